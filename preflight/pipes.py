"""A closed stdout or stderr (``preflight check | head -1``, a dropped ssh session) never changes
what a run decides.

Python ignores SIGPIPE, so writing to a pipe whose reader has gone raises BrokenPipeError (EPIPE;
a hung-up terminal gives EIO). Left alone, that error ends the run half way, and rich turns it into
``SystemExit(1)``: a ready machine would read as not ready and the ``--json`` file would be lost.
:func:`guard` follows the convention of pip and of the Python documentation ("Note on SIGPIPE"):
the error is caught, the stream is pointed at ``os.devnull`` (so the interpreter's final flush
cannot fail again), and the run goes on to its own verdict and exit code.
"""

import errno
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["GuardedStream", "guard"]

_GONE = (errno.EPIPE, errno.EIO, errno.ECONNRESET)


class GuardedStream:
    """Wraps a text stream (sys.stdout or sys.stderr): writes to it once its reader is gone are
    dropped instead of raising. Every other attribute is the wrapped stream's.

    ``broken`` is True after the first dropped write.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def _gone(self, exc: OSError) -> bool:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in _GONE:
            return False
        if not self.broken:
            self.broken = True
            try:  # the underlying descriptor now discards, so later flushes (at exit) cannot fail
                fd = self._stream.fileno()
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass
        return True

    def write(self, text: str) -> int:
        """Write ``text``; returns its length even when the reader is gone."""
        if self.broken:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not self._gone(exc):
                raise
            return len(text)

    def flush(self) -> None:
        """Flush; a reader that is gone is not an error."""
        if self.broken:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            if not self._gone(exc):
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guard() -> Iterator[None]:
    """For the duration: ``sys.stdout`` and ``sys.stderr`` are :class:`GuardedStream` wrappers
    (restored afterwards)."""
    old = sys.stdout, sys.stderr
    if old[0] is not None and not isinstance(old[0], GuardedStream):
        sys.stdout = GuardedStream(old[0])  # type: ignore[assignment]
    if old[1] is not None and not isinstance(old[1], GuardedStream):
        sys.stderr = GuardedStream(old[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        for guarded in (sys.stdout, sys.stderr):
            if isinstance(guarded, GuardedStream):
                try:
                    guarded.flush()
                except OSError:
                    pass
        sys.stdout, sys.stderr = old
