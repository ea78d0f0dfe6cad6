"""The output boundary: ``render(report, fmt, output)`` and the options every reporting command
shares (``--format``, ``--output``, ``--json``, ``-q``).

Everything a command shows or writes about a :class:`~preflight.report.Report` passes through
here: the report is redacted once (:func:`redact_report`, with :func:`preflight.redact.redact`),
then one renderer of :data:`FORMATS` turns it into text, which goes to a stream or, through the
one atomic writer (:func:`preflight.atomic.write_atomic`), to a file.
"""

import argparse
import dataclasses
import io
import os
import re
import shlex
import sys
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple

from ..redact import collect, is_secret_key, redact
from ..result import Result
from . import Report

__all__ = ["FORMATS", "render", "redact_report", "print_safe", "to_text", "add_output_options", "outputs_of", "check_outputs",
           "emit"]

#: The output formats, for ``--format``.
FORMATS = ("console", "json", "markdown", "junit", "prometheus")

#: Width of the console view when it does not go to a terminal (CI logs, files, pipes): wide
#: enough that rich never folds a fix command in the middle of a flag (``COLUMNS`` overrides it).
PLAIN_WIDTH = 4000


def _holds_redacted(value: Any) -> bool:
    from .jsonreport import Redacted

    if isinstance(value, Redacted):
        return True
    if isinstance(value, dict):
        return any(_holds_redacted(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_redacted(v) for v in value)
    return False


def _redact_section(value: Any, key: str = "") -> Any:
    from .jsonreport import Redacted

    if isinstance(value, Redacted):
        return value.value
    if not _holds_redacted(value) or (key and is_secret_key(key)):
        return redact(value, key)
    if isinstance(value, dict):
        return {k: _redact_section(v, str(k)) for k, v in value.items()}
    return [_redact_section(v) for v in value]


def invocation() -> str:
    """How the user can run this tool again, from where they are: ``preflight`` when that
    command is on PATH and is what ran, ``python3 -m preflight`` from a checkout or an install,
    else the interpreter and the zipapp path as given (``python3 dist/preflight.pyz``)."""
    import os
    import shutil

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    exe = os.path.basename(sys.executable) or "python3"
    py = exe if shutil.which(exe) and os.path.realpath(shutil.which(exe) or "") == os.path.realpath(
        sys.executable) else sys.executable
    if os.path.basename(argv0) == "preflight" and shutil.which("preflight"):
        return "preflight"
    if argv0.endswith(".pyz") or (os.path.isfile(argv0) and not argv0.endswith(".py")
                                  and os.path.basename(argv0) != "preflight"):
        return "%s %s" % (shlex.quote(py), shlex.quote(argv0))
    return "%s -m preflight" % shlex.quote(py)


def localise_commands(text: Optional[str], how: Optional[str] = None) -> Optional[str]:
    """``text`` with every ``preflight <command>`` (a real subcommand) spelled as this tool was
    run (:func:`invocation`), so a fix can be pasted as printed."""
    import re

    if not text or "preflight " not in text:
        return text
    from ..commands import COMMANDS

    names = "|".join(sorted((m.NAME for m in COMMANDS), key=len, reverse=True))
    how = how or invocation()
    if how == "preflight":
        return text
    return re.sub(r"(?<![\w./-])preflight (?=(?:%s)\b)" % names, how.replace("\\", "\\\\") + " ", text)


def redact_report(report: Report) -> Report:
    """A copy of ``report`` with every secret replaced by ``***`` (rows, target, machine facts,
    sections; a :class:`~preflight.report.jsonreport.Redacted` part is kept as its owner
    redacted it). The one redaction pass of the output layer; it also spells every
    ``preflight <command>`` in messages and fixes as the user ran the tool (:func:`localise_commands`)."""
    how = invocation()
    # a secret hidden by name anywhere (evidence) is hidden everywhere (a message quoting it)
    collect([[r.message, r.evidence, r.fix] for r in report.results] + [report.target, report.verl, report.machine]
            + [v for v in report.sections.values()])
    rows = [Result(id=r.id, stage=r.stage, status=r.status, message=localise_commands(redact(r.message), how),
                   evidence=redact(r.evidence), fix=localise_commands(redact(r.fix), how) if r.fix else r.fix,
                   caused_by=list(r.caused_by), duration_s=r.duration_s)
            for r in report.results]
    return dataclasses.replace(report, results=rows, target=redact(report.target), verl=redact(report.verl),
                               machine=redact(report.machine),
                               sections={k: _redact_section(v, k) for k, v in report.sections.items()})


#: C0 controls but newline and tab, DEL, and C1 controls (``\x9b`` is a one-byte CSI on some
#: terminals): what a file name, a target's output or a config value must not send raw to a
#: terminal or into markdown (ESC sequences recolour, retitle or hide text; BEL rings).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def print_safe(text: str, file: Optional[TextIO] = None) -> None:
    """Print one line of a command's own output for people (a summary, a progress note) the way
    every report is printed: redacted (:func:`preflight.redact.redact_text`) and with control
    characters escaped (:func:`escape_controls`). ``file``: default stdout."""
    from ..redact import redact_text

    print(escape_controls(redact_text(text)), file=file if file is not None else sys.stdout, flush=True)


def escape_controls(value: Any) -> Any:
    """``value`` (str, or dicts/lists/tuples of them, recursively; keys too) with each control
    character but newline and tab written as a visible escape (``\x1b``, ``\x07``); other values
    unchanged. Idempotent."""
    if isinstance(value, str):
        return _CONTROLS.sub(lambda m: "\\x%02x" % ord(m.group()), value) if _CONTROLS.search(value) else value
    if isinstance(value, dict):
        return {escape_controls(k): escape_controls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_controls(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(escape_controls(v) for v in value)
    return value


def for_text(report: Report) -> Report:
    """A copy of ``report`` fit for a terminal or markdown: every string (rows, target, machine
    facts, sections) passed through :func:`escape_controls`."""
    rows = [dataclasses.replace(r, id=escape_controls(r.id), message=escape_controls(r.message),
                                evidence=escape_controls(r.evidence), fix=escape_controls(r.fix),
                                caused_by=escape_controls(list(r.caused_by)))
            for r in report.results]
    return dataclasses.replace(report, results=rows, target=escape_controls(report.target),
                               verl=escape_controls(report.verl), machine=escape_controls(report.machine),
                               sections=escape_controls(report.sections), command=escape_controls(report.command))


def _plain_width() -> int:
    """:data:`PLAIN_WIDTH`, or ``COLUMNS`` when the user set it."""
    import os

    try:
        return max(20, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return PLAIN_WIDTH


def _console_text(report: Report, verbose: bool) -> str:
    from .console import SafeConsole as Console

    buf = io.StringIO()
    console = Console(file=buf, width=_plain_width(), highlight=False, no_color=True, force_terminal=False,
                      soft_wrap=False)
    show_console(report, console, verbose)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


def _formatters() -> Dict[str, Callable[[Report], str]]:
    from . import junit, jsonreport, markdown, prometheus

    return {"json": jsonreport.dumps, "markdown": markdown.render, "junit": junit.render,
            "prometheus": prometheus.render}


def to_text(report: Report, fmt: str, verbose: bool = False) -> str:
    """The already redacted ``report`` as text in ``fmt`` (console: plain text, no colour;
    console and markdown show control characters escaped, :func:`escape_controls`)."""
    if fmt == "console":
        return _console_text(report, verbose)
    if fmt == "markdown":
        report = for_text(report)
    try:
        return _formatters()[fmt](report)
    except KeyError:
        raise ValueError("unknown format %r (formats: %s)" % (fmt, ", ".join(FORMATS)))


def show_console(report: Report, console: Any, verbose: bool = False) -> None:
    """Print the already redacted ``report`` on a rich ``console``: the command's own view (or
    the generic stage table), then, when it is not ready, the Next steps. Control characters in
    its strings are shown escaped (:func:`for_text`)."""
    from . import console as generic

    report = for_text(report)
    (report.view or generic.render)(report, console, verbose)
    generic.next_steps(report, console)


def _stream_console(stream: TextIO) -> Any:
    from .console import SafeConsole as Console

    return Console(file=stream, highlight=False)


def _emit(red: Report, fmt: str, output: Optional[str], verbose: bool, option: str,
          stream: Optional[TextIO]) -> None:
    from ..atomic import write_atomic

    if output in (None, "-"):
        out = stream or sys.stdout
        if fmt == "console" and hasattr(out, "isatty") and out.isatty():
            show_console(red, _stream_console(out), verbose)
        else:  # not a terminal: plain text, never folded, no trailing padding
            out.write(to_text(red, fmt, verbose))
            out.flush()
        return
    write_atomic(output, to_text(red, fmt, verbose), option)


def render(report: Report, fmt: str = "console", output: Optional[str] = None, *, verbose: bool = False,
           option: str = "--output", stream: Optional[TextIO] = None) -> None:
    """Redact ``report`` and present it in ``fmt`` (one of :data:`FORMATS`).

    Args:
        report: what a command found.
        fmt: ``console`` (rich; colour on a terminal), ``json``, ``markdown``, ``junit`` or
            ``prometheus``.
        output: None or '-' for ``stream`` (default stdout); else a file, replaced atomically.
        verbose: the console view shows evidence.
        option: how the user named ``output`` (for the error message).
        stream: where a '-' output goes (default ``sys.stdout``).

    Raises:
        OutputError (a UsageError) naming ``option`` when the file cannot be written;
        ValueError for an unknown ``fmt``.
    """
    if fmt not in FORMATS:
        raise ValueError("unknown format %r (formats: %s)" % (fmt, ", ".join(FORMATS)))
    _emit(redact_report(report), fmt, output, verbose, option, stream)


# ---- the options every reporting command shares ---------------------------------------------

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
    from ..errors import UsageError

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
    import stat

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
    from ..errors import UsageError
    from ..paths import check_output_file

    outs = [(path, option.split()[0]) for _, path, option in outputs_of(args) if path != "-"]
    fmts = [fmt for fmt, path, _ in outputs_of(args) if path != "-"]
    for path, option in outs:
        check_output_file(path, option)
    status_dir = getattr(args, "status_dir", None)
    if status_dir:  # --json DIR/verdict would be overwritten by the status file
        from ..outputs.owned import MANIFEST
        from ..stages import STAGE_NAMES
        from .status import VERDICT_FILE

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
        _emit(red, "console", None, verbose, "", stream)
    for fmt, path, option in outputs_of(args):
        _emit(red, fmt, path, verbose, option.split()[0], sys.stdout)
    return report.exit_code
