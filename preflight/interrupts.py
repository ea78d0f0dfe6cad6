"""Signals that arrive before the command line is ready: the zipapp's entry point installs
:func:`install_early` first of all (before any other import), so a SIGTERM, SIGHUP or SIGINT in the
first milliseconds is recorded instead of killing the process outright; :func:`raise_pending`
turns it into the ``KeyboardInterrupt`` the rest of the tool handles (``--status-dir`` then still
gets ``interrupted`` in every file). A signal before the interpreter runs this module cannot be
caught by any Python code: the process then ends before it touched anything."""

import signal
from typing import List

__all__ = ["install_early", "pending", "raise_pending", "SIGNALS"]

#: The signals that stop a run.
SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP", "SIGINT")) if s is not None)

_PENDING: List[int] = []


def _record(signum: int, frame: object) -> None:
    _PENDING.append(signum)


def install_early() -> None:
    """Record SIGTERM/SIGHUP/SIGINT until the command line installs its own handlers."""
    for sig in SIGNALS:
        try:
            signal.signal(sig, _record)
        except (ValueError, OSError):  # not the main thread
            pass


def is_early(handler: object) -> bool:
    """True when ``handler`` is the recorder :func:`install_early` installed."""
    return handler is _record


def pending() -> bool:
    """True when a signal was recorded and not yet raised."""
    return bool(_PENDING)


def raise_pending() -> None:
    """Raise ``KeyboardInterrupt`` when a signal arrived before the handlers were in place."""
    if _PENDING:
        del _PENDING[:]
        raise KeyboardInterrupt
