"""The config values the rules read, checked for type and size first (:class:`Values`)."""

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple


class ValueProblem(Exception):
    """A config value has the wrong type (e.g. a string where verl needs an int); ``key`` is the
    dotted key when known."""

    def __init__(self, message: str, key: Optional[str] = None):
        super().__init__(message)
        self.key = key


@dataclass
class Values:
    """The numbers the rules read, taken from a composed config (see :func:`values`)."""

    B: int
    n: int
    gpn: int
    nnodes: int
    strategy: str
    dyn: bool
    mini: Optional[int]
    micro: Optional[int]
    micro_gpu: Optional[int]
    sp: int
    remove_padding: bool
    rollout_name: Optional[str]
    rollout_mode: Optional[str]
    tp: int
    rdp: int
    rpp: int
    ep: int
    gpu_mem_util: Optional[float]
    max_num_seqs: Optional[int]
    prompt_length: Optional[int]
    response_length: Optional[int]
    max_model_len: Optional[int]
    lp_micro: Optional[int]
    lp_micro_gpu: Optional[int]
    temperature: Optional[float]
    val_do_sample: bool
    use_ref: bool
    ref_lp_micro: Optional[int]
    ref_lp_micro_gpu: Optional[int]
    use_critic: bool
    critic_dyn: bool
    critic_mini: Optional[int]
    critic_micro: Optional[int]
    critic_micro_gpu: Optional[int]
    critic_sp: int
    mg_tp: int
    mg_pp: int
    mg_cp: int
    mg_vpp: Optional[int]
    param_offload: bool
    optimizer_offload: bool
    model_path: Any
    sp_key: str = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"

    @property
    def world(self) -> int:
        """``n_gpus_per_node x nnodes``."""
        return self.gpn * self.nnodes


#: Largest count or size read from a config (2**31 - 1): batch sizes, GPU counts and parallel sizes
#: are far below it, and arithmetic on the divisors of a larger one would not end in time.
MAX_SIZE = 2 ** 31 - 1


def _int(get: Callable[[str, Any], Any], key: str, default: Any = None, required: bool = False) -> Optional[int]:
    v = get(key, default)
    if v is None or v == "???":
        if required:
            raise ValueProblem("%s is not set" % key)
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueProblem("%s is %r, not a whole number" % (key, v), key)
    if isinstance(v, str) and "${" in v:  # left unresolved: why is OmegaConf's error (see evaluate)
        raise ValueProblem("%s is %r: the interpolation does not resolve" % (key, v), key)
    try:
        f = float(v)
    except (ValueError, OverflowError):
        raise ValueProblem("%s is %r, not a whole number" % (key, v), key)
    if not math.isfinite(f):  # nan, inf, 1e400: no size at all (and int() of them raises)
        raise ValueProblem("%s is %r, not a finite whole number" % (key, v))
    if f != int(f):
        raise ValueProblem("%s is %r, not a whole number" % (key, v))
    if abs(f) > MAX_SIZE:  # no run has more; the divisor search below would take hours
        raise ValueProblem("%s is %r, more than %d, which no run uses; set the real size" % (key, v, MAX_SIZE))
    return int(f)


