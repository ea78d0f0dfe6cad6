"""Sweeps over many real cases (every example launch of every release, every stored release):
the default suite takes an even, fixed sample of each so it stays within its time (2 cores,
15 minutes); ``PREFLIGHT_FULL_SWEEP=1`` takes every case. The sample is the same on every run
(first and last kept, the rest evenly spaced), so a failure repeats."""

import os

FULL = os.environ.get("PREFLIGHT_FULL_SWEEP") == "1"


def sample(items, n):
    """``items`` (a sequence) whole under PREFLIGHT_FULL_SWEEP=1 or when it has at most ``n``;
    else ``n`` of them, evenly spaced, in their order."""
    items = list(items)
    if FULL or len(items) <= n:
        return items
    if n <= 1:
        return items[:1]
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]
