#!/usr/bin/env bash
# Cross-node NCCL through `preflight cluster` on a 2-GPU machine without a package index.
# Installs Ray 2.60.0 from carried wheels (bench/cluster_gpu_wheels.txt lists them with sha256;
# the Ray wheel comes in two parts, each under 64 MiB) into a venv that sees the machine's
# torch (--system-site-packages), then runs bench/cluster_gpu.py: two Ray nodes on 127.0.0.1 with
# one GPU each, `preflight cluster --collective nccl`, busbw printed, both nodes stopped.
#
# Wheels are looked for in .wh/ray/part1, .wh/ray/part2 and /tmp/pf-wh (copy part1 there in a
# first call when it cannot travel with part2). Output: $OUT/cluster_gpu.json (or ./).
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
PY="${PYTHON:-python3}"
OUT="${OUT:-.}"
ENV=/tmp/pf-rayenv
WH="$(mktemp -d /tmp/pf-wheels-XXXX)"
trap 'rm -rf "$WH"' EXIT
if ! "$ENV/bin/python" -c "import ray" 2>/dev/null; then
  for d in .wh/ray/part1 .wh/ray/part2 /tmp/pf-wh; do
    if [ -d "$d" ]; then cp "$d"/* "$WH"/; fi
  done
  (cd "$WH" && cat ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl.part-* > ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl \
     && grep -F -f <(ls -- *.whl) SHA256SUMS | sha256sum -c -)
  if "$PY" -m venv --system-site-packages "$ENV" 2>/dev/null && "$ENV/bin/python" -m pip --version >/dev/null 2>&1; then
    "$ENV/bin/python" -m pip install -q --no-index --find-links "$WH" ray==2.60.0
  else  # no ensurepip: a venv without pip, filled by the machine's pip
    rm -rf "$ENV"
    "$PY" -m venv --without-pip --system-site-packages "$ENV"
    "$PY" -m pip --python "$ENV/bin/python" install -q --no-index --find-links "$WH" ray==2.60.0
  fi
fi
# a base Python that is itself a venv (/opt/torch/.venv on the H200 nodes): --system-site-packages
# sees only its base installation, so point the new venv at the base venv's site-packages too
"$PY" -c 'import site, sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)' \
  && "$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
     > "$("$ENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')/_preflight_base_venv.pth"
"$ENV/bin/python" -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__, 'GPUs', torch.cuda.device_count())"
nvidia-smi -L || true
exec "$PY" bench/cluster_gpu.py "$ENV/bin/python" "$OUT"
