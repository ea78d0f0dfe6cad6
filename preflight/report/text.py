"""Text safe to show: control characters (ESC sequences, BEL, C1 controls) escaped, for the
console and markdown views. A leaf of the report layer."""

import dataclasses
import re
from typing import Any

from . import Report

__all__ = ["escape_controls", "one_line", "for_text"]


#: C0 controls but newline and tab, DEL, and C1 controls (``\x9b`` is a one-byte CSI on some
#: terminals): what a file name, a target's output or a config value must not send raw to a
#: terminal or into markdown (ESC sequences recolour, retitle or hide text; BEL rings).
#: C0 and C1 controls but newline and tab, and the bidirectional overrides and isolates (a line that
#: reads differently from how it displays: U+202A-U+202E, U+2066-U+2069, U+200E/U+200F).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_one(m: Any) -> str:
    c = ord(m.group())
    return "\\x%02x" % c if c < 0x100 else "\\u%04x" % c


def escape_controls(value: Any) -> Any:
    """``value`` (str, or dicts/lists/tuples of them, recursively; keys too) with each control
    character but newline and tab written as a visible escape (``\x1b``, ``\x07``); other values
    unchanged. Idempotent."""
    if isinstance(value, str):
        return _CONTROLS.sub(_escape_one, value) if _CONTROLS.search(value) else value
    if isinstance(value, dict):
        return {escape_controls(k): escape_controls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_controls(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(escape_controls(v) for v in value)
    return value


def one_line(text: Any) -> Any:
    """``text`` as one line of a terminal: :func:`escape_controls`, then each line break it leaves
    (newline, U+2028, U+2029) written as a visible escape (``\\n``), so an input that holds one (a
    path, a value, a child's message) cannot split an error or a row into several lines. Dicts,
    lists and tuples are walked (keys too), like :func:`escape_controls`; another value that is not
    a str is returned as it gives it (None stays None)."""
    if isinstance(text, dict):
        return {one_line(k): one_line(v) for k, v in text.items()}
    if isinstance(text, list):
        return [one_line(v) for v in text]
    if isinstance(text, tuple) and not hasattr(text, "_fields"):
        return tuple(one_line(v) for v in text)
    out = escape_controls(text)
    if not isinstance(out, str):
        return out
    return _BREAKS.sub(lambda m: _escape_one(m) if m.group() != "\n" else "\\n", out)


#: What str.splitlines() breaks on that escape_controls leaves as it is.
_BREAKS = re.compile("[\n\u2028\u2029]")


def for_text(report: Report) -> Report:
    """A copy of ``report`` fit for a terminal or markdown: every string (rows, target, machine
    facts, sections) passed through :func:`escape_controls`."""
    rows = [dataclasses.replace(r, id=one_line(r.id), message=one_line(r.message),  # a row is one line, whatever
                                evidence=escape_controls(r.evidence), fix=one_line(r.fix),  # its inputs held
                                caused_by=[one_line(c) for c in r.caused_by])
            for r in report.results]
    return dataclasses.replace(report, results=rows, target=one_line(report.target),  # the header's lines too
                               verl=one_line(report.verl), machine=one_line(report.machine),
                               sections=escape_controls(report.sections), command=one_line(report.command))
