"""Keys a release keeps in its config for backward compatibility but its PPO entry point never reads.

verl 0.9.1 composes ``legacy_reward_impl.yaml`` into ppo_trainer (the 0.6-0.8 places of the reward
settings: ``custom_reward_function.*``, ``reward_model.*``), and only
``verl.experimental.reward_loop.migrate_legacy_reward_impl`` moves them to ``reward.*``; main_ppo
never calls it (the fully-async entry point does). Hydra takes such an override without a word and
the job trains with verl's default scorer or reward manager. The ruleset's ``legacy_unread`` maps
each such key (or node) to the key the release reads.
"""

from typing import Any, Callable, Dict

from .context import RuleContext

__all__ = ["legacy_rule"]


def _leaves(node: Any, prefix: str) -> Dict[str, Any]:
    if isinstance(node, dict):
        out: Dict[str, Any] = {}
        for k, v in node.items():
            out.update(_leaves(v, "%s.%s" % (prefix, k)))
        return out
    return {prefix: node}


def legacy_rule(x: RuleContext, get: Callable[[str, Any], Any]) -> None:
    """WARN each legacy key set to a value (not null) that the release's main_ppo never reads: verl accepts
    the launch and trains without the setting (a silent change the user must see, not a launch verl refuses)."""
    table = x.rs.get("legacy_unread") or {}
    for old, new in sorted(table.items()):
        val = get(old, None)
        if hasattr(val, "items"):
            val = {k: v for k, v in val.items()}
        for key in sorted(_leaves(val, old)):
            v = get(key, None)  # each leaf read again: a fix that nulls it is seen
            if v is None or v == {} or v == []:
                continue
            target = new + key[len(old):]
            x.add("legacy_unread", "warn", "%s=%s is a legacy key verl's main_ppo of this release never reads (kept "
                  "in legacy_reward_impl.yaml for the fully-async entry point): the job runs without it, silently"
                  % (key, v), "set %s=%s instead (and drop %s)" % (target, v, key), item=key.replace(".", "_"),
                  key=key, reads=target, alts=[{target: v, key: None}])
