"""The phase table of a rehearsal, read off verl's own output and the GPU memory samples.

Sources (verl 0.9.1, the wheel's files; the line formats the parser relies on):

* ``verl/trainer/main_ppo.py:73`` prints ``ray init kwargs: {...}`` just before ``ray.init``.
* Ray prefixes what an actor prints with ``(ClassName pid=N)`` (``, ip=A`` on other nodes);
  the TaskRunner's first line marks the end of the Ray start.
* ``verl/utils/logging_utils.py:27``: verl's logger writes ``LEVEL:asctime:message``.
* ``verl/trainer/ppo/v1/trainer_base.py``: ``worker group kwargs`` (304), ``create worker group``
  (317), ``actor and ref model engine initialized`` (330), ``reward loop manager initialized``
  (351), ``checkpoint engine manager initialized`` (388, after the LLM servers started),
  ``all initialize finished, ready to fit`` (394); the trainer then syncs the weights into the
  rollout (``on_init_end``, trainer_sync.py:33) before the first step.
* ``verl/utils/logger/aggregate_logger.py:26-31`` (the console logger): one line per step,
  ``step:N - key:value - ...``, with verl's own timers ``timing_s/gen``, ``timing_s/reward``,
  ``timing_s/old_log_prob``, ``timing_s/ref``, ``timing_s/update_actor``,
  ``timing_s/update_weights`` and ``timing_s/step`` (``marked_timer`` in trainer_base.py:565-609
  and trainer_sync.py:36), and torch's ``perf/max_memory_allocated_gb``.

Start-up phases are the time between two marker lines (each line carries the time it reached
the checker). Inside a step, verl's timers give the durations; their windows are laid end to end
from the step's start (the step line's time minus ``timing_s/step``) in the order the sync
trainer runs them, which is how peak GPU memory is attributed to them.
"""

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Phase", "ErrorFound", "parse_steps", "markers", "phase_table", "first_error", "phase_at", "strip_prefix",
           "PHASES", "PROGRESS_PATTERNS"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY_PREFIX = re.compile(r"^\((?P<actor>[A-Za-z_][\w.:\-]*)(?: pid=(?P<pid>\d+))?(?:, ip=[\d.a-fA-F:]+)?\)\s?")
_STEP = re.compile(r"(?:^|\s)step:(?P<step>\d+) - (?P<rest>.*)$")

#: (marker id, regex on the line without Ray's prefix)
_MARKERS = (
    ("ray_init", re.compile(r"^ray init kwargs: ")),
    ("worker_group", re.compile(r"worker group kwargs: ")),
    ("workers_created", re.compile(r"create worker group ")),
    ("actor_ready", re.compile(r"actor and ref model engine initialized")),
    ("reward_ready", re.compile(r"reward loop manager initialized")),
    ("rollout_ready", re.compile(r"checkpoint engine manager initialized")),
    ("init_done", re.compile(r"all initialize finished, ready to fit")),
)

#: Regexes (on a raw output line) of the lines that show the run still moving: each start-up marker
#: and a console-logger step line.
PROGRESS_PATTERNS = tuple(rx.pattern for _, rx in _MARKERS[1:]) + (_STEP.pattern,)

#: The rows of the table, in order: (id, label).
PHASES = (
    ("startup", "start-up (imports, Hydra, config validation)"),
    ("ray_start", "Ray start"),
    ("worker_init", "worker init (FSDP actor/ref)"),
    ("reward_init", "reward loop start"),
    ("rollout_start", "rollout engine start"),
    ("weight_sync", "weight sync (first, before step 1)"),
    ("rollout", "rollout (step 1)"),
    ("reward", "reward (step 1)"),
    ("log_prob", "old/ref log-prob (step 1)"),
    ("actor_update", "actor update (step 1)"),
    ("step_sync", "weight sync (end of step 1)"),
    ("step2", "step 2"),
)

#: Sync trainer order of verl's step timers (trainer_base.py:565-609, then on_step_end).
_STEP_ORDER = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor",
               "update_weights")


