"""The single way the checker runs code in another interpreter.

Every probe that imports torch, verl, vllm, flash_attn or ray, or touches CUDA/NCCL, goes
through :func:`run_script` (or :func:`run_argv` for other commands). A crash (segfault, abort),
a hang or garbage output comes back as a :class:`ProbeOutput` describing what happened; nothing
here raises for the child's misbehaviour, and nothing the probe starts outlives it:

* Each probe runs under a small supervisor (``probes/_supervise.py``, the checker's own
  interpreter with ``-I -S``) that starts it in a new session. On Linux the supervisor is a child
  subreaper and gives the probe ``PR_SET_PDEATHSIG=SIGKILL``: when the probe ends, on its own or
  at the deadline, every process it left (a ``setsid()`` daemon included) is killed and reaped.
  The supervisor also ends the probe when its control pipe from the checker closes, which the
  kernel does however the checker dies (SIGHUP, SIGKILL, a crash). Elsewhere the probe's process
  group is killed.
* The checker waits for the supervisor's pid, never for EOF of the pipes, so a daemon holding
  them cannot make a finished probe look hung.
* Output is read as it comes and only a tail is kept (:data:`KEEP_BYTES` per stream), so a
  flooding probe costs bounded memory and no disk.

Scripts live in ``preflight/target/`` and must run on the *target* interpreter with the
standard library only (any CPython 3.6+), so they never import the checker's vendored code.
They report JSON events (see ``target/_prelude.py``) as lines ``@@PREFLIGHT@@ {json}`` appended
to a private file named by ``$PREFLIGHT_EVENTS``, apart from stdout, so banners printed without
a newline cannot break them; such lines on stdout are still read for commands run without it.
Any other output is kept as evidence.
"""

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .startup import exe_path, static_refusal

MARKER = "@@PREFLIGHT@@ "
TAIL_CHARS = 4000

__all__ = ["ProbeOutput", "run_script", "run_argv", "load_script", "spawn_script", "collect", "kill_all", "MARKER",
           "target_argv", "supervisor_argv", "LOADER", "SCRIPT_ENV", "ARGS_ENV", "CodeRefused", "NoAnswer", "tree_refusal"]


@dataclass
class ProbeOutput:
    """What one probe process did.

    Attributes:
        argv: the command line (the script body is replaced by ``<script NAME>``).
        returncode: exit status; negative for death by signal (Popen convention); None if killed
            on timeout before it could be read.
        timed_out: True if the deadline passed and the process group was killed.
        duration_s: wall time in seconds.
        events: the JSON objects the script reported, in order.
        stdout_tail, stderr_tail: the last :data:`TAIL_CHARS` characters of other output.
        stdout_bytes, stderr_bytes: how many bytes the process wrote to each (all of it counted,
            only the tail kept).
        logs: what the caller read from the process's own log files (e.g. NCCL's WARN lines).
        launch_error: set when the interpreter could not be started at all (OSError text).
    """

    argv: List[str]
    returncode: Optional[int] = None
    timed_out: bool = False
    duration_s: float = 0.0
    events: List[Dict[str, Any]] = field(default_factory=list)
    stdout_tail: str = ""
    stderr_tail: str = ""
    launch_error: Optional[str] = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    logs: Dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the process exited 0 on its own."""
        return self.returncode == 0 and not self.timed_out and not self.launch_error

    @property
    def signal_name(self) -> Optional[str]:
        """``SIGSEGV``, ``SIGABRT``... when the process died by a signal, else None."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return "signal %d" % -self.returncode
        return None

    def last(self, kind: str) -> Optional[Dict[str, Any]]:
        """The last reported event whose ``event`` field equals ``kind``, or None."""
        for ev in reversed(self.events):
            if ev.get("event") == kind:
                return ev
        return None

    def describe(self) -> str:
        """A one-line account of how the process ended, for messages."""
        if self.launch_error:
            return "could not start: %s" % self.launch_error
        if self.timed_out:
            return "no answer within %.0f s (process group killed)" % self.duration_s
        if self.signal_name:
            return "crashed with %s" % self.signal_name
        if self.returncode:
            return "exited with status %d" % self.returncode
        return "exited normally"

    def evidence(self) -> Dict[str, Any]:
        """JSON-ready facts about the process for a result's evidence."""
        ev: Dict[str, Any] = {"exit": self.describe(), "duration_s": round(self.duration_s, 2)}
        if self.stderr_tail.strip():
            ev["stderr_tail"] = self.stderr_tail.strip()[-1500:]
        if self.stdout_tail.strip():
            ev["stdout_tail"] = self.stdout_tail.strip()[-800:]
        if max(self.stdout_bytes, self.stderr_bytes) > KEEP_BYTES:
            ev["output_bytes"] = {"stdout": self.stdout_bytes, "stderr": self.stderr_bytes}
        return ev


