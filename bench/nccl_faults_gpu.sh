#!/usr/bin/env bash
# NCCL failures on a real GPU machine (issue 10): the nccl.allreduce FAIL row must quote NCCL's own
# "NCCL WARN ..." line (not a torch warning), gpu.env must name NCCL_SOCKET_IFNAME against the
# host's interfaces, and no process may be left on the GPUs afterwards.
# Usage (repository root, 2+ GPUs, dist/preflight.pyz built): bash bench/nccl_faults_gpu.sh [OUTDIR]
# Prints one line per case and "nccl faults: N tried, M right"; exit 0 when all came out right.
set -u
cd "$(dirname "$0")/.." || exit 2
OUTDIR="${1:-${OUT:-/tmp/nccl-faults}}"
mkdir -p "$OUTDIR"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
[ -f dist/preflight.pyz ] || python3 tools/build_pyz.py >/dev/null || {
  echo "no dist/preflight.pyz: build it where the index is reachable (python3 tools/build_pyz.py) and carry it" >&2
  exit 2
}
PY="${PYTHON:-python3}"
tried=0; right=0

judge() {  # json, expect (fail|pass), exit code, processes left, name
  "$PY" - "$@" <<'EOF'
import json, sys
path, expect, rc, left, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    rows = {r["id"]: r for r in json.load(open(path))["results"]}
except (OSError, ValueError) as exc:
    print("WRONG %s: no report (%s), exit %d" % (name, exc, rc))
    sys.exit(1)
nccl, env = rows.get("nccl.allreduce", {}), rows.get("gpu.env", {})
ok = left == 0
if expect == "fail":
    quoted = "NCCL WARN" in nccl.get("message", "") or "(NCCL: " in nccl.get("message", "")  # its log, or its "Last error"
    ok = ok and rc == 1 and nccl.get("status") == "fail" and quoted \
        and "UserWarning" not in nccl.get("message", "") and env.get("status") == "fail" \
        and "NCCL_SOCKET_IFNAME" in env.get("message", "")
else:
    ok = ok and nccl.get("status") == "pass" and env.get("status") in ("pass", "warn")
print("%s %s: exit %d, gpu.env %s, nccl.allreduce %s: %s; processes left on GPUs: %d" % (
    "RIGHT" if ok else "WRONG", name, rc, env.get("status"), nccl.get("status"), nccl.get("message", "")[:300], left))
sys.exit(0 if ok else 1)
EOF
}

run_case() {  # name, expect (fail|pass), then env assignments
  local name="$1" expect="$2"; shift 2
  tried=$((tried + 1))
  env "$@" "$PY" dist/preflight.pyz check --stage gpu,nccl --timeout 120 -v --json "$OUTDIR/$name.json" \
    >"$OUTDIR/$name.txt" 2>&1
  local rc=$?
  local left
  left=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . || true)
  if judge "$OUTDIR/$name.json" "$expect" "$rc" "$left" "$name"; then right=$((right + 1)); fi
}

run_case ifname-nosuch fail NCCL_SOCKET_IFNAME=nosuch0
run_case ifname-nosuch-user-info fail NCCL_SOCKET_IFNAME=nosuch0 NCCL_DEBUG=INFO
firsts=$(for d in /sys/class/net/*; do basename "$d" | cut -c1; done | sort -u | paste -sd, -)
run_case ifname-exclude-all fail "NCCL_SOCKET_IFNAME=^$firsts"
run_case ifname-lo pass NCCL_SOCKET_IFNAME=lo
echo "nccl faults: $tried tried, $right right"
[ "$tried" -eq "$right" ]
