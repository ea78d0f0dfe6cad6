"""The log to explain, read bounded: a regular file (head and tail of a large one) or a pipe.

A log can be gigabytes; the root cause is near the first error, which is usually near the end, so
a file larger than the cap keeps its first quarter and its last three quarters of the cap. A pipe
is read to its end keeping at most the cap (the first quarter and a rolling tail). A terminal, a
FIFO named as a path, a directory or a device is refused with a one-line error.
"""

import os
import stat
import sys
from dataclasses import dataclass
from typing import BinaryIO, Optional

from ..paths import foreign_link, kernel_file

__all__ = ["LogInput", "read_log", "DEFAULT_CAP"]

#: bytes of log kept (32 MiB): enough for any traceback and the log around it.
DEFAULT_CAP = 32 << 20


@dataclass
class LogInput:
    """A log as read: ``text`` (decoded, invalid bytes replaced), ``source`` (the path, or
    ``"stdin"``), ``size`` (bytes seen), ``truncated`` (bytes left out of the middle)."""

    text: str
    source: str
    size: int
    truncated: int = 0


def _decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _read_stream(fh: BinaryIO, cap: int) -> "tuple":
    head_cap = cap // 4
    head = bytearray()
    tail = bytearray()
    size = 0
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if len(head) < head_cap:
            take = head_cap - len(head)
            head += chunk[:take]
            chunk = chunk[take:]
        tail += chunk
        if len(tail) > cap - head_cap:
            del tail[:len(tail) - (cap - head_cap)]
    return bytes(head), bytes(tail), size


def read_log(path: Optional[str], cap: int = DEFAULT_CAP, stdin: Optional[BinaryIO] = None) -> LogInput:
    """Read the log at ``path`` (``"-"`` or None: standard input, which must not be a terminal).

    Returns a :class:`LogInput`; at most ``cap`` bytes are kept. Raises ValueError with a
    one-line reason (no such file, a directory, a FIFO named as a path, a terminal on stdin).
    """
    if path in (None, "-"):
        fh = stdin if stdin is not None else sys.stdin.buffer
        try:
            if os.isatty(fh.fileno()):
                raise ValueError("standard input is a terminal: pipe a log in (... 2>&1 | preflight explain -) "
                                 "or name the log file")
        except (AttributeError, OSError, ValueError) as exc:
            if isinstance(exc, ValueError) and "terminal" in str(exc):
                raise
        head, tail, size = _read_stream(fh, cap)
        kept = len(head) + len(tail)
        return LogInput(_decode(head + tail), "stdin", size, size - kept)
    full = os.path.expanduser(path)
    try:
        st = os.stat(full)
    except FileNotFoundError:
        raise ValueError("%s: no such file" % path)
    except OSError as exc:
        raise ValueError("%s: cannot be read (%s)" % (path, exc.strerror or exc))
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
            "not a regular file"
        raise ValueError("%s is %s: name a log file, or pipe the log into 'explain -'" % (path, kind))
    why = kernel_file(full) or foreign_link(full)
    if why is not None:
        raise ValueError("%s: %s; copy the log somewhere of yours, or pipe it into 'explain -'" % (path, why))
    try:
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ValueError("%s: cannot be read (%s); make it readable by you, or pipe the log into 'explain -'" % (
            path, exc.strerror or exc))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValueError("%s is not a regular file" % path)
        if st.st_size <= cap:
            data = fh.read(cap + 1)[:cap]
            return LogInput(_decode(data), path, len(data))
        head = fh.read(cap // 4)
        fh.seek(max(st.st_size - (cap - cap // 4), 0))
        tail = fh.read(cap - cap // 4)
        return LogInput(_decode(head + b"\n" + tail), path, st.st_size, st.st_size - len(head) - len(tail))
