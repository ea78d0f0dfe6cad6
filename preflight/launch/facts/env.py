"""The variables the job inherits, against the installed packages' own tables.

The job's environment is this shell's, then the launch line's ``VAR=value`` words, then what the
wrapper adds (a Ray runtime_env's env_vars, a script's exports); Ray passes it to its workers.
Rows: ``env.alloc_conf`` (expandable segments vs vLLM's sleep-mode allocator),
``env.vllm_attention_backend`` (the value vs the installed vLLM's backend enum),
``env.vllm_unknown`` (VLLM_* names the installed vLLM's envs.py does not read),
``env.vllm_value.<NAME>`` (each VLLM_* value the installed vLLM's own getter in vllm/envs.py rejects:
its EngineCore reads every variable at start), ``env.alloc_parse.<NAME>`` (PYTORCH_CUDA_ALLOC_CONF,
PYTORCH_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF through the installed torch's own parser), ``env.ray_address``.
"""

import os
from typing import Any, Dict, List

from ...redact import collect_environ
from ..rules import Finding
from .probe import ALLOC_VARS

__all__ = ["job_env", "check"]


def job_env(launch_env: Dict[str, str], wrapper: Any) -> Dict[str, str]:
    """The environment the job's processes start with (see the module doc)."""
    env = dict(os.environ)
    env.update(launch_env or {})
    if wrapper is not None:
        env.update(wrapper.env)
        collect_environ(wrapper.env)  # a wrapper's secret-named exports: masked wherever their values show
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


def source(name: str, env: Dict[str, str], wrapper: Any) -> str:
    """Where the job's ``name`` comes from: the wrapper (a runtime_env, a script), the launch line,
    or this shell's environment."""
    if wrapper is not None and name in wrapper.env:
        return "set by the %s" % (wrapper.kind or "wrapper")
    if os.environ.get(name) == env.get(name):
        return "inherited from this shell's environment"
    return "set in the launch line"


def _vllm_values(env: Dict[str, str], facts: Dict[str, Any], get: Any, wrapper: Any) -> List[Finding]:
    ve = facts.get("vllm_env") or {}
    version = (facts.get("vllm") or {}).get("version")
    rollout = str(get("actor_rollout_ref.rollout.name", "vllm") or "vllm")
    out: List[Finding] = []
    if ve.get("error"):
        names = sorted(k for k in env if k.startswith("VLLM_"))
        return [Finding("env", "skip", "%s not checked: the installed vLLM %s's vllm/envs.py could not be loaded on "
                        "its own (%s)" % (", ".join(names), version, ve["error"]), item="vllm_value",
                        evidence={"names": names, "error": ve["error"]})]
    for name, r in sorted((ve.get("rejected") or {}).items()):
        value = env.get(name)
        choices = r.get("choices") or []
        ev = {"value": value, "vllm": version, "error": r.get("error"), "where": r.get("where"),
              "defined": r.get("defined"), "choices": choices or None, "source": source(name, env, wrapper),
              "engine_reads_all": ve.get("engine_reads_all")}
        fix = "set %s to one of: %s, or unset it" % (name, ", ".join(choices)) if choices else \
            "give %s a value vLLM %s accepts (see %s), or unset it" % (name, version or "", r.get("defined") or
                                                                      "vllm/envs.py")
        msg = "%s=%s (%s) is rejected by the installed vLLM %s's own getter (%s%s): %s" % (
            name, value, ev["source"], version, r.get("defined") or "vllm/envs.py",
            ", raised at %s" % r["where"] if r.get("where") else "", r.get("error"))
        if rollout != "vllm":
            out.append(Finding("env", "warn", msg + "; the rollout is %s, so only code that reads it through vLLM "
                               "stops" % rollout, fix, item="vllm_value.%s" % name, evidence=ev))
            continue
        stops = "%s when vLLM's EngineCore starts (%s: enable_envs_cache() reads every variable), after Ray and " \
            "the models are up" % ((r.get("error") or "").split(":")[0] or "an error", ve["engine_reads_all"]) \
            if ve.get("engine_reads_all") else "when vLLM first reads %s in the rollout" % name
        out.append(Finding("env", "fail", msg, fix, item="vllm_value.%s" % name, evidence=ev, stops=stops))
    return out


def _alloc_parse(env: Dict[str, str], facts: Dict[str, Any], wrapper: Any) -> List[Finding]:
    a = facts.get("alloc")
    if not a:
        names = [n for n in ALLOC_VARS if n in env]
        probe = facts.get("_probe") or {}
        if names and probe and not probe.get("ok"):
            return [Finding("env", "skip", "%s not parsed by the installed torch: the probe did not finish (%s)" % (
                ", ".join(names), probe.get("describe")), item="alloc_parse", evidence={"names": names})]
        return []
    out: List[Finding] = []
    read = a.get("read") or []
    for name, r in sorted((a.get("rejected") or {}).items()):
        ev = {"value": r.get("value"), "torch": a.get("torch"), "parser": a.get("parser"), "error": r.get("error"),
              "source": source(name, env, wrapper)}
        out.append(Finding("env", "fail", "%s=%s (%s) is rejected by the installed torch %s's allocator-config "
                           "parser (%s): %s" % (name, r.get("value"), ev["source"], a.get("torch"), a.get("parser"),
                                                r.get("error")),
                           "fix the value of %s (comma-separated key:value pairs torch %s accepts), or unset it" % (
                               name, a.get("torch")), item="alloc_parse.%s" % name, evidence=ev,
                           stops="the same error at the first CUDA allocation in each worker (torch parses %s "
                                 "lazily), after Ray started" % name))
    for name in a.get("accepted") or []:
        out.append(Finding("env", "pass", "%s=%s is accepted by the installed torch %s's parser (%s)" % (
            name, env.get(name), a.get("torch"), a.get("parser")), item="alloc_parse.%s" % name,
            evidence={"torch": a.get("torch"), "parser": a.get("parser")}))
    unread = [n for n in ALLOC_VARS if n in env and read and n not in read]
    for name in unread:
        out.append(Finding("env", "warn", "%s is set but the installed torch %s does not read it (its libc10 has no "
                           "such name): the setting does nothing" % (name, a.get("torch")),
                           "use %s instead" % " or ".join(read), item="alloc_parse.%s" % name,
                           evidence={"torch": a.get("torch"), "read": read}))
    if a.get("error") or (a.get("torch") and a.get("parser") is None and "parser" in a):
        names = [n for n in env if n in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")]
        out.append(Finding("env", "skip", "%s not parsed: %s" % (", ".join(names), a.get("error") or
                                                                 "the installed torch %s has no allocator-config "
                                                                 "parser this checker knows" % a.get("torch")),
                           item="alloc_parse", evidence={"torch": a.get("torch")}))
    return out


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
    return _alloc(get, env, facts) + _alloc_parse(env, facts, wrapper) + _backend(env, facts, get) + \
        _unknown(env, facts) + _vllm_values(env, facts, get, wrapper) + _ray_address(env, wrapper)
