#!/bin/sh
# bootstrap.sh: run verl-preflight during cluster provisioning (cloud-init, Slurm prolog,
# Kubernetes init container). Minimal version: finds a Python >= 3.8, runs the checker, writes
# the JSON report and a log, and passes the checker's exit code through.
#
# usage: bootstrap.sh [--pyz PATH] [--python PATH] [--json FILE] [--log FILE] [-- extra check args]
# exit codes: 0 ready, 1 not ready, 2 usage error or checker failure, 3 no Python >= 3.8 found
set -u

PYZ="$(dirname "$0")/dist/preflight.pyz"
TARGET=""
JSON=""
LOG=""

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --pyz) PYZ="$2"; shift 2 ;;
        --python) TARGET="$2"; shift 2 ;;
        --json) JSON="$2"; shift 2 ;;
        --log) LOG="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "bootstrap.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

find_python() {
    for cand in python3 python3.13 python3.12 python3.11 python3.10 python3.9 python3.8 python; do
        if command -v "$cand" >/dev/null 2>&1 &&
            "$cand" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' 2>/dev/null; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

PY=$(find_python) || { echo "bootstrap.sh: no Python >= 3.8 found on PATH" >&2; exit 3; }
[ -f "$PYZ" ] || { echo "bootstrap.sh: $PYZ not found; pass --pyz PATH" >&2; exit 2; }

set -- check "$@"
[ -n "$TARGET" ] && set -- "$@" --python "$TARGET"
[ -n "$JSON" ] && set -- "$@" --json "$JSON"

if [ -n "$LOG" ]; then
    "$PY" -I -S "$PYZ" "$@" >"$LOG" 2>&1
    rc=$?
    tail -n 1 "$LOG"
else
    "$PY" -I -S "$PYZ" "$@"
    rc=$?
fi
exit "$rc"
