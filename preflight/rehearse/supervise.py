"""The rehearsal's run: verl's entry point in the target interpreter, with a deadline, and every
process it started gone at the end, on success, failure, timeout or signal.

The target script ``rehearse_run`` starts ``python -m verl.trainer.main_ppo`` (through runpy, its
overrides read from a private file) in its own session, and records each output line with its
arrival time and the GPU memory in use. It runs under the probe supervisor
(:mod:`..probes.process`): a child subreaper that kills and reaps everything the run left (Ray's
GCS, raylet and workers, vLLM's engine processes, a ``setsid()`` daemon) when the run ends or the
checker closes its control pipe (a deadline, Ctrl-C, SIGTERM, SIGHUP, even SIGKILL of the
checker). As a second net, every process of the run carries a random tag in its environment
(:data:`TAG_VAR`; Ray passes the driver's environment to the workers it starts), and
:func:`leftovers` finds any process still carrying it; :func:`run` kills those by pid and reports
them. The private Ray head lives in a short temporary directory (Unix socket paths are limited to
107 bytes), removed afterwards: the ``ray stop`` of a cluster that was never shared.
"""

import os
import secrets
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["RunOutcome", "run", "leftovers", "read_log", "read_gpu", "TAG_VAR", "STALL_PATTERNS", "ray_temp_dir"]

#: Environment variable whose random value marks every process of one rehearsal.
TAG_VAR = "PREFLIGHT_REHEARSAL_TAG"

#: Variables taken out of the run's environment: a RAY_ADDRESS would make verl's ray.init join
#: whatever cluster it names instead of the private head.
UNSET = ("RAY_ADDRESS",)

#: Output lines after which verl never finishes on its own: a Ray actor died in its creation task
#: (Ray 2.x ActorDiedError, ray/exceptions.py), e.g. a reward loop worker whose reward module does not
#: import; verl 0.9.1 kept waiting for it until the deadline on the H200 (bench/RESULTS.md).
STALL_PATTERNS = (r"The actor died because of an error raised in its creation task",)


@dataclass
class RunOutcome:
    """How one rehearsal run ended.

    Attributes:
        returncode: verl's exit status (None when it was killed before it ended).
        timed_out: the deadline passed (the run was stopped).
        interrupted: the checker was interrupted (KeyboardInterrupt re-raised after cleanup).
        seconds: wall time of the run, start-up included.
        lines: [(seconds since start, text)] of everything verl and its workers printed.
        gpu: [(seconds, gpu index, MiB used)] samples.
        gpu_how: "nvml", "nvidia-smi" or None (no GPU memory figures).
        leftovers: processes still carrying the run's tag after it ended ([{pid, cmd}]); killed.
        probe: the target process's own evidence (exit, stderr tail) when it failed to start.
        stalled: (seconds, line) of the :data:`STALL_PATTERNS` line after which the run was
            stopped, ``stall_s`` without progress having passed; None otherwise.
    """

    returncode: Optional[int]
    timed_out: bool
    seconds: float
    lines: List[Tuple[float, str]] = field(default_factory=list)
    gpu: List[Tuple[float, int, int]] = field(default_factory=list)
    gpu_how: Optional[str] = None
    leftovers: List[Dict[str, Any]] = field(default_factory=list)
    probe: Dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    stalled: Optional[Tuple[float, str]] = None

    @property
    def ok(self) -> bool:
        """verl exited 0 on its own."""
        return self.returncode == 0 and not self.timed_out and self.stalled is None


def ray_temp_dir() -> str:
    """A new private directory for the Ray head, short enough for Ray's socket paths."""
    base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    return tempfile.mkdtemp(prefix="pfr-", dir=base)


def leftovers(tag: str) -> List[Dict[str, Any]]:
    """Processes of this user whose environment holds ``TAG_VAR=tag`` ([{pid, cmd}]); [] where
    /proc cannot be read (other systems)."""
    needle = ("%s=%s" % (TAG_VAR, tag)).encode()
    found: List[Any] = []
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid == me:
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as fh:
                env = fh.read(1 << 20)
        except OSError:
            continue
        if needle not in env.split(b"\0"):
            continue
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                cmd = fh.read(300).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            cmd = "?"
        try:
            with open("/proc/%d/stat" % pid) as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = "?"
        if state == "Z":
            continue  # already dead, waiting for its parent to reap it
        found.append({"pid": pid, "cmd": cmd[:200]})
    return found


def _kill_tagged(tag: str, wait_s: float = 5.0) -> List[Dict[str, Any]]:
    left = leftovers(tag)
    for p in left:
        try:
            os.kill(p["pid"], signal.SIGKILL)
        except OSError:
            pass
    end = time.monotonic() + wait_s
    while left and time.monotonic() < end and leftovers(tag):
        time.sleep(0.1)
    return left


