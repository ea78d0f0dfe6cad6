"""argparse value types and the parser shared by the subcommands (each error becomes one usage line)."""

import argparse
import math
import re
from typing import List, Sequence

from ..errors import UsageError

__all__ = ["positive_int", "non_negative_int", "positive_seconds", "url_value", "index_url", "verl_release",
           "MAX_SECONDS", "Parser", "refuse_empty"]

#: Longest time limit accepted (one week, in seconds): beyond it a deadline is a typo, and the
#: operating system's waits overflow.
MAX_SECONDS = 7 * 24 * 3600.0


#: ``--no-startup`` of ``config`` and ``check``: its help, said once.
NO_STARTUP_HELP = ("do not run verl's own dry start-up in the target (about 10 s with verl installed): the rules "
                   "alone judge the launch, in seconds, and their fix is not re-checked by verl")


def positive_int(text: str) -> int:
    """A whole number >= 1 (counts: GPUs, ranks, tensor-parallel size)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if v < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return v


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (how many examples to show)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if v < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return v


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 and at most :data:`MAX_SECONDS` (nan and inf are refused:
    every comparison with nan is false, so it would pass a plain ``> 0`` test and disable the deadline)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text)
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError("%r is not a finite number of seconds" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    if v > MAX_SECONDS:
        raise argparse.ArgumentTypeError("%s s is more than a week; give a limit in seconds, e.g. 600" % text)
    return v


def url_value(text: str) -> str:
    """A URL option's value (``--torch-index``): refused at parse time when it holds white space or
    a control character (a newline would split every line that names it; a URL writes them as
    ``%0A``, ``%20``). The message does not repeat the value."""
    if any(c.isspace() or ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or c in "\u2028\u2029" for c in text):
        raise argparse.ArgumentTypeError("a URL holds no white space or control character (a line break, a tab); "
                                         "percent-encode them (%0A, %20)")
    return text


def index_url(text: str) -> str:
    """A package index option's value (``--torch-index``): ``none``, or an absolute ``http(s)://``
    or ``file://`` URL with a host or path (what pip's ``--index-url`` takes), checked by
    :func:`url_value` too. ``notaurl`` would otherwise reach pip's every install line."""
    from urllib.parse import urlsplit

    text = url_value(text)
    if text == "none":
        return text
    parts = urlsplit(text)
    if parts.scheme.lower() in ("http", "https") and parts.netloc or parts.scheme.lower() == "file" and parts.path:
        return text
    raise argparse.ArgumentTypeError("not an index URL: give https://HOST/PATH (e.g. https://download.pytorch.org/whl/"
                                     "cu128), file:///DIR, or none")


def verl_release(text: str) -> str:
    """A ``--verl`` value, as the matrix names the release (``v0.9.1`` -> ``0.9.1``, ``0.9`` ->
    ``0.9.0``: PEP 440 equality, as pip's ``verl==0.9`` means); one the matrix does not hold is kept
    as given (the command says it is unknown and lists the known ones). Raises
    ArgumentTypeError when it is not a version at all."""
    from packaging.version import InvalidVersion, Version

    from ..matrix import load

    try:
        wanted = Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError("%r is not a version: give a verl release such as 0.9.1 (the known ones: "
                                         "'preflight matrix show')" % text)
    for known in load().verl_versions():
        if Version(known) == Version(wanted.public):
            return known
    return text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a one-line UsageError (``PROG: MESSAGE (see 'PROG
    --help')``, exit 2 in cli.main) instead of a usage dump and ``sys.exit``."""

    def error(self, message: str) -> None:  # type: ignore[override]  # raises instead of exiting
        raise UsageError("%s: %s (see '%s --help')" % (self.prog, message, self.prog))


def refuse_empty(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str] = ()) -> None:
    """UsageError naming the first option or argument given as an empty string (``--launch ""``,
    ``--verl "$UNSET"``): an unset variable in a script must not pass as "not given". With
    subcommands, the chosen subcommand's options are looked at; else ``parser``'s own."""
    actions = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, "command", None) or "")
            actions = list(sub._actions) if sub is not None else []
    for action in actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, str) and not v.strip():
                typed = [o for o in action.option_strings  # the spelling the user typed (config --config)
                         if any(a == o or a.startswith(o + "=") for a in argv)]
                longs = [o for o in action.option_strings if o.startswith("--")]
                name = (typed or longs or action.option_strings or [str(action.metavar or action.dest)])[0]
                raise UsageError("%s is empty (an unset variable in a script?); give it a value or leave it out" % name)


#: A dotted config key alone: data.train_batch_size, +trainer.x
_DOTTED = re.compile(r"^(?:\+\+|\+|~)?[A-Za-z_]\w*(?:\.\w+)+$")


def refuse_bare_key(words: List[str], option: str) -> None:
    """Raise UsageError when the launch ``words`` (given to ``option``) start with a dotted config
    key without ``=`` (``data.train_batch_size``: an override whose value was forgotten) that is
    not a file here, a program on PATH or a module path (``verl.``, ``recipe.``)."""
    import os
    import shutil

    w = words[0] if words else ""
    if not _DOTTED.match(w) or os.path.exists(w) or shutil.which(w) or w.startswith(("verl.", "recipe.")):
        return
    raise UsageError("%s %s: an override needs a value (%s=VALUE); the launch is the command (python3 -m "
                     "verl.trainer.main_ppo ...) or its KEY=VALUE overrides" % (option, w, w.lstrip("+~")))

