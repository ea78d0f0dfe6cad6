"""The single way the checker runs code in another interpreter.

Every probe that imports torch, verl, vllm, flash_attn or ray, or touches CUDA/NCCL, goes
through :func:`run_script`: the script runs in a new session (its own process group) with a
deadline; on timeout the whole group is killed with SIGKILL. A crash (segfault, abort), a hang
or garbage output comes back as a :class:`ProbeOutput` describing what happened; nothing here
raises for the child's misbehaviour.

Scripts live in ``preflight/target/`` and must run on the *target* interpreter with the
standard library only (any CPython 3.6+), so they never import the checker's vendored code.
They report through lines ``@@PREFLIGHT@@ {json}`` on stdout (see ``target/_prelude.py``);
any other output is kept as evidence.
"""

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

MARKER = "@@PREFLIGHT@@ "
TAIL_CHARS = 4000

__all__ = ["ProbeOutput", "run_script", "run_argv", "load_script", "spawn_script", "collect", "kill_all", "MARKER"]


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
        return ev


def load_script(name: str) -> str:
    """Source text of ``preflight/target/<name>.py`` with the shared prelude prepended.

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

    return read("_prelude.py") + "\n" + read(name + ".py")


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


#: Probe processes started and not yet collected: killed by :func:`kill_all` when the checker is
#: interrupted (each probe runs in its own session, so a terminal's Ctrl-C or a scheduler's
#: SIGTERM to the checker does not reach it by itself).
_LIVE: "set" = set()


def spawn_script(python: str, name: str, args: Any = None, env: Optional[Mapping[str, str]] = None,
                 cwd: Optional[str] = None, to_files: bool = False) -> "subprocess.Popen[str]":
    """Start ``python -c <script NAME> <json args>`` in its own session; return the Popen.

    ``to_files`` sends stdout and stderr to temporary files instead of pipes: for processes that
    are polled rather than drained (NCCL ranks), so a chatty process (NCCL_DEBUG=INFO) cannot
    block on a full pipe. Raises OSError if the interpreter cannot be executed. Use
    :func:`collect` to wait.
    """
    code = load_script(name)
    argv = [python, "-c", code, json.dumps(args if args is not None else {})]
    files = None
    if to_files:
        files = (tempfile.TemporaryFile(mode="w+", errors="replace"), tempfile.TemporaryFile(mode="w+", errors="replace"))
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=files[0] if files else subprocess.PIPE,
        stderr=files[1] if files else subprocess.PIPE, env=_child_env(env), cwd=cwd, start_new_session=True,
        universal_newlines=True, errors="replace",
    )
    proc._pf_files = files  # type: ignore[attr-defined]
    _LIVE.add(proc)
    return proc


def _kill_group(proc: "subprocess.Popen[str]") -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> int:
    """Kill the process group of every probe still running; returns how many there were."""
    n = 0
    for proc in list(_LIVE):
        _kill_group(proc)
        _LIVE.discard(proc)
        n += 1
    return n


def collect(proc: "subprocess.Popen[str]", timeout: float, argv_label: List[str],
            started: Optional[float] = None) -> ProbeOutput:
    """Wait up to ``timeout`` seconds for ``proc``; kill its process group on expiry.

    Also kills the group after a normal exit, so no grandchild (a vLLM engine core, a Ray
    worker) outlives the probe.
    """
    t0 = started if started is not None else time.monotonic()
    out = ProbeOutput(argv=argv_label)
    remaining = max(0.1, timeout - (time.monotonic() - t0))
    files = getattr(proc, "_pf_files", None)
    try:
        if files:
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                out.timed_out = True
                _kill_group(proc)
                proc.wait(timeout=10)
            stdout, stderr = [(f.seek(0), f.read())[1] for f in files]
            for f in files:
                f.close()
        else:
            try:
                stdout, stderr = proc.communicate(timeout=remaining)
            except subprocess.TimeoutExpired:
                out.timed_out = True
                _kill_group(proc)
                try:
                    stdout, stderr = proc.communicate(timeout=10)
                except subprocess.TimeoutExpired:  # pipes held open by an escaped grandchild
                    stdout, stderr = "", ""
    finally:
        _kill_group(proc)
        _LIVE.discard(proc)
    out.duration_s = time.monotonic() - t0
    out.returncode = None if out.timed_out else proc.returncode
    plain = []
    for line in (stdout or "").splitlines():
        if line.startswith(MARKER):
            try:
                ev = json.loads(line[len(MARKER):])
                if isinstance(ev, dict):
                    out.events.append(ev)
                    continue
            except ValueError:
                pass
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
        cwd: working directory of the child (default: the checker's).
    """
    label = [python, "-c", "<script %s>" % name]
    t0 = time.monotonic()
    try:
        proc = spawn_script(python, name, args, env=env, cwd=cwd)
    except OSError as exc:
        return ProbeOutput(argv=label, launch_error=str(exc), duration_s=time.monotonic() - t0)
    return collect(proc, timeout, label, started=t0)


def run_argv(argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None) -> ProbeOutput:
    """Run an arbitrary command with the same deadline and group-kill rules (e.g. nvidia-smi)."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=_child_env(env), start_new_session=True,
                                universal_newlines=True, errors="replace")
    except OSError as exc:
        return ProbeOutput(argv=list(argv), launch_error=str(exc), duration_s=time.monotonic() - t0)
    _LIVE.add(proc)
    return collect(proc, timeout, list(argv), started=t0)
