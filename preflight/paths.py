"""Output paths checked before any work starts, so a typo costs a second, not a minute of pip
or a GPU run. Both raise :class:`preflight.errors.UsageError` naming the option and the fix."""

import os

from .errors import UsageError

__all__ = ["check_output_file", "check_output_dir"]


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
