"""The human report: rows grouped by stage, a fix under every warn and fail, a verdict line.

Uses rich; colour follows rich's rules (NO_COLOR, FORCE_COLOR, a terminal or not). While checks
run, :class:`LiveProgress` shows which check is running (only on a terminal).

:class:`SafeConsole` is the console every report view prints on: the text of what is printed
(file names, a target's output, config values) never reaches the terminal with raw control
characters; rich's own styling and cursor control are kept.
"""

import json
from typing import Any, Iterable, Optional

from rich.console import Console
from rich.segment import Segment
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..result import Result, Status
from ..stages import stage as stage_of
from . import Report
from .text import escape_controls

__all__ = ["render", "next_steps", "LiveProgress", "STYLE", "SafeConsole"]


class SafeConsole(Console):
    """A rich ``Console`` (same arguments) that writes each control character of printed text,
    but newline and tab, as a visible escape (``\x1b``, ``\x07``): an ESC sequence in a file
    name cannot recolour, retitle or clear the user's terminal. Rich's own control segments
    (styles, the spinner's cursor moves) pass unchanged."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """rich's print, with plain strings escaped first: rich drops BEL, BS, VT, FF and CR from
        text before :meth:`_render_buffer` sees it, which would show a name other than the real one."""
        super().print(*(escape_controls(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:  # rich's one point where text becomes output
        return super()._render_buffer(
            Segment(escape_controls(seg.text), seg.style, seg.control) if not seg.control
            else seg for seg in buffer)


STYLE = {
    Status.PASS: ("PASS", "green"),
    Status.WARN: ("WARN", "yellow"),
    Status.FAIL: ("FAIL", "bold red"),
    Status.SKIP: ("SKIP", "dim"),
    Status.ERROR: ("ERROR", "bold magenta"),
}


def _title(name: str) -> str:
    try:
        return stage_of(name).title
    except KeyError:  # a command's own group (cluster's "node n0 (10.0.0.2, head)"): its name says it all
        return ""


def render(report: Report, console: Console, verbose: bool = False) -> None:
    """Print ``report``. ``verbose`` adds each row's evidence keys (short values only)."""
    t = report.target
    console.print(Text.assemble(("verl-preflight ", "bold"), report.tool_version, "  matrix ", report.matrix_version))
    line = "target: %s (Python %s)" % (escape(str(t.get("python"))), t.get("version") or "?")
    if report.verl.get("version"):  # cluster without a launch names no verl release
        line += "   verl: %s (%s)" % (report.verl.get("version"), report.verl.get("chosen_by") or "?")
    console.print(line)
    for stage, rows in report.by_stage().items():
        if not rows:
            continue
        dur = (report.stage_timings.get(stage) or {}).get("wall_s")  # the stage's wall clock (check)
        if not isinstance(dur, (int, float)):
            dur = sum({".".join(r.id.split(".")[:2]): r.duration_s for r in rows}.values())
        console.print()
        title = _title(stage)
        console.print(Text.assemble(("%s" % stage, "bold cyan"), "  " if title else "", (title, "cyan"),
                                    ("  (%.1f s)" % dur, "dim")))
        table = Table(show_header=False, box=None, pad_edge=False, expand=False)
        table.add_column("status", no_wrap=True, width=6)
        table.add_column("id", style="dim", no_wrap=True)  # whole, so it can be copied and grepped
        table.add_column("message", overflow="fold")
        for r in rows:
            label, style = STYLE[r.status]
            msg = Text(r.message)
            if r.fix and r.status in (Status.WARN, Status.FAIL, Status.ERROR):
                msg.append("\n  fix: ", style="bold")
                msg.append(r.fix)
            if verbose and r.evidence:
                for k, v in r.evidence.items():
                    sv = v if isinstance(v, str) else json.dumps(v, default=str)  # null/true, not None/True
                    msg.append("\n  %s: %s" % (k, sv if len(sv) < 300 else sv[:300] + "..."), style="dim")
            table.add_row(Text(label, style=style), r.id.split(".", 1)[1], msg)
        console.print(table)
    c = report.counts()
    console.print()
    parts = ["%d passed" % c["pass"], "%d warning%s" % (c["warn"], "" if c["warn"] == 1 else "s"),
             "%d failed" % c["fail"]]
    if c["error"]:
        parts.append("%d error%s" % (c["error"], "" if c["error"] == 1 else "s"))
    parts.append("%d skipped" % c["skip"])
    verdict = (report.headline, "bold green" if report.ready else "bold red")
    console.print(Text.assemble(verdict, ": ", ", ".join(parts), ("  (%.1f s, exit %d)" % (
        report.duration_s, report.exit_code), "dim")))


def next_steps(report: Report, console: Console) -> None:
    """When ``report`` is not ready: a numbered "Next steps" list, root causes first, each with
    its fix and what it blocks. Prints nothing for a ready report."""
    steps = report.next_steps()
    if not steps:
        return
    console.print()
    console.print(Text("Next steps", style="bold"))
    for i, s in enumerate(steps, 1):
        head = Text("%d. " % i)
        head.append(", ".join(s.ids), style="bold")
        head.append(": %s" % s.message)
        if not s.root:
            head.append("  (follows from an earlier failure)", style="dim")
        console.print(head)
        console.print(Text("   fix: ") + Text(s.fix))
        if s.blocks:
            console.print(Text("   blocks %d check(s): %s" % (
                len(s.blocks), ", ".join(s.blocks[:6]) + (", ..." if len(s.blocks) > 6 else "")), style="dim"))


class LiveProgress:
    """A spinner naming the running check, for terminals; a no-op elsewhere (and with no
    console, e.g. ``-q``)."""

    def __init__(self, console: Optional[Console]) -> None:
        self.console = console
        self.status: Any = None
        self.done = 0

    def __enter__(self) -> "LiveProgress":
        if self.console is not None and self.console.is_terminal:
            self.status = self.console.status("starting...", spinner="dots")
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(*exc)

    def __call__(self, event: str, result: Optional[Result]) -> None:
        if event.startswith("start:") and self.status is not None:
            self.status.update("checking %s  (%d rows so far)" % (event[6:], self.done))
        elif result is not None:
            self.done += 1
