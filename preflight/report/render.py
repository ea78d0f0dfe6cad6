"""The output boundary: ``render(report, fmt, output)``. The options every reporting command
shares (``--format``, ``--output``, ``--json``, ``-q``) are the command line's, in
:mod:`preflight.commands.output`.

Everything a command shows or writes about a :class:`~preflight.report.Report` passes through
here: the report is redacted once (:func:`redact_report`, with :func:`preflight.redact.redact`),
then one renderer of :data:`FORMATS` turns it into text, which goes to a stream or, through the
one atomic writer (:func:`preflight.atomic.write_atomic`), to a file.
"""

import dataclasses
import io
import os
import sys
from typing import Any, Callable, Dict, Optional, TextIO

from ..atomic import write_atomic
from ..redact import collect, is_secret_key, redact, redact_text
from ..result import Result
from . import Report
from .invocation import invocation, localise_commands
from .text import escape_controls, for_text

__all__ = ["FORMATS", "render", "redact_report", "print_safe", "to_text", "present", "escape_controls", "invocation",
           "localise_commands"]

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


def print_safe(text: str, file: Optional[TextIO] = None) -> None:
    """Print one line of a command's own output for people (a summary, a progress note) the way
    every report is printed: redacted (:func:`preflight.redact.redact_text`), every ``preflight
    <command>`` in it spelled as this tool was run (:func:`preflight.report.invocation.localise_commands`)
    and with control characters escaped (:func:`escape_controls`). ``file``: default stdout."""
    from .invocation import localise_commands

    print(escape_controls(localise_commands(redact_text(text)) or ""), file=file if file is not None else sys.stdout,
          flush=True)


def _plain_width() -> int:
    """:data:`PLAIN_WIDTH`, or ``COLUMNS`` when the user set it."""

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
    from . import jsonreport, junit, markdown, prometheus

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


def present(red: Report, fmt: str, output: Optional[str], verbose: bool, option: str,
            stream: Optional[TextIO]) -> None:
    """Present the already redacted ``red`` in ``fmt``: on ``stream`` (default stdout) when
    ``output`` is None or '-' (rich on a terminal, plain text elsewhere), else into the file
    ``output`` through the one atomic writer. Raises OutputError naming ``option``."""

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
    present(redact_report(report), fmt, output, verbose, option, stream)