def load_script(name: str) -> str:
    """Source text of ``preflight/target/<name>.py`` with the shared prelude prepended, and the
    parts its ``# parts: _a.py _b.py`` line (within its first 40 lines) names between the two (a
    script too long for one file keeps one namespace).

    Works from a source checkout and from inside the zipapp (reads through the package
    loader). Raises OSError if the script does not exist (a packaging bug).
    """
    from .. import target as _target_pkg

    def read(fname: str) -> str:
        path = os.path.join(os.path.dirname(_target_pkg.__file__), fname)
        loader = getattr(_target_pkg, "__loader__", None)
        if loader is not None and hasattr(loader, "get_data"):
            return loader.get_data(path).decode("utf-8")
        with open(path, encoding="utf-8") as fh:  # pragma: no cover - plain file loaders have get_data
            return fh.read()

    script = read(name + ".py")
    parts = [ln.split(":", 1)[1].split() for ln in script.splitlines()[:40] if ln.startswith("# parts:")]
    return "\n".join([read("_prelude.py")] + [read(f) for f in (parts[0] if parts else [])] + [script])


def _child_env(extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
    env = dict(os.environ)
    # The checker may run with -I -S; the child must see the target's normal environment,
    # but never the checker's own zipapp on its path.
    for key in ("PYTHONHOME", "PYTHONSAFEPATH"):
        env.pop(key, None)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra:
        env.update(extra)
    return env


#: Bytes of each output stream kept while a probe runs (the rest is counted and dropped).
KEEP_BYTES = 64 * 1024
#: Most bytes of reported events read back from one probe.
EVENTS_MAX_BYTES = 64 * 1024 * 1024
#: Environment variable naming the file a target script appends its events to (see target/_prelude.py).
EVENTS_ENV = "PREFLIGHT_EVENTS"


class _Tail(threading.Thread):
    """Reads a probe's stdout and stderr pipes as they come, keeping the last :data:`KEEP_BYTES`
    of each and counting the rest, so a flooding probe costs the checker a bounded amount of
    memory and never blocks on a full pipe. Stops at EOF of both or when told to."""

    def __init__(self, fds: Sequence[int]) -> None:
        super().__init__(daemon=True)
        self.fds = list(fds)
        self.bufs = {fd: bytearray() for fd in self.fds}
        self.total = {fd: 0 for fd in self.fds}
        self.halt = threading.Event()
        self.start()

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            for fd in self.fds:
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ)
            open_fds = set(self.fds)
            while open_fds and not self.halt.is_set():
                for key, _ in sel.select(timeout=0.1):
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fd)
                        open_fds.discard(key.fd)
                        continue
                    buf = self.bufs[key.fd]
                    buf += data
                    self.total[key.fd] += len(data)
                    if len(buf) > 2 * KEEP_BYTES:
                        del buf[:-KEEP_BYTES]
        finally:
            sel.close()

    def finish(self, grace: float) -> List[Tuple[str, int]]:
        """Wait up to ``grace`` s for EOF, stop, close the pipes; (text tail, total bytes) per fd."""
        self.join(grace)
        self.halt.set()
        self.join(1.0)
        out = []
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
            out.append((bytes(self.bufs[fd][-KEEP_BYTES:]).decode("utf-8", "replace"), self.total[fd]))
        return out


