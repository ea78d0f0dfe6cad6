"""The rollout rules: tensor parallel size against the world and the model's heads, mode, expert and pipeline parallel."""

import math
from typing import Optional
from .. import batch as bm
from ..model import ModelFacts
from .values import Values
from .arith import nearest, divisors
from .context import RuleContext


def tp_fits_heads(tp: int, heads: Optional[int], kv_heads: Optional[int]) -> bool:
    """True when vLLM can shard a model with ``heads`` attention and ``kv_heads`` key/value heads
    over tensor parallel size ``tp``: heads divide by tp, and the KV heads divide by tp or (when
    fewer than tp) divide tp, each KV head then being replicated (vLLM's ModelConfig
    verify_with_parallel_config and QKVParallelLinear). Unknown counts pass."""
    if heads and heads % tp:
        return False
    if kv_heads:
        return kv_heads % tp == 0 if kv_heads >= tp else tp % kv_heads == 0
    return True


def rollout_rules(x: RuleContext, v: Values, p: bm.BatchPlan, model: Optional[ModelFacts] = None) -> None:
    """The rollout's rules (``rollout_tp_world``, ``rollout_tp_heads``, ``megatron_tp_heads``, ``rollout_pp``,
    ``rollout_ep``, ``rollout_mode``, ``max_num_seqs``) on values ``v``, plan ``p`` and the model's facts when
    known."""
    size = v.tp * v.rdp * v.rpp
    pre = "actor_rollout_ref.rollout."
    heads = model.heads if model else None
    kvh = model.kv_heads if model else None
    okt = [d for d in divisors(v.world) if d * v.rdp * v.rpp <= v.world and (v.world % (d * v.rdp * v.rpp)) == 0
           and tp_fits_heads(d, heads, kvh)]
    key = pre + "tensor_model_parallel_size"
    if size > v.world or v.world % size:
        near = nearest(okt, v.tp)
        x.add("rollout_tp_world", "fail", "rollout TP %d x DP %d x PP %d = %d GPUs per replica %s the world size %d" % (
            v.tp, v.rdp, v.rpp, size, "exceeds" if size > v.world else "does not divide", v.world),
            tp=v.tp, world=v.world, candidates=okt, alts=[{key: d} for d in near], fix_key=key,
            fix_tail=" (divides the %d GPUs%s)" % (v.world, " and the model's %s attention / %s KV heads" % (
                heads, kvh) if heads else ""))
    else:
        x.add("rollout_tp_world", "pass", "%d rollout groups of %d GPU(s) (TP %d x DP %d x PP %d)" % (
            v.world // size, size, v.tp, v.rdp, v.rpp))
    if model is None or not heads:
        x.add("rollout_tp_heads", "skip", "the model's attention heads are unknown (config.json not read)")
    elif tp_fits_heads(v.tp, heads, kvh):
        x.add("rollout_tp_heads", "pass", "rollout TP %d splits %d attention heads and %s KV heads" % (v.tp, heads, kvh))
    else:
        near = nearest(okt, v.tp)
        what = "%d attention heads are not divisible by TP %d" % (heads, v.tp) if heads % v.tp else \
            "%s KV heads neither divide by TP %d nor divide it" % (kvh, v.tp)
        x.add("rollout_tp_heads", "fail", "rollout tensor_model_parallel_size %d: the model's %s (%s)" % (
            v.tp, what, model.path), heads=heads, kv_heads=kvh, tp=v.tp, candidates=okt,
            alts=[{key: d} for d in near], fix_key=key,
            fix_tail=" (divides the %d GPUs, the %d attention heads and the %s KV heads)" % (v.world, heads, kvh))
    if v.strategy == "megatron" and heads and v.mg_tp > 1:
        mkey = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
        if heads % v.mg_tp or (kvh and kvh % v.mg_tp):
            okm = [d for d in divisors(v.world) if heads % d == 0 and (not kvh or kvh % d == 0)
                   and v.world % (d * v.mg_pp * v.mg_cp) == 0]
            x.add("megatron_tp_heads", "fail", "Megatron TP %d does not divide the model's %d attention heads and %s "
                  "KV heads (query groups)" % (v.mg_tp, heads, kvh), alts=[{mkey: d} for d in nearest(okm, v.mg_tp)],
                  fix_key=mkey, heads=heads, kv_heads=kvh)
        else:
            x.add("megatron_tp_heads", "pass", "Megatron TP %d divides %d heads and %s KV heads" % (v.mg_tp, heads, kvh))
    if x.rs.get("rollout_sync_rejected") and v.rollout_mode == "sync":
        x.add("rollout_mode", "fail", "rollout.mode=sync", "remove the override or set %smode=async (async is the "
              "only mode)" % pre, alts=[{pre + "mode": "async"}])
    if v.ep > 1 and v.rollout_name != "trtllm" and v.ep != v.tp * v.rdp:
        x.add("rollout_ep", "fail", "rollout expert_parallel_size %d != TP %d x DP %d" % (v.ep, v.tp, v.rdp),
              "set %sexpert_parallel_size=%d" % (pre, v.tp * v.rdp), alts=[{pre + "expert_parallel_size": v.tp * v.rdp}])
    if v.rpp > 1 and v.rollout_name in ("vllm", "sglang"):
        x.add("rollout_pp", "fail", "rollout pipeline_model_parallel_size %d with %s" % (v.rpp, v.rollout_name),
              "set %spipeline_model_parallel_size=1" % pre, alts=[{pre + "pipeline_model_parallel_size": 1}])
    if v.rollout_name == "vllm" and v.max_num_seqs and p.sequences_per_group is not None:
        per = p.sequences_per_group
        if per > v.max_num_seqs:
            waves = bm.rounds(int(math.ceil(per)), v.max_num_seqs)
            x.add("max_num_seqs", "warn", "each rollout group holds %s sequences but vLLM max_num_seqs is %d: "
                  "generation runs in %d waves" % (per, v.max_num_seqs, waves),
                  "set %smax_num_seqs=%d if KV-cache memory allows, or lower tensor_model_parallel_size for more "
                  "groups" % (pre, int(math.ceil(per))), silent=True, sequences_per_group=per,
                  alts=[{pre + "max_num_seqs": int(math.ceil(per))}],
                  max_num_seqs=v.max_num_seqs)
        else:
            x.add("max_num_seqs", "pass", "%s sequences per rollout group <= max_num_seqs %d" % (per, v.max_num_seqs))
