"""The report layer: every reporting command builds a :class:`Report` and hands it to
:func:`preflight.report.render.render` (``render(report, fmt, output)``), which redacts it once and
turns it into one of :data:`preflight.report.render.FORMATS`: ``console`` (rich, for people),
``json`` (the versioned document of ``preflight/schema/``), ``markdown`` (short, for pasting into an
issue), ``junit`` (one testcase per check, for CI) or ``prometheus`` (node_exporter's textfile
collector). Renderers only present a Report; they never run checks.
"""

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ..result import Result, Status

__all__ = ["Report", "NextStep", "EXIT_READY", "EXIT_NOT_READY", "EXIT_USAGE", "LAUNCH_COMMANDS"]

EXIT_READY = 0      #: every selected check passed or warned
EXIT_NOT_READY = 1  #: at least one check failed or errored
EXIT_USAGE = 2      #: bad command line, unreadable input, or the checker's own failure

#: Commands whose report judges a launch rather than a machine (their headline is OK/WOULD FAIL).
LAUNCH_COMMANDS = frozenset({"config", "data", "rehearse", "explain"})


@dataclass
class Report:
    """Everything a renderer needs about one run.

    Attributes:
        results: every row, in run order.
        stages: names of the stages that were selected, in pipeline order.
        target: facts about the checked interpreter (python, version, prefix).
        verl: {"version", "chosen_by"} of the verl release checked against.
        machine: host facts and the NVML summary (sizes in bytes, memory in MiB).
        tool_version, matrix_version: versions of the checker and its data.
        started_at: epoch seconds; duration_s: wall time of the run.
        stage_timings: each stage's wall clock, ``{stage: {"start_s", "end_s", "wall_s"}}`` in
            seconds from the run's start (stages overlap where a deferred row, such as vLLM's
            import, was answered after later stages ran); empty for commands without stages.
        command: the subcommand that made the report (``check``, ``config``, ``data``,
            ``resolve``, ``cluster``...).
        sections: extra top-level sections of the JSON document, by name (``launch``, ``data``,
            ``resolution``...); a part wrapped in :class:`preflight.report.jsonreport.Redacted`
            was redacted by its owner and is kept as is.
        view: the command's own console presentation ``view(report, console, verbose)``, given the
            redacted report; None: the generic stage-by-stage table.
    """

    results: List[Result]
    stages: List[str]
    target: Dict[str, Any] = field(default_factory=dict)
    verl: Dict[str, Any] = field(default_factory=dict)
    machine: Dict[str, Any] = field(default_factory=dict)
    tool_version: str = ""
    matrix_version: str = ""
    started_at: float = field(default_factory=time.time)
    duration_s: float = 0.0
    stage_timings: Dict[str, Dict[str, float]] = field(default_factory=dict)
    command: str = "check"
    sections: Dict[str, Any] = field(default_factory=dict)
    view: Optional[Callable[["Report", Any, bool], None]] = None

    def counts(self) -> Dict[str, int]:
        """Number of rows per status value (every status present, zeros included)."""
        c = {s.value: 0 for s in Status}
        for r in self.results:
            c[r.status.value] += 1
        return c

    @property
    def ready(self) -> bool:
        """True when no row failed or errored."""
        return not any(r.status.blocks for r in self.results)

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_READY` or :data:`EXIT_NOT_READY`."""
        return EXIT_READY if self.ready else EXIT_NOT_READY

    @property
    def verdict(self) -> str:
        """``ready`` or ``not_ready`` (the JSON ``verdict``; commands word it for people)."""
        return "ready" if self.ready else "not_ready"

    @property
    def headline(self) -> str:
        """The verdict as every format words it for people: ``READY``/``NOT READY`` for a machine
        or a cluster; ``OK``/``WOULD FAIL`` for a launch, its data or its rehearsal
        (:data:`LAUNCH_COMMANDS`); ``NO ERROR FOUND``/``ERRORS FOUND`` for a log ``explain`` read;
        for ``resolve``, ``READY`` only when pip's resolver proved the install line (its
        ``resolve.proof`` row passed), else ``READY, INSTALL LINE UNPROVEN``: no format says a stack
        works without a proof."""
        if self.command == "explain":  # a log of a run that has already ended
            return "NO ERROR FOUND" if self.ready else "ERRORS FOUND"
        if self.command == "resolve" and self.ready:
            proof = [r for r in self.results if r.id == "resolve.proof"]
            if not proof or proof[0].status.value != "pass":
                return "READY, INSTALL LINE UNPROVEN"
        if self.command in LAUNCH_COMMANDS:
            return "OK" if self.ready else "WOULD FAIL"
        return "READY" if self.ready else "NOT READY"

    def next_steps(self) -> List["NextStep"]:
        """What to fix first when the run is not ready: one step per failing or erroring row
        that nothing else caused (root causes, in pipeline order), then the ones caused by
        another failing row; rows with the same fix are merged. Empty when ready."""
        bad = [r for r in self.results if r.status.blocks]
        ids = {r.id for r in bad}
        roots = [r for r in bad if not any(c in ids for c in r.caused_by)]
        after = [r for r in bad if r not in roots]
        steps: List[NextStep] = []
        for r in roots + after:
            fix = r.fix or "rerun with -v and read the evidence of %s; if the checker crashed, report it" % r.id
            same = [s for s in steps if s.fix == fix]
            if same:
                same[0].ids.append(r.id)
                continue
            blocked = [o.id for o in self.results if r.id in o.caused_by and o.id != r.id]
            steps.append(NextStep(ids=[r.id], message=r.message, fix=fix, root=r in roots, blocks=blocked))
        return steps

    def by_stage(self) -> Dict[str, List[Result]]:
        """Rows grouped by stage, in pipeline order."""
        out: Dict[str, List[Result]] = {s: [] for s in self.stages}
        for r in self.results:
            out.setdefault(r.stage, []).append(r)
        return out


@dataclass
class NextStep:
    """One thing to fix: the rows it answers (``ids``), the first row's message, the ``fix`` (a
    command or pin), whether it is a root cause (nothing failing caused it) and the rows it
    skipped or failed downstream (``blocks``)."""

    ids: List[str]
    message: str
    fix: str
    root: bool = True
    blocks: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """The step as a JSON-ready dict (``next_steps[]`` in the JSON report)."""
        return {"ids": list(self.ids), "message": self.message, "fix": self.fix, "root": self.root,
                "blocks": list(self.blocks)}
