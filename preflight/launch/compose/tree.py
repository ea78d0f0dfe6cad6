"""Helpers over nested config trees (dicts and lists): dotted-path reads and leaves."""

import re
from typing import Any, Dict, List, Sequence

MISSING = "???"  #: OmegaConf's mandatory-value marker
#: Keys hydra.utils.instantiate consumes itself before calling a ``_target_`` class.
HYDRA_KEYS = ("_target_", "_recursive_", "_convert_", "_partial_", "_args_")


def key_parts(key: str) -> List[str]:
    """Parts of a dotted config key, list indices split out: ``a.b[0].c`` -> ``['a', 'b', '0', 'c']``."""
    return [p for p in re.sub(r"\[(\d+)\]", r".\1", key).split(".") if p != ""]


def get_path(tree: Any, key: str, default: Any = None) -> Any:
    """Value at dotted ``key`` in nested dicts/lists, or ``default`` when a part is absent."""
    node = tree
    for p in key_parts(key):
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return default
    return node


def has_path(tree: Any, parts: Sequence[str]) -> bool:
    """True when ``parts`` (from :func:`key_parts`) walk to a node of nested dicts/lists ``tree``."""
    node = tree
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return False
    return True


def flatten(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """Leaves of ``tree`` by dotted path (lists and empty dicts are leaves)."""
    out: Dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            out.update(flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
    elif prefix:
        out[prefix] = tree
    return out
