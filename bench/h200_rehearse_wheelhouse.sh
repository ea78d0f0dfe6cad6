#!/bin/bash
# Connected side of the rehearsal's H200 proof (issue 25): the verl 0.9.1 full stack (verl, vLLM
# 0.24.0, Ray, TransferQueue and the trainer's requirements) for CPython 3.12 / manylinux x86_64,
# minus what the H200 node already has in versions the stack accepts (torch 2.11.0+cu130 and its
# CUDA wheels, triton, and the scientific stack of the node's image: KINDS.md's package list), split
# into parts small enough to travel one per device call beside the working tree (PART_SIZE).
#
# The lock: tools/lock_requirements.py --python 3.12 vllm==0.24.0 verl==0.9.1 transformers==5.9.0
# torch==2.11.0 (pip's resolver under a real CPython 3.12), plus transferqueue==0.1.11: verl 0.9.1's
# TaskRunnerV1 (the default trainer.use_v1=true) imports transfer_queue, which only its verl-core
# extra requires; every requirement of it is already in the set.
# transformers is carried: the node's 5.17.0 is outside verl 0.9.1's 'transformers<5.11,>=5.5.3'.
# typing-inspection and annotated-types (pydantic's) are carried too: the node's image lacks them
# (the first H200 run had to carry them in an extra call).
#
# usage: bash bench/h200_rehearse_wheelhouse.sh [PARTS_DIR]   (default .wh/rehearse; needs the index)
set -eu
cd "$(dirname "$0")/.."
PARTS=${1:-.wh/rehearse}
PART_SIZE=${PART_SIZE:-50MiB}
WORK=${WORK:-$HOME/.cache/verl-preflight/wheelhouse/rehearse-0.9.1-cp312}
PY=${PYTHON:-python3}
LOCK="$WORK/stack.lock"
mkdir -p "$WORK" "$PARTS"
if [ ! -f "$LOCK" ]; then
    "$PY" tools/lock_requirements.py --python 3.12 -o "$LOCK" vllm==0.24.0 verl==0.9.1 transformers==5.9.0 torch==2.11.0
    echo "add transferqueue==0.1.11 with its sha256 to $LOCK (see the header), then run again" >&2
    exit 1
fi
PF=${PF:-"$PY -m preflight"}
node="on the H200 node (torch 2.11.0+cu130 with its CUDA wheels, triton 3.6.0; not carried)"
img="on the H200 node's image (KINDS.md package list, 2026-11-17) in a version the stack accepts"
unused="not imported on verl's FSDP + vLLM text path (shared/reference/vllm_on_h200.md)"
only="required only by pins left out here"
omits=()
for n in torch triton cuda-toolkit 'nvidia-*' 'cuda-bindings' 'cuda-core' 'cuda-pathfinder' 'cuda-python'; do
    omits+=(--omit "$n=$node")
done
for n in numpy pandas pyarrow scipy sympy mpmath networkx pillow opencv-python-headless grpcio tensorboard \
    tensorboard-data-server tiktoken sentencepiece safetensors psutil aiohttp yarl multidict frozenlist propcache \
    aiosignal aiohappyeyeballs jinja2 markupsafe fsspec filelock hf-xet pyyaml requests urllib3 idna certifi \
    charset-normalizer tqdm protobuf msgpack cloudpickle setuptools typing-extensions click rich pygments \
    markdown-it-py mdurl xxhash h11 httpx httpcore anyio attrs zipp wrapt pybind11 six python-dateutil \
    prometheus-client absl-py einops uvloop pyparsing packaging accelerate peft llvmlite numba regex \
    ml-dtypes markdown werkzeug; do
    omits+=(--omit "$n=$img")
done
for n in torchvision torchaudio flashinfer-cubin 'nvidia-cutlass-dsl*' tilelang quack-kernels humming-kernels \
    'tokenspeed-*' fastsafetensors; do
    omits+=(--omit "$n=$unused")
done
for n in z3-solver pyelftools torch-c-dlpack-ext; do omits+=(--omit "$n=$only"); done
console="not imported with the rehearsal's console logger (verl imports it only for trainer.logger=wandb)"
omits+=(--omit "wandb=$console")
omits+=(--omit "py-spy=used only by Ray's dashboard stack traces (the rehearsal runs without a dashboard)")
omits+=(--omit "virtualenv=used only by Ray's pip/conda runtime_env (verl sets env_vars only)")
# shellcheck disable=SC2086
$PF wheelhouse --lock "$LOCK" --python 3.12 -o "$WORK/wh" --split "$PART_SIZE" --parts-dir "$PARTS" --force "${omits[@]}"
ls -la "$PARTS"
