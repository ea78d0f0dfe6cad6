"""The variables the job inherits, against the installed packages' own tables.

The job's environment is this shell's, then the launch line's ``VAR=value`` words, then what the
wrapper adds (a Ray runtime_env's env_vars, a script's exports); Ray passes it to its workers.
Rows: ``env.alloc_conf`` (expandable segments vs vLLM's sleep-mode allocator),
``env.vllm_attention_backend`` (the value vs the installed vLLM's backend enum),
``env.vllm_unknown`` (VLLM_* names the installed vLLM's envs.py does not read), ``env.ray_address``.
"""

import os
from typing import Any, Dict, List

from ..rules import Finding

__all__ = ["job_env", "check"]


def job_env(launch_env: Dict[str, str], wrapper: Any) -> Dict[str, str]:
    """The environment the job's processes start with (see the module doc)."""
    env = dict(os.environ)
    env.update(launch_env or {})
    if wrapper is not None:
        env.update(wrapper.env)
    return env


def _b(v: Any) -> bool:
    return v is True or str(v).lower() in ("true", "1", "yes")


def _alloc(get: Any, env: Dict[str, str], facts: Dict[str, Any]) -> List[Finding]:
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + env.get("PYTORCH_ALLOC_CONF", "")
    if "expandable_segments:true" not in conf.replace(" ", "").lower():
        return []
    name = str(get("actor_rollout_ref.rollout.name", "") or "")
    sleep = _b(get("actor_rollout_ref.rollout.free_cache_engine", True)) or \
        _b(get("actor_rollout_ref.rollout.enable_sleep_mode", False))
    v = facts.get("vllm") or {}
    ev = {"PYTORCH_CUDA_ALLOC_CONF": env.get("PYTORCH_CUDA_ALLOC_CONF"), "rollout": name, "sleep_mode": sleep,
          "vllm": v.get("version"), "cumem_refuses_expandable": v.get("cumem_refuses_expandable")}
    if name != "vllm" or not sleep:
        return [Finding("env", "pass", "PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True; the rollout (%s, sleep "
                        "mode %s) does not use vLLM's memory pool" % (name or "?", "on" if sleep else "off"), item="alloc_conf",
                        evidence=ev)]
    if v.get("cumem_refuses_expandable") is False:
        return [Finding("env", "pass", "expandable_segments:True: the installed vLLM %s's cumem allocator does not "
                        "refuse it" % v.get("version"), item="alloc_conf", evidence=ev)]
    where = "the installed vLLM %s (vllm/device_allocator/cumem.py)" % v["version"] if v.get("version") else \
        "vLLM's CuMemAllocator (vllm/device_allocator/cumem.py, vLLM >= 0.7.3; vLLM is not installed in the target)"
    return [Finding("env", "fail", "PYTORCH_CUDA_ALLOC_CONF=%s reaches the rollout workers, and %s asserts that "
                    "expandable_segments:True is off when the vLLM rollout sleeps between steps "
                    "(actor_rollout_ref.rollout.free_cache_engine=True): 'Expandable segments are not compatible "
                    "with memory pool' at engine start" % (env.get("PYTORCH_CUDA_ALLOC_CONF"), where),
                    "unset PYTORCH_CUDA_ALLOC_CONF for the job (verl >= 0.6 switches expandable segments on for "
                    "training itself), or drop expandable_segments:True from it", item="alloc_conf",
                    stops="AssertionError in CuMemAllocator when the vLLM engine starts, after the models loaded",
                    evidence=ev)]


