"""verl's batch arithmetic, as pure functions of the config numbers.

Terms (verl's): a *prompt* is one dataset row; each is sampled ``rollout.n`` times, giving
*sequences*. ``data.train_batch_size`` counts prompts per step, ``ppo_mini_batch_size`` prompts
per optimizer step, ``*_micro_batch_size_per_gpu`` sequences per forward/backward on one GPU.
The *world size* is ``trainer.n_gpus_per_node x trainer.nnodes``. The actor trains with data
parallel size ``world / Ulysses size``; the rollout runs ``world / (TP x DP x PP)`` replicas
(rollout data-parallel groups), each on TP x DP x PP GPUs.

Example (the seeds'): 60 prompts x 12 rollouts = 720 sequences; on 6 GPUs that is 120 per GPU;
with rollout TP 2 there are 3 groups of 20 prompts, 240 sequences each.
"""

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["world_size", "sequences_per_step", "rollout_groups", "per_gpu_mini", "split_count",
           "rounds", "multiples_near", "BatchPlan", "plan"]


def world_size(n_gpus_per_node: int, nnodes: int) -> int:
    """GPUs of the job: ``n_gpus_per_node x nnodes``."""
    return int(n_gpus_per_node) * int(nnodes)


def sequences_per_step(train_batch_size: int, rollout_n: int) -> int:
    """Sequences generated and trained per step: prompts x ``rollout.n``."""
    return int(train_batch_size) * int(rollout_n)


def rollout_groups(world: int, tp: int, dp: int = 1, pp: int = 1) -> Tuple[int, int]:
    """(rollout replicas, GPUs left over): each replica uses ``tp x dp x pp`` GPUs.

    verl asserts the remainder is 0 and the replica size is at most the world size.
    Raises ValueError for a non-positive size.
    """
    size = int(tp) * int(dp) * int(pp)
    if size <= 0:
        raise ValueError("rollout parallel size must be positive, got %d" % size)
    return world // size, world % size


def per_gpu_mini(mini: int, rollout_n: int, world: int, sp: int = 1, mode: str = "exact") -> Tuple[int, int]:
    """(per-GPU mini-batch in sequences, remainder) after verl's normalisation.

    ``mini x rollout.n / (world / sp)``. ``mode`` ``floor`` (fsdp_workers, <= 0.9.0) drops the
    remainder silently; ``exact`` (engine workers, 0.9.1) asserts it is 0. Either way verl needs
    the result > 0. Raises ValueError when ``sp`` does not divide ``world``.
    """
    if sp <= 0 or world % sp:
        raise ValueError("Ulysses size %d does not divide the world size %d" % (sp, world))
    dp = world // sp
    total = int(mini) * int(rollout_n)
    return total // dp, total % dp


def split_count(total: int, part: int) -> Tuple[int, int]:
    """(whole parts, remainder) of ``total`` split into ``part``-sized pieces (``part`` > 0)."""
    return int(total) // int(part), int(total) % int(part)


