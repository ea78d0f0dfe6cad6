"""Launch rules that need the model, the machine or several keys at once.

Called by :func:`preflight.launch.rules.evaluate` with its context; each adds findings whose
fixes carry their overrides (``alts``), so :mod:`preflight.launch.fixes` can re-check them.

* token budgets of dynamic batch size x Ulysses size vs prompt + response (failure_cases_2 #34);
* ``auto_map`` (custom code) vs the ``trust_remote_code`` keys of every role that loads the model (#42);
* compute capability < 8.0 with bf16 or FlashAttention 2 (failure_cases #11);
* LoRA ``target_modules`` vs the model's module names (safetensors index or header);
* host memory for the node's Ray workers and FSDP offload (failure_cases #22);
* GPUs named by ``CUDA_VISIBLE_DEVICES`` in the launch line when NVML cannot count them;
* Ray's ``num_cpus`` when CPU affinity or a cgroup quota limits the CPUs (failure_cases #21).
"""

import os
import re
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..paths import loads_json
from ..shell import override, overrides
from ..hw import visible_entries
from .interpolation import reference_of
from .model import ModelFacts

__all__ = ["token_budgets", "trust_remote_code", "compute_capability", "lora_modules", "host_memory",
           "launch_gpus", "ray_num_cpus", "module_names", "safetensors_names", "lora_targets", "meta_module_names",
           "needs_meta_probe"]

Get = Callable[[str, Any], Any]
_MISSING = object()


