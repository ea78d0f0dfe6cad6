#!/bin/sh
# bootstrap.sh: provision a verl environment with verl-preflight and check it.
# For cloud-init, Slurm prologs, Kubernetes init containers and Docker builds.
#
# usage: bootstrap.sh [options] [-- extra 'check' options]
#   --pyz PATH|URL      the checker zipapp (default: preflight.pyz or dist/preflight.pyz beside this script)
#   --sha256 HEX        expected sha256 of the zipapp (checked before it runs; required for an http URL)
#   --verl VERSION      verl release to install (default: the newest in the checker's matrix)
#   --backend NAME      vllm, sglang or none (verl without a rollout engine; default: vllm)
#   --prefix DIR        virtual environment to create or reuse (default: /opt/verl)
#   --install-args ARGS extra options for 'preflight install', e.g. "--torch 2.13.0 --torch-index none"
#   --wheelhouse DIR    install offline from a 'preflight wheelhouse' directory or its parts (no index;
#                       parts are reassembled and every wheel verified before anything is installed)
#   --check-only        do not install; check --python PATH, else the environment at --prefix
#   --python PATH       interpreter to check with --check-only
#   --json FILE         write the JSON report there
#   --log FILE          append everything this script and the checker print there (secrets masked);
#                       a --log that cannot be written is one warning, never a failure
#   --dry-run           print the commands, run nothing
#   -h, --help          this text
#
# exit codes: 0 ready; 1 not ready (a check failed); 2 usage error or checker/installer failure;
#             3 no Python >= 3.8 found; 4 the zipapp could not be fetched or its sha256 does not match.
# Safe to run twice: a prefix that already has the resolved lock is left as it is,
# and the checks run again. Nothing is echoed unmasked: the command lines it prints are
# redacted by the checker's own redactor. A zipapp given with --sha256 is copied into a private
# directory (mktemp -d), verified there and run from there, so no other user can swap it.
set -u

here=$(cd "$(dirname "$0")" && pwd)
PYZ=""
SHA=""
VERL=""
BACKEND="vllm"
PREFIX="/opt/verl"
PYZ_OK=""
INSTALL_ARGS=""
WHEELHOUSE=""
CHECK_ONLY=0
TARGET=""
JSON=""
LOG=""
DRY=0

usage() {
    sed -n '/^set -u$/q; 2,$p' "$0" | sed 's/^# \{0,1\}//'
}

# a private directory for the downloaded or copied zipapp and the exit status; removed on exit
WORK=""
# shellcheck disable=SC2317  # called by the traps
cleanup() {
    if [ -n "$WORK" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'cleanup; exit 2' HUP INT TERM

die() {
    code=$1
    shift
    say "bootstrap.sh: $*"
    exit "$code"
}

say() {
    if [ -n "$LOG" ]; then
        printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$LOG" 2>/dev/null
    fi
    printf '%s\n' "$*" >&2
}

# a URL as it may be printed: user and password removed (before the checker is there to redact)
url_shown() {
    printf '%s\n' "$1" | sed 's#://[^/]*@#://***@#'
}

# a command line as it may be printed: redacted by the verified checker's own redactor
# (tokens, passwords, KEY=value, URL userinfo); without it, only the command's name is shown
shown() {
    if [ -n "$PYZ_OK" ] && "$PY" -I -S -c 'import sys
sys.path.insert(0, sys.argv[1])
from preflight.redact import redact_text
print(redact_text(" ".join(sys.argv[2:])))' "$PYZ" "$@" 2>/dev/null; then
        return 0
    fi
    printf '%s (%d arguments not shown: they may hold secrets)\n' "$1" $(($# - 1))
}

need_arg() {
    [ "$2" -ge 2 ] || die 2 "$1 needs a value (see --help)"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --pyz) need_arg "$1" $#; PYZ=$2; shift 2 ;;
        --sha256) need_arg "$1" $#; SHA=$2; shift 2 ;;
        --verl) need_arg "$1" $#; VERL=$2; shift 2 ;;
        --backend) need_arg "$1" $#; BACKEND=$2; shift 2 ;;
        --prefix) need_arg "$1" $#; PREFIX=$2; shift 2 ;;
        --install-args) need_arg "$1" $#; INSTALL_ARGS=$2; shift 2 ;;
        --wheelhouse) need_arg "$1" $#; WHEELHOUSE=$2; shift 2 ;;
        --check-only) CHECK_ONLY=1; shift ;;
        --python) need_arg "$1" $#; TARGET=$2; shift 2 ;;
        --json) need_arg "$1" $#; JSON=$2; shift 2 ;;
        --log) need_arg "$1" $#; LOG=$2; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        *) die 2 "unknown option $1 (see --help)" ;;
    esac
done

case "$BACKEND" in
    vllm | sglang | none) ;;
    *) die 2 "--backend $BACKEND: choose vllm, sglang or none" ;;
esac

find_python() {
    for cand in python3 python3.13 python3.12 python3.11 python3.10 python3.9 python3.8 python; do
        p=$(command -v "$cand" 2>/dev/null) || continue
        if "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' 2>/dev/null; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    return 1
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        "$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
    fi
}

run() {
    say "+ $(shown "$@")"
    [ "$DRY" -eq 1 ] && return 0
    if [ -n "$LOG" ]; then
        # keep the command's exit status (in the private directory) while copying its output to the log
        rm -f "$WORK/rc"
        { "$@" 2>&1; echo "$?" >"$WORK/rc"; } | tee -a "$LOG"
        rc=$(cat "$WORK/rc" 2>/dev/null)
        case "$rc" in
            '' | *[!0-9]*) rc=2 ;;
        esac
        return "$rc"
    fi
    "$@"
}

