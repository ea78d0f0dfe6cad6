"""The one way this tool writes a file: atomically.

The text goes to a temporary file in the destination's own directory (same file system, so the
rename is atomic), is flushed and fsync'ed, then renamed over the destination with
:func:`os.replace`, and the directory is fsync'ed (best effort). A reader such as node_exporter's
textfile collector, an init container polling a status file, or a user's editor therefore sees
either the old file or the whole new one, never a half-written one. The temporary name starts
with a dot and ends in ``.tmp``, so collectors that read ``*.prom`` or ``*.json`` ignore it.
"""

import os
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


def write_atomic(path: str, data: Union[str, bytes], option: str = "", mode: Optional[int] = None) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically.

    Args:
        path: destination file; ``~`` is expanded; its directory must exist.
        data: the whole content.
        option: how the user named this path (``--output``), used in the error message.
        mode: permission bits for the new file (default: 0o644 minus the umask, like ``open``).

    Raises:
        OutputError: the directory does not exist or is not writable, or the write failed
            (the message names ``option`` and ``path``); the destination is then unchanged.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    full = os.path.abspath(os.path.expanduser(path))
    folder = os.path.dirname(full)
    label = ("%s %s" % (option, path)) if option else path
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