def _finite(key: str, v: Any) -> Optional[float]:
    """A number as float (None when unset or not a number); raises ValueProblem for nan and inf,
    which pass every ``<``/``>`` test unnoticed (nan) or overflow later (inf)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    if not math.isfinite(f):
        raise ValueProblem("%s is %r, not a finite number" % (key, v))
    return f


def as_bool(v: Any) -> bool:
    """A config flag as verl reads it: strings ``true``/``1``/``yes`` (any case) are True, other strings False,
    anything else by ``bool``."""
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def _size(get: Callable[[str, Any], Any], key: str, default: int = 1) -> int:
    """A size read with :func:`_int`; ``default`` only when the key is unset (null), never in
    place of a 0 or a negative value (those are reported by :func:`bad_sizes`)."""
    v = _int(get, key)
    return default if v is None else v


def values(get: Callable[[str, Any], Any]) -> Values:
    """Read the rule inputs through ``get(key, default)`` (e.g. :meth:`Composed.get`).

    Raises ValueProblem when a number verl needs is unset or not a whole number. Sizes of 0 or
    less are kept as given (see :func:`bad_sizes`).
    """
    a, r, c = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "critic."
    strategy = str(get(a + "strategy", "fsdp") or "fsdp")
    legacy_sp = _size(get, a + "ulysses_sequence_parallel_size")
    fsdp_sp = _size(get, a + "fsdp_config.ulysses_sequence_parallel_size")
    critic_legacy = _size(get, c + "ulysses_sequence_parallel_size")
    critic_fsdp = max(_size(get, c + "fsdp.ulysses_sequence_parallel_size"),
                      _size(get, c + "model.fsdp_config.ulysses_sequence_parallel_size"))
    critic_enable = get(c + "enable", None)
    adv = str(get("algorithm.adv_estimator", "gae"))
    util = get(r + "gpu_memory_utilization", None)
    temp = get(r + "temperature", None)
    return Values(
        B=_int(get, "data.train_batch_size", required=True), n=_size(get, r + "n"),
        gpn=_int(get, "trainer.n_gpus_per_node", required=True), nnodes=_size(get, "trainer.nnodes"),
        strategy=strategy, dyn=as_bool(get(a + "use_dynamic_bsz", False)),
        mini=_int(get, a + "ppo_mini_batch_size"), micro=_int(get, a + "ppo_micro_batch_size"),
        micro_gpu=_int(get, a + "ppo_micro_batch_size_per_gpu"),
        sp=legacy_sp if legacy_sp > 1 else fsdp_sp,
        remove_padding=as_bool(get("actor_rollout_ref.model.use_remove_padding", False)),
        rollout_name=get(r + "name", None), rollout_mode=get(r + "mode", None),
        tp=_size(get, r + "tensor_model_parallel_size"), rdp=_size(get, r + "data_parallel_size"),
        rpp=_size(get, r + "pipeline_model_parallel_size"), ep=_size(get, r + "expert_parallel_size"),
        gpu_mem_util=_finite(r + "gpu_memory_utilization", util),
        max_num_seqs=_int(get, r + "max_num_seqs"), prompt_length=_int(get, r + "prompt_length"),
        response_length=_int(get, r + "response_length"), max_model_len=_int(get, r + "max_model_len"),
        lp_micro=_int(get, r + "log_prob_micro_batch_size"), lp_micro_gpu=_int(get, r + "log_prob_micro_batch_size_per_gpu"),
        temperature=_finite(r + "temperature", temp),
        val_do_sample=as_bool(get(r + "val_kwargs.do_sample", False)),
        use_ref=as_bool(get("algorithm.use_kl_in_reward", False)) or as_bool(get(a + "use_kl_loss", False)),
        ref_lp_micro=_int(get, "actor_rollout_ref.ref.log_prob_micro_batch_size"),
        ref_lp_micro_gpu=_int(get, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"),
        use_critic=as_bool(critic_enable) if critic_enable is not None else adv == "gae",
        critic_dyn=as_bool(get(c + "use_dynamic_bsz", False)), critic_mini=_int(get, c + "ppo_mini_batch_size"),
        critic_micro=_int(get, c + "ppo_micro_batch_size"), critic_micro_gpu=_int(get, c + "ppo_micro_batch_size_per_gpu"),
        critic_sp=critic_legacy if critic_legacy > 1 else critic_fsdp,
        mg_tp=_size(get, a + "megatron.tensor_model_parallel_size"),
        mg_pp=_size(get, a + "megatron.pipeline_model_parallel_size"),
        mg_cp=_size(get, a + "megatron.context_parallel_size"),
        mg_vpp=_int(get, a + "megatron.virtual_pipeline_model_parallel_size"),
        param_offload=as_bool(get(a + "fsdp_config.param_offload", False)),
        optimizer_offload=as_bool(get(a + "fsdp_config.optimizer_offload", False)),
        model_path=get("actor_rollout_ref.model.path", None),
        sp_key=a + ("ulysses_sequence_parallel_size" if legacy_sp > 1 else "fsdp_config.ulysses_sequence_parallel_size"))


def bad_sizes(get: Callable[[str, Any], Any], v: Values) -> List[Tuple[str, int, str]]:
    """Sizes the launch uses that are 0 or negative: ``(key, value, suggested value)``.

    Counts and parallel sizes must be >= 1 wherever verl reads them: batch sizes, rollout.n,
    GPUs and nodes, tensor/data/pipeline/expert/Ulysses parallel sizes (Megatron's when the
    strategy is megatron, the critic's when a critic is used), and the mini/micro-batch sizes
    that are set and read (micro sizes only without dynamic batch size).
    """
    a, r, c = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "critic."
    keys: List[Tuple[str, Optional[int], str]] = [
        ("data.train_batch_size", v.B, "a multiple of the world size"),
        (r + "n", v.n, "1 (PPO) or the group size (GRPO, e.g. 4 to 16)"),
        ("trainer.n_gpus_per_node", v.gpn, "the GPUs of each node"), ("trainer.nnodes", v.nnodes, "1"),
        (r + "tensor_model_parallel_size", v.tp, "1"), (r + "data_parallel_size", v.rdp, "1"),
        (r + "pipeline_model_parallel_size", v.rpp, "1"), (r + "expert_parallel_size", v.ep, "1"),
        (a + "ulysses_sequence_parallel_size", _int(get, a + "ulysses_sequence_parallel_size"), "1"),
        (a + "fsdp_config.ulysses_sequence_parallel_size",
         _int(get, a + "fsdp_config.ulysses_sequence_parallel_size"), "1"),
        (a + "ppo_mini_batch_size", v.mini, "a divisor of data.train_batch_size"),
    ]
    if v.strategy == "megatron":
        keys += [(a + "megatron.tensor_model_parallel_size", v.mg_tp, "1"),
                 (a + "megatron.pipeline_model_parallel_size", v.mg_pp, "1"),
                 (a + "megatron.context_parallel_size", v.mg_cp, "1")]
    if not v.dyn:
        keys += [(a + "ppo_micro_batch_size_per_gpu", v.micro_gpu, "1 to 4"),
                 (a + "ppo_micro_batch_size", v.micro, "null (use ppo_micro_batch_size_per_gpu)"),
                 (r + "log_prob_micro_batch_size_per_gpu", v.lp_micro_gpu, "1 to 16")]
    if v.use_critic:
        keys += [(c + "ppo_mini_batch_size", v.critic_mini, "a divisor of data.train_batch_size"),
                 (c + "ulysses_sequence_parallel_size", _int(get, c + "ulysses_sequence_parallel_size"), "1")]
        if not v.critic_dyn:
            keys.append((c + "ppo_micro_batch_size_per_gpu", v.critic_micro_gpu, "1 to 4"))
    return [(k, val, hint) for k, val, hint in keys if val is not None and val < 1]
