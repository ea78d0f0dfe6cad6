"""The one builder of every command and fix the tool prints (a leaf module: standard library only).

A printed command is built from an argument list; each word is quoted with :func:`shlex.quote`
(POSIX sh single quotes, or the word as it is when it holds only ``[A-Za-z0-9@%+=:,./_-]``), so
pasting it into ``sh`` or ``bash`` gives back exactly that list: a user's value holding
``$(...)``, backticks, ``;``, ``|``, a newline, quotes or spaces is one word, never code. The
README promises fixes "paste as printed"; a recipe or config someone else wrote can carry such
a value, and this is what keeps its payload inert.
"""

import shlex
from typing import Any, Iterable, Mapping

__all__ = ["quote", "command", "override", "overrides"]


def quote(word: Any) -> str:
    """One shell word for ``word`` (``str()`` of it): ``a.b=8`` -> ``a.b=8``; ``a b`` -> ``'a b'``;
    ``"$(x)"`` -> ``'"$(x)"'``; ``""`` -> ``''``."""
    return shlex.quote(str(word))


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
