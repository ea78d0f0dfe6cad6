"""The report as short Markdown, for pasting into a GitHub issue or a chat.

Like torch's ``collect_env``, it is meant to be pasted verbatim: a one-line verdict, the target and
machine in a few lines, a table of the rows that did not pass, the Next steps, and the passes
folded into one ``<details>`` line. Input is an already redacted report
(:func:`preflight.report.render.redact_report`); nothing here reads the machine.
"""

from typing import Any, Dict, List

from ..result import Status
from . import Report

__all__ = ["render"]


#: ASCII punctuation that Markdown gives a meaning (links, images, emphasis, code, tables, headings,
#: strikethrough; text never starts a line here, so list and heading markers need nothing): each is backslash-escaped in user-derived text, so it renders as itself
_MD_PUNCT = frozenset("\\`*_[]()!|#~")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _text(text: Any) -> str:
    """The one escape of every user-derived text this renderer puts outside a code span (prose,
    headings, list items, table cells, ``<summary>``): newlines folded, ``& < > "`` written as HTML
    entities (no tag, comment or entity of the input survives), Markdown punctuation
    backslash-escaped (no link, image, emphasis, code span or cell break). Code spans are made by
    :func:`_code`, whose content Markdown never interprets."""
    s = " ".join(str("" if text is None else text).split())
    return "".join(_HTML.get(ch) or ("\\" + ch if ch in _MD_PUNCT else ch) for ch in s)


def _cell(text: Any) -> str:
    """One table cell (or a line of prose): :func:`_text`, which also escapes ``|``."""
    return _text(text)


def _code(text: Any) -> str:
    """``text`` as an inline code span (a fence longer than any backtick run inside it): Markdown
    shows its content literally (``<img>`` stays text, escaped by the HTML renderer)."""
    s = " ".join(str("" if text is None else text).split())
    fence = "`"
    while fence in s:
        fence += "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, s, pad, fence)


def _cell_code(text: Any) -> str:
    """An inline code span inside a table cell: GFM splits cells on every unescaped ``|``, even
    inside code, and turns ``\\|`` back into ``|``."""
    return _code(text).replace("|", "\\|")


def render(report: Report) -> str:
    """Markdown text of an already redacted ``report``."""
    c = report.counts()
    verdict = report.headline
    lines: List[str] = [
        "### verl-preflight %s: %s" % (_text(report.command), _text(verdict)), "",
        "%d passed, %d warnings, %d failed, %d errors, %d skipped (exit %d, %.1f s)" % (
            c["pass"], c["warn"], c["fail"], c["error"], c["skip"], report.exit_code, report.duration_s), "",
        "- tool: verl-preflight %s, matrix %s" % (_text(report.tool_version), _text(report.matrix_version)),
    ]
    t = report.target
    if t.get("python") or t.get("version"):
        lines.append("- target: %s (Python %s)" % (_code(str(t.get("python") or "?")), _text(t.get("version") or "?")))
    if report.verl.get("version"):
        lines.append("- verl: %s (%s)" % (_text(report.verl.get("version")), _text(report.verl.get("chosen_by") or "?")))
    host = (report.machine or {}).get("host") or {}
    if host:
        os_name = (host.get("os") or {}).get("name") or "?"
        glibc = str(host.get("glibc") or "glibc ?")
        lines.append("- host: %s, %s, %s, %s CPUs" % (_text(os_name), _text(host.get("arch") or "?"),
                                                     _text(glibc if glibc.startswith("glibc") else "glibc " + glibc),
                                                     _text((host.get("cpu") or {}).get("usable") or "?")))
    nvml = (report.machine or {}).get("nvml") or {}
    if nvml.get("devices"):
        names: Dict[str, Any] = {}
        for d in nvml["devices"]:
            key = "%s (compute capability %s)" % (d.get("name"), d.get("capability"))
            names[key] = names.get(key, 0) + 1
        lines.append("- GPUs: %s; driver %s" % (", ".join("%d x %s" % (n, _text(k)) for k, n in names.items()),
                                                _text(nvml.get("driver") or "?")))
    elif nvml.get("error"):
        lines.append("- GPUs: none seen (NVML: %s)" % _text((nvml.get("error") or {}).get("kind") or "error"))
    lines.append("")
    shown = [r for r in report.results if r.status not in (Status.PASS, Status.SKIP)]
    if shown:
        lines += ["| status | check | finding | fix |", "|---|---|---|---|"]
        for r in shown:
            lines.append("| %s | %s | %s | %s |" % (_text(r.status.value.upper()), _cell_code(r.id), _cell(r.message),
                                                  _cell_code(r.fix) if r.fix else ""))
        lines.append("")
    steps = report.next_steps()
    if steps:
        lines.append("**Next steps** (root causes first)")
        lines.append("")
        for i, s in enumerate(steps, 1):
            lines.append("%d. %s: %s; fix: %s%s" % (i, ", ".join(_code(x) for x in s.ids), _cell(s.message),
                                                   _code(s.fix), "" if s.root else " (follows from an earlier failure)"))
        lines.append("")
    passed = [r.id for r in report.results if r.status == Status.PASS]
    skipped = [r.id for r in report.results if r.status == Status.SKIP]
    for title, ids in (("passed", passed), ("skipped", skipped)):
        if ids:
            lines.append("<details><summary>%d %s</summary>" % (len(ids), title))
            lines.append("")
            lines.append(", ".join(_code(i) for i in ids))
            lines.append("")
            lines.append("</details>")
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
