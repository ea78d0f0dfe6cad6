"""The default config keys of each stored release, composed once per process by the vendored
Hydra (what a key's first release is read from: "lora_rank came in verl 0.4.0")."""

from typing import Dict, Sequence, Set, Tuple

from .inprocess import run_here
from .stored import hydra_path, stored_tree
from .tree import flatten

_KEYS: Dict[Tuple[str, str, Tuple[str, ...]], Set[str]] = {}


def release_keys(version: str, config_name: str = "ppo_trainer", overrides: Sequence[str] = ()) -> Set[str]:
    """Dotted keys of stored release ``version``'s ``config_name`` defaults, composed with
    ``overrides`` (a config group choice such as ``model_engine=megatron``); empty when that
    release has no such config or it cannot be composed so. Memoised per process."""
    k = (version, config_name, tuple(overrides))
    if k not in _KEYS:
        try:
            out = run_here("verl_compose", {"config_name": config_name, "overrides": list(overrides), "resolve": False,
                                            "stored_dir": stored_tree(version), "stored_version": version,
                                            "sys_path": hydra_path()})
            trees = [e["tree"] for e in out.events if e.get("event") == "tree" and e.get("stage") == "final"]
            _KEYS[k] = set(flatten(trees[0])) if trees else set()
        except Exception:  # no tree for that release, or no Hydra here: nothing is claimed
            _KEYS[k] = set()
    return _KEYS[k]
