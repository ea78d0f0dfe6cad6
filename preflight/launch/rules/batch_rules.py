"""The batch-size rules: mandatory keys, micro/mini/train batch arithmetic, sequence parallel, virtual pipeline."""

from typing import Any, Dict, List, Optional, Sequence, Tuple
from .. import batch as bm
from ..overrides import override_line
from ...shell import override
from .values import Values
from .arith import nearest, divisors
from .context import RuleContext


def _suggest_micro(v: Values, role: str) -> Tuple[int, str]:
    """A micro-batch size that fits: a divisor of the per-GPU mini-batch (actor, critic) or of the
    per-GPU sequences (log-prob passes), at most 4 for training and 16 for log-probs."""
    dp = _dp(v, role)
    if dp is None:
        return 4, "4"
    if role in ("actor", "critic"):
        mini = v.critic_mini if role == "critic" else v.mini
        total, cap = (mini or 0) * v.n, 4
    else:
        total, cap = v.B * v.n, 16
    if total <= 0 or total % dp:
        return cap, str(cap)
    per = total // dp
    ok = [d for d in divisors(per) if d <= cap]
    return ok[-1], "%d (a divisor of the %d sequences per GPU)" % (ok[-1], per)


def _dp(v: Values, role: str = "actor") -> Optional[int]:
    """The data-parallel size that splits a role's mini-batch: Megatron's world / (TP x PP x CP)
    for a Megatron actor, else world / Ulysses size; None when that does not divide."""
    if role in ("actor", "rollout", "ref") and v.strategy == "megatron":
        mp = v.mg_tp * v.mg_pp * v.mg_cp
        return v.world // mp if mp > 0 and v.world % mp == 0 else None
    sp = v.critic_sp if role == "critic" else v.sp
    return v.world // sp if sp > 0 and v.world % sp == 0 else None


def mandatory_rule(x: RuleContext, missing: Sequence[str]) -> None:
    """Rule ``mandatory``: a FAIL for every key of ``missing`` (``???`` in the config) that verl needs."""
    for key in missing:
        hint = "vllm (or sglang)" if key.endswith("rollout.name") else "a value"
        x.add("mandatory", "fail", "%s is ??? (mandatory) and not set" % key, "set %s" % override(
            key, hint.split(" ")[0] if hint != "a value" else "..."), item=key.replace(".", "_"),
            alts=[{key: "vllm"}, {key: "sglang"}] if hint != "a value" else [])


