"""Rules against the machine and the model: visible GPUs, GPU memory, host memory."""

import math
from typing import Any, Callable, Dict, List, Optional, Tuple
from ...hw import visible_devices
from ..model import ModelFacts
from .table import load_rules
from .values import Values
from .arith import nearest, divisors
from .context import RuleContext


def visible_gpus(nvml: Dict[str, Any], env: Dict[str, str]) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """(the GPUs a job on this machine sees, how counted), or (None, why unknown).

    NVML lists every GPU; CUDA_VISIBLE_DEVICES (indices or UUIDs) narrows what CUDA, Ray and
    so verl see. ``env`` is the launch's environment (its own assignments over the checker's).
    """
    if not isinstance(nvml, dict) or nvml.get("error") or "devices" not in nvml:
        err = (nvml or {}).get("error") or {}
        return None, "NVML: %s" % (err.get("message") or err.get("kind") or "no answer")
    devs = [d for d in nvml.get("devices") or [] if not d.get("error")]
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return devs, "%d GPU(s) seen by NVML, CUDA_VISIBLE_DEVICES unset" % len(devs)
    picked = visible_devices(devs, cvd)
    return picked, "CUDA_VISIBLE_DEVICES=%r leaves %d of %d GPU(s)" % (cvd, len(picked), len(devs))


