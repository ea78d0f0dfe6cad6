"""A closed stdout or stderr (``preflight check | head -1``, a dropped ssh session) never changes
what a run decides.

Python ignores SIGPIPE, so writing to a pipe whose reader has gone raises BrokenPipeError (EPIPE;
a hung-up terminal gives EIO). Left alone, that error ends the run half way, and rich turns it into
``SystemExit(1)``: a ready machine would read as not ready and the ``--json`` file would be lost.
:func:`guard` follows the convention of pip and of the Python documentation ("Note on SIGPIPE"):
the error is caught, the stream is pointed at ``os.devnull`` (so the interpreter's final flush
cannot fail again), and the run goes on to its own verdict and exit code.

A stdout that takes no more bytes (ENOSPC: a full disk or ``> /dev/full``; EDQUOT, EFBIG; EIO: the
device failed) is different: the reader is there but the report was lost, so the run must not
claim success. The first such failure prints one line on stderr (``could not write the report to
stdout: No space left on device``), the stream is pointed at ``os.devnull`` as above, the run goes
on, and :func:`preflight.cli.main` exits 2. A failing stderr is only silenced (it carries no verdict).
"""

import errno
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["GuardedStream", "guard"]

_GONE = (errno.EPIPE, errno.ECONNRESET)
#: The stream is there but takes no more bytes: the output is lost (exit 2 when it is stdout).
_FAILED = (errno.ENOSPC, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC))


class GuardedStream:
    """Wraps a text stream (sys.stdout or sys.stderr): writes to it once its reader is gone are
    dropped instead of raising. Every other attribute is the wrapped stream's.

    ``broken`` is True after the first dropped write; ``error`` is the OSError when the stream
    failed (ENOSPC, EIO, ...) rather than lost its reader, else None. ``label`` (``"stdout"``)
    names the stream in the one line printed on stderr at such a failure; without it nothing is
    printed.
    """

    def __init__(self, stream: Any, label: str = "") -> None:
        self._stream = stream
        self.broken = False
        self.error: Any = None
        self.label = label

    def _gone(self, exc: OSError) -> bool:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in _GONE + _FAILED:
            return False
        if not self.broken:
            self.broken = True
            if exc.errno in _FAILED:
                self.error = exc
                if self.label:
                    try:
                        err = sys.__stderr__ if sys.stderr is self else sys.stderr
                        err.write("error: could not write the report to %s: %s\n" % (
                            self.label, exc.strerror or os.strerror(exc.errno)))
                        err.flush()
                    except (OSError, ValueError, AttributeError):
                        pass
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
def guard() -> Iterator[Any]:
    """For the duration: ``sys.stdout`` and ``sys.stderr`` are :class:`GuardedStream` wrappers
    (restored afterwards). Yields the stdout wrapper (or None): after the block, its ``error``
    says whether the output was lost (the final flush is included)."""
    old = sys.stdout, sys.stderr
    if old[0] is not None and not isinstance(old[0], GuardedStream):
        sys.stdout = GuardedStream(old[0], "stdout")  # type: ignore[assignment]
    if old[1] is not None and not isinstance(old[1], GuardedStream):
        sys.stderr = GuardedStream(old[1])  # type: ignore[assignment]
    out = sys.stdout if isinstance(sys.stdout, GuardedStream) else None
    try:
        yield out
    finally:
        for guarded in (sys.stdout, sys.stderr):
            if isinstance(guarded, GuardedStream):
                try:
                    guarded.flush()
                except OSError:
                    pass
        sys.stdout, sys.stderr = old
