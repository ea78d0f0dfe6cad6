"""The command line's output options, shared by every reporting command: ``--format``,
``--output``, ``--json`` and ``-q`` (:func:`add_output_options`), the outputs they ask for
(:func:`outputs_of`), checked before any work starts (:func:`check_outputs`, which also knows the
arguments of every command that names a file it reads, :data:`INPUT_ARGS`), and :func:`emit`,
which hands a command's :class:`~preflight.report.Report` to the report layer
(:mod:`preflight.report.render`) once per output.
"""

import argparse
import os
import stat
import sys
from typing import Callable, List, Optional, TextIO, Tuple

from ..errors import UsageError
from ..outputs.owned import MANIFEST
from ..paths import check_output_file
from ..report import Report
from ..report.render import FORMATS, present, redact_report
from ..report.status import VERDICT_FILE
from ..stages import STAGE_NAMES

__all__ = ["add_output_options", "outputs_of", "check_outputs", "console_stream", "emit", "INPUT_ARGS"]


def teller() -> Callable[[str], None]:
    """The one way a command tells its progress and plain answers to people: on stderr, each line
    redacted (:func:`preflight.redact.redact_text`), every ``preflight <command>`` in it spelled as
    this tool was run (:func:`preflight.report.invocation.localise_commands`), and never folded (a
    command in it stays one pasteable line, terminal or not)."""
    from ..redact import redact_text
    from ..report.console import SafeConsole
    from ..report.invocation import localise_commands

    console = SafeConsole(highlight=False, stderr=True)

    def say(text: str) -> None:
        console.print(localise_commands(redact_text(text)) or "", markup=False, soft_wrap=True)
    return say


def add_output_options(p: argparse.ArgumentParser, what: str = "the report") -> None:
    """Add ``--format``, ``--output``, ``--json`` and ``-q`` to a command's parser."""
    p.add_argument("--format", choices=FORMATS, default="console",
                   help="how to present %s: console (default), json, markdown (short, for an issue), junit "
                        "(CI), prometheus (node_exporter textfile)" % what)
    p.add_argument("--output", metavar="FILE", default=None,
                   help="write the --format output to FILE (replaced atomically) instead of stdout; the console "
                        "summary still shows")
    p.add_argument("--json", metavar="FILE", default=None,
                   help="also write %s as JSON to FILE ('-' for stdout); short for --format json --output FILE"
                        % what)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no console report; only the exit code and the files asked for")


def outputs_of(args: argparse.Namespace) -> List[Tuple[str, str, str]]:
    """The (format, path, option) outputs asked for; '-' is stdout.

    Raises UsageError when two outputs would both go to stdout.
    """
    outs: List[Tuple[str, str, str]] = []
    fmt = getattr(args, "format", "console") or "console"
    output = getattr(args, "output", None)
    if fmt != "console":
        outs.append((fmt, output or "-", "--output" if output else "--format %s" % fmt))
    elif output:
        outs.append(("console", output, "--output"))
    if getattr(args, "json", None):
        outs.append(("json", args.json, "--json"))
    if sum(1 for _, path, _ in outs if path == "-") > 1:
        raise UsageError("--json - and --format %s both write to stdout; give one of them a file (--output FILE or "
                         "--json FILE)" % fmt)
    return outs


#: Arguments of the reporting commands that name files the command reads (``config --file``,
#: ``check --config``, ``data FILE...``, ``--custom-reward``, ``--lock``, ``--pyz``, ``--python``).
INPUT_ARGS = (("file", "--file"), ("config", "--config"), ("files", "FILE"), ("custom_reward", "--custom-reward"),
              ("lock", "--lock"), ("pyz", "--pyz"), ("python", "--python"), ("model", "--model"))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(os.path.expanduser(a), os.path.expanduser(b))
    except (OSError, ValueError):
        return os.path.abspath(os.path.expanduser(a)) == os.path.abspath(os.path.expanduser(b))


def _regular_or_absent(path: str) -> bool:
    """True when ``path`` is a regular file (links followed) or does not exist: a device or FIFO
    (``/dev/null`` for two outputs) may be named twice."""
    try:
        return stat.S_ISREG(os.stat(os.path.expanduser(path)).st_mode)
    except OSError:
        return True


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output path before any work starts (see :mod:`preflight.paths`).

    Raises UsageError (nothing written) when a path cannot be written, when two outputs name one
    file in different formats (``--format junit --output same --json same``), or when an output is a file the command reads
    (:data:`INPUT_ARGS`: ``config --file my.yaml --json my.yaml`` would replace the user's YAML).
    """

    outs = [(path, option.split()[0]) for _, path, option in outputs_of(args) if path != "-"]
    fmts = [fmt for fmt, path, _ in outputs_of(args) if path != "-"]
    for path, option in outs:
        check_output_file(path, option)
    status_dir = getattr(args, "status_dir", None)
    if status_dir:  # --json DIR/verdict would be overwritten by the status file
        for path, option in outs:
            if os.path.basename(path) in set(STAGE_NAMES) | {VERDICT_FILE, MANIFEST} \
                    and _same_file(os.path.dirname(os.path.abspath(os.path.expanduser(path))), status_dir):
                raise UsageError("%s %s is a status file of --status-dir %s; write the output elsewhere (nothing "
                                 "was written)" % (option, path, status_dir))
    for i, (path, option) in enumerate(outs):
        for j, (other, other_option) in enumerate(outs[i + 1:], i + 1):
            # the same document twice (--format json --output F --json F) is harmless
            if fmts[i] != fmts[j] and _regular_or_absent(path) and _same_file(path, other):
                raise UsageError("%s %s and %s %s name the same file; give each output its own path (nothing was "
                                 "written)" % (option, path, other_option, other))
        for attr, in_option in INPUT_ARGS:
            value = getattr(args, attr, None)
            for src in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(src, str) and src and src != "-" and os.path.lexists(os.path.expanduser(src)) \
                        and _regular_or_absent(path) and _same_file(path, src):
                    raise UsageError("%s %s is the input %s %s; it would be replaced: write the output to another "
                                     "path (nothing was written)" % (option, path, in_option, src))


def console_stream(args: argparse.Namespace) -> Optional[TextIO]:
    """Where the console view goes: None with ``-q`` or when ``--format console --output FILE``
    sends it to a file (not twice); stderr when stdout carries a document."""
    outs = outputs_of(args)
    if getattr(args, "quiet", False) or any(fmt == "console" and path != "-" for fmt, path, _ in outs):
        return None
    return sys.stderr if any(path == "-" for _, path, _ in outs) else sys.stdout


def emit(report: Report, args: argparse.Namespace, verbose: Optional[bool] = None) -> int:
    """Present ``report`` as the shared options in ``args`` ask (the console view unless ``-q``,
    then every output of :func:`outputs_of`), redacting it once; return its exit code."""
    red = redact_report(report)
    if verbose is None:
        verbose = bool(getattr(args, "verbose", False))
    stream = console_stream(args)
    if stream is not None:
        present(red, "console", None, verbose, "", stream)
    for fmt, path, option in outputs_of(args):
        present(red, fmt, path, verbose, option.split()[0], sys.stdout)
    return report.exit_code
