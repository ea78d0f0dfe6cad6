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
#                       a --log that cannot be written is one warning, never a failure; it is never
#                       a link, a FIFO or another user's file, nor in a directory others can write
#                       (a sticky /tmp is fine): such a --log is refused the same way
#   --dry-run           print the commands, run nothing
#   -h, --help          this text
#
# environment: VERL_PREFLIGHT_CONNECT_TIMEOUT (s, default 20), VERL_PREFLIGHT_DOWNLOAD_TIMEOUT (s, total,
#   default 300) and VERL_PREFLIGHT_DOWNLOAD_MAX_BYTES (default 268435456) bound the zipapp's download;
#   a download that stalls (under 1 KiB/s for 30 s) stops too.
# signals: SIGTERM, SIGHUP and SIGINT are passed on to the checker (as SIGTERM for SIGINT) and waited
#   for, so its probes and installs stop; then this script exits 2.
# exit codes: 0 ready; 1 not ready (a check failed); 2 usage error or checker/installer failure;
#             3 no Python >= 3.8 found; 4 the zipapp could not be downloaded or its sha256 does not match
#             (a --pyz path that does not exist is a usage error: 2).
# Safe to run twice: a prefix that already has the resolved lock is left as it is,
# and the checks run again. Nothing is echoed unmasked: the command lines it prints are
# redacted by the checker's own redactor. A zipapp given with --sha256 is copied into a private
# directory (mktemp -d), verified there and run from there, so no other user can swap it.
set -u
set -f  # no pathname expansion anywhere: --install-args words are never globbed

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
CHILD=""
# shellcheck disable=SC2317  # called by the traps
on_signal() {
    if [ -n "$CHILD" ]; then
        # a background job of a non-interactive shell ignores SIGINT: it gets SIGTERM instead
        kill -s "$1" "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
        CHILD=""
    fi
    say "bootstrap.sh: stopped by SIG$2"
    cleanup
    exit 2
}
trap cleanup EXIT
trap 'on_signal TERM TERM' TERM
trap 'on_signal HUP HUP' HUP
trap 'on_signal TERM INT' INT

die() {
    code=$1
    shift
    say "bootstrap.sh: $*"
    exit "$code"
}

say() {
    if [ -n "$LOG" ]; then
        printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&3 2>/dev/null
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
        --verl) need_arg "$1" $#; VERL=$2; shift 2
            case "$VERL" in
                '' | [!0-9]* | *[!0-9A-Za-z.+!_-]*) die 2 "--verl '$VERL': not a version (digits, letters and . + ! _ - only)" ;;
            esac ;;
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

# Run the command in the background and wait for it, so that a signal reaches the trap at once
# (a trap waits for a foreground command) and is passed on; with --log, its output goes through a
# FIFO in the private directory to tee, which appends to the log's verified descriptor 3.
run() {
    say "+ $(shown "$@")"
    [ "$DRY" -eq 1 ] && return 0
    teepid=""
    if [ -n "$LOG" ]; then
        rm -f "$WORK/out"
        if mkfifo -m 600 "$WORK/out" 2>/dev/null; then
            tee -a "$LOG_SINK" <"$WORK/out" &
            teepid=$!
            "$@" <&0 >"$WORK/out" 2>&1 &
        else
            "$@" <&0 &
        fi
    else
        "$@" <&0 &
    fi
    CHILD=$!
    wait "$CHILD"
    rc=$?
    CHILD=""
    if [ -n "$teepid" ]; then wait "$teepid"; fi
    return "$rc"
}

# --log FILE: checked (no link owned by another user on its way, not a link, a regular file of this
# user's if it exists, in a directory owned by this user or root that others cannot write unless it
# is sticky), created new with O_EXCL (mode 0600) when missing, opened once as descriptor 3, and
# checked again through that descriptor (same file as the path names); every write goes there.
LOG_CHECK='import os, stat, sys
p, fd, me = os.path.abspath(sys.argv[1]), int(sys.argv[2]), os.geteuid()
def bad(why):
    print(why)
    sys.exit(1)
