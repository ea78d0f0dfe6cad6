"""The temporary root under which this run makes its private directories (probes', pip's scratch,
the rehearsal's), chosen before any is made so that no other user can swap one of them: see
:func:`temp_root`. bootstrap.sh's ``safe_dir`` applies the same rule in shell."""

import os
from typing import Optional, Tuple

from .atomic import run_problem
from .errors import UsageError

__all__ = ["temp_root", "use_safe_temp_root"]

#: Where private temporary directories go when $TMPDIR is not safe from other users, in order.
_TEMP_FALLBACKS = ("/tmp", "/var/tmp", "/usr/tmp")


def temp_root() -> Tuple[str, Optional[str]]:
    """(the directory this run makes its private temporary directories in, why the configured one
    (``$TMPDIR``, as :func:`tempfile.gettempdir` reads it) was passed over, or None).

    A private directory (mode 0700) is only private while no other user can rename it away and put
    their own in its place: its parent, and every directory above, must be owned by the invoking
    user or root and not writable by other users unless sticky (:func:`run_problem` with
    ``is_dir``). A group-writable scratch directory without the sticky bit, or a job's ``TMPDIR``
    owned by the job's user while root runs the checker, is passed over for the first safe one of
    /tmp, /var/tmp, /usr/tmp. Raises UsageError naming ``TMPDIR`` and the fix when none is safe."""
    configured = _configured_temp()
    why = run_problem(configured, is_dir=True)
    if why is None and not os.path.isdir(configured):  # tempfile would fall through to an unjudged $TEMP/$TMP
        why = "not a directory (another user could make it, or $TEMP/$TMP would be used unjudged)"
    if why is None:
        return configured, None
    for cand in _TEMP_FALLBACKS:
        if os.path.isdir(cand) and os.access(cand, os.W_OK | os.X_OK) and run_problem(cand, is_dir=True) is None:
            return cand, why
    raise UsageError("TMPDIR %s: %s, so another user could swap this run's private directories, and no safe "
                     "one of %s exists; set TMPDIR to a directory only you (or root) can write" % (
                         configured, why, ", ".join(_TEMP_FALLBACKS)))


def _configured_temp() -> str:
    """The temporary directory the user named (``$TMPDIR``, ``$TEMP``, ``$TMP``, as :mod:`tempfile`
    reads them), else /tmp; read without :func:`tempfile.gettempdir`, which writes a test file there."""
    import tempfile

    if tempfile.tempdir:
        return tempfile.tempdir
    for name in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(name):
            return os.environ[name]
    return "/tmp"


def use_safe_temp_root() -> Optional[str]:
    """Point :mod:`tempfile` (and, through ``TMPDIR``, every child) at :func:`temp_root`; returns the
    one-line warning to show when ``$TMPDIR`` was passed over, else None. Raises UsageError."""
    import tempfile

    root, why = temp_root()
    configured = _configured_temp()
    tempfile.tempdir = root  # the judged directory, never one tempfile would pick by itself later
    if why is None:
        return None
    os.environ["TMPDIR"] = root
    return "warning: TMPDIR %s: %s: this run's private directories go under %s instead" % (configured, why, root)
