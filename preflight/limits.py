"""One-line messages for running out of a resource limit (``ulimit -v``, ``-u``, ``-n``) or into
deep recursion, for the command line's boundary (:func:`preflight.cli.main`) and the probe
launcher: a login node with ``ulimit -v 400000`` or a small ``ulimit -u`` gets a sentence naming
the limit and the fix, never a traceback."""

import errno
import os
from typing import Optional

__all__ = ["limit_message"]

_NAMES = {"AS": ("-v", "virtual memory", 1024), "NPROC": ("-u", "processes", 1), "NOFILE": ("-n", "open files", 1)}


def _limit(which: str) -> str:
    """``ulimit -v 400000`` style text of the soft limit ``RLIMIT_<which>``, or ``""``."""
    try:
        import resource

        soft, _ = resource.getrlimit(getattr(resource, "RLIMIT_" + which))
    except (ImportError, AttributeError, OSError, ValueError):
        return ""
    flag, _, unit = _NAMES[which]
    if soft == getattr(resource, "RLIM_INFINITY", -1) or soft < 0:
        return "ulimit %s unlimited" % flag
    return "ulimit %s %d" % (flag, soft // unit)


def limit_message(exc: BaseException) -> Optional[str]:
    """The one-line message for ``exc`` when it comes from a resource limit or deep recursion,
    else None. MemoryError and ENOMEM: the address-space limit (``ulimit -v``, in KiB); EAGAIN
    from fork or "can't start new thread": the process limit (``ulimit -u``); EMFILE/ENFILE: the
    open-file limit (``ulimit -n``); RecursionError: an input nested too deeply."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return ("out of memory (%s KiB); raise the limit (ulimit -v unlimited, or a few GB) or run on a machine with "
                "more free memory" % (_limit("AS") or "no ulimit -v"))
    if isinstance(exc, RecursionError):
        return "an input is nested too deeply to read (%s); pass a flatter file" % (str(exc)[:80] or "recursion")
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN or (
            isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)):
        return ("cannot start another process or thread: a limit is reached (processes: %s; memory: %s KiB); raise "
                "it (ulimit -u 4096, ulimit -v unlimited) or stop other processes of this user" % (
                    _limit("NPROC") or "ulimit -u", _limit("AS") or "ulimit -v"))
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return ("too many open files (%s); raise the limit (ulimit -n 4096)" % (_limit("NOFILE") or "ulimit -n")
                if exc.errno == errno.EMFILE else "the system's table of open files is full; try again later")
    return None


def access_message(exc: BaseException) -> Optional[str]:
    """The one-line message for an OSError about one named path that this user may not read or
    use (permission denied, a directory where a file was wanted, gone since it was named), else
    None: ``PATH: cannot be used (Permission denied); FIX``. The last stop for any input a command
    opens without saying so itself (SECURITY.md: bad input is one line, never a traceback)."""
    if not isinstance(exc, OSError) or exc.filename is None or exc.errno not in (
            errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.ENOENT, errno.ELOOP, errno.ENAMETOOLONG):
        return None
    fix = {errno.EACCES: "make it readable by you, or pass a copy of yours",
           errno.EPERM: "make it readable by you, or pass a copy of yours",
           errno.EISDIR: "name a file, not a directory",
           errno.ENOENT: "check the path (it is gone, or was never there)"}.get(exc.errno, "name another path")
    return "%s: cannot be used (%s); %s" % (os.fsdecode(exc.filename), exc.strerror or exc, fix)
