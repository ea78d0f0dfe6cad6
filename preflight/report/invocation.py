"""How the user ran this tool, and fixes spelled that way: ``preflight check`` in a message
becomes ``python3 dist/preflight.pyz check`` when that is what ran.

The report layer needs the subcommands' names for this (a word after ``preflight`` is rewritten
only when it is one); they are data here, below every command, and
:mod:`preflight.commands` checks at import that its COMMANDS carry exactly these names.
"""

import os
import re
import shutil
import sys
from typing import Optional

from ..shell import quote as shell_quote

__all__ = ["COMMAND_NAMES", "invocation", "localise_commands"]

#: The subcommands, in help order (the first is the default); ``preflight.commands.COMMANDS``
#: holds their modules in this order.
COMMAND_NAMES = ("check", "config", "data", "rehearse", "cluster", "explain", "resolve", "spec", "install", "image", "matrix", "wheelhouse")


def invocation() -> str:
    """How the user can run this tool again, from where they are: ``preflight`` when that
    command is on PATH and is what ran, ``python3 -m preflight`` from a checkout or an install,
    else the interpreter and the zipapp path as given (``python3 dist/preflight.pyz``)."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    exe = os.path.basename(sys.executable) or "python3"
    py = exe if shutil.which(exe) and os.path.realpath(shutil.which(exe) or "") == os.path.realpath(
        sys.executable) else sys.executable
    if os.path.basename(argv0) == "preflight" and shutil.which("preflight"):
        return "preflight"
    if argv0.endswith(".pyz") or (os.path.isfile(argv0) and not argv0.endswith(".py")
                                  and os.path.basename(argv0) != "preflight"):
        return "%s %s" % (shell_quote(py), shell_quote(argv0))
    return "%s -m preflight" % shell_quote(py)


def localise_commands(text: Optional[str], how: Optional[str] = None) -> Optional[str]:
    """``text`` with every ``preflight <command>`` (a real subcommand) spelled as this tool was
    run (:func:`invocation`), so a fix can be pasted as printed."""
    if not text or "preflight " not in text:
        return text
    names = "|".join(sorted(COMMAND_NAMES, key=len, reverse=True))
    how = how or invocation()
    if how == "preflight":
        return text
    return re.sub(r"(?<![\w./-])preflight (?=(?:%s)\b)" % names, how.replace("\\", "\\\\") + " ", text)
