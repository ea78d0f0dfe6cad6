"""Reading OmegaConf interpolations (``${a.b}``, ``${.sibling}``, ``${..uncle}``,
``${oc.select:a.b,default}``) in a config's unresolved values: which keys a value refers to.

OmegaConf resolves the values (in the target, or the vendored copy); this only names the keys a
value reads, for provenance (:func:`references`) and for following a key to the one it takes its
value from (:func:`reference_of`: a fix to that key reaches this one). Resolvers other than
``oc.select`` (``oc.env``, custom ones) refer to no key. Source: OmegaConf 2.3 "Variable
interpolation" (absolute keys; a leading dot per level for a relative key).
"""

import re
from typing import Any, List, Optional

__all__ = ["key_parts", "references", "reference_of"]

_KEY = r"(\.*[A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)"
#: One key reference inside a value (several may appear: ``${a}_${b}``).
_REF = re.compile(r"\$\{\s*(?:oc\.select\s*:\s*)?" + _KEY + r"\s*[,}]")
#: A value that is exactly one key reference (with an ``oc.select`` default, perhaps); with text
#: around it (spaces too) OmegaConf makes a string of it instead.
_WHOLE = re.compile(r"^\$\{\s*(?:oc\.select\s*:\s*)?" + _KEY + r"\s*(?:,[^}]*)?\}$")


def key_parts(key: str) -> List[str]:
    """The parts of a dotted config key, list indices included: ``a.b[0].c`` -> a, b, 0, c."""
    return [p for p in re.sub(r"\[(\d+)\]", r".\1", key).split(".") if p != ""]


def _absolute(ref: str, path: str) -> List[str]:
    dots = len(ref) - len(ref.lstrip("."))
    if not dots:
        return key_parts(ref)
    parent = key_parts(path)[:-1]  # one dot: a sibling of ``path``; each more: one level up
    return parent[:len(parent) - (dots - 1)] + key_parts(ref[dots:])


def references(text: Any, path: str) -> List[str]:
    """The absolute keys the raw value ``text`` of the key ``path`` interpolates, in order, each
    once (``${a.b}``, ``${.x}``, ``${oc.select:k,...}``); [] for a value that is no string or
    holds no interpolation."""
    if not isinstance(text, str) or "${" not in text:
        return []
    out: List[str] = []
    for k in _REF.findall(text):
        full = _absolute(k, path)
        if full and ".".join(full) not in out and not k.startswith(("oc.", "oc_")):
            out.append(".".join(full))
    return out


def reference_of(value: Any, path: str) -> Optional[str]:
    """The absolute key whose value the raw ``value`` of the key ``path`` is, when it is exactly
    one reference (``${a.b}``, ``${.x}``, ``${oc.select:a.b,default}``); else None."""
    if not isinstance(value, str) or "${" not in value:
        return None
    m = _WHOLE.match(value)
    if m is None or m.group(1).startswith(("oc.", "oc_")):
        return None
    full = _absolute(m.group(1), path)
    return ".".join(full) if full else None
