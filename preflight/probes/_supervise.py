# The supervisor of one probe: runs as ``python -I -S -c <this file> <json config>`` under the
# checker's own interpreter, standard library only (it never imports the checker's code).
#
# It starts the probe command in a new session, waits for it, and then removes every process the
# probe left behind, however it detached:
#   * Linux: it is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a daemon that double-forks
#     and calls setsid() is re-parented to it instead of to init, and it kills and reaps every
#     process left under it until none remains. The probe gets PR_SET_PDEATHSIG=SIGKILL before
#     exec, so it dies with the supervisor even if the supervisor is killed with SIGKILL.
#   * elsewhere: the probe's process group is killed (a setsid() daemon can escape there).
# It stops the probe early (the same cleanup) when the control pipe from the checker reaches EOF:
# the checker closed it (deadline passed) or the checker died in any way, SIGKILL included, since
# the kernel closes a dead process's descriptors. SIGTERM, SIGINT and SIGHUP do the same.
#
# Config (argv[1], JSON): {"argv": [...], "cwd": str|null, "ctl_fd": int, "dir": str}.
# It writes <dir>/pid (the probe's pid, as soon as it runs) and <dir>/status (the probe's exit
# status in the Popen convention: negative for a signal; "killed" when it was stopped early), and
# exits with the probe's status (128 + N for signal N). When the checker is gone it removes <dir>.
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _libc():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except Exception:  # no ctypes or no libc: fall back to process groups
        return None


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.rename(tmp, path)


def _children(me):
    """Pids whose parent is ``me`` (dead, unreaped ones included)."""
    kids = set()
    try:
        for tid in os.listdir("/proc/%d/task" % me):
            try:
                with open("/proc/%d/task/%s/children" % (me, tid)) as fh:
                    kids.update(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                raise OSError("no children file")
        return kids
    except OSError:
        pass
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as fh:
                stat = fh.read()
            if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
                kids.add(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def main():
    cfg = json.loads(sys.argv[1])
    ctl = int(cfg["ctl_fd"])
    d = cfg["dir"]
    parent = os.getppid()
    me = os.getpid()
    libc = _libc() if sys.platform.startswith("linux") else None
    reaper = bool(libc is not None and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)

    def preexec():
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != me:  # the supervisor died before prctl took effect
                os._exit(137)

    try:
        proc = subprocess.Popen(cfg["argv"], cwd=cfg.get("cwd"), stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=preexec)
    except OSError as exc:
        _write(os.path.join(d, "status"), "launch_error %s" % exc)
        sys.exit(127)
    _write(os.path.join(d, "pid"), str(proc.pid))
    status = None  # the probe's exit status, Popen convention

    def reap(block_pid=None):
        nonlocal status
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == proc.pid:
                status = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
                proc.returncode = status

    early = False
    while status is None:
        reap()
        if status is not None:
            break
        if stop:
            early = True
            break
        try:
            ready, _, _ = select.select([ctl, wake_r], [], [], 1.0)
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                os.read(wake_r, 512)
            except OSError:
                pass
        if ctl in ready:
            try:
                data = os.read(ctl, 64)
            except OSError:
                data = b""
            if not data:  # the checker closed the pipe or died
                early = True
                break
        if os.getppid() != parent:
            early = True
            break

    stopped_running = early and status is None  # we are about to kill a probe that was still running
    # remove everything left: the probe's group, then (as subreaper) every process under us
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for kid in _children(me):
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        if not reap():
            break  # no child left
        if not reaper and status is not None:
            break  # without a subreaper only the group can be reached
        time.sleep(0.005)
    if stopped_running:
        _write(os.path.join(d, "status"), "killed")
    else:
        _write(os.path.join(d, "status"), str(status))
    if os.getppid() != parent:  # the checker is gone: nobody will read or remove the directory
        shutil.rmtree(d, ignore_errors=True)
    if status is None:
        code = 137
    else:
        code = status if status >= 0 else 128 - status
    sys.stdout.flush()
    os._exit(code)


try:
    main()
except SystemExit:
    raise
except BaseException as exc:  # never a traceback in the probe's stderr from here
    try:
        os.write(2, ("preflight supervisor: %s: %s\n" % (type(exc).__name__, exc)).encode())
    except OSError:
        pass
    os._exit(125)