def model_rules(x: RuleContext, v: Values, model: Optional[ModelFacts], why: str) -> None:
    """Rules ``ulysses_heads`` and ``max_position`` against the model's facts; with no model, each is a SKIP saying
    ``why``."""
    if model is None:
        if why.endswith(" has no config.json"):  # a local directory that is not a model: verl's load fails
            x.add("model_path", "fail", "%s: verl loads the model's config and tokenizer from it (transformers' "
                  "AutoConfig / AutoTokenizer) and stops there" % why,
                  "point actor_rollout_ref.model.path at the directory that holds the checkpoint's config.json (a "
                  "Hugging Face model directory: config.json, tokenizer files, weights), or at a hub id")
        for rule in ("ulysses_heads", "max_position"):
            if rule == "ulysses_heads" and v.sp <= 1 and v.critic_sp <= 1:
                x.add(rule, "pass", "Ulysses sequence parallel is off (size 1)")
                continue
            x.add(rule, "skip", "model config not read: %s" % why)
        return
    sps = [("actor", v.sp)] + ([("critic", v.critic_sp)] if v.use_critic else [])
    if all(sp <= 1 for _, sp in sps):
        x.add("ulysses_heads", "pass", "Ulysses sequence parallel is off (size 1)")
    for role, sp in sps:
        if sp <= 1 or model.heads is None:
            continue
        bad = model.heads % sp != 0
        kv_bad = bool(x.rs.get("ulysses_kv_heads")) and model.kv_heads is not None and (
            model.kv_heads % sp != 0 and sp % model.kv_heads != 0)
        ok = [d for d in divisors(model.heads) if v.world % d == 0 and (
            not x.rs.get("ulysses_kv_heads") or not model.kv_heads or model.kv_heads % d == 0 or d % model.kv_heads == 0)]
        if bad or kv_bad:
            ukey = "critic.ulysses_sequence_parallel_size" if role == "critic" else \
                "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
            x.add("ulysses_heads", "fail", "%s: Ulysses size %d vs %d attention heads / %s KV heads (%s)" % (
                role, sp, model.heads, model.kv_heads, model.path),
                item=role, heads=model.heads, kv_heads=model.kv_heads, sp=sp,
                alts=[{ukey: d} for d in nearest(ok, sp)], fix_key=ukey)
        else:
            x.add("ulysses_heads", "pass", "%s: Ulysses size %d divides %d heads" % (role, sp, model.heads), item=role)
    mp = model.max_position_embeddings
    if mp is None or v.prompt_length is None or v.response_length is None:
        x.add("max_position", "skip", "max_position_embeddings or prompt/response length unknown")
        return
    total = v.prompt_length + v.response_length
    if v.max_model_len is not None and v.max_model_len > mp:
        x.add("max_position", "fail", "rollout.max_model_len %d > max_position_embeddings %d (%s)" % (
            v.max_model_len, mp, model.path), "set actor_rollout_ref.rollout.max_model_len=%d or leave it null" % mp,
            alts=[{"actor_rollout_ref.rollout.max_model_len": mp}])
        return
    limit = v.max_model_len or mp
    if total <= limit:
        x.add("max_position", "pass", "prompt %d + response %d = %d <= %d" % (v.prompt_length, v.response_length,
                                                                             total, limit))
    elif x.rs["max_position"] == "assert" or v.prompt_length >= limit:
        x.add("max_position", "fail", "prompt %d + response %d = %d > %s %d" % (
            v.prompt_length, v.response_length, total, "max_model_len" if v.max_model_len else
            "max_position_embeddings", limit),
            "set data.max_response_length=%d (or shorten data.max_prompt_length)" % (limit - v.prompt_length)
            if v.prompt_length < limit else
            "the prompt alone fills the limit: set data.max_prompt_length=%d data.max_response_length=%d" % (
                limit // 2, limit - limit // 2),
            limit=limit, alts=[{"data.max_response_length": limit - v.prompt_length}]
            if v.prompt_length < limit else [{"data.max_prompt_length": limit // 2,
                                              "data.max_response_length": limit - limit // 2}])
    else:
        x.add("max_position", "warn", "prompt %d + response %d = %d > %d: long prompts get their responses cut to "
              "what is left" % (v.prompt_length, v.response_length, total, limit),
              "set data.max_response_length=%d (or shorten data.max_prompt_length)" % (limit - v.prompt_length),
              silent=True, limit=limit, alts=[{"data.max_response_length": limit - v.prompt_length}])


def machine_rules(x: RuleContext, v: Values, machine: Dict[str, Any], model: Optional[ModelFacts],
             get: Callable[[str, Any], Any]) -> None:
    """Rules ``gpus_present``, ``gpu_memory``, ``host_memory`` and ``ray_num_cpus`` against ``machine`` (``nvml``,
    ``host``, ``env`` dicts) and the config's ``get``."""
    from .. import model_rules as mr

    env = dict(machine.get("env") or {})
    gpus, how = visible_gpus(machine.get("nvml") or {}, env)
    if gpus is None or (not gpus and "CUDA_VISIBLE_DEVICES" not in env):
        reason = "no NVIDIA GPU on this machine (%s); run this on a training node to compare" % how
        attached = machine.get("attached")
        if not mr.launch_gpus(x, v, env if machine.get("job_env") else machine.get("launch_env") or {},
                              machine.get("cvd_source"), attached):
            x.add("gpus_present", "skip", reason + ("; CUDA_VISIBLE_DEVICES of the driver is not counted: %s" %
                                                    attached if attached and "CUDA_VISIBLE_DEVICES" in env else ""))
        # host memory and CPUs are judged only on a machine that can be a training node
        x.add("host_memory", "skip", reason)
        x.add("ray_num_cpus", "skip", reason)
        x.add("gpu_memory", "skip", reason)
    else:
        mr.compute_capability(x, v, get, gpus[:v.gpn] if v.gpn > 0 else gpus)
        if v.gpn > len(gpus):
            x.add("gpus_present", "fail", "trainer.n_gpus_per_node=%d but this node has %d usable GPU(s): %s" % (
                v.gpn, len(gpus), how), "set trainer.n_gpus_per_node=%d%s" % (
                    len(gpus), " or widen CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in env else ""),
                asked=v.gpn, present=len(gpus), nnodes=v.nnodes,
                alts=[{"trainer.n_gpus_per_node": len(gpus)}] if gpus else [])
        else:
            x.add("gpus_present", "pass", "n_gpus_per_node %d of %d usable GPU(s) on this node (%s)%s" % (
                v.gpn, len(gpus), how, "; %d more node(s) needed" % (v.nnodes - 1) if v.nnodes > 1 else ""))
        used = gpus[:v.gpn]
        if v.gpu_mem_util is None or v.rollout_name not in ("vllm", "sglang"):
            x.add("gpu_memory", "skip", "no vLLM/SGLang rollout memory fraction to compare")
        else:
            short = []
            for d in used:
                tot, usd = d.get("memory_total_mib"), d.get("memory_used_mib")
                if tot is None or usd is None:
                    continue
                need = v.gpu_mem_util * tot
                if tot - usd < need:
                    short.append((d.get("index"), tot, usd, need))
            if short:
                idx, tot, usd, need = short[0]
                fit = math.floor((tot - usd) / tot * 100) / 100 - 0.02
                x.add("gpu_memory", "fail", "GPU %s: %.1f GiB free, vLLM wants %.2f x %.1f GiB = %.1f GiB (%d GPU(s) "
                      "short)" % (idx, (tot - usd) / 1024, v.gpu_mem_util, tot / 1024, need / 1024, len(short)),
                      "stop the other processes on GPU %s, or set actor_rollout_ref.rollout.gpu_memory_utilization=%.2f"
                      % (", ".join(str(s[0]) for s in short), max(0.05, fit)),
                      gpus=[{"index": s[0], "total_mib": s[1], "used_mib": s[2], "need_mib": round(s[3])} for s in short],
                      alts=[{"actor_rollout_ref.rollout.gpu_memory_utilization": round(max(0.05, fit), 2)}])
            else:
                x.add("gpu_memory", "pass", "gpu_memory_utilization %.2f fits the free memory of %d GPU(s)" % (
                    v.gpu_mem_util, len(used)))
        mr.host_memory(x, v, machine, model, load_rules().get("estimates", {}))
        mr.ray_num_cpus(x, get, machine.get("host") or {})
