"""Which files in a directory an earlier wheelhouse build wrote: only those are ever replaced."""

import os
from typing import Dict, Iterable, Optional

from ...errors import UsageError
from .files import MANIFEST, SERVED_LOCK, load_json, sha256_of


def owned_files(out_dir: str) -> Optional[Dict[str, Optional[str]]]:
    """What an earlier build wrote into ``out_dir``, from its manifest: {path relative to
    ``out_dir``: the sha256 recorded when it was written, or None when the manifest names the file
    without one (a wheel: replaced even when corrupt; files of a manifest older than ``written``)}.
    None when ``out_dir`` holds no readable wheelhouse manifest."""
    try:
        m = load_json(os.path.join(out_dir, MANIFEST))
        wheels = m["wheels"]
        out: Dict[str, Optional[str]] = {MANIFEST: None, "simple/index.html": None}
        for r in wheels:
            out[r["file"]] = None
            out["simple/%s/index.html" % r["key"]] = None
        out[m.get("served_lock") or SERVED_LOCK] = None
        if m.get("pyz"):
            out[m["pyz"]["file"]] = None
        for rel, digest in (m.get("written") or {}).items():
            out[rel] = digest
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def is_ours(out_dir: str, rel: str, owned: Optional[Dict[str, Optional[str]]]) -> bool:
    """True when the file ``rel`` in ``out_dir`` is one an earlier build wrote and (where its
    sha256 was recorded) nobody changed since."""
    from ..owned import has_our_header

    path = os.path.join(out_dir, rel)
    if owned is None or rel not in owned or os.path.islink(path) or not os.path.isfile(path):
        return False
    if owned[rel] is not None:
        return sha256_of(path) == owned[rel]
    if rel == SERVED_LOCK or rel.endswith(".pyz"):  # written before hashes were recorded: its header says
        return has_our_header(path)
    return True


def refuse_theirs(out_dir: str, rels: Iterable[str], owned: Optional[Dict[str, Optional[str]]],
                   option: str = "-o") -> None:
    """UsageError listing the files among ``rels`` that exist in ``out_dir`` and are not this
    tool's (see :func:`is_ours`); --force never replaces those. Nothing is changed."""
    theirs = sorted({r for r in rels if os.path.lexists(os.path.join(out_dir, r)) and not is_ours(out_dir, r, owned)})
    if theirs:
        shown = ", ".join(theirs[:8]) + (" and %d more" % (len(theirs) - 8) if len(theirs) > 8 else "")
        raise UsageError("%s %s: would replace %d file(s) that no earlier wheelhouse build wrote there (or that "
                         "changed since): %s; move them away or choose another directory (--force does not replace "
                         "them; nothing was changed)" % (option, out_dir, len(theirs), shown))
