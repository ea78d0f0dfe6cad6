"""Runs the selected stages in order, gating each on earlier results.

The runner owns everything between a check function and a report row: gating (skip with the
cause), timing, turning an exception inside a check into an ERROR row with its traceback (the
run goes on), and progress callbacks for live rendering. Rows are not redacted here: the output
boundary (:func:`preflight.report.render.redact_report`) does it once for every format.
"""

import importlib
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .checks.base import REGISTRY, Check, Deferred, to_result
from .context import Context
from .result import Result, Status
from .stages import STAGES, Stage, stage as stage_of

__all__ = ["run", "Progress"]

Progress = Callable[[str, Optional[Result]], None]
"""Callback ``(event, result)``: ``("start:<id>", None)`` before a check runs, ``("result",
Result)`` for each row, and ``("end:<stage>", None)`` when a selected stage has ended."""

_OK = (Status.PASS, Status.WARN)


def _blocked(ctx: Context, ids: Sequence[str]) -> List[str]:
    bad = [i for i in ids if i in ctx.results and ctx.results[i].status not in _OK]
    # a gate that was itself skipped because of another one in the list is not a cause of its own
    return [i for i in bad if not (ctx.results[i].status == Status.SKIP
                                   and set(ctx.results[i].caused_by) & (set(bad) - {i}))]


def _skip_row(ctx: Context, c: Check, blocked: Sequence[str]) -> Result:
    """The SKIP row of check ``c``, naming the first of the results ``blocked`` that stopped it."""
    first = ctx.results[blocked[0]]
    verb = {"fail": "failed", "error": "could not run", "skip": "was skipped"}[first.status.value]
    return Result(c.id, c.stage, Status.SKIP, "skipped: %s %s" % (blocked[0], verb), caused_by=list(blocked))


def _outcomes(c: Check, fn: Callable[[], Any], t0: float, may_defer: bool) -> Union[List[Result], Deferred]:
    """Call ``fn`` (the check, or a Deferred's finish) and turn what it returns into rows, timed
    from ``t0``; a Deferred is handed back as it is where ``may_defer``."""
    try:
        out = fn()
        if isinstance(out, Deferred) and not may_defer:
            raise TypeError("a deferred answer returned another Deferred")
    except Exception as exc:  # a bug in a check must not end the run
        tb = traceback.format_exc()
        return [Result(c.id, c.stage, Status.ERROR, "check crashed: %s: %s" % (type(exc).__name__, exc),
                       {"traceback": tb[-3000:]}, duration_s=time.monotonic() - t0)]
    if isinstance(out, Deferred):
        return out
    dt = time.monotonic() - t0
    outs = [] if out is None else (out if isinstance(out, list) else [out])
    return [to_result(c.id, o, dt) for o in outs]


def load_stage(s: Stage) -> List[Check]:
    """Import the stage's module (registering its checks) and return them in order."""
    importlib.import_module(s.module)
    return list(REGISTRY.get(s.name, []))


def run(ctx: Context, stages: Sequence[str], progress: Optional[Progress] = None) -> List[Result]:  # noqa: C901  TODO(issue 22): split
    """Run ``stages`` (names, any order; run in pipeline order) and return every row.

    Results are also stored in ``ctx.results`` by id, where later gates look them up. A check that
    returns :class:`~preflight.checks.base.Deferred` keeps its place in the rows; the next checks
    and stages run meanwhile, and its answer is awaited when a gate names it, or at the end.
    Each stage's wall clock goes to ``ctx.put("stage_timings", {stage: {"start_s", "end_s",
    "wall_s"}})``, seconds from the run's start; stages overlap where a deferred row ended late.
    """
    t_run = time.monotonic()
    groups: List[List[Result]] = []  # one group of rows per check, in run order
    pending: Dict[str, Tuple[Check, Deferred, float, List[Result]]] = {}
    open_rows: Dict[str, int] = {}  # stage -> deferred checks not answered yet
    looped: List[str] = []  # stages whose checks have all been started
    timings: Dict[str, Dict[str, float]] = {}
    ctx.put("stage_timings", timings)

    def add(group: List[Result], r: Result) -> None:
        r.fix = ctx.target_fix(r.fix)
        ctx.results[r.id] = r
        group.append(r)
        if progress:
            progress("result", r)

    def end_stage(name: str) -> None:
        t = timings[name]
        t["end_s"] = round(time.monotonic() - t_run, 3)
        t["wall_s"] = round(t["end_s"] - t["start_s"], 3)
        if progress:
            progress("end:%s" % name, None)

    def answer(cid: str) -> None:
        c, d, t0, group = pending.pop(cid)
        rows = _outcomes(c, d.finish, t0, False)
        for r in rows if isinstance(rows, list) else ():
            add(group, r)
        open_rows[c.stage] -= 1
        if c.stage in looped and not open_rows[c.stage]:
            end_stage(c.stage)

    def settle(ids: Sequence[str]) -> None:
        for cid in [p for p in pending if any(i == p or i.startswith(p + ".") for i in ids)]:
            answer(cid)

    for s in STAGES:
        if s.name not in stages:
            continue
        checks = load_stage(s)
        for rid in s.implied(ctx):  # another stage's check this one cannot do without, run once
            if rid not in ctx.results:
                other = next(c for c in load_stage(stage_of(rid.split(".", 1)[0])) if c.id == rid)
                implied: List[Result] = []
                groups.append(implied)
                held = _blocked(ctx, other.needs)
                if held:
                    add(implied, _skip_row(ctx, other, held))
                    continue
                answered = _outcomes(other, lambda o=other: o.func(ctx), time.monotonic(), False)  # type: ignore[misc]
                for r in answered if isinstance(answered, list) else []:  # may_defer False: never a Deferred
                    add(implied, r)
        settle(s.gate(ctx))  # a deferred row this stage is gated on: its wait belongs to its own stage
        timings[s.name] = {"start_s": round(time.monotonic() - t_run, 3)}
        open_rows[s.name] = 0
        gate = _blocked(ctx, tuple(dict.fromkeys(tuple(s.gate(ctx)) + tuple(s.implied(ctx)))))
        for c in checks:
            group: List[Result] = []
            groups.append(group)
            settle(c.needs)
            blocked = gate or _blocked(ctx, c.needs)
            if blocked:
                add(group, _skip_row(ctx, c, blocked))
                continue
            if progress:
                progress("start:%s" % c.id, None)
            t0 = time.monotonic()
            rows = _outcomes(c, lambda c=c: c.func(ctx), t0, True)  # type: ignore[misc]
            if isinstance(rows, Deferred):
                pending[c.id] = (c, rows, t0, group)
                open_rows[c.stage] += 1
                continue
            for r in rows:
                add(group, r)
        looped.append(s.name)
        if not open_rows[s.name]:
            end_stage(s.name)
    for cid in list(pending):
        answer(cid)
    return [r for g in groups for r in g]
