"""Runs the selected stages in order, gating each on earlier results.

The runner owns everything between a check function and a report row: gating (skip with the
cause), timing, turning an exception inside a check into an ERROR row with its traceback (the
run goes on), and progress callbacks for live rendering. Rows are not redacted here: the output
boundary (:func:`preflight.report.render.redact_report`) does it once for every format.
"""

import importlib
import time
import traceback
from typing import Callable, List, Optional, Sequence

from .checks.base import REGISTRY, Check, Outcome
from .context import Context
from .result import Result, Status
from .stages import STAGES, Stage

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


def _to_result(c: Check, o: Outcome, duration: float) -> Result:
    rid = c.id if not o.item else "%s.%s" % (c.id, o.item)
    fix = o.fix
    status = o.status
    if status in (Status.WARN, Status.FAIL) and not fix:  # a check bug, not the user's problem
        fix = "(no fix recorded: please report this as a bug in verl-preflight)"
    return Result(id=rid, stage=c.stage, status=status, message=o.message,
                  evidence=o.evidence, fix=fix or None,
                  caused_by=list(o.caused_by), duration_s=duration)


def _run_check(ctx: Context, c: Check) -> List[Result]:
    t0 = time.monotonic()
    try:
        out = c.func(ctx)
    except Exception as exc:  # a bug in a check must not end the run
        tb = traceback.format_exc()
        return [Result(c.id, c.stage, Status.ERROR, "check crashed: %s: %s" % (type(exc).__name__, exc),
                       {"traceback": tb[-3000:]}, duration_s=time.monotonic() - t0)]
    dt = time.monotonic() - t0
    outs = [] if out is None else (out if isinstance(out, list) else [out])
    return [_to_result(c, o, dt) for o in outs]


def load_stage(s: Stage) -> List[Check]:
    """Import the stage's module (registering its checks) and return them in order."""
    importlib.import_module(s.module)
    return list(REGISTRY.get(s.name, []))


def run(ctx: Context, stages: Sequence[str], progress: Optional[Progress] = None) -> List[Result]:
    """Run ``stages`` (names, any order; run in pipeline order) and return every row.

    Results are also stored in ``ctx.results`` by id, where later gates look them up.
    """
    rows: List[Result] = []

    def add(r: Result) -> None:
        ctx.results[r.id] = r
        rows.append(r)
        if progress:
            progress("result", r)

    for s in STAGES:
        if s.name not in stages:
            continue
        checks = load_stage(s)
        gate = _blocked(ctx, s.gate(ctx))
        for c in checks:
            blocked = gate or _blocked(ctx, c.needs)
            if blocked:
                first = ctx.results[blocked[0]]
                verb = {"fail": "failed", "error": "could not run", "skip": "was skipped"}[first.status.value]
                add(Result(c.id, c.stage, Status.SKIP, "skipped: %s %s" % (blocked[0], verb),
                           caused_by=list(blocked)))
                continue
            if progress:
                progress("start:%s" % c.id, None)
            for r in _run_check(ctx, c):
                add(r)
        if progress:
            progress("end:%s" % s.name, None)
    return rows
