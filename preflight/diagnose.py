"""Turns an error text into its cause and fix, using matrices/signatures.toml.

:func:`classify` searches the text for each signature's regex in file order and returns the
first match with its fix filled in; None when nothing matches.
"""

import re
from dataclasses import dataclass
from typing import Dict, Optional

from .shell import quote

__all__ = ["Diagnosis", "LINE_CAP", "WINDOW_LINES", "bounded", "classify"]

#: every signature regex (signatures.toml, explain's wrappers and rows) runs on text whose lines are
#: at most this many characters: a pattern that backtracks on a long line costs at most this squared
LINE_CAP = 4096
#: and on at most this many lines (the last ones: the innermost frames, the error and its message)
WINDOW_LINES = 256


@dataclass
class Diagnosis:
    """A matched signature: ``id``, ``cause``, ``fix`` (placeholders filled), ``source``,
    ``confidence`` and any named regex groups in ``groups`` (e.g. ``module``)."""

    id: str
    cause: str
    fix: str
    source: str
    confidence: str
    groups: Dict[str, str]


def bounded(text: str, line_cap: int = LINE_CAP, max_lines: int = WINDOW_LINES) -> str:
    """``text`` with each line cut to ``line_cap`` characters and only its last ``max_lines``
    lines kept: the only text a signature regex is run on (a 20 MB line with no newline, or a
    log of a million lines, cannot make a backtracking pattern take minutes)."""
    text = text or ""
    if len(text) <= line_cap and "\n" not in text:
        return text
    lines = text.split("\n")[-max_lines:]
    return "\n".join(x if len(x) <= line_cap else x[:line_cap] for x in lines)


class _Safe(dict):
    def __missing__(self, key: str) -> str:
        return "{%s}" % key


def classify(matrix, text: str, **fill: str) -> Optional[Diagnosis]:
    """First signature of ``matrix`` found in ``text``; ``fill`` values go into the fix template
    (``dist``, ``torch``...). For a missing module, ``missing_dist`` is derived from the module
    name through matrices/modules.toml unless given."""
    text = bounded(text)
    for sig in matrix.curated.get("signatures", {}).get("signature", []):
        m = re.search(sig["pattern"], text)
        if not m:
            continue
        groups = {k: v for k, v in m.groupdict().items() if v}
        # every value is one shell word in the fix (a version or name read from a package's
        # metadata or an error message is not trusted to be free of shell syntax)
        values = _Safe({k: quote(v) for k, v in fill.items()})
        values.update({k: quote(v) for k, v in groups.items()})
        if "module" in groups and "missing_dist" not in fill:
            values["missing_dist"] = quote(matrix.module_dist(groups["module"]))
        return Diagnosis(sig["id"], sig["cause"], sig["fix"].format_map(values), sig.get("source", ""),
                         sig.get("confidence", "U"), groups)
    return None
