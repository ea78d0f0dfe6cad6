"""What a probe leaves behind when its supervisor itself is killed comes back to the checker.

Every probe runs under a supervisor (``_supervise.py``) that is a child subreaper and ends all the
probe started. But the probe runs as the same user and can SIGKILL its supervisor; a daemon it
started in a session of its own is then re-parented to the nearest subreaper above, or to init,
and outlives the run. When the checker runs as the command line, it is a child subreaper too
(:func:`become_reaper`), so such a process is re-parented to it, and :func:`end_orphans` at the end
of the run kills and reaps whatever is still a child of the checker (by then every process the run
started on purpose has ended), except the children the process had before it became the reaper. A library caller (tests calling ``cli.main``) is never made a
subreaper, so nothing of its own is touched. Linux only; elsewhere both are no-ops.
"""

import os
import signal
import sys
import time
from typing import Set

__all__ = ["become_reaper", "end_orphans"]

_PR_SET_CHILD_SUBREAPER = 36
_REAPER = [False]
#: Children this process already had when it became the reaper (a job script's `monitor &` before
#: `exec preflight`): the user's, never ended by :func:`end_orphans`.
_BEFORE: Set[int] = set()


def become_reaper() -> bool:
    """Make this process a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``); True when it took.
    Only the command line's entry point calls this."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        ok = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        ok = False
    _REAPER[0] = ok
    if ok:
        _BEFORE.update(_children(os.getpid()))
    return ok


def _children(me: int) -> Set[int]:
    """Pids whose parent is ``me`` (zombies included), from /proc."""
    kids: Set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as fh:
                st = fh.read()
            if int(st[st.rindex(")") + 2:].split()[1]) == me:
                kids.add(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def end_orphans(deadline_s: float = 5.0) -> int:
    """SIGKILL and reap every process still a child of this one, over and over as their own
    children are re-parented here, for at most ``deadline_s`` seconds; returns how many were
    ended. A no-op (0) unless :func:`become_reaper` took."""
    if not _REAPER[0]:
        return 0
    me, ended = os.getpid(), set()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids = _children(me) - _BEFORE
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    ended.add(pid)
            except ChildProcessError:
                ended.add(pid)
            except OSError:
                pass
        time.sleep(0.01)
    return len(ended)