def micro_set_rule(x: RuleContext, v: Values) -> None:
    """Rules ``micro_batch_set`` and ``per_gpu_required``: each role's micro batch is set one way (global or per
    GPU), per GPU where the release reads only that; nothing to check with use_dynamic_bsz."""
    roles = []
    if not v.dyn:
        roles.append(("actor", "actor_rollout_ref.actor.ppo_micro_batch_size", v.micro, v.micro_gpu))
        roles.append(("rollout", "actor_rollout_ref.rollout.log_prob_micro_batch_size", v.lp_micro, v.lp_micro_gpu))
        if v.use_ref:
            roles.append(("ref", "actor_rollout_ref.ref.log_prob_micro_batch_size", v.ref_lp_micro,
                          v.ref_lp_micro_gpu))
    if v.use_critic and not v.critic_dyn:
        roles.append(("critic", "critic.ppo_micro_batch_size", v.critic_micro, v.critic_micro_gpu))
    if not roles:
        x.add("micro_batch_set", "pass", "dynamic batch size: micro-batches are sized by tokens")
    for role, key, glob, per in roles:
        if glob is None and per is None:
            num, text = _suggest_micro(v, role)
            x.add("micro_batch_set", "fail", "%s: neither %s nor %s_per_gpu is set" % (role, key, key),
                  "set %s_per_gpu=%s" % (key, text), item=role, alts=[{key + "_per_gpu": num}])
        elif glob is not None and per is not None:
            x.add("micro_batch_set", "fail", "%s: both %s=%d and %s_per_gpu=%d are set" % (role, key, glob, key, per),
                  "remove %s (deprecated); keep %s_per_gpu" % (key, key), item=role, alts=[{key: None}])
        else:
            x.add("micro_batch_set", "pass", "%s: %s%s=%d" % (role, key, "" if glob is not None else "_per_gpu",
                                                            glob if glob is not None else per), item=role)
        if x.rs.get("per_gpu_required") and per is None and glob is not None and role in ("actor", "rollout"):
            dp = _dp(v, role) or v.world
            x.add("per_gpu_required", "fail", "%s: only the deprecated %s=%d is set; verl %s's engine worker reads "
                  "only %s_per_gpu" % (role, key, glob, x.rs["label"], key),
                  "set %s_per_gpu=%d (that is %d / %d data-parallel ranks) and remove %s" % (
                      key, max(1, glob // dp), glob, dp, key), item=role, global_micro=glob, dp=dp,
                  alts=[{key + "_per_gpu": max(1, glob // dp), key: None}])


def train_divisible_rule(x: RuleContext, v: Values, p: bm.BatchPlan) -> None:
    """Rules ``train_batch_divisible`` and ``megatron_world``: train_batch_size x rollout.n divides by the release's
    minimal batch (the world size, or Megatron's data-parallel size x micro batch); TP x PP x CP divides the world."""
    if x.rs["train_batch_divisible"] == "without_dynamic_bsz" and v.dyn:
        x.add("train_batch_divisible", "pass", "not checked with use_dynamic_bsz=True in verl %s" % x.rs["label"])
        return
    minimal, how = v.world, "the world size %d (n_gpus_per_node %d x nnodes %d)" % (v.world, v.gpn, v.nnodes)
    if v.strategy == "megatron" and x.rs["minimal_bsz"] == "megatron_dp_x_micro":
        mp = v.mg_tp * v.mg_pp * v.mg_cp
        if v.world % mp:
            okd = [d for d in divisors(v.world) if d % (v.mg_tp * v.mg_cp) == 0 or d == v.world]
            ppk = "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"
            tpk = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"
            alts = [{ppk: d} for d in nearest([d for d in divisors(v.world) if v.world % (v.mg_tp * d * v.mg_cp) == 0],
                                            v.mg_pp)]
            if not alts:
                alts = [{tpk: d, ppk: 1} for d in nearest([d for d in divisors(v.world) if v.world % (d * v.mg_cp) == 0],
                                                        v.mg_tp)]
            x.add("megatron_world", "fail", "world size %d is not divisible by Megatron TP %d x PP %d x CP %d = %d" % (
                v.world, v.mg_tp, v.mg_pp, v.mg_cp, mp),
                "set %s so that TP x PP x CP divides %d" % (" or ".join(override_line(a) for a in alts), v.world),
                alts=alts, world=v.world, model_parallel=mp, candidates=okd[:6])
            return
        x.add("megatron_world", "pass", "world size %d / (TP %d x PP %d x CP %d) = %d data-parallel ranks" % (
            v.world, v.mg_tp, v.mg_pp, v.mg_cp, v.world // mp))
        if v.micro_gpu is None:
            return  # micro_batch_set reports it
        minimal = (v.world // mp) * v.micro_gpu
        how = "Megatron data-parallel size %d x ppo_micro_batch_size_per_gpu %d = %d" % (
            v.world // mp, v.micro_gpu, minimal)
    seqs = v.B * v.n
    if seqs % minimal == 0:
        x.add("train_batch_divisible", "pass", "%d x %d = %d sequences divide by %s" % (v.B, v.n, seqs, how))
        return
    opts = bm.multiples_near(v.B, minimal, v.n)
    x.add("train_batch_divisible", "fail", "data.train_batch_size x rollout.n = %d x %d = %d is not divisible by %s" % (
        v.B, v.n, seqs, how), sequences=seqs, minimal_bsz=minimal, candidates=opts,
        alts=[{"data.train_batch_size": o} for o in opts], fix_key="data.train_batch_size")


def _mini_candidates(v: Values, current: int, k: int = 3, role: str = "actor") -> List[int]:
    """ppo_mini_batch_size values to suggest instead of ``current``, ascending: the (up to) ``k``
    largest below it and the next one above it; all divisors of data.train_batch_size
    whose sequences (x rollout.n) split evenly over the data-parallel ranks (plain divisors when
    none does)."""
    divs = divisors(v.B) if v.B > 0 else []
    dp = _dp(v, role)
    good = [d for d in divs if dp and (d * v.n) % dp == 0] or divs
    below = [d for d in good if d < current][-k:] if k > 0 else []
    above = [d for d in good if d > current][:1]
    return below + above


def mini_le_train_rule(x: RuleContext, v: Values) -> None:
    """Rule ``mini_le_train``: each role's ppo_mini_batch_size is at most data.train_batch_size."""
    pairs = [("actor", "actor_rollout_ref.actor.ppo_mini_batch_size", v.mini, v.dyn)]
    if v.use_critic:
        pairs.append(("critic", "critic.ppo_mini_batch_size", v.critic_mini, v.critic_dyn))
    for role, key, mini, dyn in pairs:
        if dyn or mini is None:
            continue
        if v.B < mini:
            cands = _mini_candidates(v, mini, role=role)
            x.add("mini_le_train", "fail", "%s: data.train_batch_size %d < %s %d" % (role, v.B, key, mini),
                  item=role, train_batch_size=v.B, mini=mini, candidates=cands,
                  alts=[{key: c} for c in cands], fix_key=key, fix_tail=" (a divisor of data.train_batch_size %d)" % v.B)
        else:
            x.add("mini_le_train", "pass", "%s: %s %d <= train_batch_size %d" % (role, key, mini, v.B), item=role)


def global_micro_rule(x: RuleContext, v: Values) -> None:
    """Rule ``global_micro``: each role's deprecated global ppo_micro_batch_size (where set) divides its mini batch
    and, times the Ulysses size, covers the world size."""
    pairs = [("actor", "actor_rollout_ref.actor", v.mini, v.micro, v.sp, v.dyn)]
    if v.use_critic:
        pairs.append(("critic", "critic", v.critic_mini, v.critic_micro, v.critic_sp, v.critic_dyn))
    for role, pre, mini, micro, sp, dyn in pairs:
        if dyn or micro is None or mini is None:
            continue
        if micro <= 0 or mini % micro or micro * sp < v.world:
            why = ("ppo_mini_batch_size %d is not a multiple of the deprecated ppo_micro_batch_size %d" % (mini, micro)
                   if micro <= 0 or mini % micro else
                   "ppo_micro_batch_size %d x Ulysses %d < world size %d" % (micro, sp, v.world))
            fix, alts = _global_micro_fix(pre, mini, sp, v.world)
            x.add("global_micro", "fail", "%s: %s" % (role, why), fix, item=role, alts=alts)
        else:
            x.add("global_micro", "pass", "%s: ppo_micro_batch_size %d fits mini %d and world %d" % (
                role, micro, mini, v.world), item=role)


def _global_micro_fix(pre: str, mini: int, sp: int, world: int) -> Tuple[str, Any]:
    """(fix text, alts) for a global ppo_micro_batch_size: the smallest value that divides the mini
    batch and, times the Ulysses size, covers the world size (a key every release has; verl 0.1 has
    no ``_per_gpu`` form), else the per-GPU key (verl 0.2+)."""
    need = -(-world // max(1, sp))
    fit = [m for m in range(max(1, need), mini + 1) if mini % m == 0]
    per_gpu = "use %s.ppo_micro_batch_size_per_gpu instead (verl 0.2+; and remove ppo_micro_batch_size)" % pre
    if not fit:
        return per_gpu, None
    return ("set %s.ppo_micro_batch_size=%d, or %s" % (pre, fit[0], per_gpu),
            [{"%s.ppo_micro_batch_size" % pre: fit[0]}])


def sp_rule(x: RuleContext, v: Values) -> None:
    """Rule ``sp_remove_padding``: a Ulysses sequence parallel size over 1 needs use_remove_padding (verl's config
    validation, before Ray) and must divide the world size (the workers' device mesh: ``where`` sp_mesh)."""
    for role, sp in (("actor", v.sp),) + ((("critic", v.critic_sp),) if v.use_critic else ()):
        if sp <= 1:
            continue
        if v.world % sp:
            ukey = "critic.ulysses_sequence_parallel_size" if role == "critic" else v.sp_key
            near = nearest(divisors(v.world), sp)
            x.add("sp_remove_padding", "fail", "%s: Ulysses size %d does not divide the world size %d" % (
                role, sp, v.world), item=role, alts=[{ukey: d} for d in near], fix_key=ukey,
                fix_tail=" (a divisor of the world size %d)" % v.world, where_key="sp_mesh", stops_key="stops_mesh")
        if not v.remove_padding:
            x.add("sp_remove_padding", "fail", "%s: Ulysses size %d with use_remove_padding=False" % (role, sp),
                  "set actor_rollout_ref.model.use_remove_padding=True", item=role,
                  alts=[{"actor_rollout_ref.model.use_remove_padding": True}])
        else:
            x.add("sp_remove_padding", "pass", "%s: Ulysses size %d with use_remove_padding=True" % (role, sp),
                  item=role)


def val_temperature_rule(x: RuleContext, v: Values) -> None:
    """Rule ``val_temperature``: val_kwargs.do_sample=True needs a rollout temperature above 0."""
    if v.val_do_sample and (v.temperature is None or v.temperature <= 0):
        x.add("val_temperature", "fail", "val_kwargs.do_sample=True with rollout.temperature=%s" % v.temperature,
              "set actor_rollout_ref.rollout.temperature to a value > 0 (e.g. 1.0)",
              alts=[{"actor_rollout_ref.rollout.temperature": 1.0}])


def mini_micro_rule(x: RuleContext, v: Values, p: bm.BatchPlan) -> None:
    """Rules ``mini_per_gpu``, ``micro_vs_mini`` and ``train_divisible_by_mini``: the mini batch per GPU (normalised
    as the release does, plan ``p``) is whole and a multiple of the micro batch."""
    mode = x.rs["mini_normalisation"]
    roles = [("actor", "actor_rollout_ref.actor", v.mini, v.micro_gpu, v.dyn)]
    if v.use_critic:
        roles.append(("critic", "critic", v.critic_mini, v.critic_micro_gpu, v.critic_dyn))
    for role, pre, mini, micro, dyn in roles:
        dp = _dp(v, role)
        if dyn or mini is None or mini <= 0 or dp is None:
            continue
        total = mini * v.n
        q, rem = total // dp, total % dp
        shown = "%d x %d / %d = %s" % (mini, v.n, dp, ("%d" % q) if not rem else "%.2f" % (total / dp))
        if role == "actor" and v.strategy == "megatron":
            shown += " (Megatron data-parallel size %d = %d GPUs / (TP %d x PP %d x CP %d))" % (
                dp, v.world, v.mg_tp, v.mg_pp, v.mg_cp)
        key = pre + ".ppo_mini_batch_size"
        cands = _mini_candidates(v, mini, role=role)
        good = [m for m in divisors(v.B) if (m * v.n) % dp == 0]
        if good:
            mini_fix: Dict[str, Any] = dict(alts=[{key: c} for c in cands], fix_key=key)
        else:
            up = bm.multiples_near(v.B, dp, v.n)[-1]
            mini_fix = dict(fix="raise data.train_batch_size x rollout.n to at least %d (e.g. data.train_batch_size=%d "
                                "and %s=%d)" % (dp, up, key, up), alts=[{"data.train_batch_size": up, key: up}])
        if q == 0:
            x.add("mini_per_gpu", "fail", "%s: per-GPU mini-batch %s normalises to 0 (silent hang in releases without "
                  "the assertion)" % (role, shown), item=role, silent=False, mini=mini, rollout_n=v.n,
                  dp=dp, per_gpu=q, **mini_fix)
            continue
        if rem and mode == "exact":
            x.add("mini_per_gpu", "fail", "%s: per-GPU mini-batch %s is not whole" % (role, shown), item=role,
                  mini=mini, rollout_n=v.n, dp=dp, **mini_fix)
            continue
        if rem:
            x.add("mini_per_gpu", "warn", "%s: per-GPU mini-batch %s is floored to %d; sequences are left over in "
                  "each step's last mini-batch" % (role, shown, q), item=role, silent=True, per_gpu=q, **mini_fix)
        else:
            x.add("mini_per_gpu", "pass", "%s: per-GPU mini-batch %s sequences" % (role, shown), item=role, per_gpu=q)
        seq_gpu = v.B * v.n // dp if (v.B * v.n) % dp == 0 else None
        if seq_gpu is not None:
            if seq_gpu % q:
                assert_ = x.rs["train_divisible_by_mini"] == "assert"
                x.add("train_divisible_by_mini", "fail" if assert_ else "warn",
                      "%s: %d sequences per GPU do not split into mini-batches of %d (train_batch_size %d / "
                      "ppo_mini_batch_size %d = %.2f)" % (role, seq_gpu, q, v.B, mini, v.B / mini),
                      item=role, silent=not assert_, alts=[{key: c} for c in cands], fix_key=key,
                      fix_tail=" (a divisor of data.train_batch_size %d)" % v.B)
            else:
                x.add("train_divisible_by_mini", "pass", "%s: %d mini-batches of %d sequences per GPU per step" % (
                    role, seq_gpu // q, q), item=role)
        if micro is None or micro <= 0:
            continue
        silent = x.rs["micro_divisibility"] == "global_micro_only"
        okm = [d for d in divisors(q) if d <= micro] or [1]
        mkey = pre + ".ppo_micro_batch_size_per_gpu"
        micro_fix: Dict[str, Any] = dict(alts=[{mkey: okm[-1]}], fix_key=mkey, fix_tail=" (a divisor of %d)" % q)
        if micro > q:
            x.add("micro_vs_mini", "fail", "%s: ppo_micro_batch_size_per_gpu %d > per-GPU mini-batch %d%s" % (
                role, micro, q, " (silent: gradient accumulation %d // %d = 0, NaN loss)" % (q, micro) if silent else ""),
                item=role, silent=silent, micro=micro, mini_per_gpu=q, **micro_fix)
        elif q % micro:
            x.add("micro_vs_mini", "warn" if silent else "fail", "%s: per-GPU mini-batch %d is not a multiple of "
                  "ppo_micro_batch_size_per_gpu %d%s" % (role, q, micro, " (silent: the loss is scaled by %d // %d)" % (
                      q, micro) if silent else ""), item=role, silent=silent, **micro_fix)
        else:
            x.add("micro_vs_mini", "pass", "%s: %d / %d = %d micro-batches per mini-batch" % (role, q, micro, q // micro),
                  item=role)
            if role == "actor" and v.strategy == "megatron" and v.mg_vpp and v.mg_vpp > 1:
                _vpp(x, v, q, micro, cands, key, mkey)


def _vpp(x: RuleContext, v: Values, q: int, micro: int, cands: List[int], key: str, mkey: str) -> None:
    """Megatron's interleaved (virtual) pipeline schedule needs at least PP micro-batches per
    mini-batch on each data-parallel rank."""
    m = q // micro
    if m >= v.mg_pp:
        x.add("megatron_vpp", "pass", "virtual pipeline %d: %d micro-batches per mini-batch >= PP %d" % (
            v.mg_vpp, m, v.mg_pp))
        return
    dp = _dp(v, "actor") or 1
    alts = [{mkey: d} for d in reversed(divisors(q)) if q // d >= v.mg_pp][:1]
    alts += [{key: c} for c in cands if (c * v.n // dp) // micro >= v.mg_pp and (c * v.n) % dp == 0][:2]
    x.add("megatron_vpp", "fail", "virtual pipeline size %d needs >= PP %d micro-batches per mini-batch, but each "
          "data-parallel rank gets %d / %d = %d" % (v.mg_vpp, v.mg_pp, q, micro, m),
          "set %s" % " or ".join(override_line(a) for a in alts) if alts else
          "unset actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size (or raise "
          "ppo_mini_batch_size)", alts=alts, vpp=v.mg_vpp, pp=v.mg_pp, micro_batches=m)
