"""The rules' context: the release's rule set and the findings added so far."""

from typing import Any, Dict, List, Optional
from ..overrides import fix_overrides, format_value, or_list
from .finding import Finding


class RuleContext:
    """What the rules share while they run: the release's rule set ``rs`` (:func:`ruleset`), the rule table ``rules``
    (``matrices/verl_rules.toml``'s ``[rule]``) and the findings added so far (``out``)."""
    def __init__(self, rs: Dict[str, Any], rules: Dict[str, Any]):
        self.rs = rs
        self.rules = rules
        self.out: List[Finding] = []

    def add(self, rule: str, status: str, message: str, fix: Optional[str] = None, item: Optional[str] = None,
            silent: bool = False, alts: Optional[List[Dict[str, Any]]] = None, fix_key: Optional[str] = None,
            fix_tail: str = "", where_key: Optional[str] = None, stops_key: str = "stops",
            **evidence: Any) -> Finding:
        """Add one finding of ``rule``; its check and stops text come from the rule table and its where from the
        release's ruleset. ``where_key``/``stops_key``: a part of the rule verl checks elsewhere (another key of
        the ruleset's ``where`` and of the rule's table). Returns the finding."""
        meta = self.rules.get(rule, {})
        if fix is None and fix_key and alts:
            fix = "set %s to %s%s" % (fix_key, or_list([format_value(a[fix_key]) for a in alts]), fix_tail)
        elif fix is None and fix_key:
            fix = "change %s%s" % (fix_key, fix_tail)
        if not alts and fix:
            alts = fix_overrides(fix)  # a fix phrased "set k=v": the one-line fix can use it too
        f = Finding(rule, status, message, fix, item, meta.get("check", ""),
                    (self.rs.get("where") or {}).get(where_key or rule, ""), meta.get(stops_key, ""), silent,
                    {k: v for k, v in evidence.items() if v is not None}, list(alts or []), fix_key, fix_tail)
        self.out.append(f)
        return f
