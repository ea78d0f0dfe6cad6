# The supervisor of one probe: runs as ``python -I -S -c <this file> CTL_FD DIR`` under the
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
# Arguments: CTL_FD DIR; DIR/.supervise-cmd holds CWD and COMMAND... separated by NUL bytes (CWD "" for the
# supervisor's own), so neither is on any command line the supervisor shows. It imports nothing heavy
# (no json, subprocess or shutil: fork and exec by hand), so it starts in a few milliseconds.
# It writes <dir>/pid (the probe's pid, as soon as it runs) and <dir>/status (the probe's exit
# status in the Popen convention: negative for a signal; "killed" when it was stopped early), and
# exits with the probe's status (128 + N for signal N). When the checker is gone it removes <dir>.
import os
import select
import signal
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


def _spawn(argv, cwd, libc, me, keep_out):
    """Fork the probe (this process has one thread) and, in the child, a new session, the
    parent-death signal, stdin from /dev/null, none of the descriptors ``keep_out``, and exec.
    Returns (pid, b"" or the child's error text when exec failed)."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            os.setsid()
            if libc is not None:
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != me:  # the supervisor died before prctl took effect
                    os._exit(137)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd in (null,) + tuple(keep_out):
                os.close(fd)
            os.set_inheritable(err_w, False)
            if cwd:
                os.chdir(cwd)
            os.execvp(argv[0], argv)
        except BaseException as exc:
            try:
                os.write(err_w, ("%s" % (exc,)).encode("utf-8", "replace"))
            finally:
                os._exit(127)
    os.close(err_w)
    failure = b""
    while True:  # EOF at exec (the pipe is close-on-exec) or the child's error text
        try:
            chunk = os.read(err_r, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        failure += chunk
    os.close(err_r)
    return pid, failure


def _reap(pid, box):
    """Reap every exited child without blocking; the probe's (``pid``) status goes to
    ``box["status"]`` (Popen convention). True while children remain, False when none is left."""
    while True:
        try:
            done, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if done == 0:
            return True
        if done == pid:
            box["status"] = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)


def _wait(pid, box, stop, ctl, wake_r, parent):
    """Wait for the probe to end; True when it must be stopped early instead (a stop signal, EOF on
    the control pipe ``ctl``, or the checker ``parent`` gone)."""
    while box["status"] is None:
        _reap(pid, box)
        if box["status"] is not None:
            return False
        if stop:
            return True
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
                return True
        if os.getppid() != parent:
            return True
    return False


def _clear(pid, box, me, reaper):
    """Remove everything left: the probe's group, then (as subreaper) every process under us, for
    at most 10 s."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        for kid in _children(me):
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        if not _reap(pid, box):
            break  # no child left
        if not reaper and box["status"] is not None:
            break  # without a subreaper only the group can be reached
        time.sleep(0.005)


def main():
    ctl = int(sys.argv[1])
    d = sys.argv[2]
    # the command and its directory: NUL-separated in DIR/.supervise-cmd (0600), never on our command line
    with open(os.path.join(d, ".supervise-cmd"), "rb") as fh:
        parts = [os.fsdecode(p) for p in fh.read().split(b"\0")]
    os.unlink(os.path.join(d, ".supervise-cmd"))
    cwd = parts[0] or None
    argv = parts[1:]
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

    pid, failure = _spawn(argv, cwd, libc, me, (ctl, wake_r, wake_w))
    if failure:
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
        _write(os.path.join(d, "status"), "launch_error %s" % failure.decode("utf-8", "replace"))
        os._exit(127)
    _write(os.path.join(d, "pid"), str(pid))
    box = {"status": None}  # the probe's exit status, Popen convention
    early = _wait(pid, box, stop, ctl, wake_r, parent)
    stopped_running = early and box["status"] is None  # we are about to kill a probe that was still running
    _clear(pid, box, me, reaper)
    status = box["status"]
    if stopped_running:
        _write(os.path.join(d, "status"), "killed")
    else:
        _write(os.path.join(d, "status"), str(status))
    if os.getppid() != parent:  # the checker is gone: nobody will read or remove the directory
        import shutil

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
