"""argparse value types shared by the subcommands (each error becomes one usage line)."""

import argparse

__all__ = ["positive_int", "positive_seconds"]


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts: GPUs, ranks, tensor-parallel size)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return v


def positive_seconds(text: str) -> float:
    """A number of seconds > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v