class _Probe:
    """A running probe: the supervisor's Popen plus what is needed to stop and read it."""

    def __init__(self, popen: "subprocess.Popen[bytes]", ctl_w: Optional[int], workdir: str, tail: _Tail,
                 started: float) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.ctl_w = ctl_w
        self.workdir = workdir
        self.tail = tail
        self.started = started

    def poll(self) -> Optional[int]:
        """The supervisor's exit code (the probe's, 128 + N for signal N) or None while it runs."""
        return self.popen.poll()

    def wait(self, timeout: Optional[float] = None) -> int:
        """Wait for the supervisor (not for EOF of the pipes); raises subprocess.TimeoutExpired."""
        return self.popen.wait(timeout)

    def target_pid(self) -> Optional[int]:
        """Pid of the probe itself (the supervisor's child) once it started, else None."""
        try:
            with open(os.path.join(self.workdir, "pid")) as fh:
                return int(fh.read().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Ask the supervisor to kill the probe and everything under it (close the control pipe)."""
        if self.ctl_w is not None:
            try:
                os.close(self.ctl_w)
            except OSError:
                pass
            self.ctl_w = None

    def kill_hard(self) -> None:
        """Fallback when the supervisor does not answer: SIGKILL the probe's group and the supervisor's."""
        tp = self.target_pid()
        for pid in ([tp] if tp else []) + [self.pid]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def end(self, wait_s: float = 5.0) -> None:
        """Stop the probe if still running and wait (at most ``wait_s`` s, then SIGKILL) for the supervisor."""
        self.stop()
        try:
            self.popen.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.kill_hard()
            try:
                self.popen.wait(2.0)
            except subprocess.TimeoutExpired:
                pass


#: Probes started and not yet collected: ended by :func:`kill_all` when the checker is interrupted
#: (each probe runs in its own session, so a terminal's Ctrl-C or a scheduler's SIGTERM to the
#: checker does not reach it by itself). If the checker dies without running it (SIGKILL), each
#: probe's supervisor sees its control pipe close and does the same.
_LIVE: "set" = set()
_LIVE_LOCK = threading.Lock()


def supervisor_code() -> str:
    """The source of ``probes/_supervise.py`` (read from the package, zipapp included), run by
    ``python -I -S -c`` as the supervisor of a probe or of pip/uv (:mod:`preflight.probes.child`)."""
    from .. import probes as _pkg

    path = os.path.join(os.path.dirname(_pkg.__file__), "_supervise.py")
    loader = getattr(_pkg, "__loader__", None)
    if loader is not None and hasattr(loader, "get_data"):
        return loader.get_data(path).decode("utf-8")
    with open(path, encoding="utf-8") as fh:  # pragma: no cover
        return fh.read()


#: Environment variables naming the private files a target script reads its code and its ``ARGS``
#: from (see target/_prelude.py); both are taken out of the environment as the script starts.
SCRIPT_ENV = "PREFLIGHT_SCRIPT"
ARGS_ENV = "PREFLIGHT_ARGS"
#: The whole ``-c`` program of every target script: a fixed loader with no user data in it. It
#: runs the script named by ``$PREFLIGHT_SCRIPT`` in ``__main__`` (``sys.path[0]`` stays ``''``, the
#: child's private working directory, as for any ``-c``).
LOADER = ("import os as _o; _p = _o.environ.pop(%r); _f = open(_p, 'rb'); _s = _f.read(); _f.close(); "
          "exec(compile(_s, _p, 'exec')); del _o, _p, _f, _s" % SCRIPT_ENV)


def _private_file(workdir: str, name: str, data: bytes) -> str:
    """Write ``data`` to a new file ``workdir/name`` (mode 0600; ``workdir`` is the 0700 directory
    :func:`tempfile.mkdtemp` made for this probe); return its path. Raises OSError."""
    from ..atomic import write_new

    path = os.path.join(workdir, name)
    write_new(path, data, 0o600)
    return path


def supervisor_argv(ctl_r: int, workdir: str, cwd: str, argv: Sequence[str]) -> List[str]:
    """The supervisor's command line: the checker's interpreter, fixed flags, its fixed code and
    two tool-made values (a descriptor number, the private ``workdir``). The command it runs and
    that command's directory go in ``workdir/.supervise-cmd`` (NUL-separated, 0600), never on this line.
    Raises OSError when the file cannot be written."""
    _private_file(workdir, ".supervise-cmd", b"\0".join(os.fsencode(a) for a in [cwd or ""] + list(argv)))
    return [sys.executable or "python3", "-I", "-S", "-c", supervisor_code(), str(ctl_r), workdir]


def _start(argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
           files: Optional[Mapping[str, Tuple[str, bytes]]] = None) -> _Probe:
    """Start ``argv`` under a supervisor (see ``probes/_supervise.py``); raises OSError when even
    the supervisor cannot start. ``files``: {environment variable: (file name, bytes)} written
    0600 into the probe's private 0700 directory before it starts, each named to the child by
    that variable (how a target script gets its code and arguments)."""
    t0 = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="preflight-probe-")
    child_env = _child_env(env)
    child_env[EVENTS_ENV] = os.path.join(workdir, "events")
    try:
        for var, (fname, data) in (files or {}).items():
            child_env[var] = _private_file(workdir, fname, data)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    ctl_r, ctl_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if not cwd:
        # The target's sys.path[0] is '' (its current directory) for ``-c``: a checkout holding
        # build/ or *.egg-info there would show up as installed. Run it in a private empty directory.
        cwd = os.path.join(workdir, "cwd")
        os.mkdir(cwd, 0o700)
    argv = list(argv)
    if argv and os.sep in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = os.path.abspath(argv[0])  # relative to the caller's directory, not the private one
    try:
        sup = supervisor_argv(ctl_r, workdir, cwd, argv)
        popen = subprocess.Popen(sup, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, env=child_env,
                                 pass_fds=(ctl_r,), start_new_session=True)
    except BaseException:
        for fd in (ctl_r, ctl_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    for fd in (ctl_r, out_w, err_w):
        os.close(fd)
    probe = _Probe(popen, ctl_w, workdir, _Tail([out_r, err_r]), t0)
    with _LIVE_LOCK:
        _LIVE.add(probe)
    return probe


def target_argv(python: str) -> List[str]:
    """The command line of every target script: the interpreter, ``-c`` and the fixed
    :data:`LOADER`; the same for every script and every input."""
    return [python, "-c", LOADER]


def spawn_script(python: str, name: str, args: Any = None, env: Optional[Mapping[str, str]] = None,
                 cwd: Optional[str] = None, to_files: bool = False, timeout: float = 30.0) -> _Probe:
    """Start target script ``name`` (``preflight/target/<name>.py``) under ``python`` and a
    supervisor; return the running probe (``poll()``/``wait()`` like a Popen). Use :func:`collect`
    to wait for it and read it.

    The script's code and ``args`` (JSON) travel in private files (0600, in the probe's own 0700
    directory), named by ``$PREFLIGHT_SCRIPT`` and ``$PREFLIGHT_ARGS``; the child's command line is
    :func:`target_argv` (``python -c LOADER``), the same for every input, so no argument (a secret
    resolved from the environment, a path, a list of 20 000 dataset shards) is ever readable in
    ``/proc/PID/cmdline`` or limited by the kernel's argument-length limit.

    Output is read as it comes into a bounded tail, so no probe blocks on a full pipe however
    chatty it is (``to_files`` is accepted for callers of the older API and changes nothing).
    Before the first script under an interpreter, :func:`tree_refusal` reads its start-up under
    ``-I -S`` within ``timeout`` seconds.

    Raises OSError if the supervisor cannot be started (TypeError/ValueError when ``args`` is
    not JSON-serialisable), :class:`CodeRefused` when the interpreter's start-up is code another
    user can change, :class:`NoAnswer` when its ``-I -S`` start did not answer within ``timeout``;
    an interpreter that cannot be executed shows as ``launch_error`` in :func:`collect`'s result.
    """
    why = tree_refusal(python, env, timeout, cwd)
    if why:
        raise CodeRefused(why)
    code = load_script(name).encode("utf-8")
    payload = json.dumps(args if args is not None else {}).encode("utf-8")
    files = {SCRIPT_ENV: ("target_%s.py" % name, code), ARGS_ENV: ("args.json", payload)}
    # the path that was judged, never a bare name the child's PATH could answer differently
    return _start(target_argv(exe_path(python, _child_env(env)) or python), env, cwd, files)


class CodeRefused(OSError):
    """A target script was not started: the interpreter would first run code another user can
    change (its message is :func:`preflight.paths.not_run`'s)."""


class NoAnswer(OSError):
    """A target script was not started: the interpreter's ``-I -S`` start (which reads what it
    would run before any script) did not answer within the deadline; ``duration_s`` is the wait in
    seconds. Never cached, so a slow start is read again, never taken as clean."""

    def __init__(self, duration_s: float) -> None:
        super().__init__("no answer within %.0f s" % duration_s)
        self.duration_s = duration_s


_TREES: Dict[Tuple[str, ...], Optional[str]] = {}
_TREE_VARS = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONHOME", "PYTHONPLATLIBDIR", "PATH",
              "PYTHONPYCACHEPREFIX", "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH")


