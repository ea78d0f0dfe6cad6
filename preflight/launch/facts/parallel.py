"""The model's layers against Megatron pipeline x virtual pipeline sizes, and features per release.

* ``megatron.layers.<role>``: megatron-core splits the layers evenly over the pipeline stages and
  each stage's layers over the virtual stages: num_hidden_layers % PP == 0 and
  (num_hidden_layers / PP) % VPP == 0 (TransformerConfig asserts it when the model is built),
  unless the first/last stage sizes are given (uneven pipeline).
* ``feature.*``: per-release support read from verl's code at the tags (matrices/launch_facts.toml
  ``[[feature]]``): LoRA with the Megatron trainer, multi-turn tool configs (0.4.x asserts),
  SGLang tensor parallel across nodes.
"""

from typing import Any, Dict, List, Optional

from packaging.specifiers import SpecifierSet

from ...matrix import parse_version
from ..rules import Finding

__all__ = ["check", "layers_of", "first_transformers", "releases_admitting"]


def _i(v: Any) -> Optional[int]:
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def layers_of(model: Any) -> Optional[int]:
    """num_hidden_layers of the language model (the text sub-config's when there is one)."""
    if model is None:
        return None
    raw = model.raw or {}
    sub = raw.get(model.text_key) if model.text_key else None
    for d in (sub, raw):
        if isinstance(d, dict):
            n = _i(d.get("num_hidden_layers") or d.get("num_layers") or d.get("n_layer"))
            if n:
                return n
    return None


def _feature(fid: str, release: Optional[str]) -> Optional[Dict[str, Any]]:
    from .data import load_facts

    pv = parse_version(release) if release else None
    for f in load_facts().get("feature", []):
        if f["id"] == fid and pv is not None and SpecifierSet(f["versions"]).contains(pv, prereleases=True):
            return f
    return None