@dataclass
class Phase:
    """One row: ``id``, ``label``, ``seconds`` (None when the run never got there), ``source``
    (how the time was measured), ``window`` (start, end) in run seconds, ``peak_mib`` per GPU index
    within the window (measured by NVML sampling), ``reached`` (the phase ended)."""

    id: str
    label: str
    seconds: Optional[float] = None
    source: str = ""
    window: Optional[Tuple[float, float]] = None
    peak_mib: Dict[int, int] = field(default_factory=dict)
    reached: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready row."""
        return {"id": self.id, "label": self.label, "seconds": None if self.seconds is None else round(self.seconds, 3),
                "source": self.source, "window": None if self.window is None else [round(x, 3) for x in self.window],
                "peak_mib": {str(k): v for k, v in sorted(self.peak_mib.items())}, "reached": self.reached}


def strip_prefix(line: str) -> Tuple[Optional[str], str]:
    """(Ray actor name or None, the line without ANSI colours and Ray's ``(Actor pid=N)`` prefix)."""
    text = _ANSI.sub("", line)
    m = _RAY_PREFIX.match(text)
    if m:
        return m.group("actor"), text[m.end():]
    return None, text


def _number(v: str) -> Optional[float]:
    try:
        return float(v)
    except ValueError:
        return None


def parse_steps(lines: Sequence[Tuple[float, str]]) -> Dict[int, Dict[str, Any]]:
    """``{step: {"t": seconds the line arrived, "metrics": {key: float}}}`` from the console
    logger's ``step:N - key:value`` lines (the first line for each step)."""
    out: Dict[int, Dict[str, Any]] = {}
    for t, line in lines:
        _, text = strip_prefix(line)
        m = _STEP.search(text)
        if not m:
            continue
        step = int(m.group("step"))
        if step in out:
            continue
        metrics: Dict[str, float] = {}
        for part in m.group("rest").split(" - "):
            k, sep, v = part.partition(":")
            if sep:
                num = _number(v.strip())
                if num is not None:
                    metrics[k.strip()] = num
        out[step] = {"t": t, "metrics": metrics}
    return out


def markers(lines: Sequence[Tuple[float, str]]) -> Dict[str, float]:
    """First arrival time of each start-up marker (see module doc), plus ``taskrunner``: the first
    line a TaskRunner actor printed."""
    seen: Dict[str, float] = {}
    for t, line in lines:
        actor, text = strip_prefix(line)
        if actor and actor.startswith("TaskRunner") and "taskrunner" not in seen:
            seen["taskrunner"] = t
        for mid, rx in _MARKERS:
            if mid not in seen and rx.search(text):
                seen[mid] = t
    return seen


def _peak(gpu: Sequence[Tuple[float, int, int]], a: float, b: float) -> Dict[int, int]:
    peak: Dict[int, int] = {}
    for t, i, mib in gpu:
        if a - 0.5 <= t <= b + 0.5:
            peak[i] = max(peak.get(i, 0), mib)
    return peak


def phase_table(lines: Sequence[Tuple[float, str]], gpu: Sequence[Tuple[float, int, int]] = (),
                ended_at: Optional[float] = None) -> List[Phase]:
    """The rows of :data:`PHASES` for one run's ``lines`` and GPU samples ``gpu``.

    A start-up phase whose end marker never came but whose start did is the phase the run was in
    when it ended (``ended_at``, or the last line's time): its row has the time spent so far and
    ``reached`` False.
    """
    mk = markers(lines)
    steps = parse_steps(lines)
    last = ended_at if ended_at is not None else (lines[-1][0] if lines else 0.0)
    rows = {pid: Phase(pid, label) for pid, label in PHASES}
    ray_end = mk.get("taskrunner") or mk.get("worker_group")
    step1 = steps.get(1)
    step1_start = None
    if step1 and "timing_s/step" in step1["metrics"]:
        step1_start = step1["t"] - step1["metrics"]["timing_s/step"]
    bounds = (
        ("startup", 0.0, mk.get("ray_init"), "log: start to 'ray init kwargs' (main_ppo.py:73)"),
        ("ray_start", mk.get("ray_init"), ray_end, "log: 'ray init kwargs' to the TaskRunner's first line"),
        ("worker_init", ray_end, mk.get("actor_ready"), "log: to 'actor and ref model engine initialized'"),
        ("reward_init", mk.get("actor_ready"), mk.get("reward_ready"), "log: to 'reward loop manager initialized'"),
        ("rollout_start", mk.get("reward_ready"), mk.get("rollout_ready"),
         "log: to 'checkpoint engine manager initialized' (the LLM servers are up)"),
        ("weight_sync", mk.get("rollout_ready"), step1_start,
         "log: to step 1's start (step line minus timing_s/step); includes the agent loop's start"),
    )
    open_phase = None
    for pid, a, b, src in bounds:
        row = rows[pid]
        row.source = src
        if a is None:
            continue
        if b is not None and b >= a:
            row.seconds, row.window, row.reached = b - a, (a, b), True
        elif open_phase is None:
            open_phase = pid
            row.seconds, row.window = max(0.0, last - a), (a, last)
    for n, st in sorted(steps.items()):
        m = st["metrics"]
        start = st["t"] - m.get("timing_s/step", 0.0)
        cursor = start
        windows: Dict[str, Tuple[float, float]] = {}
        for key in _STEP_ORDER:
            d = m.get("timing_s/%s" % key)
            if d is None:
                continue
            windows[key] = (cursor, cursor + d)
            cursor += d
        if n == 1:
            for pid, keys in (("rollout", ("gen",)), ("reward", ("reward",)), ("log_prob", ("old_log_prob", "ref")),
                              ("actor_update", ("update_actor",)), ("step_sync", ("update_weights",))):
                got = [windows[k] for k in keys if k in windows]
                row = rows[pid]
                row.source = "verl timer %s" % " + ".join("timing_s/%s" % k for k in keys)
                if not got and pid == "reward" and "gen" in windows:
                    # verl 0.9.1's v1 trainer scores inside the rollout (the reward loop), without a timer
                    row.source = "inside the rollout (verl's reward loop; no timer of its own)"
                    row.window, row.reached = windows["gen"], True
                    continue
                if got:
                    row.seconds = sum(b - a for a, b in got)
                    row.window = (got[0][0], got[-1][1])
                    row.reached = True
        elif n == 2 and "timing_s/step" in m:
            row = rows["step2"]
            row.seconds, row.window, row.reached = m["timing_s/step"], (start, st["t"]), True
            row.source = "verl timer timing_s/step (step 2)"
    if not rows["step2"].source:
        rows["step2"].source = "verl timer timing_s/step (step 2)"
    for row in rows.values():
        if row.window is not None:
            row.peak_mib = _peak(gpu, *row.window)
    return [rows[pid] for pid, _ in PHASES]


_TB_START = re.compile(r"Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Fault))"
                       r"(?:\((?P<inner>[\w.]+)\))?(?::\s?(?P<msg>.*))?$")
#: Exceptions that only carry another one (the cause is inside them, printed after them).
_WRAPPERS = ("RayTaskError", "ActorDiedError", "RayActorError", "RaySystemError", "ActorUnschedulableError",
             "WorkerCrashedError", "ChildFailedError", "InstantiationException", "hydra.errors")
#: Frames inside installed packages (the user's own file is the last frame outside them).
_LIB = re.compile(r"/(site-packages|dist-packages|lib/python[\d.]*|verl|vllm|ray|torch|transformers|hydra|omegaconf|"
                  r"tensordict|transfer_queue|pyarrow|datasets)/")
_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")


@dataclass
class ErrorFound:
    """The first real error of a run: ``type``, ``message``, ``tail`` (the traceback's last lines),
    ``at`` (run seconds), ``actor`` (the Ray actor that printed it, if any), ``where`` (the last
    frame outside site-packages, ``path:line``, when there is one)."""

    type: str
    message: str
    tail: str
    at: float
    actor: Optional[str] = None
    where: Optional[str] = None

    @property
    def line(self) -> str:
        """``Type: message`` as Python prints it."""
        return "%s: %s" % (self.type, self.message) if self.message else self.type


def _user_frame(block: Sequence[str]) -> Optional[str]:
    where = None
    for text in block:
        m = _FRAME.match(text)
        if m and not _LIB.search(m.group("file")) and not m.group("file").startswith("<") and \
                not m.group("file").endswith(".pyx"):  # compiled (Cython) library code: uvloop, Ray's _raylet
            where = "%s:%s" % (m.group("file"), m.group("line"))
    return where


def first_error(lines: Sequence[Tuple[float, str]], tail_lines: int = 12,
                headline: Optional[str] = None) -> Optional[ErrorFound]:
    """The first exception line of a traceback in ``lines`` that is not a wrapper (Ray's
    RayTaskError/ActorDiedError, Hydra's InstantiationException: each prints the exception it
    carries after itself), with the traceback lines before it; failing that the first wrapper,
    with its inner type. Exception lines count only within 80 lines after a ``Traceback`` header
    or a ``File "..."`` frame, so warnings that quote an exception do not. With ``headline`` (the
    error line a classifier picked, without prefixes), the first exception line holding it,
    wrapper or not. None when there is none.
    """
    recent: List[str] = []
    since_tb = 10 ** 9
    fallback = None
    for t, line in lines:
        actor, text = strip_prefix(line)
        text = _REPEAT.sub("", text)
        since_tb += 1
        if _TB_START.search(text) or _FRAME.match(text):
            since_tb = 0
            if _TB_START.search(text):
                recent = []
        recent.append(text)
        if len(recent) > 80:
            del recent[0]
        s = text.strip()
        if text[:1] in (" ", "\t") or since_tb > 80:
            continue
        m = _EXC_LINE.match(s)
        if not m:
            continue
        if headline is not None and headline not in s:
            continue
        typ = m.group("type")
        err = ErrorFound(typ, (m.group("msg") or "").strip(), "\n".join(recent[-tail_lines:]), t, actor,
                         _user_frame(recent))
        if headline is not None:
            return err
        if any(w in typ for w in _WRAPPERS):
            if fallback is None:
                if m.group("inner"):
                    err.type = "%s(%s)" % (typ, m.group("inner"))
                fallback = err
            continue
        return err
    return fallback


def phase_at(table: Sequence[Phase], t: float) -> Optional[Phase]:
    """The phase whose window holds run second ``t`` (the latest one that started before it)."""
    best = None
    for p in table:
        if p.window is not None and p.window[0] <= t:
            best = p
    return best