def _read_version(python: str, env: Mapping[str, str], timeout: float) -> Optional[str]:
    """``X.Y.Z`` of an interpreter that gave no tree under ``-I -S`` (Python 2 rejects ``-I``),
    read with ``-E -s -S`` (no site, no environment); None when it does not say."""
    out = collect(_start([python, "-E", "-s", "-S", "-c", "import sys; print('@@V %d.%d.%d' % sys.version_info[:3])"],
                         env, None), timeout, [python, "-E", "-s", "-S", "-c", "<version>"])
    for line in out.stdout_tail.splitlines():
        if line.startswith("@@V "):
            return line[4:].strip()
    return None


def tree_refusal(python: str, env: Optional[Mapping[str, str]] = None, timeout: float = 30.0,
                 cwd: Optional[str] = None) -> Optional[str]:
    """Why ``python`` must not run any target script, or None.

    Judged without running anything first (:func:`preflight.probes.startup.static_refusal`, each
    path as a child started in ``cwd`` resolves it; None: the probe's private directory): what the
    kernel runs (the executable found on the child's PATH when a bare name, each ``#!`` interpreter
    and the PATH directories env searches), the directories its standard library is looked for in
    (its installation's, PYTHONHOME's, PYTHONPLATLIBDIR's, a venv's ``home``), what LD_PRELOAD,
    LD_AUDIT and LD_LIBRARY_PATH load, PYTHONPATH and PYTHONPYCACHEPREFIX. Then what runs before
    any script (its prefix, site directories and their entries, ``.pth`` files and the directories
    they add, sitecustomize/usercustomize; read by ``target/info.py`` under ``-I -S``, so none of it
    ran; :func:`preflight.paths.tree_code_problem`), and the executable that read reports when it
    is not the one judged (a wrapper's). Refused too: an interpreter that starts but gives no such
    read (``<python> is Python 2.7.18, not Python 3.6 or newer`` when it is an old one): what it
    would run at start-up is unknown. None when none is, or when the interpreter cannot be
    executed (its own start then fails and is reported). Judged once per interpreter, directory
    and variables, within ``timeout`` seconds.

    Returns the ``not run: ...`` message (:func:`preflight.paths.not_run`). Raises
    :class:`NoAnswer` when the ``-I -S`` start was still running at ``timeout`` (not cached)."""
    merged = _child_env(env)
    key = (python, cwd or "") + tuple(merged.get(k, "") for k in _TREE_VARS)
    if key not in _TREES:
        _TREES[key] = _judge_tree(python, env, merged, timeout, cwd)
    return _TREES[key]