def _layers(get: Any, model: Any) -> List[Finding]:
    n = layers_of(model)
    out: List[Finding] = []
    for role, base in (("actor", "actor_rollout_ref.actor"), ("ref", "actor_rollout_ref.ref"), ("critic", "critic")):
        if str(get(base + ".strategy", get("actor_rollout_ref.actor.strategy", "")) or "") != "megatron":
            continue
        if role == "critic" and not _critic_used(get):
            continue
        pp = _i(get(base + ".megatron.pipeline_model_parallel_size", 1)) or 1
        vpp = _i(get(base + ".megatron.virtual_pipeline_model_parallel_size", None)) or 1
        uneven = any(get(base + ".megatron.override_transformer_config." + k, None) for k in (
            "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"))
        if pp * vpp <= 1:
            continue
        if n is None:
            out.append(Finding("megatron", "skip", "%s: layers vs PP %d x VPP %d not checked: the model's "
                               "num_hidden_layers is unknown" % (role, pp, vpp), item="layers.%s" % role))
            continue
        ev = {"num_hidden_layers": n, "pp": pp, "vpp": vpp, "uneven": bool(uneven)}
        if uneven:
            out.append(Finding("megatron", "pass", "%s: uneven pipeline stages given; %d layers over PP %d" % (
                role, n, pp), item="layers.%s" % role, evidence=ev))
            continue
        if n % pp or (n // pp) % vpp:
            good = [p for p in range(1, n + 1) if n % p == 0 and (n // p) % vpp == 0 and p <= 64]
            out.append(Finding("megatron", "fail", "%s: the model's %d layers do not split over pipeline %d x virtual "
                               "pipeline %d (each stage needs a whole number of layers per virtual stage: %d %% %d%s)" % (
                                   role, n, pp, vpp, n, pp, "" if n % pp else ", %d %% %d" % (n // pp, vpp)),
                               "set %s.megatron.pipeline_model_parallel_size to one of %s%s" % (
                                   base, ", ".join(str(p) for p in good[:8]),
                                   " (with VPP %d), or drop virtual_pipeline_model_parallel_size" % vpp if vpp > 1 else ""),
                               item="layers.%s" % role, evidence=ev,
                               stops="AssertionError in megatron-core TransformerConfig when the model is built, "
                                     "after Ray started"))
        else:
            out.append(Finding("megatron", "pass", "%s: %d layers = PP %d x VPP %d x %d per virtual stage" % (
                role, n, pp, vpp, n // pp // vpp), item="layers.%s" % role, evidence=ev))
    return out


def _critic_used(get: Any) -> bool:
    adv = str(get("algorithm.adv_estimator", "gae") or "gae")
    return adv == "gae" or bool(get("critic.enable", False))


def _features(get: Any, release: Optional[str]) -> List[Finding]:
    out: List[Finding] = []
    rank = _i(get("actor_rollout_ref.model.lora_rank", 0)) or 0
    megatron = str(get("actor_rollout_ref.actor.strategy", "") or "") == "megatron"
    if rank > 0 and megatron:
        f = _feature("megatron_lora", release)
        g = _feature("megatron_lora_key", release)
        if f is not None:
            out.append(Finding("feature", "fail", "actor_rollout_ref.model.lora_rank=%d with the Megatron trainer: "
                               "verl %s's Megatron workers apply no LoRA (full-parameter training), while the trainer "
                               "still treats the reference as the actor without LoRA (lora_rank > 0), so there is no "
                               "separate reference policy" % (rank, release),
                               "use strategy=fsdp (or fsdp2) for LoRA, or verl >= 0.7.0 with "
                               "actor_rollout_ref.model.lora.rank (Megatron-Bridge PEFT)", item="megatron_lora",
                               evidence={"source": f["source"]}, silent=True))
        elif g is not None and not (_i(get("actor_rollout_ref.model.lora.rank", 0)) or 0):
            out.append(Finding("feature", "warn", "actor_rollout_ref.model.lora_rank=%d with the Megatron trainer: "
                               "verl %s's Megatron workers read LoRA from actor_rollout_ref.model.lora (rank 0 here), "
                               "not lora_rank" % (rank, release),
                               "set actor_rollout_ref.model.lora.rank=%d (and lora.alpha...) for Megatron" % rank,
                               item="megatron_lora", evidence={"source": g["source"]}))
    if str(get("actor_rollout_ref.rollout.multi_turn.enable", False)).lower() == "true":
        f = _feature("multi_turn_tool_config", release)
        if f is not None:
            bad = []
            if not get("actor_rollout_ref.rollout.multi_turn.tool_config_path", None) and \
                    not get("actor_rollout_ref.rollout.multi_turn.interaction_config_path", None):
                bad.append("neither multi_turn.tool_config_path nor interaction_config_path is set")
            if str(get("algorithm.adv_estimator", "") or "") != "grpo":
                bad.append("algorithm.adv_estimator is %s, not grpo" % get("algorithm.adv_estimator", None))
            if bad:
                out.append(Finding("feature", "fail", "multi-turn on verl %s: %s (its validate_config asserts both)" % (
                    release, "; ".join(bad)),
                    "set actor_rollout_ref.rollout.multi_turn.tool_config_path=<tools.yaml> and "
                    "algorithm.adv_estimator=grpo, or use verl >= 0.5", item="multi_turn",
                    evidence={"source": f["source"]}, stops="AssertionError in validate_config, before Ray starts"))
    if str(get("actor_rollout_ref.rollout.name", "") or "") == "sglang":
        tp = _i(get("actor_rollout_ref.rollout.tensor_model_parallel_size", 1)) or 1
        gpn = _i(get("trainer.n_gpus_per_node", 8)) or 8
        f = _feature("sglang_multi_node", release)
        if tp > gpn and f is not None:
            out.append(Finding("feature", "fail", "SGLang rollout tensor parallel %d spans nodes (%d GPUs per node), "
                               "and verl %s's SGLang rollout starts its engine on one node" % (tp, gpn, release),
                               "set actor_rollout_ref.rollout.tensor_model_parallel_size <= %d, or verl >= 0.4.0 "
                               "(multi-node SGLang)" % gpn, item="sglang_tp_nodes", evidence={"source": f["source"]}))
    return out


def _rollout_release_rows(get: Any, release: Optional[str], facts: Dict[str, Any]) -> List[Finding]:
    """Per-release rollout and reward facts: lora_rank passed to vLLM as is (0.6.0), chunked
    prefill vs max_num_batched_tokens (< 0.7), the prime reward manager with a custom reward (< 0.6)."""
    from .data import load_facts

    out: List[Finding] = []
    vllm = str(get("actor_rollout_ref.rollout.name", "") or "") == "vllm"
    rank = _i(get("actor_rollout_ref.model.lora_rank", 0)) or 0
    if vllm and rank > 0:
        v = facts.get("vllm") or {}
        ranks, src = (v["lora_ranks"], "the installed vLLM %s (%s)" % (v.get("version"), v.get("lora_ranks_source"))) \
            if v.get("lora_ranks") else (load_facts()["vllm"]["lora_ranks"], load_facts()["vllm"]["lora_ranks_source"])
        f = _feature("lora_rank_passed_through", release)
        up = [r for r in ranks if r >= rank]
        if rank > max(ranks):
            out.append(Finding("feature", "fail", "actor_rollout_ref.model.lora_rank=%d is above the largest "
                               "max_lora_rank vLLM accepts (%d; %s)" % (rank, max(ranks), src),
                               "set actor_rollout_ref.model.lora_rank <= %d" % max(ranks), item="lora_rank",
                               evidence={"ranks": ranks, "source": src}))
        elif f is not None and rank not in ranks:
            out.append(Finding("feature", "fail", "verl %s passes lora_rank %d to vLLM as max_lora_rank, and vLLM "
                               "accepts only %s (%s)" % (release, rank, ", ".join(str(r) for r in ranks), src),
                               "set actor_rollout_ref.model.lora_rank=%d (or use verl >= 0.6.1, which rounds it up)" % (
                                   up[0] if up else max(ranks)), item="lora_rank",
                               evidence={"ranks": ranks, "source": src, "verl_source": f["source"]},
                               stops="vLLM's LoRAConfig refuses max_lora_rank when the rollout engine starts"))
    mode = str(get("actor_rollout_ref.rollout.mode", "sync") or "sync")
    f = _feature("async_server_needs_v1_engine_utils", release)
    multi = str(get("actor_rollout_ref.rollout.multi_turn.enable", False)).lower() == "true"
    if vllm and f is not None and (mode == "async" or multi):
        v = facts.get("vllm") or {}
        why = "rollout.mode=async" if mode == "async" else "multi-turn"
        if v.get("version") and v.get("has_v1_engine_utils") is False:
            out.append(Finding("feature", "fail", "%s: verl %s's async vLLM server imports vllm.v1.engine.utils "
                               "(CoreEngineProcManager), which the installed vLLM %s does not have" % (
                                   why, release, v["version"]),
                               "install vLLM 0.10.0 (verl 0.6.0's own image), or verl >= 0.6.1 with vLLM <= 0.11.0",
                               item="async_vllm", evidence={"source": f["source"], "vllm": v["version"]},
                               stops="ModuleNotFoundError 'No module named vllm.v1.engine.utils' when the rollout "
                                     "server starts, after Ray started"))
        elif not v.get("version"):
            out.append(Finding("feature", "warn", "%s: verl %s's async vLLM server imports vllm.v1.engine.utils, "
                               "which no vLLM inside 0.6.0's declared range (<= 0.9.1) has (vLLM >= 0.10)" % (
                                   why, release),
                               "install vLLM 0.10.0 (verl 0.6.0's own image), or verl >= 0.6.1 with vLLM <= 0.11.0",
                               item="async_vllm", evidence={"source": f["source"]}))
    f = _feature("chunked_prefill_raise", release)
    if vllm and f is not None and mode != "async" and str(get("actor_rollout_ref.rollout.enable_chunked_prefill",
                                                              True)).lower() == "true":
        p, r = _i(get("data.max_prompt_length", None)), _i(get("data.max_response_length", None))
        mml = _i(get("actor_rollout_ref.rollout.max_model_len", None)) or ((p or 0) + (r or 0) if p and r else None)
        mbt = _i(get("actor_rollout_ref.rollout.max_num_batched_tokens", 8192)) or 8192
        if mml and mbt < mml:
            out.append(Finding("feature", "fail", "max_model_len %d (%s) > actor_rollout_ref.rollout.max_num_batched_"
                               "tokens %d with chunked prefill on: verl %s's vLLM rollout raises at start" % (
                                   mml, "prompt %s + response %s" % (p, r) if not get(
                                       "actor_rollout_ref.rollout.max_model_len", None) else "rollout.max_model_len",
                                   mbt, release),
                               "set actor_rollout_ref.rollout.max_num_batched_tokens=%d (or more)" % mml,
                               item="max_num_batched_tokens", evidence={"source": f["source"]},
                               stops="ValueError 'Enable chunked prefill, max_num_batched_tokens is smaller than "
                                     "max_model_len' when the rollout is built, after Ray started"))
    f = _feature("prime_custom_reward_pickle", release)
    manager = str(get("reward_model.reward_manager", "") or get("reward.reward_manager.name", "") or "")
    custom = get("custom_reward_function.path", None) or get("reward.custom_reward_function.path", None)
    if f is not None and manager == "prime" and custom:
        out.append(Finding("feature", "fail", "reward_model.reward_manager=prime with the custom reward file %s: verl "
                           "%s loads the file so that its function cannot be pickled by name, and the prime manager's "
                           "process pool pickles it ('Can't pickle ...: it's not the same object as custom_module...')"
                           % (custom, release), "use reward_model.reward_manager=naive, or verl >= 0.6.0",
                           item="prime_custom_reward", evidence={"source": f["source"]},
                           stops="every training reward fails (or scores 0) while validation works"))
    return out


def _chat_template(get: Any, model: Any, has_data: bool) -> List[Finding]:
    if model is None or model.chat_template or has_data:
        return []  # with local data files the data rows render the template on real rows
    custom = get("actor_rollout_ref.model.custom_chat_template", None) or get("data.custom_chat_template", None)
    if custom:
        return []
    return [Finding("model", "fail", "the tokenizer at %s has no chat_template (a base checkpoint?), and verl's "
                    "RLHFDataset applies the chat template to every prompt" % model.directory,
                    "use an instruct/chat model, or set actor_rollout_ref.model.custom_chat_template='<jinja>' "
                    "(verl >= 0.9)", item="chat_template",
                    stops="ValueError 'Cannot use chat template functions because tokenizer.chat_template is not "
                          "set' in the dataset (0.9.1 with filter_overlong_prompts: every prompt is filtered out)")]


def first_transformers(types: List[str]) -> Optional[Dict[str, Any]]:
    """The ``[[model_type]]`` row of launch_facts.toml naming one of ``types``: {types, transformers
    (the first release that knows them), source}; None when none is recorded."""
    from .data import load_facts

    for row in load_facts().get("model_type", []):
        if set(types) & set(row.get("types", [])):
            return row
    return None


def _at_least(text: str, floor: Any) -> bool:
    v = parse_version(text)
    return v is not None and v >= floor


def releases_admitting(package_version: str) -> List[str]:
    """verl releases whose recorded requirements (matrices/metadata: verl's own with its [vllm] extra,
    and the Requires-Dist of a vLLM that extra admits) and the works-with bounds of bounds.toml on
    transformers admit transformers ``package_version`` or a newer release those specifiers name;
    oldest first."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ... import matrix as matrix_mod

    mx = matrix_mod.load()
    floor = parse_version(package_version)
    if floor is None:
        return []
    out = []

    def reqs(pkg: str, ver: str, extra: str) -> List[Any]:
        got = []
        for line in (mx.meta(pkg, ver) or {}).get("requires_dist") or []:
            try:
                r = Requirement(line)
            except InvalidRequirement:
                continue
            m = str(r.marker or "")
            if not m or ("extra" in m and r.marker is not None and r.marker.evaluate({"extra": extra})):
                got.append(r)
        return got

    for v in mx.versions("verl"):
        mine = reqs("verl", v, "vllm")
        t_specs = [r.specifier for r in mine if r.name == "transformers"]
        v_spec = next((r.specifier for r in mine if r.name == "vllm"), None)
        vllms = [x for x in mx.versions("vllm") if v_spec is None or v_spec.contains(x, prereleases=True)]
        ok = False
        for bv in vllms:
            specs = t_specs + [r.specifier for r in reqs("vllm", bv, "") if r.name == "transformers"]
            for b in mx.bounds():
                when = b.get("when") or {}
                have = {"verl": v, "vllm": bv}
                if b.get("package") == "transformers" and all(
                        k in have and SpecifierSet(str(w)).contains(have[k], prereleases=True) for k, w in when.items()):
                    specs.append(SpecifierSet(str(b["spec"])))
            cands = {str(floor)} | {c.version for sp in specs for c in sp if _at_least(c.version, floor)}
            if any(all(sp.contains(c, prereleases=True) for sp in specs) for c in cands):
                ok = True
                break
        if ok:
            out.append(v)
    return out


def _model_type(get: Any, model: Any, facts: Dict[str, Any]) -> List[Finding]:
    t = facts.get("transformers") or {}
    known = t.get("known") or {}
    if model is None or not known:
        return []
    if model.auto_map and str(get("actor_rollout_ref.model.trust_remote_code", False)).lower() == "true":
        return []  # the model brings its own classes
    bad = [k for k, ok in sorted(known.items()) if not ok]
    if not bad:
        return []
    ev: Dict[str, Any] = {"unknown": bad, "transformers": t.get("version")}
    fix = ("install a stack whose transformers knows %s and whose vLLM accepts that transformers ('preflight "
           "resolve' with a newer verl); upgrading transformers alone can break vLLM's pin" % ", ".join(bad))
    row = first_transformers(bad)
    if row is not None:
        rels = releases_admitting(str(row["transformers"]))
        ev.update(needs_transformers=row["transformers"], source=row["source"], verl_releases=rels)
        fix = ("%s needs transformers >= %s (the first release that knows it); %s; install that stack with "
               "'preflight resolve --verl RELEASE', not transformers alone, which breaks the installed vLLM's pin" % (
                   ", ".join(bad), row["transformers"],
                   "verl releases whose recorded requirements and vLLM admit it: %s" % ", ".join(rels) if rels else
                   "no recorded verl release admits it with its vLLM yet"))
    return [Finding("model", "fail", "model_type %s of %s is unknown to transformers %s in the target (not in its "
                    "CONFIG_MAPPING_NAMES): loading the model fails ('does not recognize this architecture')" % (
                        ", ".join(bad), model.directory, t.get("version")),
                    fix, item="model_type", evidence=ev,
                    stops="ValueError from transformers' AutoConfig when the actor model is built, in the Ray worker")]


def check(get: Any, model: Any, release: Optional[str], wrapper: Any, facts: Optional[Dict[str, Any]] = None,
          has_data: bool = False) -> List[Finding]:
    """The megatron layer rows, the per-release feature rows, and torchrun around main_ppo."""
    out = _layers(get, model) + _features(get, release) + _rollout_release_rows(get, release, facts or {}) + \
        _chat_template(get, model, has_data) + _model_type(get, model, facts or {})
    if wrapper is not None and wrapper.kind and "torchrun" in wrapper.kind and (wrapper.nproc_per_node or 1) > 1:
        out.append(Finding("launcher", "fail", "torchrun --nproc_per_node=%d starts %d copies of verl's PPO driver, "
                           "each of which starts or joins Ray and its own trainer" % (
                               wrapper.nproc_per_node, wrapper.nproc_per_node),
                           "run the entry point once (python3 -m verl.trainer.main_ppo ...): verl places its workers "
                           "through Ray (trainer.n_gpus_per_node, trainer.nnodes)", item="torchrun",
                           evidence={"read": wrapper.read}))
    return out
