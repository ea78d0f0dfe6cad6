"""Paths the user names: outputs checked before any work starts, so a typo costs a second, not a
minute of pip or a GPU run (both raise :class:`preflight.errors.UsageError` naming the option and
the fix); inputs read only when they are regular files of a sane size, so a FIFO, a device or a
link to /dev/zero named by mistake (or placed by someone else) cannot block or exhaust memory."""

import errno
import os
import stat
from typing import Optional

from .errors import UsageError

__all__ = ["check_output_file", "check_output_dir", "file_problem", "read_regular"]


def file_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be read as a file (``"no such file"``, ``"not a regular file (a FIFO)"``),
    or None for a regular file. Only stats the path: a FIFO is never opened (opening one blocks)."""
    try:
        mode = os.stat(os.path.expanduser(path)).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return "cannot be read (%s)" % (exc.strerror or exc)
    if stat.S_ISREG(mode):
        return None
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a file")
    return "not a regular file (%s)" % kind


def read_regular(path: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``.

    Opened without blocking (a FIFO swapped in after a stat cannot hang the read; a /proc file
    that would wait for data ends the read instead). Raises OSError with a one-phrase
    ``strerror`` (``"no such file"``, ``"not a regular file (a FIFO)"``, ``"larger than 64 MiB"``)
    for anything else, so callers that already report an OSError's strerror name the cause."""
    path = os.path.expanduser(path)
    why = file_problem(path)
    if why is not None:
        raise OSError(errno.ENOENT if why == "no such file" else errno.EINVAL, why)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while True:
            try:
                b = os.read(fd, 1 << 20)
            except BlockingIOError:
                break
            if not b:
                break
            size += len(b)
            if size > max_bytes:
                raise OSError(errno.EFBIG, "larger than %s" % _human(max_bytes))
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _human(n: int) -> str:
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10) if n >= 1 << 10 else "%d bytes" % n


def check_output_file(path: str, option: str) -> None:
    """``path`` can be created or replaced as a file ('-' means stdout and is accepted)."""
    if not path or path == "-":
        return
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(full):
        raise UsageError("%s %s is a directory; pass a file path such as %s" % (option, path,
                                                                               os.path.join(path, "report.json")))
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise UsageError("%s %s: directory %s does not exist; create it or pass another path" % (option, path, folder))
    if not os.access(folder, os.W_OK):
        raise UsageError("%s %s: directory %s is not writable; pass another path" % (option, path, folder))
    from .atomic import check_file

    check_file(path, option)  # no foreign link, file or shared directory in the way


def check_output_dir(path: str, option: str) -> None:
    """``path`` is an existing writable directory, or can be created (its nearest existing
    ancestor is a writable directory)."""
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(full) and not os.path.isdir(full):
        raise UsageError("%s %s exists and is not a directory; pass a directory path" % (option, path))
    probe = full
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK):
        raise UsageError("%s %s: %s is not a writable directory; pass another path" % (option, path, probe))
    from .atomic import check_dir

    check_dir(path, option)  # owned by this user or root, not writable by others
