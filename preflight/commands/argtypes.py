"""argparse value types shared by the subcommands (each error becomes one usage line)."""

import argparse
import math

__all__ = ["positive_int", "non_negative_int", "positive_seconds", "MAX_SECONDS"]

#: Longest time limit accepted (one week, in seconds): beyond it a deadline is a typo, and the
#: operating system's waits overflow.
MAX_SECONDS = 7 * 24 * 3600.0


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts: GPUs, ranks, tensor-parallel size)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return v


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (how many examples to show)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if v < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return v


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 and at most :data:`MAX_SECONDS` (nan and inf are refused:
    every comparison with nan is false, so it would pass a plain ``> 0`` test and disable the deadline)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text)
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError("%r is not a finite number of seconds" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    if v > MAX_SECONDS:
        raise argparse.ArgumentTypeError("%s s is more than a week; give a limit in seconds, e.g. 600" % text)
    return v
