#!/bin/bash
# The H200 proof (issues 12, 13, 14) in one script, run on the GPU node from the repository root
# after the wheelhouse parts were carried into .wh/vllm/ (bench/h200_wheelhouse.sh made them):
#
#   1. install: reassemble + verify the parts, then 'preflight install --wheelhouse' into a venv that
#      sees the node's torch (--system-site-packages), offline, hashes required; 'wheelhouse --check'.
#   2. check:   (step "check" only) a full check of that venv, every stage, cold caches.
#   3. bench:   bench/gpu_bench.py: full checks, cold then warm caches: per-stage wall time, the vLLM split, the nccl
#               stage beside nccl-tests (built here from .wh/nccl-tests.tar when it was carried) or
#               beside the bare torch loop (bench/allreduce_loop.py) when it was not.
#
# usage: bash bench/h200_run.sh [install|check|bench|all ...]   (default: all)
# env:   OUT (results; default /tmp/h200-run), PARTS (.wh/vllm), PREFIX (/tmp/verl-vllm),
#        PY (python3), EXTRA (more 'check' options, e.g. "--vllm-tp 2 --vllm-compile")
# Figures go to $OUT/*.json and $OUT/*.txt; everything printed is also in $OUT/run.log.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/h200-run}
PARTS=${PARTS:-.wh/vllm}
PREFIX=${PREFIX:-/tmp/verl-vllm}
PY=${PY:-python3}
EXTRA=${EXTRA:-}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1

if [ -f "$PARTS/preflight.pyz" ]; then
    PF=("$PY" -I -S "$PARTS/preflight.pyz")
elif [ -f dist/preflight.pyz ]; then
    PF=("$PY" -I -S dist/preflight.pyz)
else
    PF=("$PY" -m preflight)  # from source: needs rich and packaging where python3 runs
fi
say() { printf '\n=== %s  [%s]\n' "$*" "$(date -u +%H:%M:%S)"; }
secs() { "$PY" -c 'import time; print("%.1f" % (time.time() - float(__import__("sys").argv[1])))' "$1"; }
now() { "$PY" -c 'import time; print(time.time())'; }

do_install() {
    say "install: ${PF[*]} (parts in $PARTS: $(ls "$PARTS" 2>/dev/null | wc -l) files)"
    t=$(now)
    "${PF[@]}" wheelhouse verify "$PARTS" || { echo "h200_run: the wheelhouse parts are not usable (see above)"; return 2; }
    echo "verify+reassemble: $(secs "$t") s" | tee "$OUT/install.txt"
    t=$(now)
    PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/ "${PF[@]}" install --wheelhouse "$PARTS" --prefix "$PREFIX" \
        --system-site-packages --no-check
    rc=$?
    echo "install (offline, hashes required): $(secs "$t") s, exit $rc" | tee -a "$OUT/install.txt"
    du -sh "$PARTS" "$PREFIX" 2>/dev/null | tee -a "$OUT/install.txt"
    "${PF[@]}" wheelhouse --check "$PARTS" --python "$PREFIX/bin/python" --json "$OUT/wheelhouse-check.json" \
        | tee -a "$OUT/install.txt"
    return $rc
}

do_check() {
    say "check: every stage of $PREFIX/bin/python, cold caches"
    cold=$(mktemp -d /tmp/preflight-cold-XXXX)
    t=$(now)
    # shellcheck disable=SC2086
    XDG_CACHE_HOME=$cold/xdg VLLM_CACHE_ROOT=$cold/vllm TORCHINDUCTOR_CACHE_DIR=$cold/inductor \
        TRITON_CACHE_DIR=$cold/triton FLASHINFER_WORKSPACE_BASE=$cold/flashinfer CUDA_CACHE_PATH=$cold/nv \
        "${PF[@]}" check --python "$PREFIX/bin/python" --json "$OUT/check.json" -v $EXTRA
    echo "check wall: $(secs "$t") s" | tee "$OUT/check.txt"
    rm -rf "$cold"
}

do_bench() {
    say "bench: stages, vLLM split cold and warm, nccl stage beside nccl-tests / the bare loop"
    ntests=""
    nvcc=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
    if [ -f .wh/nccl-tests.tar ] && [ -n "$nvcc" ]; then
        src=/tmp/nccl-tests-src
        rm -rf "$src" && mkdir -p "$src" && tar xf .wh/nccl-tests.tar -C "$src"
        cuda=$(dirname "$(dirname "$nvcc")")
        t=$(now)
        if make -s -j16 -C "$src/src" MPI=0 CUDA_HOME="$cuda" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
            BUILDDIR="$src/build" "$src/build/all_reduce_perf" >"$OUT/nccl-tests-build.log" 2>&1; then
            ntests="$src/build/all_reduce_perf"
            echo "nccl-tests built in $(secs "$t") s"
        else
            echo "nccl-tests did not build (tail of $OUT/nccl-tests-build.log):"; tail -5 "$OUT/nccl-tests-build.log"
        fi
    else
        echo "nccl-tests not built: $([ -f .wh/nccl-tests.tar ] || echo 'no .wh/nccl-tests.tar carried; ')$([ -n "$nvcc" ] || echo 'no nvcc')"
    fi
    # shellcheck disable=SC2086
    "$PY" bench/gpu_bench.py --python "$PREFIX/bin/python" --out "$OUT" ${ntests:+--nccl-tests "$ntests"} \
        --preflight "${PF[*]}" -- $EXTRA
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
rc=0
for s in "${steps[@]}"; do
    case "$s" in
        install) do_install || rc=$? ;;
        check) do_check || rc=$? ;;
        bench) do_bench || rc=$? ;;
        all) { do_install && do_bench; } || rc=$? ;;
        *) echo "h200_run: unknown step $s (install, check, bench, all)"; exit 2 ;;
    esac
done
say "done (exit $rc); results in $OUT"
ls -la "$OUT"
exit $rc
