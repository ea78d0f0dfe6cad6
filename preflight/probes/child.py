"""pip and uv, run so that they die with the checker.

``spec``, ``install``, ``wheelhouse`` and ``matrix refresh`` start pip or uv for minutes at a time.
Started with :func:`subprocess.run`, a checker killed with SIGKILL (an OOM kill, a scheduler's
hard stop) leaves that pip running, re-parented to init, and its temporary directory behind.
:func:`run` is a drop-in for :func:`subprocess.run` that starts the command under the supervisor
the probes use (``preflight/probes/_supervise.py``): the command gets PR_SET_PDEATHSIG=SIGKILL and
a new session, the supervisor is a child subreaper, and it kills the command and everything it
started as soon as its control pipe from the checker closes, which the kernel does however the
checker ends. The supervisor then removes its directory: the caller's scratch directory when one
is given (``workdir``), and the command's ``TMPDIR`` (pip's own build directories), which is
inside it.
"""

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Mapping, Optional, Sequence

__all__ = ["run", "run_live", "scratch"]

#: The scratch directory's watcher (stdlib only): it waits for the end of its pipe, which comes
#: when the checker closes it or dies (SIGKILL included), then removes the directory it was given.
_WATCH = ("import os, shutil, sys\n"
          "fd, d = int(sys.argv[1]), sys.argv[2]\n"
          "try:\n    while os.read(fd, 1):\n        pass\nexcept OSError:\n    pass\n"
          "shutil.rmtree(d, ignore_errors=True)\n")


@contextlib.contextmanager
def scratch(prefix: str = "preflight-") -> Iterator[str]:
    """A private directory (``tempfile.mkdtemp``, mode 0700) for a command's files between its
    children (pip's requirement files, reports), removed at the end of the ``with`` block, and also
    when the checker is killed between two children, where no supervisor is running: a watcher
    process in a session of its own holds the reading end of a pipe and removes the directory when
    the pipe ends. Its argv holds only the descriptor number and the directory this made."""
    d = tempfile.mkdtemp(prefix=prefix)
    r, w = os.pipe()
    watcher = None
    try:
        try:
            watcher = subprocess.Popen([sys.executable or "python3", "-I", "-S", "-c", _WATCH, str(r), d],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, pass_fds=(r,), cwd=d, start_new_session=True)
        except OSError:
            watcher = None  # no watcher: the directory is still removed below on every orderly end
        os.close(r)
        r = -1
        yield d
    finally:
        if r >= 0:
            os.close(r)
        shutil.rmtree(d, ignore_errors=True)
        os.close(w)  # the watcher wakes, finds nothing left, exits
        if watcher is not None:
            try:
                watcher.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - it only removes a directory
                watcher.kill()
                watcher.wait()


def _fd_of(target: Any, name: str, opened: list) -> Any:
    """A file descriptor (or None: inherit) for the supervisor's ``name`` stream."""
    if target is None:
        return None
    if target is subprocess.DEVNULL:
        fh = open(os.devnull, "wb")
        opened.append(fh)
        return fh.fileno()
    if isinstance(target, int):
        return target
    try:
        target.flush()
    except (AttributeError, OSError, ValueError):
        pass
    return target.fileno()