if [ -n "$LOG" ] && ! (: >>"$LOG") 2>/dev/null; then
    bad_log=$LOG
    LOG=""
    say "bootstrap.sh: warning: --log $bad_log cannot be written (missing directory or no permission); logging to stderr only"
fi
case "$SHA" in
    '') ;;
    *[!0-9a-fA-F]*) die 2 "--sha256 $SHA: not a sha256 (64 hexadecimal digits)" ;;
    *) [ "${#SHA}" -eq 64 ] || die 2 "--sha256 $SHA: not a sha256 (64 hexadecimal digits)" ;;
esac
SHA=$(printf '%s' "$SHA" | tr 'A-F' 'a-f')

PY=$(find_python) || die 3 "no Python >= 3.8 found on PATH; install python3 first"
# private (mode 0700, a fresh name): mktemp, else Python's tempfile
WORK=$(mktemp -d "${TMPDIR:-/tmp}/verl-preflight.XXXXXXXX" 2>/dev/null) ||
    WORK=$("$PY" -c 'import tempfile; print(tempfile.mkdtemp(prefix="verl-preflight."))') ||
    die 2 "cannot make a private temporary directory in ${TMPDIR:-/tmp}; set TMPDIR to a writable directory"
say "bootstrap.sh: using $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"

# 1. the checker
if [ -z "$PYZ" ]; then
    for cand in "$here/preflight.pyz" "$here/dist/preflight.pyz" ${WHEELHOUSE:+"$WHEELHOUSE/preflight.pyz"}; do
        if [ -f "$cand" ]; then PYZ=$cand; break; fi
    done
    [ -n "$PYZ" ] || die 2 "no preflight.pyz beside this script; pass --pyz PATH or URL"
fi
case "$PYZ" in
    http://* | https://*)
        [ -n "$SHA" ] || die 2 "--pyz $(url_shown "$PYZ") is a URL: pass --sha256 too, so what runs is what you meant"
        if [ "$DRY" -eq 0 ]; then
            say "bootstrap.sh: downloading $(url_shown "$PYZ")"
            # into the private directory: nothing another user planted (a symlink) is followed
            if command -v curl >/dev/null 2>&1; then
                curl -fsSL --retry 3 -o "$WORK/preflight.pyz" "$PYZ" || die 4 "could not download $(url_shown "$PYZ")"
            elif command -v wget >/dev/null 2>&1; then
                wget -q -O "$WORK/preflight.pyz" "$PYZ" || die 4 "could not download $(url_shown "$PYZ")"
            else
                die 4 "neither curl nor wget is installed to download $(url_shown "$PYZ")"
            fi
            PYZ=$WORK/preflight.pyz
        fi
        ;;
    *)
        [ -f "$PYZ" ] || die 2 "--pyz $PYZ: no such file"
        if [ -n "$SHA" ] && [ "$DRY" -eq 0 ]; then
            # verify and run a private copy, so the file cannot be swapped between the two
            cp "$PYZ" "$WORK/preflight.pyz" || die 4 "could not copy $PYZ into $WORK"
            PYZ=$WORK/preflight.pyz
        fi
        ;;
esac
if [ -n "$SHA" ] && [ "$DRY" -eq 0 ]; then
    got=$(sha256_of "$PYZ" | tr 'A-F' 'a-f')
    [ "$got" = "$SHA" ] || die 4 "the zipapp has sha256 $got, expected $SHA; not running it"
fi
if [ "$DRY" -eq 0 ] || { [ -z "$SHA" ] && [ -f "$PYZ" ]; }; then
    PYZ_OK=1  # verified, or the user's own file: its redactor may mask what is printed
fi

# 2. install (idempotent), then 3. check
if [ -n "$JSON" ]; then
    set -- "$@" --json "$JSON"
fi
if [ "$CHECK_ONLY" -eq 1 ]; then
    if [ -z "$TARGET" ]; then
        [ -x "$PREFIX/bin/python" ] || die 2 "--check-only: no environment at $PREFIX (no $PREFIX/bin/python); pass --prefix DIR of an installed environment or --python PATH, or drop --check-only to install one"
        TARGET="$PREFIX/bin/python"
    fi
    if [ -n "$TARGET" ]; then
        set -- --python "$TARGET" "$@"
    fi
    run "$PY" -I -S "$PYZ" check "$@"
    rc=$?
else
    verl_opt=""
    if [ -n "$VERL" ]; then
        verl_opt="--verl $VERL"
    fi
    if [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die 2 "--wheelhouse $WHEELHOUSE: no such directory"
        verl_opt="$verl_opt --wheelhouse $WHEELHOUSE"
    fi
    # INSTALL_ARGS and verl_opt are word-split on purpose: they hold several options
    # shellcheck disable=SC2086
    run "$PY" -I -S "$PYZ" install $verl_opt --backend "$BACKEND" --prefix "$PREFIX" $INSTALL_ARGS -- "$@"
    rc=$?
fi
if [ "$DRY" -eq 1 ]; then
    say "bootstrap.sh: dry run, nothing was run"
    exit 0
fi
case "$rc" in
    0) say "bootstrap.sh: ready" ;;
    1) say "bootstrap.sh: not ready (see the report above${JSON:+ and $JSON})" ;;
    *) say "bootstrap.sh: the checker or installer failed (exit $rc)"; rc=2 ;;
esac
exit "$rc"
