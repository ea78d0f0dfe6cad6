"""Renderers: ``console`` (rich, for people) and ``jsonreport`` (versioned, for machines).

Renderers only present a :class:`Report`; they never run checks.
"""

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List

from ..result import Result, Status

__all__ = ["Report", "EXIT_READY", "EXIT_NOT_READY", "EXIT_USAGE"]

EXIT_READY = 0      #: every selected check passed or warned
EXIT_NOT_READY = 1  #: at least one check failed or errored
EXIT_USAGE = 2      #: bad command line, unreadable input, or the checker's own failure


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

    def by_stage(self) -> Dict[str, List[Result]]:
        """Rows grouped by stage, in pipeline order."""
        out: Dict[str, List[Result]] = {s: [] for s in self.stages}
        for r in self.results:
            out.setdefault(r.stage, []).append(r)
        return out
