"""The one builder of every command and fix the tool prints (a leaf module: standard library only).

A printed command is built from an argument list; each word is quoted with :func:`shlex.quote`
(POSIX sh single quotes, or the word as it is when it holds only ``[A-Za-z0-9@%+=:,./_-]``), so
pasting it into ``sh`` or ``bash`` gives back exactly that list: a user's value holding
``$(...)``, backticks, ``;``, ``|``, a newline, quotes or spaces is one word, never code. The
README promises fixes "paste as printed"; a recipe or config someone else wrote can carry such
a value, and this is what keeps its payload inert.

A word holding what a terminal or the report cannot show as itself (a byte of a non-UTF-8 file
name, which Python holds as a lone surrogate; a control character; a line or bidi separator) has
those characters written as ``"$(printf '\\ooo')"``: octal escapes of their bytes, which POSIX
``printf`` turns back into the same bytes in ``sh`` (dash), ``bash`` and a Dockerfile's ``RUN``.
The printed command is then plain text, one line, and pastes back to the exact bytes.
"""

import re
import shlex
from typing import Any, Iterable, List, Mapping

__all__ = ["quote", "command", "override", "overrides"]


#: What is written through printf: C0 controls (tab and newline too), DEL, C1 controls, the line and
#: bidi separators the report escapes (preflight/report/text.py), and the lone surrogates U+DC80-U+DCFF
#: that stand for the undecodable bytes 0x80-0xFF of a file name (``os.fsdecode``'s surrogateescape).
_UNSHOWN = re.compile("[\x01-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069\udc80-\udcff]+")


def _octal(text: str) -> str:
    """``text`` as printf octal escapes of its bytes (surrogates U+DC80-U+DCFF as the byte they hold)."""
    return "".join("\\%03o" % b for b in text.encode("utf-8", "surrogateescape"))


def quote(word: Any) -> str:
    """One shell word for ``word`` (``str()`` of it): ``a.b=8`` -> ``a.b=8``; ``a b`` -> ``'a b'``;
    ``"$(x)"`` -> ``'"$(x)"'``; ``""`` -> ``''``; ``"f\\udcff"`` (file name byte 0xff) ->
    ``f"$(printf '\\377')"``; ``"a\\tb"`` -> ``a"$(printf '\\011')"b`` (a run ending in a line
    break takes the next character along, as ``$(...)`` drops trailing newlines; a word that ends in
    a newline keeps that newline as it is)."""
    text = str(word)
    if not _UNSHOWN.search(text):
        return shlex.quote(text)
    parts: List[str] = []
    i = 0
    for m in _UNSHOWN.finditer(text):
        if m.start() < i:  # this run's first character went with the last run
            continue
        if m.start() > i:
            parts.append(shlex.quote(text[i:m.start()]))
        run, i = m.group(), m.end()
        if run.endswith("\n"):
            if i == len(text):
                head = run.rstrip("\n")
                if head:
                    parts.append("\"$(printf '%s')\"" % _octal(head))
                parts.append(shlex.quote(run[len(head):]))
                break
            run, i = run + text[i], i + 1
        parts.append("\"$(printf '%s')\"" % _octal(run))
    if i < len(text):
        parts.append(shlex.quote(text[i:]))
    return "".join(parts)


def command(argv: Iterable[Any]) -> str:
    """The command line of ``argv`` (a list of words, each given as the program will get it),
    every word quoted: ``["docker", "build", "-t", "v:1", "ctx dir"]`` -> ``docker build -t v:1 'ctx dir'``.
    Words that are already-built commands must not be passed here (they would be quoted again)."""
    return " ".join(quote(a) for a in argv)


def override(key: str, value: Any) -> str:
    """A Hydra override as one shell word: ``key=value`` quoted as a whole (``value`` as written,
    e.g. ``'trainer.project_name="$(touch X)"'``)."""
    return quote("%s=%s" % (key, value))


def overrides(alt: Mapping[str, Any]) -> str:
    """``{"a.b": 8, "c": "x y"}`` -> ``a.b=8 'c=x y'`` (values given as the text to write)."""
    return " ".join(override(k, v) for k, v in alt.items())
