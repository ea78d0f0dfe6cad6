#!/bin/bash
# The H200 proof (issues 12, 13, 14) in one script, run on the GPU node from the repository root
# after the wheelhouse parts were carried into .wh/vllm/ (bench/h200_wheelhouse.sh made them):
#
#   1. install: reassemble + verify the parts, then 'preflight install --wheelhouse' into a venv that
#      sees the node's torch (--system-site-packages), offline, hashes required; 'wheelhouse --check'.
#   2. check:   (step "check" only) a full check of that venv, every stage, cold caches.
#   diag:       (asked for by name) which modules carry bytecode, and vLLM's import under -X importtime
#               with cold then warm caches: where the import's time goes and what it writes to the caches.
#   3. bench:   bench/gpu_bench.py: full checks, cold then warm caches: per-stage wall time, the vLLM split, the nccl
#               stage beside nccl-tests (built here from .wh/nccl-tests.tar when it was carried) or
#               beside the bare torch loop (bench/allreduce_loop.py) when it was not.
#
# usage: bash bench/h200_run.sh [install|check|bench|diag|all ...]   (default: all)
# env:   OUT (results; default /tmp/h200-run), PARTS (.wh/vllm), PREFIX (/tmp/verl-vllm),
#        PY (python3), EXTRA (more 'check' options, e.g. "--vllm-tp 2 --vllm-compile"),
#        VARIANT (NAME=VALUE: the bench adds a cold run with that environment variable set)
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
        --preflight "${PF[*]}" ${VARIANT:+--variant "$VARIANT"} -- $EXTRA
}

do_diag() {
    say "diag: bytecode beside the stack, vLLM's import profiled with cold then warm caches"
    nproc; df -hT /tmp "$PREFIX" 2>/dev/null | tail -n +2
    for tool in uv gcc nvcc; do printf '%s: %s\n' "$tool" "$(command -v $tool || echo none)"; done
    "$PREFIX/bin/python" - <<'PYEOF'
import importlib.util, os
for name in ("torch", "triton", "transformers", "vllm", "pydantic"):
    spec = importlib.util.find_spec(name)
    if not spec or not spec.origin:
        print("%-13s not importable" % name); continue
    root = os.path.dirname(spec.origin); py = have = 0
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                py += 1; have += os.path.exists(importlib.util.cache_from_source(os.path.join(d, f)))
    print("%-13s %5d modules, %5d with bytecode  (%s)" % (name, py, have, root))
PYEOF
    cold=$(mktemp -d /tmp/preflight-diag-XXXX)
    for label in cold warm; do
        t=$(now)
        XDG_CACHE_HOME=$cold/xdg VLLM_CACHE_ROOT=$cold/vllm TORCHINDUCTOR_CACHE_DIR=$cold/inductor \
            TRITON_CACHE_DIR=$cold/triton FLASHINFER_WORKSPACE_BASE=$cold/flashinfer CUDA_CACHE_PATH=$cold/nv \
            PYTHONDONTWRITEBYTECODE=1 "$PREFIX/bin/python" -X importtime -c \
            "import vllm; from vllm import LLM, SamplingParams; from vllm.platforms import current_platform; \
print(current_platform.device_type)" 2>"$OUT/importtime-$label.txt"
        echo "import vllm ($label caches): $(secs "$t") s wall; caches: $(cd "$cold" && find . -type f | \
            awk -F/ '{print $2}' | sort | uniq -c | tr '\n' ' ')"
    done
    "$PY" - "$OUT/importtime-cold.txt" "$OUT/importtime-warm.txt" <<'PYEOF'
import sys
def read(p):
    rows = {}
    for line in open(p):
        if line.startswith("import time:") and "|" in line and "self" not in line:
            a, b, name = line[12:].split("|", 2)
            rows.setdefault(name.strip(), (int(a), int(b), len(name) - len(name.lstrip())))
    return rows
cold, warm = read(sys.argv[1]), read(sys.argv[2])
print("top cumulative, cold caches (s):")
for n, (s, c, ind) in sorted(cold.items(), key=lambda kv: -kv[1][1])[:25]:
    print("  %7.2f %7.2f  %s%s" % (c / 1e6, warm.get(n, (0, 0))[1] / 1e6, " " * (ind - 1), n))
print("largest self time, cold minus warm (s):")
for n, (s, c, ind) in sorted(cold.items(), key=lambda kv: -(kv[1][0] - warm.get(kv[0], (0,))[0]))[:15]:
    print("  %7.2f cold %7.2f warm  %s" % (s / 1e6, warm.get(n, (0,))[0] / 1e6, n))
print("largest self time, warm (s):")
for n, (s, c, ind) in sorted(warm.items(), key=lambda kv: -kv[1][0])[:20]:
    print("  %7.2f  %s" % (s / 1e6, n))
PYEOF
    rm -rf "$cold"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
rc=0
for s in "${steps[@]}"; do
    case "$s" in
        install) do_install || rc=$? ;;
        check) do_check || rc=$? ;;
        bench) do_bench || rc=$? ;;
        diag) do_diag || rc=$? ;;
        all) { do_install && do_bench; } || rc=$? ;;
        *) echo "h200_run: unknown step $s (install, check, bench, diag, all)"; exit 2 ;;
    esac
done
say "done (exit $rc); results in $OUT"
ls -la "$OUT"
exit $rc