def _judge_tree(python: str, env: Optional[Mapping[str, str]], merged: Mapping[str, str],
                timeout: float, cwd: Optional[str]) -> Optional[str]:
    from ..paths import code_problem, not_run, tree_code_problem

    chain, why = static_refusal(python, merged, cwd)
    if why:
        return why
    files = {SCRIPT_ENV: ("target_info.py", load_script("info").encode("utf-8")),
             ARGS_ENV: ("args.json", b'{"tree": true}')}
    start = chain[0] if chain else python
    try:
        out = collect(_start([start, "-I", "-S", "-c", LOADER], env, None, files), timeout,
                      [python, "-I", "-S", "-c", "<script info tree>"])
    except OSError:
        return None
    if out.timed_out:
        raise NoAnswer(out.duration_s)
    if out.launch_error:
        return None  # it cannot be executed: its own start fails the same way and says why
    tree = out.last("tree")
    if not isinstance(tree, dict):
        version = None
        said = [ln for ln in out.stderr_tail.splitlines() if ln.strip()]
        if "-I" in out.stderr_tail or "SyntaxError" in out.stderr_tail:  # Python 2 ("Unknown option: -I"), or
            # one that cannot parse the read: its version, read without site
            try:
                version = _read_version(start, env or {}, timeout)
            except OSError:
                pass
        parts = (version or "").split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and (int(parts[0]), int(parts[1])) < (3, 6):
            return "%s is Python %s, not Python 3.6 or newer" % (python, version)
        if "SyntaxError" in out.stderr_tail:
            return "%s is not Python 3.6 or newer (it cannot parse the probe: %s)" % (python, said[-1][:200])
        return ("not run: %s started but did not say what it runs at start-up under -I -S (%s%s), so that code "
                "could not be judged" % (python, out.describe(), ": " + said[-1][:200] if said else ""))
    problem = tree_code_problem(tree)
    if problem:
        return not_run("the interpreter's start-up (%s)" % tree.get("prefix"), problem)
    real = tree.get("executable")
    if isinstance(real, str) and real.startswith("/") and chain and os.path.realpath(real) not in {
            os.path.realpath(c) for c in chain}:
        problem = code_problem(real)
        if problem:
            return not_run("the interpreter %s starts (%s)" % (python, real), problem)
    return None


