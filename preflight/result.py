"""The one result type every check returns.

A :class:`Result` is a row of the report: which check produced it (``id``), in which stage,
its :class:`Status`, a one-line message, the evidence behind it (versions, error text,
numbers) and, for every warn and fail, a fix (a command or a pin the user can apply).
"""

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Status", "Result"]


class Status(str, enum.Enum):
    """Outcome of one check.

    ``ERROR`` means the check itself could not run (a bug, a probe that returned garbage);
    ``FAIL`` means it ran and found a problem that stops verl; ``WARN`` is a problem that
    may cost performance or correctness but does not stop a run; ``SKIP`` means an earlier
    result made the check meaningless (``Result.caused_by`` names it).
    """

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def blocks(self) -> bool:
        """True for the statuses that make a machine 'not ready' (fail and error)."""
        return self in (Status.FAIL, Status.ERROR)


@dataclass
class Result:
    """One row of the report.

    Attributes:
        id: dotted check id, ``<stage>.<name>[.<item>]`` (e.g. ``packages.torch``).
        stage: the stage name the check belongs to.
        status: see :class:`Status`.
        message: one line, no trailing period needed.
        evidence: JSON-serialisable facts (versions, error text, numbers with units in keys).
        fix: what to run or pin; required (non-empty) for WARN and FAIL.
        caused_by: for SKIP (and for failures derived from another row), the ids responsible.
        duration_s: wall time of the check that produced this row, in seconds.
    """

    id: str
    stage: str
    status: Status
    message: str
    evidence: Dict[str, Any] = field(default_factory=dict)
    fix: Optional[str] = None
    caused_by: List[str] = field(default_factory=list)
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.status in (Status.WARN, Status.FAIL) and not self.fix:
            raise ValueError("result %s is %s without a fix" % (self.id, self.status.value))

    def to_dict(self) -> Dict[str, Any]:
        """The row as a JSON-ready dict (the ``results[]`` entries of the JSON report)."""
        return {
            "id": self.id,
            "stage": self.stage,
            "status": self.status.value,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "caused_by": list(self.caused_by),
            "duration_s": round(self.duration_s, 3),
        }