def _backend(env: Dict[str, str], facts: Dict[str, Any], get: Any) -> List[Finding]:
    value = env.get("VLLM_ATTENTION_BACKEND")
    if value is None:
        return []
    v = facts.get("vllm") or {}
    ev = {"value": value, "vllm": v.get("version"), "backends": v.get("backends"), "source": v.get("backend_source")}
    if str(get("actor_rollout_ref.rollout.name", "vllm") or "vllm") != "vllm":
        return [Finding("env", "pass", "VLLM_ATTENTION_BACKEND=%s is set; the rollout is not vLLM" % value,
                        item="vllm_attention_backend", evidence=ev)]
    if not v.get("version"):
        return [Finding("env", "skip", "VLLM_ATTENTION_BACKEND=%s not checked: vLLM is not installed in the target "
                        "(its backend enum is read from the installed package)" % value, item="vllm_attention_backend",
                        evidence=ev)]
    if v.get("reads_attention_env") is False:
        return [Finding("env", "warn", "VLLM_ATTENTION_BACKEND=%s is not read by the installed vLLM %s (its envs.py "
                        "does not list it): the setting does nothing" % (value, v["version"]),
                        "drop VLLM_ATTENTION_BACKEND and give the engine argument instead: "
                        "+actor_rollout_ref.rollout.engine_kwargs.vllm.attention_backend=NAME (one of %s)" % ", ".join(
                            (v.get("backends") or [])[:12] or ["the installed vLLM's names"]),
                        item="vllm_attention_backend", evidence=ev)]
    names = v.get("backends") or []
    if not names:
        return [Finding("env", "skip", "VLLM_ATTENTION_BACKEND=%s not checked: the installed vLLM %s's backend enum "
                        "was not found" % (value, v["version"]), item="vllm_attention_backend", evidence=ev)]
    if value.upper() in names or value in names:
        return [Finding("env", "pass", "VLLM_ATTENTION_BACKEND=%s is a backend of the installed vLLM %s" % (
            value, v["version"]), item="vllm_attention_backend", evidence=ev)]
    return [Finding("env", "fail", "VLLM_ATTENTION_BACKEND=%s is not an attention backend of the installed vLLM %s "
                    "(%s: %s)" % (value, v["version"], v.get("backend_source"), ", ".join(names)),
                    "unset VLLM_ATTENTION_BACKEND (vLLM picks one), or set it to one of: %s" % ", ".join(names),
                    item="vllm_attention_backend", evidence=ev,
                    stops="vLLM refuses the name when the rollout engine starts, after Ray and the models are up")]


def _unknown(env: Dict[str, str], facts: Dict[str, Any]) -> List[Finding]:
    v = facts.get("vllm") or {}
    known = set(v.get("env_names") or [])
    if not known:
        return []
    own = {"VLLM_ATTENTION_BACKEND"}
    odd = sorted(k for k in env if k.startswith("VLLM_") and k not in known and k not in own)
    if not odd:
        return []
    return [Finding("env", "warn", "%s: not variable(s) the installed vLLM %s reads (vllm/envs.py): a typo, or "
                    "removed in this release, so the setting does nothing" % (", ".join(odd), v.get("version")),
                    "remove %s, or spell it as vllm/envs.py of this release does" % ", ".join(odd),
                    item="vllm_unknown", evidence={"names": odd, "vllm": v.get("version")})]


def _ray_address(env: Dict[str, str], wrapper: Any) -> List[Finding]:
    addr = env.get("RAY_ADDRESS")
    if not addr or (wrapper is not None and wrapper.kind and "ray job submit" in wrapper.kind):
        return []
    return [Finding("env", "warn", "RAY_ADDRESS=%s: verl's ray.init() attaches to that cluster instead of starting "
                    "one; a dead address or a cluster started by another environment fails or hangs at start" % addr,
                    "check it first: preflight cluster --address %s -- <overrides> (or unset RAY_ADDRESS for a "
                    "local cluster)" % addr, item="ray_address", evidence={"RAY_ADDRESS": addr})]


def check(get: Any, env: Dict[str, str], wrapper: Any, facts: Dict[str, Any]) -> List[Finding]:
    """The env rows (see the module doc)."""
    return _alloc(get, env, facts) + _backend(env, facts, get) + _unknown(env, facts) + _ray_address(env, wrapper)