def kill_all() -> int:
    """End every probe still running, with everything it started, and remove its private
    directory (events, cwd); returns how many there were."""
    with _LIVE_LOCK:
        live = list(_LIVE)
        _LIVE.clear()
    for probe in live:
        probe.stop()
    for probe in live:
        probe.end(3.0)
        shutil.rmtree(probe.workdir, ignore_errors=True)
    return len(live)


def read_events(path: str) -> List[Dict[str, Any]]:
    """The ``@@PREFLIGHT@@`` events a target script wrote to the file ``path`` (at most
    :data:`EVENTS_MAX_BYTES` read), in order; a missing or unreadable file gives []."""
    events: List[Dict[str, Any]] = []
    try:
        chunks, size = [], 0
        with open(path, "rb") as fh:  # in 1 MiB reads: read(64 MiB) allocates 64 MiB at once (p01, ulimit -v)
            while size < EVENTS_MAX_BYTES:
                block = fh.read(min(1 << 20, EVENTS_MAX_BYTES - size))
                if not block:
                    break
                chunks.append(block)
                size += len(block)
        data = b"".join(chunks)
    except OSError:
        return events
    for line in data.decode("utf-8", "replace").splitlines():
        ev = _parse_marker(line)
        if ev is not None:
            events.append(ev)
    return events


