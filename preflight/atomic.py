"""The one way this tool writes a file: atomically.

The text goes to a temporary file in the destination's own directory (same file system, so the
rename is atomic), is flushed and fsync'ed, then renamed over the destination with
:func:`os.replace`, and the directory is fsync'ed (best effort). A reader such as node_exporter's
textfile collector, an init container polling a status file, or a user's editor therefore sees
either the old file or the whole new one, never a half-written one. The temporary name starts
with a dot and ends in ``.tmp``, so collectors that read ``*.prom`` or ``*.json`` ignore it.

A destination that is not a regular file is never replaced: a character or block device
(``/dev/null``), a FIFO or a socket, or a symlink to one, is written through (opened and written,
no rename), and so is a link to an open descriptor (``/dev/stdout``, ``/proc/self/fd/1``), which is
appended to. A symlink to a regular file keeps the link: its target is replaced atomically.
"""

import os
import re
import stat
import tempfile
from typing import Optional, Union

from .errors import UsageError

__all__ = ["OutputError", "write_atomic"]


class OutputError(UsageError):
    """A file could not be written; the message names the option (or file) and the reason."""


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_FD_LINK = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)/fd|dev/fd)/\d+$|^/dev/std(?:in|out|err)$")


def _is_fd_link(full: str) -> bool:
    """True when ``full`` or a link on its way names an open descriptor (``/dev/stdout``,
    ``/proc/self/fd/1``, ``/dev/fd/3``): such a file is written through, never replaced."""
    p = full
    for _ in range(40):
        if _FD_LINK.match(p):
            return True
        if not os.path.islink(p):
            return False
        try:
            p = os.path.join(os.path.dirname(p), os.readlink(p))
        except OSError:
            return False
        p = os.path.normpath(p)
    return False


def _write_through(full: str, raw: bytes, label: str, append: bool) -> None:
    """Write ``raw`` into the existing non-regular file ``full`` (device, FIFO, socket, fd link)."""
    flags = os.O_WRONLY | (os.O_APPEND if append else 0)
    try:
        fd = os.open(full, flags)
    except OSError as exc:
        raise OutputError("%s: cannot write: %s" % (label, exc.strerror or exc))
    try:
        view = memoryview(raw)
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(0, "nothing was written")
            view = view[n:]
    except OSError as exc:
        raise OutputError("%s: cannot write: %s" % (label, exc.strerror or exc))
    finally:
        os.close(fd)


def write_atomic(path: str, data: Union[str, bytes], option: str = "", mode: Optional[int] = None) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically.

    Args:
        path: destination file; ``~`` is expanded; its directory must exist.
        data: the whole content.
        option: how the user named this path (``--output``), used in the error message.
        mode: permission bits for the new file (default: 0o644 minus the umask, like ``open``).

    An existing ``path`` that is not a regular file (device, FIFO, socket, a link to one or to an
    open descriptor) is written through instead, never replaced; a symlink to a regular file is
    kept and its target replaced.

    Raises:
        OutputError: the directory does not exist or is not writable, ``path`` is a directory, or
            the write failed (e.g. ENOSPC from ``/dev/full``; the message names ``option`` and
            ``path``); a regular destination is then unchanged.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    full = os.path.abspath(os.path.expanduser(path))
    label = ("%s %s" % (option, path)) if option else path
    if _is_fd_link(full):
        _write_through(full, raw, label, append=True)
        return
    try:
        st = os.stat(full)  # follows links
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError("%s: cannot write: is a directory; pass a file path" % label)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(full, raw, label, append=False)
        return
    if os.path.islink(full):  # keep the link; replace what it points to
        full = os.path.realpath(full)
    folder = os.path.dirname(full)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(full), suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError("%s: cannot write: %s" % (label, exc.strerror or exc))
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                if mode is None:
                    umask = os.umask(0)
                    os.umask(umask)
                    mode = 0o666 & ~umask
                os.fchmod(fh.fileno(), mode)
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, full)
        except OSError as exc:
            raise OutputError("%s: cannot write: %s" % (label, exc.strerror or exc))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)
