"""One rule's verdict on a launch (:class:`Finding`)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional
from ..overrides import override_line


@dataclass
class Finding:
    """One rule's verdict.

    Attributes:
        rule: rule id (``train_batch_divisible``), ``item`` adds the role (``actor``, ``critic``).
        status: ``pass``, ``warn``, ``fail`` or ``skip``.
        message: the numbers, one line.
        fix: the smallest change (required for warn and fail).
        check: what verl checks, paraphrased (matrices/verl_rules.toml [rule.<id>]).
        where: the verl code that checks it in this release (when recorded).
        stops: when and how verl stops (or what goes wrong silently).
        silent: True when verl would not stop but train wrongly or slowly.
        evidence: the numbers by name.
        alts: the fix as overrides: each mapping (dotted key -> value) is one way to fix it that
            the fix text offers; :func:`evaluate` re-runs every rule on each and keeps only those
            that fix this finding without failing another rule (a mapping may then carry the
            companion change that another rule needs).
        fix_key, fix_tail: when set, the fix text is rebuilt from the surviving ``alts`` as
            ``set <fix_key> to A or B<fix_tail>``.
    """

    rule: str
    status: str
    message: str
    fix: Optional[str] = None
    item: Optional[str] = None
    check: str = ""
    where: str = ""
    stops: str = ""
    silent: bool = False
    evidence: Dict[str, Any] = field(default_factory=dict)
    alts: List[Dict[str, Any]] = field(default_factory=list)
    fix_key: Optional[str] = None
    fix_tail: str = ""

    @property
    def id(self) -> str:
        """``rule`` or ``rule.item``."""
        return self.rule if not self.item else "%s.%s" % (self.rule, self.item)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "rule": self.rule, "status": self.status, "message": self.message, "fix": self.fix,
                "check": self.check, "where": self.where, "stops": self.stops, "silent": self.silent,
                "evidence": self.evidence, "overrides": [override_line(a) for a in self.alts]}
