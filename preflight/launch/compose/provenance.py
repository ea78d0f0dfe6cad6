"""Where each leaf of a composed config came from: the defaults, the user's file or an override."""

from typing import Any, Dict, Sequence

from ..interpolation import references
from ..overrides import Override
from .tree import flatten

def provenance(defaults: Dict[str, Any], after_file: Dict[str, Any], final: Dict[str, Any],
               overrides: Sequence[Override]) -> Dict[str, Dict[str, Any]]:
    """Where each leaf of ``final`` came from.

    Returns dotted path -> ``{"source": "default" | "file" | "override" | "--gpus" | "--nnodes",
    "override": text (when an override set it), "via": [keys it interpolates]}``. The last
    override naming the key or one of its parents wins; else "file" when the file added or changed
    it; else "default".
    """
    fd, ff, fl = flatten(defaults), flatten(after_file), flatten(final)
    out: Dict[str, Dict[str, Any]] = {}
    for path, val in fl.items():
        rec: Dict[str, Any] = {"source": "default"}
        for ov in overrides:
            if ov.kind != "delete" and (path == ov.key or path.startswith(ov.key + ".")):
                rec = {"source": ov.origin, "override": ov.text}
        if rec["source"] == "default" and (path not in fd or fd.get(path) != ff.get(path)) and path in ff:
            rec["source"] = "file"
        refs = references(val, path)
        if refs:
            rec["via"] = refs
        out[path] = rec
    return out


def effective_source(prov: Dict[str, Dict[str, Any]], path: str, _depth: int = 0) -> str:
    """The source to show for ``path``: its own, or, for an interpolated default, that of the key
    it copies (``default <- data.max_prompt_length (override)``)."""
    rec = prov.get(path)
    if rec is None:
        return "absent"
    src = rec["source"]
    if src == "default" and rec.get("via") and _depth < 5:
        for ref in rec["via"]:
            inner = effective_source(prov, ref, _depth + 1)
            if inner not in ("default", "absent"):
                return "%s via %s" % (inner.split(" via ")[0], ref)
    return src