cur, todo, hops = "/", [c for c in os.path.dirname(p).split("/") if c], 0
while todo:
    c = todo.pop(0)
    nxt = os.path.normpath(os.path.join(cur, c))
    try:
        st = os.lstat(nxt)
    except OSError as e:
        bad("%s: %s" % (nxt, e.strerror))
    if stat.S_ISLNK(st.st_mode):
        hops += 1
        if st.st_uid not in (0, me) or hops > 40:
            bad("%s is a link owned by uid %d, another user" % (nxt, st.st_uid))
        t = os.readlink(nxt)
        cur = "/" if t.startswith("/") else cur
        todo[:0] = [x for x in t.split("/") if x]
        continue
    cur = nxt
ds = os.stat(cur)
if ds.st_uid not in (0, me):
    bad("directory %s is owned by uid %d, another user" % (cur, ds.st_uid))
if ds.st_mode & 0o002 and not ds.st_mode & 0o1000:
    bad("directory %s is writable by every user" % cur)
q = os.path.join(cur, os.path.basename(p))
try:
    st = os.lstat(q)
except FileNotFoundError:
    st = None
if st is not None and stat.S_ISLNK(st.st_mode):
    bad("%s is a link; name the file itself" % q)
if st is not None and not stat.S_ISREG(st.st_mode):
    bad("%s is not a regular file" % q)
if st is not None and st.st_uid != me:
    bad("%s is owned by uid %d, another user" % (q, st.st_uid))
if fd < 0:
    if st is None:
        os.close(os.open(q, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    print(q)
    sys.exit(0)
fs = os.fstat(fd)
if st is None or (fs.st_dev, fs.st_ino) != (st.st_dev, st.st_ino):
    bad("%s changed while it was opened" % q)'
case "$SHA" in
    '') ;;
    *[!0-9a-fA-F]*) die 2 "--sha256 $SHA: not a sha256 (64 hexadecimal digits)" ;;
    *) [ "${#SHA}" -eq 64 ] || die 2 "--sha256 $SHA: not a sha256 (64 hexadecimal digits)" ;;
esac
SHA=$(printf '%s' "$SHA" | tr 'A-F' 'a-f')

PY=$(find_python) || die 3 "no Python >= 3.8 found on PATH; install python3 first"
if [ -n "$LOG" ]; then
    bad_log=$LOG
    LOG=""
    if why=$("$PY" -I -S -c "$LOG_CHECK" "$bad_log" -1 2>&1); then
        real_log=$why
        if exec 3>>"$real_log" && why=$("$PY" -I -S -c "$LOG_CHECK" "$real_log" 3 2>&1); then
            LOG=$real_log
            LOG_SINK=$LOG
            if [ -w /dev/fd/3 ]; then LOG_SINK=/dev/fd/3; fi  # the very file checked, reopened for appending
        else
            exec 3>&-
        fi
    fi
    if [ -z "$LOG" ]; then
        say "bootstrap.sh: warning: --log $bad_log cannot be written (${why:-no permission}); logging to stderr only (name a file of yours in a directory only you can write)"
    fi
fi
# safe_dir DIR: no other user can rename or replace what is made in DIR: DIR and every directory
# above it are owned by root or by this user, and none is writable by other users without the sticky
# bit (group-writable is fine for root's group and this user's own). Without stat -c: not judged.
safe_dir() {
    command -v stat >/dev/null 2>&1 && stat -c %u / >/dev/null 2>&1 || return 0
    _sd=$(cd "$1" 2>/dev/null && pwd -P) || return 1
    _me=$(id -u); _mg=$(id -g)
    while :; do
        _st=$(stat -c '%u %g %a' "$_sd" 2>/dev/null) || return 1
        # shellcheck disable=SC2086 # three numbers, split on purpose
        set -- $_st
        [ "$1" = 0 ] || [ "$1" = "$_me" ] || return 1
        _mode=$((0$3))
        if [ $((_mode & 512)) -eq 0 ]; then  # not sticky
            [ $((_mode & 2)) -eq 0 ] || return 1
            if [ $((_mode & 16)) -ne 0 ] && [ "$2" != 0 ] && [ "$2" != "$_mg" ]; then return 1; fi
        fi
        [ "$_sd" = / ] && return 0
        _sd=$(dirname "$_sd")
    done
}
# private (mode 0700, a fresh name), in a directory no other user can swap it out of: mktemp, else
# Python's tempfile
TMP_ROOT=${TMPDIR:-/tmp}
if ! safe_dir "$TMP_ROOT"; then
    for t in /tmp /var/tmp; do
        if safe_dir "$t"; then
            say "bootstrap.sh: warning: TMPDIR $TMP_ROOT can be changed by other users (owner or write bits); working under $t instead"
            TMP_ROOT=$t
            break
        fi
    done
    safe_dir "$TMP_ROOT" || die 2 "TMPDIR $TMP_ROOT can be changed by other users and /tmp too; set TMPDIR to a directory only you (or root) can write"