def _others_can_plant(path: str, own: bool) -> bool:
    """True when a user other than the invoking one (or root) can create or swap an entry in
    directory ``path``: it is owned by someone else, or writable by group/others (for an ancestor
    (``own`` False) the sticky bit is enough: nobody can rename what is not theirs there)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    if st.st_uid not in (0, os.geteuid()):
        return True
    if not st.st_mode & 0o022:
        return False
    return own or not st.st_mode & stat.S_ISVTX


def _default_cwd(scratch: str) -> str:
    """The working directory a child gets when the caller names none: the invoker's, unless
    another user can put a file in it or swap a directory above it; then a new empty 0700
    directory inside ``scratch``.

    A Python child started as ``python -m pip``/``-m venv``/``-c CODE`` has its working
    directory first on ``sys.path``, before the standard library: a ``venv.py`` or ``pip.py``
    another user left in ``/tmp`` would otherwise run as the invoker (root in provisioning)."""
    try:
        here = os.getcwd()
    except OSError:
        here = ""
    if here:
        p, own = here, True
        while True:
            if _others_can_plant(p, own):
                break
            parent = os.path.dirname(p)
            if parent == p:
                return here
            p, own = parent, False
    empty = os.path.join(scratch, "cwd")
    os.mkdir(empty, 0o700)
    return empty


def run(cmd: Sequence[str], stdout: Any = None, stderr: Any = None, timeout: Optional[float] = None,  # noqa: C901
        env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None, universal_newlines: bool = False,
        text: Optional[bool] = None, capture_output: bool = False,
        workdir: Optional[str] = None) -> "subprocess.CompletedProcess[Any]":
    """Run ``cmd`` to completion like :func:`subprocess.run` (same arguments: ``stdout``/``stderr``
    as PIPE, DEVNULL, STDOUT (stderr only), a file or descriptor, or None to inherit; ``timeout``
    in seconds; ``text``/``universal_newlines``), under the probes' supervisor so that nothing it
    starts outlives it or the checker.

    ``workdir``: the caller's scratch directory (for example its TemporaryDirectory), removed by
    the supervisor when the checker dies while ``cmd`` runs; without it a private one is made
    and removed. Captured output is kept in files there while ``cmd`` runs (no pipe to fill).

    Returns a CompletedProcess (``returncode`` negative for death by a signal). Raises
    subprocess.TimeoutExpired after ``timeout`` (``cmd`` and its children are killed first),
    OSError when ``cmd`` cannot be started (FileNotFoundError when it does not exist), and
    re-raises KeyboardInterrupt after stopping it.
    """
    from .process import supervisor_argv

    if capture_output:
        stdout = stderr = subprocess.PIPE
    as_text = bool(text or universal_newlines)
    own = workdir is None
    # a private directory of our own is a scratch(): its watcher removes it even when the checker is
    # killed before the supervisor starts or after it ended (a kill between two pip runs)
    owned = contextlib.ExitStack()
    base = owned.enter_context(scratch(prefix="preflight-child-")) if own else workdir
    d = tempfile.mkdtemp(prefix=".child-", dir=base)  # the supervisor's pid/status files
    tmp = os.path.join(d, "tmp")
    os.mkdir(tmp, 0o700)
    child_env = dict(os.environ if env is None else env)
    for key in ("TMPDIR", "TEMP", "TMP"):
        child_env[key] = tmp
    opened: list = []
    out_path = os.path.join(d, "stdout")
    err_path = os.path.join(d, "stderr")
    ctl_r = ctl_w = -1
    popen = None
    try:
        def spool(path):  # a PIPE is spooled to a file in the scratch directory
            from ..atomic import open_new

            fh = os.fdopen(open_new(path), "wb")
            opened.append(fh)
            return fh.fileno()

        out_fd = spool(out_path) if stdout is subprocess.PIPE else _fd_of(stdout, "stdout", opened)
        if stderr is subprocess.STDOUT:
            err_fd = out_fd if out_fd is not None else 1
        else:
            err_fd = spool(err_path) if stderr is subprocess.PIPE else _fd_of(stderr, "stderr", opened)
        argv = [str(c) for c in cmd]
        if argv and os.sep in argv[0] and not os.path.isabs(argv[0]):
            argv[0] = os.path.abspath(argv[0])
        ctl_r, ctl_w = os.pipe()
        # the supervisor removes ``base`` (with ``d`` inside) when the checker is gone
        sup = supervisor_argv(ctl_r, base, os.path.abspath(cwd) if cwd else _default_cwd(d), argv)
        popen = subprocess.Popen(sup, stdin=subprocess.DEVNULL, stdout=out_fd, stderr=err_fd, env=child_env,
                                 pass_fds=(ctl_r,), start_new_session=True)
        os.close(ctl_r)
        ctl_r = -1
        try:
            popen.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        os.close(ctl_w)  # stops it (if still running) with everything it started
        ctl_w = -1
        popen.wait()
        status = ""
        try:
            with open(os.path.join(base, "status")) as fh:
                status = fh.read().strip()
        except OSError:
            pass
        if status.startswith("launch_error "):
            why = status[len("launch_error "):]
            exc_type = FileNotFoundError if "No such file" in why else OSError
            raise exc_type("%s: %s" % (argv[0], why))
        for fh in opened:
            fh.close()
        opened = []
        def _read(path: str, wanted: bool) -> Any:
            if not wanted:
                return None
            with open(path, "rb") as fh:
                data = fh.read()
            return data.decode("utf-8", "replace").replace("\r\n", "\n") if as_text else data

        if timed_out and status in ("killed", ""):  # what it printed until then, as subprocess.run gives it
            raise subprocess.TimeoutExpired(argv, timeout or 0, output=_read(out_path, stdout is subprocess.PIPE),
                                            stderr=_read(err_path, stderr is subprocess.PIPE))
        code = int(status) if status.lstrip("-").isdigit() else popen.returncode

        return subprocess.CompletedProcess(argv, code, _read(out_path, stdout is subprocess.PIPE),
                                           _read(err_path, stderr is subprocess.PIPE))
    finally:
        for fd in (ctl_r, ctl_w):
            if fd >= 0:
                os.close(fd)  # an exception (Ctrl-C) while it ran: the supervisor stops it
        if popen is not None and popen.poll() is None:
            deadline = time.monotonic() + 10
            while popen.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if popen.poll() is None:
                popen.kill()
                popen.wait()
        for fh in opened:
            fh.close()
        for name in ("status", "pid", ".supervise-cmd"):
            try:
                os.remove(os.path.join(base, name))
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)
        owned.close()  # our own base, and its watcher


class _RedactingPump:
    """Copies what a child writes to ``src_fd`` onto ``sink`` (a text stream) as it comes, one
    line at a time through :func:`preflight.redact.redact_text`. A line ends at ``\\n`` or ``\\r``
    (a progress bar redraws at each ``\\r``, so it stays live); a line with neither is held until
    one comes or :data:`HOLD_BYTES` pile up, so no token is shown in two halves. Ends at EOF
    (EIO on a pty whose other side is closed) or when told to."""

    HOLD_BYTES = 16384

    def __init__(self, src_fd: int, sink: Any) -> None:
        import threading

        self.src_fd, self.sink = src_fd, sink
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.halt = False
        self.thread.start()

    def _emit(self, raw: bytes) -> None:
        from ..redact import redact_text

        try:
            self.sink.write(redact_text(raw.decode("utf-8", "replace")))
            self.sink.flush()
        except (OSError, ValueError):
            pass

    def _loop(self) -> None:
        import select

        pending = b""
        while True:
            try:
                ready, _, _ = select.select([self.src_fd], [], [], 0.1)
            except (OSError, ValueError):
                break
            if not ready:
                if self.halt:
                    break
                continue
            try:
                data = os.read(self.src_fd, 65536)
            except OSError:  # EIO: the pty's other side is closed
                data = b""
            if not data:
                break
            pending += data
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r"))
            if cut < 0 and len(pending) < self.HOLD_BYTES:
                continue
            done, pending = (pending[:cut + 1], pending[cut + 1:]) if cut >= 0 else (pending, b"")
            self._emit(done)
        if pending:
            self._emit(pending)

    def finish(self, grace: float = 5.0) -> None:
        """Wait for EOF (up to ``grace`` s), then stop and flush what is held."""
        self.thread.join(grace)
        self.halt = True
        self.thread.join(2.0)


def run_live(cmd: Sequence[str], sink: Any, timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None) -> "subprocess.CompletedProcess[Any]":
    """Run ``cmd`` like :func:`run` with its stdout and stderr shown live on ``sink`` (a text
    stream, e.g. sys.stderr on a terminal), every line redacted (:func:`preflight.redact.redact_text`)
    before it is shown: the child writes to a pseudo-terminal (so pip and uv keep their progress
    bars) whose other side only this process reads. Where no pty can be made, a pipe.

    Returns a CompletedProcess without output (it was shown). Raises as :func:`run` does
    (subprocess.TimeoutExpired, OSError, KeyboardInterrupt after stopping ``cmd``).
    """
    try:
        import pty

        master, slave = pty.openpty()
    except (ImportError, OSError):
        master, slave = os.pipe()
    pump = _RedactingPump(master, sink)
    try:
        try:
            return run(cmd, stdout=slave, stderr=subprocess.STDOUT, timeout=timeout, env=env, cwd=cwd)
        finally:
            os.close(slave)  # the child's copies are gone once run() returned: EOF (EIO) on master
            pump.finish()
    finally:
        os.close(master)
