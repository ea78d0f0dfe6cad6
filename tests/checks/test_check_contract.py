"""The check contract is typed: every registered check takes the Context protocol
(preflight.checks.base.Context) and declares what it returns, and the run's real context
satisfies the protocol (mypy checks that at the runner; here, member by member)."""

import inspect

from preflight.checks import base
from preflight.context import Context, Options
from preflight.runner import load_stage
from preflight.stages import STAGES


def test_every_check_is_annotated():
    checks = [c for s in STAGES for c in load_stage(s)]
    assert len(checks) > 40
    bad = []
    for c in checks:
        sig = inspect.signature(c.func)
        first = next(iter(sig.parameters.values()))
        if first.annotation is not base.Context or sig.return_annotation is inspect.Signature.empty:
            bad.append("%s (%s.%s%s)" % (c.id, c.func.__module__, c.func.__name__, sig))
    assert not bad, "check functions must be f(ctx: Context) -> CheckResult (or a narrower return):\n" + "\n".join(bad)


def test_the_run_context_has_every_member_of_the_protocol(matrix):
    ctx = Context(Options(), matrix)
    members = [n for n in dir(base.Context) if not n.startswith("_")] + list(base.Context.__annotations__)
    assert {"matrix", "options", "results", "installed", "memo", "verl_release"} <= set(members)
    missing = [n for n in members if not hasattr(ctx, n)]
    assert not missing, missing