def read_log(path: str, limit: int = 64 << 20) -> List[Tuple[float, str]]:
    """The run's log as [(seconds, line)] (see target/rehearse_run.py); at most ``limit`` bytes
    read (the tail kept)."""
    out: List[Tuple[float, str]] = []
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if size > limit:
                fh.seek(size - limit)
                fh.readline()
            data = fh.read()
    except OSError:
        return out
    for raw in data.decode("utf-8", "replace").splitlines():
        t, _, text = raw.partition(" ")
        try:
            out.append((float(t), text))
        except ValueError:
            if out:
                out[-1] = (out[-1][0], out[-1][1] + "\n" + raw)
    return out


def read_gpu(path: str) -> List[Tuple[float, int, int]]:
    """GPU samples [(seconds, index, MiB used)] from the run's sample file."""
    out: List[Tuple[float, int, int]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                parts = raw.split()
                if len(parts) == 3:
                    try:
                        out.append((float(parts[0]), int(parts[1]), int(parts[2])))
                    except ValueError:
                        continue
    except OSError:
        pass
    return out


def run(python: str, overrides: Sequence[str], workdir: str, timeout: float, env: Optional[Mapping[str, str]] = None,
        module: str = "verl.trainer.main_ppo", sample_s: float = 0.5, ray_dir: Optional[str] = None,
        keep_ray_address: bool = False, stall_s: Optional[float] = None) -> RunOutcome:
    """Run ``module`` (verl's entry point) with ``overrides`` under ``python`` in ``workdir``.

    Args:
        python: the target interpreter (the verl environment's).
        overrides: Hydra override strings (:mod:`.rewrite`).
        workdir: the rehearsal's private directory (exists; the log files go there).
        timeout: seconds for the whole run; then it is stopped (SIGTERM, then SIGKILL to the
            group, then everything under the supervisor).
        env: variables for the run (the launch's assignments), over this process's environment.
        module: the entry point (tests use a fake long-running one).
        sample_s: GPU memory sampling period, seconds.
        ray_dir: the private Ray head's temp dir (removed at the end).
        keep_ray_address: keep RAY_ADDRESS (``--address`` joins that cluster).
        stall_s: stop the run this many seconds after a :data:`STALL_PATTERNS` line if it has not
            ended by then and printed no progress line since (a start-up marker or a step line,
            :data:`.phases.PROGRESS_PATTERNS`; each restarts the clock). None: only the deadline.
    Returns: a :class:`RunOutcome`; never raises for the run's misbehaviour. A KeyboardInterrupt
    (Ctrl-C, or SIGTERM/SIGHUP turned into one by the CLI) ends the run and everything under it,
    then propagates.
    """
    from ..probes.process import collect, spawn_script

    tag = secrets.token_hex(8)
    log = os.path.join(workdir, "run.log")
    gpu = os.path.join(workdir, "gpu.log")
    run_env = dict(env or {})
    run_env[TAG_VAR] = tag
    args = {"module": module, "overrides": list(overrides), "workdir": workdir, "log": log, "gpu_log": gpu,
            "env": run_env, "unset": [] if keep_ray_address else list(UNSET),
            "deadline_s": max(5.0, timeout - 15.0), "sample_s": sample_s}
    if stall_s:
        from .phases import PROGRESS_PATTERNS

        args["stall"] = {"patterns": list(STALL_PATTERNS), "progress": list(PROGRESS_PATTERNS), "seconds": float(stall_s)}
    t0 = time.monotonic()
    outcome = RunOutcome(returncode=None, timed_out=False, seconds=0.0)
    proc = None
    try:
        proc = spawn_script(python, "rehearse_run", args, env={TAG_VAR: tag}, cwd=workdir, timeout=timeout)
        out = collect(proc, timeout, [python, "-c", "<script rehearse_run>"], started=t0)
        proc = None
        done = out.last("done")
        if done is not None:
            outcome.returncode = done.get("returncode")
            outcome.timed_out = bool(done.get("timed_out"))
            st = done.get("stalled")
            if st:
                outcome.stalled = (float(st[0]), str(st[1]))
        else:
            outcome.timed_out = out.timed_out
            outcome.probe = {"returncode": out.returncode, "timed_out": out.timed_out,
                             "stderr_tail": out.stderr_tail[-2000:], "launch_error": out.launch_error}
        g = out.last("gpu")
        outcome.gpu_how = (g or {}).get("how")
    except KeyboardInterrupt:
        outcome.interrupted = True
        raise
    finally:
        if proc is not None:
            proc.end(5.0)
        outcome.seconds = time.monotonic() - t0
        outcome.leftovers = _kill_tagged(tag)
        outcome.lines = read_log(log)
        outcome.gpu = read_gpu(gpu)
        if ray_dir:
            shutil.rmtree(ray_dir, ignore_errors=True)
    return outcome
