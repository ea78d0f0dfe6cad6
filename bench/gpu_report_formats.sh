#!/bin/bash
# Issue 11 on a GPU node: every report format from a real gpu + nccl run (and vllm when the
# interpreter has vLLM), plus --status-dir, written under $OUT for the tests to read back:
#   ./test.sh tests/report/test_report.py -k gpu_run  with  PREFLIGHT_GPU_REPORTS=<the returned folder>
# validates the JSON against the schema, the JUnit with junitparser, the Prometheus text with
# prometheus_client (NCCL busbw per size; vLLM timings when that stage ran) and the Markdown.
#
# usage: bash bench/gpu_report_formats.sh      env: OUT (default /tmp/gpu-reports), PY (python3),
#        PYTHON (the interpreter to check; default: PY), STAGES (default host,python,gpu,nccl,vllm)
set -u
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-reports}
PY=${PY:-python3}
PYTHON=${PYTHON:-$(command -v "$PY")}
STAGES=${STAGES:-host,python,gpu,nccl,vllm}
mkdir -p "$OUT"
[ -f dist/preflight.pyz ] || "$PY" tools/build_pyz.py >/dev/null
PF=("$PY" -I -S dist/preflight.pyz)
start=$(date +%s)
"${PF[@]}" check --python "$PYTHON" --stage "$STAGES" --backend none --timeout 300 \
    --status-dir "$OUT/status" --json "$OUT/report.json" --format prometheus --output "$OUT/report.prom" \
    > "$OUT/console.txt" 2>&1
echo "check exit $? in $(( $(date +%s) - start )) s" | tee "$OUT/exit.txt"
# the same report in the other formats, from a second (shorter) run of the cheap stages
for f in junit markdown; do
    "${PF[@]}" check --python "$PYTHON" --stage "$STAGES" --backend none --timeout 300 -q --format "$f" \
        --output "$OUT/report.$f"
done
ls -l "$OUT" "$OUT/status"
