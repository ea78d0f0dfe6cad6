"""Signals that stop a run: SIGTERM (a scheduler), SIGHUP (an ssh drop) and SIGINT (Ctrl-C).

The zipapp's entry point installs :func:`install_early` first of all (before any other import), so
a signal in the first milliseconds is recorded instead of killing the process outright. The
command line keeps recording (:func:`handle`) until the command is ready to be stopped: then
:func:`arm` turns a recorded signal, or the next one, into the ``KeyboardInterrupt`` the rest of
the tool handles. ``check --status-dir`` arms once its status directory is in place, so a signal at
any moment after the zipapp's first line leaves ``interrupted`` in every file; other commands are
armed as they start. That first ``KeyboardInterrupt`` disarms: a second signal (a scheduler's
SIGTERM repeated, Ctrl-C pressed again) while the run stops is only recorded, so it cannot cut the
status files or the ending of the probes short (SIGKILL still ends the process). A signal before
the interpreter runs this module cannot be caught by any Python code: the process then ends before
it touched anything.

:func:`stopped` tells whether a signal's ``KeyboardInterrupt`` was raised in this process: the
command line then ends the process itself (see :func:`preflight.cli.main`)."""

import signal
from typing import List

__all__ = ["install_early", "handle", "is_early", "arm", "disarm", "pending", "raise_pending",
           "stopped", "SIGNALS"]

#: The signals that stop a run.
SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP", "SIGINT")) if s is not None)

_PENDING: List[int] = []
_ARMED: List[bool] = []
_RAISED: List[int] = []


def handle(signum: int, frame: object) -> None:
    """The handler of :data:`SIGNALS`: records the signal, and once :func:`arm` was called raises
    ``KeyboardInterrupt``."""
    _PENDING.append(signum)
    if _ARMED:
        raise_pending()


def install_early() -> None:
    """Record SIGTERM/SIGHUP/SIGINT until the command line is ready to be stopped."""
    for sig in SIGNALS:
        try:
            signal.signal(sig, handle)
        except (ValueError, OSError):  # not the main thread
            pass


def is_early(handler: object) -> bool:
    """True when ``handler`` is the recorder :func:`install_early` installed."""
    return handler is handle


def arm() -> None:
    """From now on a signal raises ``KeyboardInterrupt`` (once); one recorded before is raised now."""
    if not _ARMED:
        _ARMED.append(True)
    raise_pending()


def disarm() -> None:
    """Back to recording, with nothing recorded (the command line's run is over)."""
    del _ARMED[:]
    del _PENDING[:]


def pending() -> bool:
    """True when a signal was recorded and not yet raised."""
    return bool(_PENDING)


def raise_pending() -> None:
    """Raise ``KeyboardInterrupt`` when a signal arrived and was not raised yet."""
    if _PENDING:
        _RAISED.append(_PENDING[0])
        del _PENDING[:]
        del _ARMED[:]  # one stop per run: a second signal while it stops is recorded, its cleanup not cut short
        raise KeyboardInterrupt


def stopped() -> bool:
    """True when a signal's ``KeyboardInterrupt`` was raised in this process (by :func:`raise_pending`
    or :func:`handle`)."""
    return bool(_RAISED)

