"""The release's own rules on keys: config dataclasses' fields and renamed keys (``renames.json``)."""

import difflib
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.version import Version

from ...matrix import parse_version, read_data
from ...shell import override, quote
from .stored import stored_json
from .tree import HYDRA_KEYS, has_path, key_parts, flatten, get_path


#: The key, beside the ``_target_`` names, of what the release's code builds into dataclasses
#: (``target/verl_fields.py built``: ``{"paths": [...], "classes": [...]}``).
BUILT = "@built"


def built_node(path: Sequence[str], target: str, dataclasses_: Mapping[str, Any]) -> bool:
    """Whether the release turns the ``_target_`` node at ``path`` into its class: the class is
    given by name to verl's builder, or the node or a node above it (Hydra's instantiate is
    recursive) ends with a config path the release's code passes to it. True when that is not
    known (a tree read before it was recorded): every ``_target_`` node then counts, as verl's
    YAML says. Source: verl's own calls of ``omega_conf_to_dataclass`` (0.6.1 never builds
    ``reward_model`` into RewardModelConfig, so its extra keys bind nothing)."""
    info = dataclasses_.get(BUILT)
    if not isinstance(info, dict):
        return True
    if target.rsplit(".", 1)[-1] in (info.get("classes") or []):
        return True
    suffixes = info.get("paths") or []
    for i in range(len(path), 0, -1):
        sub = ".".join(path[:i])
        if any(sub == s or sub.endswith("." + s) for s in suffixes):
            return True
    return False


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
        info = dataclasses_.get(target) if isinstance(target, str) and built_node(path, target, dataclasses_) else None
        fields = (info or {}).get("fields")
        base = get_path(defaults, ".".join(path)) if path else defaults
        for k, v in node.items():
            if fields is not None and k not in fields and k not in HYDRA_KEYS and \
                    not (isinstance(base, dict) and k in base):
                out.append((".".join(path + [str(k)]), target))
            walk(v, path + [str(k)])
    walk(final, [])
    return out


#: verl's PPO trainer configs for FSDP and for Megatron workers, and the keys that name a worker's
#: training strategy.
FSDP_CONFIG, MEGATRON_CONFIG = "ppo_trainer", "ppo_megatron_trainer"
STRATEGY_KEYS = ("actor_rollout_ref.actor.strategy", "critic.strategy")


