#!/bin/sh
# Connected side of the H200 proof (issue 13): lock vLLM 0.24.0 for CPython 3.12 / manylinux x86_64
# with pip, then build its wheelhouse minus what the H200 node already has (torch 2.11.0+cu130,
# triton and torch's CUDA wheels: several GB that cannot be carried) and minus the GPU extras the
# engine does not import for the tiny model (shared/reference/vllm_on_h200.md), split into parts
# under 60 MiB in .wh/vllm (git-ignored). The lead carries the parts and runs bench/h200_run.sh.
#
# usage: sh bench/h200_wheelhouse.sh [PARTS_DIR]    (default .wh/vllm; needs the package index)
set -eu
cd "$(dirname "$0")/.."
PARTS=${1:-.wh/vllm}
WORK=${WORK:-$HOME/.cache/verl-preflight/wheelhouse/vllm-0.24.0-cp312}
mkdir -p "$WORK" "$PARTS"
PY=${PYTHON:-python3}
# resolved by a real CPython 3.12 (pyenv or PATH): pip evaluates markers with the interpreter it runs
# under, not --python-version, so a cross-resolution from another Python misses e.g. vLLM's
# 'six; python_version > "3.11"' and its 'setuptools<81' bound ('wheelhouse --check' showed both)
[ -f "$WORK/vllm.lock" ] || "$PY" tools/lock_requirements.py --python 3.12 -o "$WORK/vllm.lock" vllm==0.24.0
"$PY" tools/build_pyz.py >/dev/null
node="the H200 node has torch 2.11.0+cu130 with its CUDA wheels and triton 3.6.0 installed (several GB, not carried)"
only="required only by pins left out here (torch, tilelang...: no carried wheel's metadata asks for it)"
unused="not imported by the engine for the tiny model (shared/reference/vllm_on_h200.md: the H200 run went without it)"
"$PY" dist/preflight.pyz wheelhouse --lock "$WORK/vllm.lock" --python 3.12 -o "$WORK/wh" --pyz dist/preflight.pyz \
    --split 59MiB --parts-dir "$PARTS" \
    --omit "torch=$node" --omit "triton=$node" --omit "cuda-toolkit=$node" \
    --omit "nvidia-cublas=$node" --omit "nvidia-cuda-*=$node" --omit "nvidia-cudnn-cu13=$node" \
    --omit "nvidia-cufft=$node" --omit "nvidia-cufile=$node" --omit "nvidia-curand=$node" \
    --omit "nvidia-cusolver=$node" --omit "nvidia-cusparse*=$node" --omit "nvidia-nccl-*=$node" \
    --omit "nvidia-nvjitlink=$node" --omit "nvidia-nvshmem-*=$node" --omit "nvidia-nvtx=$node" \
    --omit "nvidia-nvvm=$node" \
    --omit "torchvision=$unused; a text-only generation" --omit "torchaudio=$unused; a text-only generation" \
    --omit "flashinfer-cubin=$unused (447 MB of prebuilt kernels; flashinfer-python JIT-compiles what it needs)" \
    --omit "nvidia-cutlass-dsl*=$unused" --omit "tilelang=$unused" --omit "quack-kernels=$unused" \
    --omit "humming-kernels=$unused" --omit "tokenspeed-*=$unused" --omit "fastsafetensors=$unused" \
    --omit "z3-solver=$only" --omit "cuda-bindings=$only" --omit "cuda-core=$only" --omit "cuda-pathfinder=$only" \
    --omit "cuda-python=$only" --omit "ml-dtypes=$only" --omit "mpmath=$only" --omit "networkx=$only" \
    --omit "pyelftools=$only" --omit "sympy=$only" --omit "torch-c-dlpack-ext=$only"
ls -la "$PARTS"