def rounds(total: float, part: int) -> int:
    """Passes needed to go through ``total`` items ``part`` at a time (ceil)."""
    return -(-int(total) // int(part)) if part else 0


def multiples_near(value: int, step: int, factor: int = 1) -> List[int]:
    """Values ``v`` near ``value`` with ``v x factor`` divisible by ``step``: the nearest below
    (when > 0) and above. E.g. ``multiples_near(68, 8)`` -> ``[64, 72]``; with ``factor`` 12
    and ``step`` 8, multiples of 2."""
    unit = int(step) // math.gcd(int(step), int(factor)) if factor else int(step)
    lo = (int(value) // unit) * unit
    hi = lo + unit if lo != value else value + unit
    out = [v for v in (lo if lo != value else value - unit, hi) if v > 0]
    return sorted(set(out))


@dataclass
class BatchPlan:
    """The batch pipeline of one config, every count in prompts or sequences as named.

    Fractional results are kept as floats so a report can show them; the rules decide what a
    remainder means for the release. Per-GPU figures are per training data-parallel rank
    (``world / sp`` ranks).
    """

    prompts_per_step: int
    rollout_n: int
    sequences_per_step: int
    gpus_per_node: int
    nnodes: int
    world: int
    rollout_tp: int
    rollout_dp: int
    rollout_pp: int
    rollout_replica_gpus: int
    rollout_groups: Optional[int]
    prompts_per_group: Optional[float]
    sequences_per_group: Optional[float]
    sp: int
    train_dp: Optional[int]
    prompts_per_gpu: Optional[float]
    sequences_per_gpu: Optional[float]
    mini_prompts: Optional[int]
    mini_sequences: Optional[int]
    mini_per_gpu: Optional[float]
    mini_batches_per_step: Optional[float]
    micro_per_gpu: Optional[int]
    micro_batches_per_mini: Optional[float]
    logprob_micro_per_gpu: Optional[int]
    logprob_rounds: Optional[int]
    ref_logprob_micro_per_gpu: Optional[int]
    ref_logprob_rounds: Optional[int]
    dynamic_bsz: bool = False
    rows: List[Tuple[str, str, str]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form (``rows`` as [label, value, how])."""
        d = asdict(self)
        d["rows"] = [list(r) for r in self.rows]
        return d


def _div(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or not b:
        return None
    q = a / b
    return int(q) if q == int(q) else round(q, 2)


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return "?"
    if isinstance(x, float) and x != int(x):
        return "%.2f" % x
    return "%d" % x


def plan(train_batch_size: int, rollout_n: int, gpus_per_node: int, nnodes: int, rollout_tp: int = 1,
         rollout_dp: int = 1, rollout_pp: int = 1, sp: int = 1, mini: Optional[int] = None,
         micro_per_gpu: Optional[int] = None, logprob_micro_per_gpu: Optional[int] = None,
         ref_logprob_micro_per_gpu: Optional[int] = None, dynamic_bsz: bool = False) -> BatchPlan:
    """The whole pipeline for these numbers, with ``rows`` explaining each figure.

    ``mini`` is ``actor.ppo_mini_batch_size`` (prompts); ``micro_per_gpu`` the actor's
    ``ppo_micro_batch_size_per_gpu``; the log-prob sizes are the rollout's and the ref's
    ``log_prob_micro_batch_size_per_gpu`` (sequences). Inputs must be ints (None: unset).
    """
    B, n = int(train_batch_size), int(rollout_n)
    seqs = sequences_per_step(B, n)
    world = world_size(gpus_per_node, nnodes)
    rsize = int(rollout_tp) * int(rollout_dp) * int(rollout_pp)
    groups = world // rsize if rsize > 0 and world % rsize == 0 and world >= rsize else None
    train_dp = world // sp if sp > 0 and world % sp == 0 else None
    seq_gpu = _div(seqs, train_dp)
    mini_seq = mini * n if mini is not None else None
    mini_gpu = _div(mini_seq, train_dp)
    p = BatchPlan(
        prompts_per_step=B, rollout_n=n, sequences_per_step=seqs, gpus_per_node=int(gpus_per_node),
        nnodes=int(nnodes), world=world, rollout_tp=int(rollout_tp), rollout_dp=int(rollout_dp),
        rollout_pp=int(rollout_pp), rollout_replica_gpus=rsize, rollout_groups=groups,
        prompts_per_group=_div(B, groups), sequences_per_group=_div(seqs, groups), sp=int(sp), train_dp=train_dp,
        prompts_per_gpu=_div(B, train_dp), sequences_per_gpu=seq_gpu, mini_prompts=mini, mini_sequences=mini_seq,
        mini_per_gpu=mini_gpu, mini_batches_per_step=_div(B, mini), micro_per_gpu=micro_per_gpu,
        micro_batches_per_mini=_div(mini_gpu, micro_per_gpu), logprob_micro_per_gpu=logprob_micro_per_gpu,
        logprob_rounds=rounds(seq_gpu, logprob_micro_per_gpu) if seq_gpu is not None and logprob_micro_per_gpu else None,
        ref_logprob_micro_per_gpu=ref_logprob_micro_per_gpu,
        ref_logprob_rounds=(rounds(seq_gpu, ref_logprob_micro_per_gpu)
                            if seq_gpu is not None and ref_logprob_micro_per_gpu else None),
        dynamic_bsz=bool(dynamic_bsz))
    r = p.rows
    r.append(("prompts per step", "%d" % B, "data.train_batch_size"))
    r.append(("sequences per step", "%d x %d = %d" % (B, n, seqs), "x rollout.n"))
    r.append(("world size", "%d x %d = %d GPUs" % (p.gpus_per_node, p.nnodes, world),
              "n_gpus_per_node x nnodes"))
    if groups is not None:
        r.append(("rollout groups", "%d / %d = %d" % (world, rsize, groups),
                  "world / rollout TP %d x DP %d x PP %d" % (rollout_tp, rollout_dp, rollout_pp)))
        r.append(("per rollout group", "%s prompts, %s sequences" % (_fmt(p.prompts_per_group),
                                                                    _fmt(p.sequences_per_group)),
                  "step / rollout groups"))
    else:
        r.append(("rollout groups", "%d GPUs / %d: not whole" % (world, rsize),
                  "rollout TP x DP x PP must divide the world"))
    if train_dp is not None:
        r.append(("per GPU", "%s prompts, %s sequences" % (_fmt(p.prompts_per_gpu), _fmt(seq_gpu)),
                  "step / %d data-parallel ranks%s" % (train_dp, " (world / Ulysses %d)" % sp if sp > 1 else "")))
    else:
        r.append(("per GPU", "?", "Ulysses size %d does not divide the world %d" % (sp, world)))
    if dynamic_bsz:
        r.append(("micro-batches", "by token count", "use_dynamic_bsz=True (ppo_max_token_len_per_gpu)"))
    if mini is not None:
        r.append(("actor mini-batch", "%d x %d / %s = %s sequences per GPU" % (
            mini, n, train_dp if train_dp else "?", _fmt(mini_gpu)), "ppo_mini_batch_size x n / DP ranks"))
        r.append(("mini-batches per step", _fmt(p.mini_batches_per_step), "train_batch_size / ppo_mini_batch_size"))
    if micro_per_gpu and not dynamic_bsz:
        r.append(("micro-batches per mini", "%s / %d = %s" % (_fmt(mini_gpu), micro_per_gpu,
                                                             _fmt(p.micro_batches_per_mini)),
                  "gradient accumulation steps"))
    if p.logprob_rounds is not None and not dynamic_bsz:
        r.append(("log-prob rounds", "%s / %d = %d" % (_fmt(seq_gpu), logprob_micro_per_gpu, p.logprob_rounds),
                  "rollout.log_prob_micro_batch_size_per_gpu"))
    if p.ref_logprob_rounds is not None and not dynamic_bsz:
        r.append(("ref log-prob rounds", "%s / %d = %d" % (_fmt(seq_gpu), ref_logprob_micro_per_gpu,
                                                           p.ref_logprob_rounds),
                  "ref.log_prob_micro_batch_size_per_gpu"))
    return p