def _parse_marker(line: str) -> Optional[Dict[str, Any]]:
    at = line.find(MARKER)
    if at < 0:
        return None
    try:
        ev = json.loads(line[at + len(MARKER):])
    except ValueError:
        return None
    return ev if isinstance(ev, dict) else None


def collect(proc: _Probe, timeout: float, argv_label: List[str], started: Optional[float] = None) -> ProbeOutput:
    """Wait up to ``timeout`` seconds for ``proc`` to exit (its pid, not EOF of its pipes); stop it
    on expiry. After it ends, in every case, nothing it started is left running. The events it
    reported before a timeout are kept."""
    t0 = started if started is not None else proc.started
    out = ProbeOutput(argv=argv_label)
    remaining = max(0.1, timeout - (time.monotonic() - t0))
    try:
        try:
            proc.wait(remaining)
        except subprocess.TimeoutExpired:
            out.timed_out = True
        proc.end(5.0)
        out.duration_s = time.monotonic() - t0
        (stdout, out.stdout_bytes), (stderr, out.stderr_bytes) = proc.tail.finish(1.0)
        status = ""
        try:
            with open(os.path.join(proc.workdir, "status")) as fh:
                status = fh.read().strip()
        except OSError:
            pass
        if status.startswith("launch_error "):
            out.launch_error = status[len("launch_error "):]
        elif status == "killed":
            out.timed_out = True
        elif status.lstrip("-").isdigit():
            out.returncode = int(status)
            out.timed_out = False  # it ended on its own just as the deadline passed
        elif not out.timed_out:
            out.returncode = proc.popen.returncode  # the supervisor itself failed
        out.events = read_events(os.path.join(proc.workdir, "events"))
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        shutil.rmtree(proc.workdir, ignore_errors=True)
    plain = []
    for line in (stdout or "").splitlines():
        ev = _parse_marker(line)  # events printed on stdout (a command run without the events file)
        if ev is not None:
            out.events.append(ev)
            line = line[:line.find(MARKER)]  # a banner printed without a newline before it
            if not line:
                continue
        plain.append(line)
    out.stdout_tail = "\n".join(plain)[-TAIL_CHARS:]
    out.stderr_tail = (stderr or "")[-TAIL_CHARS:]
    return out


def run_script(python: str, name: str, args: Any = None, timeout: float = 60.0,
               env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> ProbeOutput:
    """Run target script ``name`` under ``python`` with a deadline; never raises for the child.

    Args:
        python: path of the target interpreter.
        name: script name under ``preflight/target/`` (without ``.py``).
        args: JSON-serialisable arguments, available to the script as ``ARGS``.
        timeout: seconds before the whole process group is killed.
        env: extra environment variables for the child.
        cwd: working directory of the child (default: a private empty directory, so nothing in the
            checker's current directory lands on the target's ``sys.path``; give paths absolute).
    """
    label = [python, "-c", "<script %s>" % name]
    t0 = time.monotonic()
    try:
        proc = spawn_script(python, name, args, env=env, cwd=cwd, timeout=timeout)
    except NoAnswer:
        return ProbeOutput(argv=label, timed_out=True, duration_s=time.monotonic() - t0)
    except OSError as exc:
        return ProbeOutput(argv=label, launch_error=str(exc), duration_s=time.monotonic() - t0)
    return collect(proc, timeout, label, started=t0)


def run_argv(argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None) -> ProbeOutput:
    """Run an arbitrary command with the same deadline and group-kill rules (e.g. nvidia-smi)."""
    t0 = time.monotonic()
    try:
        proc = _start(argv, env, None)
    except OSError as exc:
        return ProbeOutput(argv=list(argv), launch_error=str(exc), duration_s=time.monotonic() - t0)
    return collect(proc, timeout, list(argv), started=t0)
