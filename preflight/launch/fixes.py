"""Suggested fixes re-checked against every rule, grouped by root cause, and joined into one line.

A finding's fix carries its overrides (:attr:`Finding.alts`). Before a fix is offered, the whole
rule set runs again on the config with that override applied (interpolations that read the
changed key follow it, as OmegaConf would resolve them):

* an alternative that leaves its own finding failing, or fails a rule that passed before, is
  completed with the first alternative of that new failure that works (up to ``depth`` steps),
  or dropped; the fix text lists only what survives;
* findings of the same rule whose messages are the same but for the role (actor and critic)
  become one finding with one combined fix;
* :func:`fix_line` joins the surviving fixes into one line of overrides and re-checks it; the
  line is offered only for the failures it really fixes.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .interpolation import reference_of
from .overrides import format_value, or_list, override_line

__all__ = ["overlay", "verify", "group", "fix_line"]

Get = Callable[[str, Any], Any]
Runner = Callable[[Get], List[Any]]


def overlay(get: Get, raw: Optional[Get], alt: Dict[str, Any]) -> Get:
    """``get`` with ``alt``'s keys set; a key whose unresolved value (``raw``) interpolates a
    changed key (``${k}``, ``${oc.select:k,default}``, ``${.sibling}``) reads the new value."""
    if not alt:
        return get

    def g(key: str, default: Any = None) -> Any:
        seen = set()
        k = key
        while True:
            if k in alt:
                return alt[k]
            t = reference_of(raw(k, None) if raw is not None else None, k)
            if t is None or k in seen:
                return get(key, default)
            seen.add(k)
            k = t
    return g


def _bad(found: Sequence[Any]) -> Dict[str, str]:
    return {f.id: f.status for f in found if f.status in ("fail", "warn")}


def _fails(found: Sequence[Any]) -> Set[str]:
    return {f.id for f in found if f.status == "fail"}


def _works(run: Runner, get: Get, raw: Optional[Get], f: Any, alt: Dict[str, Any], before: Set[str],
           depth: int) -> Optional[Dict[str, Any]]:
    """``alt`` (possibly completed with other findings' fixes) when it fixes ``f`` without a new
    failure; None when no completion within ``depth`` steps does."""
    try:
        after = run(overlay(get, raw, alt))
    except Exception:  # a value no rule expected: not offered (the rules themselves never see it)
        return None
    by_id = {g.id: g for g in after}
    own = by_id.get(f.id)
    if own is not None and own.status in ("fail", "warn") and own.rule == f.rule and (
            own.status == "fail" or f.status == "warn"):
        return None
    new = [g for g in after if g.status == "fail" and g.id not in before and g.id != f.id]
    if not new:
        return alt
    if depth <= 0:
        return None
    for g in new:
        for galt in g.alts:
            if any(k in alt and alt[k] != val for k, val in galt.items()):
                continue
            merged = dict(alt)
            merged.update(galt)
            ok = _works(run, get, raw, f, merged, before, depth - 1)
            if ok is not None:
                return ok
        break  # the first new failure could not be completed
    return None


def _text(f: Any, alts: List[Dict[str, Any]]) -> Optional[str]:
    if f.fix_key and all(list(a) == [f.fix_key] for a in alts):
        return "set %s to %s%s" % (f.fix_key, or_list([format_value(a[f.fix_key]) for a in alts]), f.fix_tail)
    return "set " + " or ".join(override_line(a) for a in alts)


def verify(found: List[Any], get: Get, raw: Optional[Get], run: Runner, depth: int = 2) -> None:
    """Re-check each failing or warning finding's alternatives in place (see module doc).

    ``run(get)`` evaluates every rule on a config read through ``get`` (without verifying).
    A finding whose every alternative fails keeps its text with a note and no alternatives.
    """
    before = _fails(found)
    for f in found:
        if f.status not in ("fail", "warn") or not f.alts:
            continue
        kept: List[Dict[str, Any]] = []
        for alt in f.alts:
            ok = _works(run, get, raw, f, alt, before, depth)
            if ok is not None and ok not in kept:
                kept.append(ok)
        changed = kept != f.alts
        f.evidence["fix_checked"] = bool(kept)
        if not kept:
            f.fix = "%s (on its own this fails another rule; see the one-line fix)" % (f.fix or "")
            f.evidence["fix_rejected"] = [dict(a) for a in f.alts]
            f.alts = []
        elif changed:
            f.alts = kept
            f.fix = _text(f, kept)


def group(found: List[Any]) -> List[Any]:
    """Findings of one rule whose messages differ only in the role (``actor: ...`` and
    ``critic: ...``) merged into one (item ``actor+critic``) with the roles' fixes combined."""
    out: List[Any] = []
    seen: Dict[Tuple[str, str, str], Any] = {}
    for f in found:
        if f.status not in ("fail", "warn") or not f.item or ":" not in f.message:
            out.append(f)
            continue
        role, _c, rest = f.message.partition(": ")
        if role != f.item:
            out.append(f)
            continue
        k = (f.rule, f.status, rest)
        first = seen.get(k)
        if first is None:
            seen[k] = f
            out.append(f)
            continue
        first.item = "%s+%s" % (first.item, f.item)
        first.message = "%s: %s" % (first.item.replace("+", " and "), rest)
        if first.alts and f.alts:
            merged = dict(first.alts[0])
            merged.update(f.alts[0])
            first.alts = [merged]
            first.fix_key = None
            first.fix = _text(first, first.alts)
        elif f.fix and f.fix != first.fix:
            first.fix = "%s; %s" % (first.fix, f.fix)
        first.evidence.setdefault("grouped", [first.id]).append(f.id)
    return out


#: Rules fixed first when building one line: the GPUs and parallel sizes decide the batch arithmetic.
_ORDER = ("gpus_launch", "gpus_present", "megatron_world", "megatron_tp_heads", "rollout_tp_world", "rollout_tp_heads",
          "ulysses_heads", "sp_remove_padding", "train_batch_divisible", "mini_le_train", "mini_per_gpu",
          "train_divisible_by_mini", "micro_vs_mini", "megatron_vpp")


def _rank(f: Any) -> int:
    return _ORDER.index(f.rule) if f.rule in _ORDER else len(_ORDER)


def fix_line(found: List[Any], get: Get, raw: Optional[Get], run: Runner,
             rounds: int = 30) -> Optional[Tuple[Dict[str, Any], List[str], List[str]]]:
    """(one set of overrides, failures it fixes, failures it leaves) for the failing findings;
    None when nothing fails or no failure has an override fix.

    Built step by step: the rules run on the config with the line so far, and the first failure
    (parallel sizes before batch sizes) adds its first fix that works (:func:`_works`), so each
    value is chosen for the sizes already fixed; the final line is checked once more.
    """
    fails = [f for f in found if f.status == "fail" and f.rule != "fix_line"]
    if not fails or not any(f.alts for f in fails):
        return None
    before = _fails(fails)
    line: Dict[str, Any] = {}
    after: List[Any] = list(found)
    stuck: Set[str] = set()
    for _ in range(rounds):
        left = sorted([g for g in after if g.status == "fail" and g.alts and g.rule != "fix_line"
                       and g.id not in stuck], key=_rank)
        if not left:
            break
        g = left[0]
        cur = overlay(get, raw, line)
        now = _fails(after)
        pick = None
        for alt in g.alts:
            ok = _works(run, cur, raw, g, alt, now, 2)
            if ok is not None:
                pick = ok
                break
        step = dict(pick if pick is not None else g.alts[0])
        if all(line.get(k, object()) == v for k, v in step.items()):
            stuck.add(g.id)  # its fix is in the line already and it still fails: leave it to the others
            continue
        line.update(step)
        try:
            after = run(overlay(get, raw, line))
        except Exception:
            return None
    left_ids = sorted(_fails(after))
    fixed = sorted(i for i in before if i not in set(left_ids))
    return line, fixed, left_ids
