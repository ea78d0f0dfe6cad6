"""What the full-size model needs per GPU in each phase of a verl FSDP + vLLM run: parameters,
gradients, optimizer state, activations and the rollout's KV cache.

Estimates follow how verl 0.9.1's FSDP workers hold the model: the actor in fp32
(``fsdp_config.model_dtype`` defaults to fp32 for the actor; bf16 compute through FSDP's mixed
precision), sharded over the actor's data-parallel ranks (the world size divided by the Ulysses
sequence-parallel size is not a further shard: FSDP shards over all ranks), fp32 gradients and
AdamW's two fp32 moments likewise sharded; the reference policy in bf16, sharded; offloaded
parameters or optimizer state cost no GPU memory between uses. The actor update's activations are
one micro batch's: with gradient checkpointing the layer inputs (2 bytes x tokens x hidden x layers)
plus one layer's working set, and the fp32 logits (4 bytes x tokens x vocab). vLLM takes
``gpu_memory_utilization`` of the GPU and keeps what its weights (bf16, split over the rollout's
tensor-parallel size) leave as KV cache; the KV cache a batch needs is 2 (K and V) x layers x KV
heads x head_dim x 2 bytes per token. Figures the rehearsal measured (the rollout's peak with the
same gpu_memory_utilization) are marked ``measured``; the rest ``estimated``.
"""

from typing import Any, Dict, List, Optional

__all__ = ["param_count", "needs", "GIB"]

GIB = float(1 << 30)


def _i(cfg: Dict[str, Any], *keys: str) -> int:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def param_count(cfg: Dict[str, Any]) -> Optional[int]:
    """Parameters of a decoder config (embeddings, attention, MLP or experts, norms, the LM head
    unless tied); None when the sizes cannot be read. A ``text_config`` is counted for VL models
    (the vision tower is left out)."""
    c = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    h, layers, v = _i(c, "hidden_size"), _i(c, "num_hidden_layers", "num_layers"), _i(c, "vocab_size")
    heads = _i(c, "num_attention_heads")
    if not (h and layers and v and heads):
        return None
    kv = _i(c, "num_key_value_heads") or heads
    hd = _i(c, "head_dim") or h // heads
    attn = h * heads * hd * 2 + h * kv * hd * 2
    inter = _i(c, "intermediate_size")
    experts = _i(c, "num_experts", "num_local_experts", "n_routed_experts")
    if experts:
        moe_i = _i(c, "moe_intermediate_size") or inter
        shared = _i(c, "shared_expert_intermediate_size") or (_i(c, "n_shared_experts") * moe_i)
        mlp = experts * 3 * h * moe_i + 3 * h * shared + h * experts
    else:
        mlp = 3 * h * inter
    per_layer = attn + mlp + 2 * h
    tied = bool(c.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    return v * h * (1 if tied else 2) + layers * per_layer + h


def _row(name: str, phase: str, gib: Optional[float], how: str, basis: str) -> Dict[str, Any]:
    return {"item": name, "phase": phase, "gib": None if gib is None else round(gib, 2), "how": how, "basis": basis}


def needs(cfg: Dict[str, Any], world: int, gpu_total_gib: Optional[float], settings: Dict[str, Any],
          measured_rollout_gib: Optional[float] = None) -> List[Dict[str, Any]]:
    """Per-GPU rows ``{item, phase, gib, how: measured|estimated, basis}`` for the full-size ``cfg``.

    Args:
        cfg: the user's full-size config.json.
        world: GPUs of the run (n_gpus_per_node x nnodes).
        gpu_total_gib: one GPU's memory (None: the KV cache row has no figure).
        settings: the composed launch's values: ``gpu_memory_utilization``, ``rollout_tp``,
            ``micro_batch`` (actor ppo_micro_batch_size_per_gpu), ``prompt_length``,
            ``response_length``, ``train_batch_size``, ``rollout_n``, ``param_offload``,
            ``optimizer_offload``, ``ref`` (a reference policy is used), ``grad_ckpt``.
        measured_rollout_gib: the rehearsal's peak GPU memory during its rollout (same
            gpu_memory_utilization), which bounds what vLLM takes.
    """
    p = param_count(cfg)
    rows: List[Dict[str, Any]] = []
    if p is None:
        return rows
    c = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    world = max(1, int(world))
    tp = max(1, int(settings.get("rollout_tp") or 1))
    gb = GIB
    off_p, off_o = bool(settings.get("param_offload")), bool(settings.get("optimizer_offload"))
    basis = "%.2fB parameters from config.json, sharded over %d GPU(s)" % (p / 1e9, world)
    rows.append(_row("parameters (actor, fp32)", "actor update", 0.0 if off_p else 4.0 * p / world / gb, "estimated",
                     basis + (", offloaded to CPU between uses" if off_p else "")))
    rows.append(_row("gradients (fp32)", "actor update", 4.0 * p / world / gb, "estimated", basis))
    rows.append(_row("optimizer state (AdamW, 2 x fp32)", "actor update", 0.0 if off_o else 8.0 * p / world / gb,
                     "estimated", basis + (", offloaded" if off_o else "")))
    if settings.get("ref"):
        rows.append(_row("reference policy (bf16)", "old/ref log-prob", 2.0 * p / world / gb, "estimated", basis))
    h, layers = _i(c, "hidden_size"), _i(c, "num_hidden_layers", "num_layers")
    v = _i(c, "vocab_size")
    seq = int(settings.get("prompt_length") or 0) + int(settings.get("response_length") or 0)
    micro = int(settings.get("micro_batch") or 1)
    if h and layers and seq:
        tokens = micro * seq
        if settings.get("grad_ckpt", True):
            act = 2.0 * tokens * h * layers + 34.0 * tokens * h
            how = "gradient checkpointing: layer inputs + one layer"
        else:
            act = 34.0 * tokens * h * layers
            how = "no gradient checkpointing: every layer's activations"
        act += 4.0 * tokens * v
        rows.append(_row("activations + fp32 logits (one micro batch)", "actor update", act / gb, "estimated",
                         "%d sequences x %d tokens per micro batch; %s" % (micro, seq, how)))
    weights = 2.0 * p / tp / gb
    rows.append(_row("rollout weights (bf16)", "rollout", weights, "estimated", "split over rollout TP %d" % tp))
    util = settings.get("gpu_memory_utilization")
    kv_heads = _i(c, "num_key_value_heads") or _i(c, "num_attention_heads")
    hd = _i(c, "head_dim") or (h // max(1, _i(c, "num_attention_heads")) if h else 0)
    if gpu_total_gib and isinstance(util, (int, float)):
        pool = float(util) * gpu_total_gib
        if measured_rollout_gib is not None:
            rows.append(_row("vLLM's share of the GPU at gpu_memory_utilization=%s" % util, "rollout",
                             measured_rollout_gib, "measured", "the rehearsal's rollout peak, same setting"))
        rows.append(_row("KV cache allocated", "rollout", max(0.0, pool - weights), "estimated",
                         "%.2f x %.1f GiB minus the weights" % (float(util), gpu_total_gib)))
    if layers and kv_heads and hd and seq:
        per_token = 2.0 * layers * kv_heads * hd * 2 / min(tp, kv_heads)
        seqs = int(settings.get("train_batch_size") or 0) * int(settings.get("rollout_n") or 1)
        replicas = max(1, world // tp)
        rows.append(_row("KV cache the batch needs", "rollout", per_token * seq * seqs / replicas / gb, "estimated",
                         "%d sequences x %d tokens over %d rollout replica(s), %d B per token per GPU" % (
                             seqs, seq, replicas, per_token)))
    return rows