fi
WORK=$(mktemp -d "$TMP_ROOT/verl-preflight.XXXXXXXX" 2>/dev/null) ||
    WORK=$(TMPDIR=$TMP_ROOT "$PY" -c 'import tempfile; print(tempfile.mkdtemp(prefix="verl-preflight."))') ||
    die 2 "cannot make a private temporary directory in $TMP_ROOT; set TMPDIR to a writable directory"
export TMPDIR="$TMP_ROOT"  # the checker's children too
say "bootstrap.sh: using $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"

CONNECT_S=${VERL_PREFLIGHT_CONNECT_TIMEOUT:-20}
TOTAL_S=${VERL_PREFLIGHT_DOWNLOAD_TIMEOUT:-300}
MAX_BYTES=${VERL_PREFLIGHT_DOWNLOAD_MAX_BYTES:-268435456}
for v in "$CONNECT_S" "$TOTAL_S" "$MAX_BYTES"; do
    case "$v" in
        '' | *[!0-9]*) die 2 "VERL_PREFLIGHT_CONNECT_TIMEOUT, _DOWNLOAD_TIMEOUT and _DOWNLOAD_MAX_BYTES take whole numbers" ;;
    esac
done

# download URL FILE: bounded in connect time, total time, stall and size; exit 4 otherwise
download() {
    if command -v curl >/dev/null 2>&1; then
        set -- curl -fsSL --proto =http,https --retry 2 --connect-timeout "$CONNECT_S" --max-time "$TOTAL_S" \
            --retry-max-time "$TOTAL_S" --speed-limit 1024 --speed-time 30 --max-filesize "$MAX_BYTES" -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then
        set -- wget -q --tries=2 --connect-timeout="$CONNECT_S" --read-timeout=30 -O "$2" "$1"
        if command -v timeout >/dev/null 2>&1; then set -- timeout "$TOTAL_S" "$@"; fi
    else
        die 4 "neither curl nor wget is installed to download $(url_shown "$PYZ")"
    fi
    "$@" </dev/null &
    CHILD=$!
    wait "$CHILD" || { CHILD=""; die 4 "could not download $(url_shown "$PYZ") within ${TOTAL_S} s (connect ${CONNECT_S} s, at most $MAX_BYTES bytes)"; }
    CHILD=""
    size=$(wc -c <"$WORK/preflight.pyz" 2>/dev/null | tr -d ' ')
    [ "${size:-0}" -le "$MAX_BYTES" ] || die 4 "the download of $(url_shown "$PYZ") is larger than $MAX_BYTES bytes; not running it"
}

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
            download "$PYZ" "$WORK/preflight.pyz"
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
    if [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die 2 "--wheelhouse $WHEELHOUSE: no such directory"
    fi
    # each value is one word (a value starting with '-' is then an error of install's, never an
    # option); only INSTALL_ARGS is split on purpose (it holds several options), never globbed (set -f)
    # shellcheck disable=SC2086
    run "$PY" -I -S "$PYZ" install ${VERL:+--verl "$VERL"} ${WHEELHOUSE:+--wheelhouse "$WHEELHOUSE"} \
        --backend "$BACKEND" --prefix "$PREFIX" $INSTALL_ARGS -- "$@"
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
