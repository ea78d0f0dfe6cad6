"""The release's own rules on keys: config dataclasses' fields and renamed keys (``renames.json``)."""

import difflib
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import Version

from ...matrix import parse_version
from ...shell import override, quote
from .stored import stored_json
from .tree import HYDRA_KEYS, has_path, key_parts, flatten, get_path


def unknown_fields(final: Dict[str, Any], defaults: Dict[str, Any],
                   dataclasses_: Dict[str, Any]) -> List[Tuple[str, str]]:
    """Keys the user added to a node that verl turns into a dataclass lacking them.

    ``final``/``defaults``: unresolved trees; ``dataclasses_``: ``_target_`` -> ``{"fields"}`` (of
    that release, read from its source). Returns ``[(dotted key, _target_)]``; a key the release's
    own defaults already hold is never reported.
    """
    out: List[Tuple[str, str]] = []

    def walk(node: Any, path: List[str]) -> None:
        if isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [str(i)])
            return
        if not isinstance(node, dict):
            return
        target = node.get("_target_")
        info = dataclasses_.get(target) if isinstance(target, str) else None
        fields = (info or {}).get("fields")
        base = get_path(defaults, ".".join(path)) if path else defaults
        for k, v in node.items():
            if fields is not None and k not in fields and k not in HYDRA_KEYS and \
                    not (isinstance(base, dict) and k in base):
                out.append((".".join(path + [str(k)]), target))
            walk(v, path + [str(k)])
    walk(final, [])
    return out


def _renames(config_name: str) -> Dict[str, Dict[str, str]]:
    doc = stored_json("renames.json") or {}
    confs = doc.get("configs", {})
    return confs.get(config_name) or confs.get("ppo_trainer") or {}


def key_fix(key: str, release: Optional[str], config_name: str, tree: Dict[str, Any],
            dataclasses_: Dict[str, Any], text: str = "") -> Tuple[str, str]:
    """(why, fix) for an override of ``key`` that release ``release``'s config does not have.

    ``tree``: the composed (or default) unresolved config; ``text``: the override as written.
    A key verl dropped: the key that replaced it (followed to one that exists) or "delete it".
    A key under a node verl builds into a dataclass: "delete it" (``+key`` dies in verl too).
    Otherwise a near key, or ``+key`` when the node is a plain mapping verl reads as it is.
    """
    text = text or key
    value = text.split("=", 1)[1] if "=" in text else "..."
    parts = key_parts(key)
    parent = get_path(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
    target = parent.get("_target_") if isinstance(parent, dict) else None
    fields = (dataclasses_.get(target) or {}).get("fields") if isinstance(target, str) else None
    if fields is not None and parts[-1] in fields:
        return "not in the YAML, but a field of %s" % target, "add it with %s" % quote("+" + text.lstrip("+"))
    ren = _renames(config_name)
    rec = ren.get(key)
    pv = parse_version(release) if release else None
    if rec and (pv is None or Version(rec["removed_in"]) <= Version(pv.public)):
        new, seen = rec.get("replacement") or "", set()
        while new and not has_path(tree, key_parts(new)) and new in ren and new not in seen:
            seen.add(new)
            new = ren[new].get("replacement") or ""
        why = "verl %s dropped %s (last in %s)" % (rec["removed_in"], key, rec["last_in"])
        if new and has_path(tree, key_parts(new)):
            return why + "; %s took its place" % new, "write %s instead of %s" % (override(new, value), quote(text))
        return why, "delete the override %s (verl %s has no such option)" % (quote(text), release or rec["removed_in"])
    if fields is not None:
        near = difflib.get_close_matches(parts[-1], [f for f in fields if not f.startswith("_")], n=1, cutoff=0.75)
        why = "verl builds %s into %s, which has no field '%s' (a +%s passes Hydra, then verl stops with " \
              "TypeError: unexpected keyword argument)" % (".".join(parts[:-1]), target, parts[-1], key)
        if near:
            return why, "write %s instead of %s" % (
                override("%s.%s" % (".".join(parts[:-1]), near[0]), value), quote(text))
        return why, "delete the override %s" % quote(text)
    if ".megatron." in ".%s." % key and config_name != "ppo_megatron_trainer":
        return "the megatron keys live in ppo_megatron_trainer", \
            "add --config-name=ppo_megatron_trainer (the megatron keys live in that config)"
    added = first_release_with(key, config_name, release)
    if added is not None:
        return "verl %s has no %s (it came in verl %s)" % (release, key, added), \
            "upgrade verl to %s or later for %s, or delete the override %s" % (added, parts[-1], quote(text))
    cands = near_keys(key, tree)
    if cands:
        return "no such key (did you mean %s?)" % cands[0], "write %s instead of %s" % (
            override(cands[0], value), quote(text))
    return "no such key in the composed config", "add it with %s if your own code reads it, else delete it" % \
        quote("+" + text.lstrip("+"))


def near_keys(key: str, tree: Dict[str, Any]) -> List[str]:
    """Keys of ``tree`` that ``key`` is plausibly a misspelling of: the same leaf name under
    another parent (``actor_rollout_ref.lora_rank`` -> ``actor_rollout_ref.model.lora_rank``), or a
    leaf name within 0.8 (difflib ratio) of it under the same parent. A key is never matched to
    an unrelated sibling because the dotted paths look alike (``model.lora_rank`` is no
    ``model.path``)."""
    parts = key_parts(key)
    leaf, parent = parts[-1], ".".join(parts[:-1])
    leaves = list(flatten(tree))
    same_leaf = [k for k in leaves if k.rsplit(".", 1)[-1] == leaf]
    if same_leaf:
        return sorted(same_leaf, key=lambda k: -difflib.SequenceMatcher(None, k, key).ratio())[:1]
    node = get_path(tree, parent) if parent else tree
    if isinstance(node, dict):
        near = difflib.get_close_matches(leaf, [str(k) for k in node], n=1, cutoff=0.8)
        if near:
            return ["%s.%s" % (parent, near[0]) if parent else near[0]]
    return []


def first_release_with(key: str, config_name: str, release: Optional[str]) -> Optional[str]:
    """The oldest stored release after ``release`` whose ``config_name`` defaults hold ``key``
    (from the stored releases' flattened key lists in ``matrices/verl_config/<v>.json``), or None."""
    from .defaults import release_keys
    from .stored import stored_index

    pv = parse_version(release) if release else None
    if pv is None:
        return None
    for v in sorted(stored_index(), key=Version):
        if Version(v) <= Version(pv.public):
            continue
        if key in release_keys(v, config_name):
            return v
    return None