def _b(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def _i(v: Any) -> Optional[int]:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def _has(get: Get, key: str) -> bool:
    return get(key, _MISSING) is not _MISSING


def _interp_of(raw: Optional[Get], key: str) -> Optional[str]:
    """The dotted key that ``key``'s unresolved value interpolates (``${a.b}``,
    ``${oc.select:a.b,default}``), or None."""
    return reference_of(raw(key, None), key) if raw is not None else None


# ---- token budgets (case 34) -----------------------------------------------------------------
def token_budgets(x: Any, v: Any, get: Get, raw: Optional[Get]) -> None:
    """Dynamic batch size: each role's ``*_max_token_len_per_gpu x Ulysses size`` must hold
    ``data.max_prompt_length + data.max_response_length`` tokens (verl's rearrange_micro_batches
    asserts it). Budgets that interpolate the actor's are one finding with the actor's fix."""
    a, r = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout."
    plen = _i(get("data.max_prompt_length", None))
    rlen = _i(get("data.max_response_length", None))
    if plen is None or rlen is None:
        plen, rlen = v.prompt_length, v.response_length
    if plen is None or rlen is None:
        x.add("token_budget", "skip", "prompt or response length unknown")
        return
    need = plen + rlen
    ref_sp = _i(get("actor_rollout_ref.ref.ulysses_sequence_parallel_size", None)) or v.sp
    roles: List[Tuple[str, str, bool, int]] = []
    if v.dyn:
        roles.append(("actor", a + "ppo_max_token_len_per_gpu", True, v.sp))
    if _b(get(r + "log_prob_use_dynamic_bsz", False)):
        roles.append(("rollout", r + "log_prob_max_token_len_per_gpu", True, v.sp))
    if v.use_ref and _b(get("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", False)):
        roles.append(("ref", "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", True, ref_sp))
    if v.use_critic and v.critic_dyn:
        roles.append(("critic", "critic.ppo_max_token_len_per_gpu", True, v.critic_sp))
        if _has(get, "critic.forward_max_token_len_per_gpu"):
            roles.append(("critic forward", "critic.forward_max_token_len_per_gpu", True, v.critic_sp))
    if not roles:
        x.add("token_budget", "pass", "dynamic batch size is off: micro-batches are counted in sequences")
        return
    groups: Dict[str, List[Tuple[str, str, int, int]]] = {}
    for role, key, _on, sp in roles:
        budget = _i(get(key, None))
        if budget is None:
            continue
        sp = max(1, sp)
        if budget * sp >= need:
            x.add("token_budget", "pass", "%s: %s %d x Ulysses %d >= prompt %d + response %d" % (
                role, key.rsplit(".", 1)[-1], budget, sp, plen, rlen), item=role.replace(" ", "_"))
            continue
        # the key whose value this budget takes (its interpolation chain), so one fix covers it
        root, seen = key, set()
        while True:
            t = _interp_of(raw, root)
            if t is None or t in seen:
                break
            seen.add(t)
            root = t
        groups.setdefault(root, []).append((role, key, budget, sp))
    for root, items in groups.items():
        sp = max(s for _r, _k, _b2, s in items)
        smallest = -(-need // min(s for _r, _k, _b2, s in items))
        names = ", ".join(r for r, _k, _b2, _s in items)
        keys = [k for _r, k, _b2, _s in items]
        shown = "; ".join("%s %d x Ulysses %d = %d" % (k, b, s, b * s) for _r, k, b, s in items)
        via = "" if all(k == root for k in keys) else " (they take %s by interpolation)" % root
        x.add("token_budget", "fail", "%s: dynamic batch token budget below prompt %d + response %d = %d tokens: "
              "%s%s" % (names, plen, rlen, need, shown, via),
              "set %s=%d (the smallest that holds one full sequence; GPU memory grows with the budget)" % (
                  root, smallest), item=items[0][0].replace(" ", "_"),
              alts=[{root: smallest}], need=need, budgets={k: b for _r, k, b, _s in items}, ulysses=sp)


# ---- trust_remote_code (case 42) -------------------------------------------------------------
def trust_remote_code(x: Any, v: Any, get: Get, model: Optional[ModelFacts]) -> None:
    """A model with ``auto_map`` needs ``trust_remote_code=True`` on every role that loads it:
    the actor/rollout/ref model, the dataset's tokenizer, and the critic and reward model when
    they load the same path. One finding names every key that is false."""
    if model is None:
        x.add("trust_remote_code", "skip", "model config not read")
        return
    if not model.auto_map:
        x.add("trust_remote_code", "pass", "no auto_map in %s: transformers' own classes load it" % os.path.basename(
            model.directory))
        return
    path = get("actor_rollout_ref.model.path", None)
    keys = ["actor_rollout_ref.model.trust_remote_code", "data.trust_remote_code"]
    if v.use_critic and get("critic.model.path", None) in (path, None, "???"):
        keys.append("critic.model.trust_remote_code")
    for rm in ("reward.reward_model", "reward_model"):
        if _b(get(rm + ".enable", False)):
            rpath = get(rm + ".model.path", get(rm + ".model_path", None))
            if rpath == path:
                keys.append(rm + ".model.trust_remote_code")
    present = [k for k in keys if _has(get, k)]
    off = [k for k in present if not _b(get(k, False))]
    where = "; ".join("%s maps %s" % (f, ", ".join(sorted(m)[:3])) for f, m in sorted(model.auto_map.items()))
    if not off:
        x.add("trust_remote_code", "pass", "custom code (%s) and %s are True" % (where, ", ".join(present)))
        return
    x.add("trust_remote_code", "fail", "the model has custom code (%s) but %s %s False: transformers refuses to "
          "load it" % (where, ", ".join(off), "is" if len(off) == 1 else "are"),
          "set %s (only for a model whose code you trust)" % " ".join("%s=True" % k for k in off),
          alts=[{k: True for k in off}], keys=off, auto_map=model.auto_map)


# ---- compute capability (case 11) ------------------------------------------------------------
_BF16 = ("bfloat16", "bf16")
_DTYPE_KEYS = ("actor_rollout_ref.rollout.dtype", "actor_rollout_ref.actor.fsdp_config.dtype",
               "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype",
               "actor_rollout_ref.ref.fsdp_config.dtype", "actor_rollout_ref.actor.megatron.dtype")
_CRITIC_DTYPE_KEYS = ("critic.fsdp.dtype", "critic.model.fsdp_config.mixed_precision.param_dtype",
                      "critic.megatron.dtype")
_ATTN_KEYS = ("actor_rollout_ref.model.override_config.attn_implementation",
              "critic.model.override_config.attn_implementation")


def compute_capability(x: Any, v: Any, get: Get, gpus: Optional[List[Dict[str, Any]]]) -> None:
    """GPUs below compute capability 8.0 (V100 7.0, T4 7.5) with bf16 or FlashAttention 2
    (``use_remove_padding=True`` or ``attn_implementation=flash_attention_2``)."""
    if not gpus:
        return
    def cc(d: Dict[str, Any]) -> Optional[Tuple[int, int]]:
        m = re.match(r"^(\d+)\.(\d+)$", str(d.get("capability") or ""))
        return (int(m.group(1)), int(m.group(2))) if m else None

    ccs = [c for c in (cc(d) for d in gpus) if c is not None]
    if not ccs:
        x.add("compute_capability", "skip", "NVML gave no compute capability")
        return
    low = min(ccs)
    name = next((d.get("name") for d in gpus if cc(d) == low), None) or "GPU"
    if low >= (8, 0):
        x.add("compute_capability", "pass", "compute capability %d.%d: bf16 and FlashAttention 2 run" % low)
        return
    keys = list(_DTYPE_KEYS) + (list(_CRITIC_DTYPE_KEYS) if v.use_critic else [])
    bf16 = [k for k in keys if str(get(k, "") or "").lower() in _BF16]
    flash = []
    if v.remove_padding:
        flash.append("actor_rollout_ref.model.use_remove_padding")
    if v.use_critic and _b(get("critic.model.use_remove_padding", False)):
        flash.append("critic.model.use_remove_padding")
    flash += [k for k in _ATTN_KEYS if str(get(k, "") or "") == "flash_attention_2"]
    if not bf16 and not flash:
        x.add("compute_capability", "pass", "%s (compute capability %d.%d): no bf16 or FlashAttention 2 in the "
              "config" % ((name,) + low))
        return
    alt: Dict[str, Any] = {k: "float16" if not k.endswith("param_dtype") else "fp16" for k in bf16}
    for k in flash:
        alt[k] = False if k.endswith("use_remove_padding") else "sdpa"
    # Ulysses sequence parallel needs the padding-free (FlashAttention) path: it goes too
    if "actor_rollout_ref.model.use_remove_padding" in flash and v.sp > 1:
        for k in ("actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                  "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size"):
            if (_i(get(k, None)) or 1) > 1:
                alt[k] = 1
    if "critic.model.use_remove_padding" in flash and v.critic_sp > 1:
        for k in ("critic.ulysses_sequence_parallel_size", "critic.model.fsdp_config.ulysses_sequence_parallel_size",
                  "critic.fsdp.ulysses_sequence_parallel_size"):
            if (_i(get(k, None)) or 1) > 1:
                alt[k] = 1
    parts = []
    if bf16:
        parts.append("bf16 (%s)" % ", ".join(bf16))
    if flash:
        parts.append("FlashAttention 2 (%s)" % ", ".join(flash))
    x.add("compute_capability", "fail", "%s has compute capability %d.%d but the config uses %s, which need >= 8.0" % (
        (name,) + low + (" and ".join(parts),)),
          "set %s (fp16 and SDPA attention), or run on an Ampere or newer GPU" % overrides(
              {k: "False" if val is False else val for k, val in alt.items()}),
          alts=[alt], compute_capability="%d.%d" % low, bf16_keys=bf16, flash_keys=flash)


# ---- LoRA target modules ---------------------------------------------------------------------
def safetensors_names(path: str, limit: int = 100 * 1024 * 1024) -> Optional[List[str]]:
    """Tensor names in a ``.safetensors`` file's header (8-byte little-endian length, then a JSON
    object of name -> {dtype, shape, data_offsets}); None when it is not one."""
    from .model import read_head

    try:
        first = read_head(path, 8)  # never blocks: a FIFO or a device is refused, not waited on
        n = struct.unpack("<Q", first)[0]
        if n <= 0 or n > limit:
            return None
        head = loads_json(read_head(path, 8 + n)[8:], path)
    except (OSError, ValueError, struct.error, UnicodeDecodeError, RecursionError):
        return None
    return sorted(k for k in head if k != "__metadata__") if isinstance(head, dict) else None


def module_names(model: ModelFacts) -> Tuple[Optional[List[str]], str]:
    """(module names that hold parameters, where they came from): from the safetensors index's
    weight_map, else the header of ``model.safetensors``; parameter names lose their last part
    (``model.layers.0.self_attn.q_proj.weight`` -> ``model.layers.0.self_attn.q_proj``)."""
    names, src = model.weight_names, model.weights_from
    if names is None:
        single = os.path.join(model.directory, "model.safetensors")
        names = safetensors_names(single) if os.path.isfile(single) else None
        src = "model.safetensors header" if names is not None else ""
    if names is None:
        return None, ""
    return sorted({n.rsplit(".", 1)[0] for n in names if "." in n}), src


def meta_module_names(python: str, model: ModelFacts, trust_remote_code: bool = False,
                      timeout: float = 120.0) -> Tuple[Optional[List[str]], str]:
    """(module names, source) from the architecture built on the meta device in the target
    (``preflight/target/model_modules.py``: transformers' AutoModelForCausalLM.from_config under
    ``torch.device("meta")``, offline); (None, why) when torch/transformers are missing or it fails."""
    from ..probes.process import run_script

    out = run_script(python, "model_modules", {"path": os.path.abspath(model.directory), "trust_remote_code": trust_remote_code},
                     timeout=timeout)
    got = out.last("modules")
    if got is not None:
        return list(got.get("names") or []), "%s built on the meta device" % got.get("cls")
    miss = out.last("missing")
    if miss is not None:
        return None, "the target cannot import torch/transformers (%s)" % miss.get("error")
    err = out.last("error")
    if err is not None:
        return None, "building the architecture failed: %s: %s" % (err.get("error_type"), err.get("error"))
    return None, "the module probe did not finish: %s" % out.describe()


def lora_targets(value: Any) -> Optional[List[str]]:
    """target_modules as a list of names (a comma-separated string is split); None for
    ``all-linear`` (every linear layer) or an unset value."""
    if value is None or value == "all-linear":
        return None
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)):
        return [str(t) for t in value]
    return None


def lora_modules(x: Any, v: Any, get: Get, model: Optional[ModelFacts],
                 names: Optional[Tuple[Optional[List[str]], str]] = None) -> None:
    """LoRA (``actor_rollout_ref.model.lora_rank`` > 0): every ``target_modules`` entry must
    match a module (PEFT's rule: the module name equals the target or ends in ``.<target>``).
    ``names`` overrides where module names come from (the meta-device probe)."""
    rank = _i(get("actor_rollout_ref.model.lora_rank", 0)) or 0
    if rank <= 0:
        return
    key = "actor_rollout_ref.model.target_modules"
    targets = lora_targets(get(key, None))
    if targets is None:
        x.add("lora_modules", "pass", "LoRA rank %d on all-linear layers" % rank)
        return
    if model is None:
        x.add("lora_modules", "skip", "LoRA target_modules not checked: model config not read")
        return
    mods, src = module_names(model)
    if not mods and names is not None:
        mods, src = names
    if not mods:
        x.add("lora_modules", "skip", "LoRA target_modules not checked: no safetensors index or header in %s%s" % (
            model.directory, "; %s" % src if src else ""))
        return
    leaves = sorted({m.rsplit(".", 1)[-1] for m in mods})
    missing = [t for t in targets if not any(m == t or m.endswith("." + t) for m in mods)]
    if not missing:
        x.add("lora_modules", "pass", "LoRA target_modules %s all exist (%s)" % (", ".join(targets), src))
        return
    linear_like = [n for n in leaves if n.endswith("proj") or n in ("qkv", "fc1", "fc2", "dense", "query_key_value")]
    keep = [t for t in targets if t not in missing]
    fix_list = keep or linear_like[:7]
    alts: List[Dict[str, Any]] = [{key: list(fix_list)}] if fix_list else [{key: "all-linear"}]
    x.add("lora_modules", "fail", "LoRA target_modules %s match no module of %s (%s has %s)" % (
        ", ".join(missing), model.directory, src, ", ".join(linear_like[:12]) or ", ".join(leaves[:12])),
          "set %s, or all-linear" % override(key, "[%s]" % ",".join(fix_list)) if fix_list else
          "set %s" % override(key, "all-linear"),
          alts=alts, missing=missing, modules_from=src)


def needs_meta_probe(get: Get, model: Optional[ModelFacts]) -> bool:
    """True when LoRA names target modules and the model's files list no weight names (so only
    building the architecture can tell which modules exist)."""
    rank = _i(get("actor_rollout_ref.model.lora_rank", 0)) or 0
    if rank <= 0 or model is None or lora_targets(get("actor_rollout_ref.model.target_modules", None)) is None:
        return False
    return not module_names(model)[0]


# ---- host memory (case 22) -------------------------------------------------------------------
def host_memory(x: Any, v: Any, machine: Dict[str, Any], model: Optional[ModelFacts], est: Dict[str, Any]) -> None:
    """The node's host memory vs its Ray workers and the FSDP offload shares.

    Per worker: ``worker_bytes_per_param`` x parameters (verl#224: about 11 GB RSS per rollout
    worker for a 7.6B model), at least ``worker_base_gib``. Offload adds the node's share of fp32
    parameters (param_offload) and Adam state (optimizer_offload).
    """
    mem = (machine.get("host") or {}).get("memory") or {}
    total = mem.get("total")
    if mem.get("cgroup_limit"):
        total = min(total or mem["cgroup_limit"], mem["cgroup_limit"])
    flags = [k for k, f in (("param_offload", v.param_offload), ("optimizer_offload", v.optimizer_offload)) if f]
    if model is None or not model.params or not total:
        x.add("host_memory", "skip", "host memory not estimated: %s (offload: %s)" % (
            "model size unknown" if model is None or not model.params else "host memory unknown",
            ", ".join(flags) or "off"))
        return
    gib = float(1 << 30)
    per_worker = max(est.get("worker_base_gib", 4) * gib, model.params * est.get("worker_bytes_per_param", 1.44))
    share = model.params * v.gpn / max(1, v.world)
    off = share * ((est.get("param_bytes_fp32", 4) if v.param_offload else 0) +
                   (est.get("adam_state_bytes", 8) if v.optimizer_offload else 0))
    need = v.gpn * per_worker + off
    msg = "about %.0f GiB of host memory on each node: %d workers x %.1f GiB (%.2fB params)%s vs %.0f GiB" % (
        need / gib, v.gpn, per_worker / gib, model.params / 1e9,
        " + %s %.0f GiB (%d/%d GPUs' share)" % (" + ".join(flags), off / gib, v.gpn, v.world) if off else "",
        total / gib)
    ev = dict(need_bytes=int(need), host_bytes=int(total), workers=v.gpn, per_worker_bytes=int(per_worker),
              offload_bytes=int(off))
    alts = []
    if v.optimizer_offload:
        alts.append({"actor_rollout_ref.actor.fsdp_config.optimizer_offload": False})
    if need > total:
        x.add("host_memory", "fail", msg, "%suse more nodes, or a host with more memory" % (
            "turn off actor_rollout_ref.actor.fsdp_config.optimizer_offload, " if v.optimizer_offload else ""),
              silent=True, alts=[], **ev)
    elif need > 0.8 * total:
        x.add("host_memory", "warn", msg, "leave headroom: %sadd host memory or nodes (fewer GPUs per node)" % (
            "turn off optimizer_offload, " if v.optimizer_offload else ""), silent=True, **ev)
    else:
        x.add("host_memory", "pass", msg, **ev)


# ---- GPUs named in the launch line without NVML ---------------------------------------------
def count_visible(cvd: str) -> int:
    """GPUs a CUDA_VISIBLE_DEVICES value names, counted the way CUDA reads it without knowing
    the devices: entries up to the first invalid one (``-1`` or a non-index/UUID), duplicates
    once."""
    return len(visible_entries(cvd))


def launch_gpus(x: Any, v: Any, env: Dict[str, str], where: Optional[str] = None,
                attached: Optional[str] = None) -> bool:
    """When the job's environment sets CUDA_VISIBLE_DEVICES (the launch line, a wrapper's
    runtime_env or exports, or this shell's environment, as ``where`` says): its GPUs vs
    trainer.n_gpus_per_node (no NVML needed). The Ray verl starts in the driver counts those GPUs,
    and verl's resource pool check (verl/single_controller/ray/base.py _check_resource_available)
    raises 'Total available GPUs N is less than total desired GPUs M'. ``attached``: why the
    driver's variable does not count the cluster's GPUs (the job joins a running Ray cluster);
    then nothing is reported. Returns True when it reported."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None or attached:
        return False
    n = count_visible(cvd)
    src = "; %s" % where if where else ""
    if v.gpn > n:
        x.add("gpus_launch", "fail", "the job's CUDA_VISIBLE_DEVICES=%s (%d GPU(s)%s) but trainer.n_gpus_per_node=%d: "
              "the Ray verl starts sees %d GPU(s) and verl's resource pool check raises 'Total available GPUs %d is "
              "less than total desired GPUs %d'" % (cvd, n, src, v.gpn, n, n, v.gpn * max(1, v.nnodes)),
              "set trainer.n_gpus_per_node=%d, or name %d GPUs in CUDA_VISIBLE_DEVICES" % (max(1, n), v.gpn),
              alts=[{"trainer.n_gpus_per_node": n}] if n else [], visible=n, asked=v.gpn, cvd_source=where)
    else:
        x.add("gpus_launch", "pass", "CUDA_VISIBLE_DEVICES=%s names %d GPU(s)%s for n_gpus_per_node %d" % (
            cvd, n, " (%s)" % where if where else "", v.gpn))
    return True


# ---- Ray num_cpus (case 21) ------------------------------------------------------------------
def ray_num_cpus(x: Any, get: Get, host: Dict[str, Any]) -> None:
    """CPU affinity or a cgroup quota below the machine's CPU count with Ray's num_cpus unset
    (or above the allowed count). The key is the one the composed config has:
    ``ray_kwargs.ray_init.num_cpus`` (0.9.1) or ``ray_init.num_cpus`` (older releases)."""
    cpu = (host or {}).get("cpu") or {}
    logical, usable = cpu.get("logical"), cpu.get("usable")
    key = next((k for k in ("ray_kwargs.ray_init.num_cpus", "ray_init.num_cpus") if _has(get, k)), None)
    if key is None or not logical or not usable:
        return
    val = _i(get(key, None))
    if usable >= logical:
        x.add("ray_num_cpus", "pass", "all %d CPUs are usable; %s=%s" % (logical, key, "null" if val is None else val))
        return
    why = "cgroup quota" if cpu.get("cgroup_quota") and cpu["cgroup_quota"] < logical else "CPU affinity"
    if val is not None and val <= usable:
        x.add("ray_num_cpus", "pass", "%s=%d fits the %d usable CPUs (of %d)" % (key, val, usable, logical))
        return
    x.add("ray_num_cpus", "fail", "%s=%s but only %d of %d CPUs are usable (%s): Ray starts workers for CPUs the "
          "job cannot use" % (key, "null" if val is None else val, usable, logical, why),
          alts=[{key: usable}], fix_key=key, usable=usable, logical=logical)
