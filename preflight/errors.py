"""Errors that become one line on stderr and exit code 2 (see :func:`preflight.cli.main`)."""

__all__ = ["UsageError"]


class UsageError(Exception):
    """A bad command line or input (a missing file, an unknown version); the message names the
    input and the fix."""
