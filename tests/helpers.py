"""Small helpers shared by tests (not fixtures)."""

from preflight.runner import run


def rows(ctx, stages):
    """Run ``stages`` on ``ctx``; return {result id: Result}."""
    return {r.id: r for r in run(ctx, list(stages))}