def launch_strategies(overrides: Sequence[Any], tree: Optional[Dict[str, Any]] = None,
                      defaults: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """The training strategies a launch itself chooses: :data:`STRATEGY_KEYS` -> value (lower
    case, quotes dropped), from its overrides (``.key``/``.value``, the last one wins), else from
    ``tree`` (a saved config merged over the defaults) where it differs from ``defaults``. A
    strategy left at the config's default is not the launch's choice and is not listed."""
    out: Dict[str, str] = {}
    for o in overrides:
        key = str(getattr(o, "key", "")).lstrip("+~")
        if key in STRATEGY_KEYS and getattr(o, "value", None) is not None:
            out[key] = str(o.value).strip().strip("'\"").lower()
    for key in STRATEGY_KEYS:
        if key in out or tree is None:
            continue
        v = get_path(tree, key)
        if isinstance(v, str) and (defaults is None or v != get_path(defaults, key)):
            out[key] = v.lower()
    return out


def _named_in_megatron_files(key: str, version: str) -> bool:
    """True when a YAML file of stored release ``version`` whose path names megatron
    (``ppo_megatron_trainer.yaml``, ``engine/megatron.yaml``...) has ``key``'s leaf as a mapping
    key: a cheap necessary condition for the key to exist only with Megatron workers."""
    from .stored import release_doc

    leaf = re.compile(r"^\s*%s\s*:" % re.escape(key_parts(key)[-1]), re.M)
    for rel in release_doc(version).get("files") or {}:
        if "megatron" in rel:
            data = read_data("verl_config/%s/%s" % (version, rel))
            if data is not None and leaf.search(data.decode("utf-8", "replace")):
                return True
    return False


def megatron_ways(release: Optional[str], config_name: str) -> List[Tuple[str, str, str, Tuple[str, ...]]]:
    """The ways the stored tree nearest ``release`` selects Megatron workers from ``config_name``:
    (launch words, stored release, config, overrides): ``model_engine=megatron`` where that
    config's model_engine group has a megatron option (ppo_trainer from verl 0.8.0), then
    ``--config-name=ppo_megatron_trainer``."""
    from .errors import ComposeUnsupported
    from .stored import release_doc, stored_release

    out: List[Tuple[str, str, str, Tuple[str, ...]]] = []
    try:
        pick = stored_release(release, config_name)[0]
        if "megatron" in ((release_doc(pick).get("groups") or {}).get("model_engine") or []):
            out.append(("model_engine=megatron", pick, config_name, ("model_engine=megatron",)))
    except ComposeUnsupported:
        pass
    if config_name != MEGATRON_CONFIG:
        try:
            out.append(("--config-name=%s" % MEGATRON_CONFIG, stored_release(release, MEGATRON_CONFIG)[0],
                        MEGATRON_CONFIG, ()))
        except ComposeUnsupported:
            pass
    return out


def megatron_homes(key: str, release: Optional[str], config_name: str, tree: Dict[str, Any]) -> List[str]:
    """Those of :func:`megatron_ways` whose composed defaults (real Hydra over the stored tree)
    hold ``key``, when ``tree`` (the launch's composed or default config) lacks it; [] when none
    does."""
    from .defaults import release_keys

    if has_path(tree, key_parts(key)):
        return []
    ways = megatron_ways(release, config_name)
    if not ways or not _named_in_megatron_files(key, ways[-1][1]):
        return []  # (a few small files read; composing takes seconds)
    return [w for w, pick, name, ovs in ways if key in release_keys(pick, name, ovs)]


def _megatron_config_fix(key: str, release: Optional[str], config_name: str, strategies: Mapping[str, str],
                         text: str, tree: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(why, fix) proposing Megatron workers (:func:`megatron_homes`) for a refused ``key``, or
    None: only when the launch chose strategy=megatron, or the key exists only with Megatron
    workers and the launch chose no other strategy (an FSDP launch is told to delete the Megatron
    key, never to switch trainers). Only for verl's own FSDP config, ``ppo_trainer``: a user's own
    config name is the user's to change."""
    if config_name != FSDP_CONFIG:
        return None
    meg = sorted(k for k, v in strategies.items() if v == "megatron")
    homes = megatron_homes(key, release, config_name, tree)
    if meg:
        words = homes or [w[0] for w in megatron_ways(release, config_name)] or ["--config-name=%s" % MEGATRON_CONFIG]
        return ("%s=megatron, but %s composes verl's FSDP workers' nodes%s" % (
            meg[0], config_name, "; %s is there with Megatron workers" % key if homes else ""),
            "add %s (verl's way to select Megatron workers%s)" % (
                " or ".join(words), "" if homes else "; then check %s against that config" % key))
    if not homes:
        return None
    other = sorted("%s=%s" % kv for kv in strategies.items())
    if other:
        return ("%s exists only with Megatron workers, and this launch trains with %s" % (key, ", ".join(other)),
                "delete the override %s (only Megatron workers read it)" % quote(text))
    return ("%s exists only with Megatron workers (%s), not in %s" % (key, " or ".join(homes), config_name),
            "add %s to train with Megatron, or delete the override %s to stay on %s's workers" % (
                " or ".join(homes), quote(text), config_name))


def _renames(config_name: str) -> Dict[str, Dict[str, str]]:
    doc = stored_json("renames.json") or {}
    confs = doc.get("configs", {})
    return confs.get(config_name) or confs.get("ppo_trainer") or {}


def key_fix(key: str, release: Optional[str], config_name: str, tree: Dict[str, Any],
            dataclasses_: Dict[str, Any], text: str = "",
            strategies: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """(why, fix) for an override of ``key`` that release ``release``'s config does not have.

    ``tree``: the composed (or default) unresolved config; ``text``: the override as written;
    ``strategies``: the strategies the launch chose (:func:`launch_strategies`).
    A key verl dropped: the key that replaced it (followed to one that exists) or "delete it".
    A key under a node verl builds into a dataclass: "delete it" (``+key`` dies in verl too).
    The Megatron config only for a launch with strategy=megatron, or a key only that config has
    (:func:`_megatron_config_fix`). Otherwise a near key, or ``+key`` when the node is a plain
    mapping verl reads as it is.
    """
    text = text or key
    value = text.split("=", 1)[1] if "=" in text else "..."
    parts = key_parts(key)
    parent = get_path(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
    target = parent.get("_target_") if isinstance(parent, dict) else None
    fields = (dataclasses_.get(target) or {}).get("fields") if isinstance(target, str) and built_node(
        parts[:-1], target, dataclasses_) else None
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
    meg = _megatron_config_fix(key, release, config_name, strategies or {}, text, tree)
    if meg is not None:
        return meg
    if fields is not None:
        near = near_name(parts[-1], list(fields), cutoff=0.75)
        why = "verl builds %s into %s, which has no field '%s' (a +%s passes Hydra, then verl stops with " \
              "TypeError: unexpected keyword argument)" % (".".join(parts[:-1]), target, parts[-1], key)
        if near:
            return why, "write %s instead of %s" % (
                override("%s.%s" % (".".join(parts[:-1]), near), value), quote(text))
        return why, "delete the override %s" % quote(text)
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


#: The field's short spellings of words in verl's option names (tp_size, dp, micro_bsz, gpu_mem_util):
#: an unknown leaf whose words, these expanded, appear in order in a sibling's name is taken as it.
_ABBREVIATIONS = {"tp": ["tensor", "parallel"], "dp": ["data", "parallel"], "pp": ["pipeline", "parallel"],
                  "ep": ["expert", "parallel"], "cp": ["context", "parallel"], "sp": ["sequence", "parallel"],
                  "vpp": ["virtual", "pipeline", "parallel"], "etp": ["expert", "tensor", "parallel"],
                  "mbs": ["micro", "batch", "size"], "bs": ["batch", "size"], "bsz": ["batch", "size"],
                  "mem": ["memory"], "util": ["utilization"], "len": ["length"], "tok": ["token"],
                  "toks": ["tokens"], "seq": ["sequence"], "num": ["n"], "n": ["num"], "cfg": ["config"],
                  "lr": ["lr"], "ckpt": ["checkpoint"], "val": ["validation"], "gen": ["generation"]}


def _run_end(run: List[str], name_words: List[str], at: int) -> int:
    """The index after ``run`` matched in ``name_words`` from ``at`` (its first word there, each next
    word at most one word further: tensor_[model_]parallel), or -1."""
    if at >= len(name_words) or name_words[at] != run[0]:
        return -1
    pos = at + 1
    for w in run[1:]:
        if pos < len(name_words) and name_words[pos] == w:
            pos += 1
        elif pos + 1 < len(name_words) and name_words[pos + 1] == w:
            pos += 2
        else:
            return -1
    return pos


def _fits(alts: List[List[List[str]]], name_words: List[str], start: int = 0) -> bool:
    """Each of ``alts`` (a word's spellings, each a run of words) found in order in ``name_words``."""
    if not alts:
        return True
    for run in alts[0]:
        for at in range(start, len(name_words)):
            end = _run_end(run, name_words, at)
            if end >= 0 and _fits(alts[1:], name_words, end):
                return True
    return False


def near_name(leaf: str, names: List[str], cutoff: float = 0.8) -> Optional[str]:
    """The name of ``names`` that ``leaf`` plausibly misspells or abbreviates: the closest within
    ``cutoff`` (difflib ratio), else, for a leaf of two words or more or with a short spelling, the
    name whose words hold ``leaf``'s words in order, each as written or expanded (``tp_size`` ->
    ``tensor_model_parallel_size``, ``n_gpus`` -> ``n_gpus_per_node``), the one that starts alike
    and adds the fewest words first; or None."""
    names = [n for n in names if not n.startswith("_")]
    near = difflib.get_close_matches(leaf, names, n=1, cutoff=cutoff)
    if near:
        return near[0]
    words = [w for w in leaf.lower().split("_") if w]
    if not words or (len(words) < 2 and words[0] not in _ABBREVIATIONS):
        return None
    alts = [[[w]] + ([_ABBREVIATIONS[w]] if w in _ABBREVIATIONS else []) for w in words]
    fits = [n for n in names if _fits(alts, n.lower().split("_"))]
    if not fits:
        return None

    def rank(n: str) -> Tuple[bool, int, int, str]:
        nw = n.lower().split("_")
        return (not any(nw[0] == run[0] for run in alts[0]), len(nw), len(n), n)
    return min(fits, key=rank)


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
        near = near_name(leaf, [str(k) for k in node])
        if near:
            return ["%s.%s" % (parent, near) if parent else near]
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
