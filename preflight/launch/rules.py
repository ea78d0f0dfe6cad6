"""verl's launch rules for a release, checked on a composed config before anything starts.

The rules themselves are code (:func:`evaluate`); what differs between releases (which check
exists, whether it stops the run or goes silent, where it lives) is data in
``matrices/verl_rules.toml``. Every :class:`Finding` names the verl check that would fail later
(paraphrased), shows the numbers, and gives the smallest change that fixes it.

Machine facts (GPUs, free GPU memory, host memory) come in as plain dicts, so the rules are
pure: ``machine = {"nvml": <nvml snapshot>, "host": <host facts>, "env": {...}}``.
"""

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..hw import visible_devices
from ..matrix import MatrixError, parse_version, read_file as _read
from . import batch as bm
from .model import ModelFacts

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - exercised on 3.8-3.10
    import tomli as _toml  # type: ignore[no-redef]

__all__ = ["Finding", "Values", "load_rules", "ruleset", "values", "evaluate", "divisors", "visible_gpus",
           "mandatory_keys", "entry_point", "bad_sizes"]

_RULES: Dict[str, Any] = {}


def load_rules() -> Dict[str, Any]:
    """``matrices/verl_rules.toml`` parsed (cached). Raises MatrixError when missing or malformed."""
    if not _RULES:
        raw = _read("verl_rules.toml", None)
        if raw is None:
            raise MatrixError("matrix file verl_rules.toml not found; rebuild the zipapp or restore matrices/")
        try:
            data = _toml.loads(raw.decode("utf-8"))
        except ValueError as exc:
            raise MatrixError("matrix file verl_rules.toml is not valid TOML: %s; restore it" % exc)
        for rs in data.get("ruleset", []):
            if not rs.get("source") or not rs.get("versions"):
                raise MatrixError("matrix file verl_rules.toml: a ruleset lacks versions or source; fix the row")
            SpecifierSet(rs["versions"])
        for ep in data.get("entry_point", []):
            if not all(ep.get(k) for k in ("module", "kind", "config_name", "source")):
                raise MatrixError("matrix file verl_rules.toml: an entry_point lacks module, kind, config_name or "
                                  "source; fix the row")
        _RULES.update(data)
    return _RULES


def ruleset(version: Optional[str]) -> Tuple[Dict[str, Any], str]:
    """(the ruleset covering verl ``version``, a note on how it was chosen).

    An unparseable or absent version gets the newest ruleset.
    """
    sets = load_rules()["ruleset"]
    pv = parse_version(version) if version else None
    if pv is None:
        return sets[-1], "verl release unknown: rules of %s" % sets[-1]["label"]
    v = Version(pv.base_version)
    for rs in sets:
        if SpecifierSet(rs["versions"]).contains(v, prereleases=True):
            note = "rules of verl %s (%s)" % (rs["label"], rs["versions"])
            if v < Version("0.3"):
                note += "; rules before 0.3 are not recorded, 0.3's are used"
            return rs, note
    return sets[-1], "rules of %s" % sets[-1]["label"]


def entry_point(entry: Optional[str]) -> Optional[Dict[str, Any]]:
    """The ``[[entry_point]]`` row of verl_rules.toml for a launch's program, or None when it is
    not one of verl's (a recipe, the user's own script) or absent.

    ``entry`` is a module (``verl.trainer.sft_trainer``) or a script path
    (``verl/trainer/main_ppo.py``, ``/src/verl/verl/trainer/fsdp_sft_trainer.py``).
    """
    if not entry:
        return None
    name = entry[:-3] if entry.endswith(".py") else entry
    name = name.replace("\\", "/").replace("/", ".").strip(".")
    for row in load_rules().get("entry_point", []):
        if name == row["module"] or name.endswith("." + row["module"]):
            return row
    return None


@dataclass
class Finding:
    """One rule's verdict.

    Attributes:
        rule: rule id (``train_batch_divisible``), ``item`` adds the role (``actor``, ``critic``).
        status: ``pass``, ``warn``, ``fail`` or ``skip``.
        message: the numbers, one line.
        fix: the smallest change (required for warn and fail).
        check: what verl checks, paraphrased (matrices/verl_rules.toml [rule.<id>]).
        where: the verl code that checks it in this release (when recorded).
        stops: when and how verl stops (or what goes wrong silently).
        silent: True when verl would not stop but train wrongly or slowly.
        evidence: the numbers by name.
        alts: the fix as overrides: each mapping (dotted key -> value) is one way to fix it that
            the fix text offers; :func:`evaluate` re-runs every rule on each and keeps only those
            that fix this finding without failing another rule (a mapping may then carry the
            companion change that another rule needs).
        fix_key, fix_tail: when set, the fix text is rebuilt from the surviving ``alts`` as
            ``set <fix_key> to A or B<fix_tail>``.
    """

    rule: str
    status: str
    message: str
    fix: Optional[str] = None
    item: Optional[str] = None
    check: str = ""
    where: str = ""
    stops: str = ""
    silent: bool = False
    evidence: Dict[str, Any] = field(default_factory=dict)
    alts: List[Dict[str, Any]] = field(default_factory=list)
    fix_key: Optional[str] = None
    fix_tail: str = ""

    @property
    def id(self) -> str:
        """``rule`` or ``rule.item``."""
        return self.rule if not self.item else "%s.%s" % (self.rule, self.item)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "rule": self.rule, "status": self.status, "message": self.message, "fix": self.fix,
                "check": self.check, "where": self.where, "stops": self.stops, "silent": self.silent,
                "evidence": self.evidence, "overrides": [override_line(a) for a in self.alts]}


# ---- config values ---------------------------------------------------------------------------
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


def _bool(v: Any) -> bool:
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
        strategy=strategy, dyn=_bool(get(a + "use_dynamic_bsz", False)),
        mini=_int(get, a + "ppo_mini_batch_size"), micro=_int(get, a + "ppo_micro_batch_size"),
        micro_gpu=_int(get, a + "ppo_micro_batch_size_per_gpu"),
        sp=legacy_sp if legacy_sp > 1 else fsdp_sp,
        remove_padding=_bool(get("actor_rollout_ref.model.use_remove_padding", False)),
        rollout_name=get(r + "name", None), rollout_mode=get(r + "mode", None),
        tp=_size(get, r + "tensor_model_parallel_size"), rdp=_size(get, r + "data_parallel_size"),
        rpp=_size(get, r + "pipeline_model_parallel_size"), ep=_size(get, r + "expert_parallel_size"),
        gpu_mem_util=_finite(r + "gpu_memory_utilization", util),
        max_num_seqs=_int(get, r + "max_num_seqs"), prompt_length=_int(get, r + "prompt_length"),
        response_length=_int(get, r + "response_length"), max_model_len=_int(get, r + "max_model_len"),
        lp_micro=_int(get, r + "log_prob_micro_batch_size"), lp_micro_gpu=_int(get, r + "log_prob_micro_batch_size_per_gpu"),
        temperature=_finite(r + "temperature", temp),
        val_do_sample=_bool(get(r + "val_kwargs.do_sample", False)),
        use_ref=_bool(get("algorithm.use_kl_in_reward", False)) or _bool(get(a + "use_kl_loss", False)),
        ref_lp_micro=_int(get, "actor_rollout_ref.ref.log_prob_micro_batch_size"),
        ref_lp_micro_gpu=_int(get, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"),
        use_critic=_bool(critic_enable) if critic_enable is not None else adv == "gae",
        critic_dyn=_bool(get(c + "use_dynamic_bsz", False)), critic_mini=_int(get, c + "ppo_mini_batch_size"),
        critic_micro=_int(get, c + "ppo_micro_batch_size"), critic_micro_gpu=_int(get, c + "ppo_micro_batch_size_per_gpu"),
        critic_sp=critic_legacy if critic_legacy > 1 else critic_fsdp,
        mg_tp=_size(get, a + "megatron.tensor_model_parallel_size"),
        mg_pp=_size(get, a + "megatron.pipeline_model_parallel_size"),
        mg_cp=_size(get, a + "megatron.context_parallel_size"),
        mg_vpp=_int(get, a + "megatron.virtual_pipeline_model_parallel_size"),
        param_offload=_bool(get(a + "fsdp_config.param_offload", False)),
        optimizer_offload=_bool(get(a + "fsdp_config.optimizer_offload", False)),
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


# ---- helpers ---------------------------------------------------------------------------------
def divisors(n: int) -> List[int]:
    """Positive divisors of ``n`` (n > 0), ascending."""
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return small + large[::-1]


def _near(cands: Sequence[int], value: int, k: int = 2) -> List[int]:
    """Up to ``k`` candidates nearest ``value``: the closest below and above when both exist."""
    below = [c for c in cands if c < value]
    above = [c for c in cands if c > value]
    out = ([below[-1]] if below else []) + ([above[0]] if above else [])
    return out[:k] if out else sorted(cands, key=lambda c: abs(c - value))[:k]


def _or(xs: Sequence[Any]) -> str:
    """``a, b or c``; ``""`` for no items (a fix text is only built for a finding that has one)."""
    xs = [str(x) for x in xs]
    if not xs:
        return ""
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " or " + xs[-1]


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[%s]" % ",".join(_fmt(i) for i in v)
    return str(v)


def override_line(alt: Dict[str, Any]) -> str:
    """Overrides as launch words: ``{"a.b": 8, "c": True}`` -> ``a.b=8 c=True``."""
    return " ".join("%s=%s" % (k, _fmt(v)) for k, v in alt.items())


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


# ---- the rules --------------------------------------------------------------------------------
_SET_WORD = re.compile(r"^([A-Za-z_][\w.]*)=([\w.+-]+)$")


def fix_overrides(fix: str) -> List[Dict[str, Any]]:
    """The overrides a fix text stands for when it is exactly ``set k=v [k2=v2 ...]`` with
    literal values (``set a.b=4``, ``set x=vllm``), as one alternative; [] for any other text.

    Values are read as Hydra reads an override's value (int, float, bool, null, else a string).
    """
    if not fix.startswith("set "):
        return []
    words = fix[4:].split()
    out: Dict[str, Any] = {}
    for w in words:
        m = _SET_WORD.match(w)
        if not m or m.group(2) == "...":
            return []
        out[m.group(1)] = _literal(m.group(2))
    return [out] if out else []


def _literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    for typ in (int, float):
        try:
            return typ(text)
        except ValueError:
            pass
    return text


class _Ctx:
    def __init__(self, rs: Dict[str, Any], rules: Dict[str, Any]):
        self.rs = rs
        self.rules = rules
        self.out: List[Finding] = []

    def add(self, rule: str, status: str, message: str, fix: Optional[str] = None, item: Optional[str] = None,
            silent: bool = False, alts: Optional[List[Dict[str, Any]]] = None, fix_key: Optional[str] = None,
            fix_tail: str = "", **evidence: Any) -> Finding:
        meta = self.rules.get(rule, {})
        if fix is None and fix_key and alts:
            fix = "set %s to %s%s" % (fix_key, _or([_fmt(a[fix_key]) for a in alts]), fix_tail)
        elif fix is None and fix_key:
            fix = "change %s%s" % (fix_key, fix_tail)
        if not alts and fix:
            alts = fix_overrides(fix)  # a fix phrased "set k=v": the one-line fix can use it too
        f = Finding(rule, status, message, fix, item, meta.get("check", ""),
                    (self.rs.get("where") or {}).get(rule, ""), meta.get("stops", ""), silent,
                    {k: v for k, v in evidence.items() if v is not None}, list(alts or []), fix_key, fix_tail)
        self.out.append(f)
        return f


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


def _mandatory(x: _Ctx, missing: Sequence[str]) -> None:
    for key in missing:
        hint = "vllm (or sglang)" if key.endswith("rollout.name") else "a value"
        x.add("mandatory", "fail", "%s is ??? (mandatory) and not set" % key, "set %s=%s" % (
            key, hint.split(" ")[0] if hint != "a value" else "..."), item=key.replace(".", "_"),
            alts=[{key: "vllm"}, {key: "sglang"}] if hint != "a value" else [])


def _micro_set(x: _Ctx, v: Values) -> None:
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


def _train_divisible(x: _Ctx, v: Values, p: bm.BatchPlan) -> None:
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
            alts = [{ppk: d} for d in _near([d for d in divisors(v.world) if v.world % (v.mg_tp * d * v.mg_cp) == 0],
                                            v.mg_pp)]
            if not alts:
                alts = [{tpk: d, ppk: 1} for d in _near([d for d in divisors(v.world) if v.world % (d * v.mg_cp) == 0],
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


def _mini_le_train(x: _Ctx, v: Values) -> None:
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


def _global_micro(x: _Ctx, v: Values) -> None:
    pairs = [("actor", "actor_rollout_ref.actor", v.mini, v.micro, v.sp, v.dyn)]
    if v.use_critic:
        pairs.append(("critic", "critic", v.critic_mini, v.critic_micro, v.critic_sp, v.critic_dyn))
    for role, pre, mini, micro, sp, dyn in pairs:
        if dyn or micro is None or mini is None:
            continue
        if micro <= 0 or mini % micro:
            x.add("global_micro", "fail", "%s: ppo_mini_batch_size %d is not a multiple of the deprecated "
                  "ppo_micro_batch_size %d" % (role, mini, micro),
                  "use %s.ppo_micro_batch_size_per_gpu instead (and remove ppo_micro_batch_size)" % pre, item=role)
        elif micro * sp < v.world:
            x.add("global_micro", "fail", "%s: ppo_micro_batch_size %d x Ulysses %d < world size %d" % (
                role, micro, sp, v.world), "use %s.ppo_micro_batch_size_per_gpu instead (and remove "
                "ppo_micro_batch_size)" % pre, item=role)
        else:
            x.add("global_micro", "pass", "%s: ppo_micro_batch_size %d fits mini %d and world %d" % (
                role, micro, mini, v.world), item=role)


def _sp(x: _Ctx, v: Values) -> None:
    for role, sp in (("actor", v.sp),) + ((("critic", v.critic_sp),) if v.use_critic else ()):
        if sp <= 1:
            continue
        if v.world % sp:
            ukey = "critic.ulysses_sequence_parallel_size" if role == "critic" else v.sp_key
            near = _near(divisors(v.world), sp)
            x.add("sp_remove_padding", "fail", "%s: Ulysses size %d does not divide the world size %d" % (
                role, sp, v.world), item=role, alts=[{ukey: d} for d in near], fix_key=ukey,
                fix_tail=" (a divisor of the world size %d)" % v.world)
        if not v.remove_padding:
            x.add("sp_remove_padding", "fail", "%s: Ulysses size %d with use_remove_padding=False" % (role, sp),
                  "set actor_rollout_ref.model.use_remove_padding=True", item=role,
                  alts=[{"actor_rollout_ref.model.use_remove_padding": True}])
        else:
            x.add("sp_remove_padding", "pass", "%s: Ulysses size %d with use_remove_padding=True" % (role, sp),
                  item=role)


def _val_temperature(x: _Ctx, v: Values) -> None:
    if v.val_do_sample and (v.temperature is None or v.temperature <= 0):
        x.add("val_temperature", "fail", "val_kwargs.do_sample=True with rollout.temperature=%s" % v.temperature,
              "set actor_rollout_ref.rollout.temperature to a value > 0 (e.g. 1.0)",
              alts=[{"actor_rollout_ref.rollout.temperature": 1.0}])


def _mini_micro(x: _Ctx, v: Values, p: bm.BatchPlan) -> None:
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
        micro_fix = dict(alts=[{mkey: okm[-1]}], fix_key=mkey, fix_tail=" (a divisor of %d)" % q)
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


def _vpp(x: _Ctx, v: Values, q: int, micro: int, cands: List[int], key: str, mkey: str) -> None:
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


def _rollout(x: _Ctx, v: Values, p: bm.BatchPlan, model: Optional[ModelFacts] = None) -> None:
    size = v.tp * v.rdp * v.rpp
    pre = "actor_rollout_ref.rollout."
    heads = model.heads if model else None
    kvh = model.kv_heads if model else None
    okt = [d for d in divisors(v.world) if d * v.rdp * v.rpp <= v.world and (v.world % (d * v.rdp * v.rpp)) == 0
           and tp_fits_heads(d, heads, kvh)]
    key = pre + "tensor_model_parallel_size"
    if size > v.world or v.world % size:
        near = _near(okt, v.tp)
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
        near = _near(okt, v.tp)
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
                  "KV heads (query groups)" % (v.mg_tp, heads, kvh), alts=[{mkey: d} for d in _near(okm, v.mg_tp)],
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


def _model_rules(x: _Ctx, v: Values, model: Optional[ModelFacts], why: str) -> None:
    if model is None:
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
                alts=[{ukey: d} for d in _near(ok, sp)], fix_key=ukey)
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
            "set data.max_response_length=%d (or shorten data.max_prompt_length)" % max(1, limit - v.prompt_length),
            limit=limit, alts=[{"data.max_response_length": max(1, limit - v.prompt_length)}]
            if v.prompt_length < limit else [{"data.max_prompt_length": limit // 2,
                                              "data.max_response_length": limit - limit // 2}])
    else:
        x.add("max_position", "warn", "prompt %d + response %d = %d > %d: long prompts get their responses cut to "
              "what is left" % (v.prompt_length, v.response_length, total, limit),
              "set data.max_response_length=%d (or shorten data.max_prompt_length)" % (limit - v.prompt_length),
              silent=True, limit=limit, alts=[{"data.max_response_length": limit - v.prompt_length}])


def _machine(x: _Ctx, v: Values, machine: Dict[str, Any], model: Optional[ModelFacts],
             get: Callable[[str, Any], Any]) -> None:
    from . import model_rules as mr

    env = dict(machine.get("env") or {})
    gpus, how = visible_gpus(machine.get("nvml") or {}, env)
    if gpus is None or (not gpus and "CUDA_VISIBLE_DEVICES" not in env):
        reason = "no NVIDIA GPU on this machine (%s); run this on a training node to compare" % how
        if not mr.launch_gpus(x, v, machine.get("launch_env") or {}):
            x.add("gpus_present", "skip", reason)
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


def evaluate(get: Callable[[str, Any], Any], release: Optional[str], machine: Optional[Dict[str, Any]] = None,
             model: Optional[ModelFacts] = None, model_why: str = "not looked up",
             missing: Sequence[str] = (), raw: Optional[Callable[[str, Any], Any]] = None,
             module_names: Optional[Tuple[Optional[List[str]], str]] = None,
             verify: bool = True, unresolved: Optional[Dict[str, str]] = None
             ) -> Tuple[Optional[bm.BatchPlan], List[Finding], str]:
    """Check a composed config against verl ``release``'s rules.

    Args:
        get: ``get(key, default)`` over the resolved config.
        release: verl version whose rules apply (None: the newest recorded).
        machine: ``{"nvml", "host", "env", "launch_env"}`` facts of this machine (None: machine
            rules skipped); ``launch_env`` holds the launch line's own VAR=value words.
        model: the actor model's facts (None: model rules skipped with ``model_why``).
        missing: keys left as ``???`` that verl will read (see :func:`mandatory_keys`).
        raw: ``raw(key, default)`` over the unresolved config (interpolation strings), so a fix
            to one key also reaches the keys that interpolate it.
        module_names: the model's module names and their source when known otherwise (the
            meta-device probe); default: from the safetensors index or header.
        verify: re-check each fix against every rule, group findings that share a root cause
            and add the ``fix_line`` finding (see :mod:`preflight.launch.fixes`).
    Returns:
        (the batch plan or None when a required number is missing, findings, ruleset note).
    """
    from . import fixes

    def run(g: Callable[[str, Any], Any]) -> List[Finding]:
        # a ??? key that a fix sets is no longer missing
        left = [k for k in missing if _unchanged(g, get, k)]
        return _evaluate(g, release, machine, model, model_why, left, raw, module_names, unresolved)[1]

    plan, out, note = _evaluate(get, release, machine, model, model_why, missing, raw, module_names, unresolved)
    if not verify or plan is None:
        return plan, out, note
    fixes.verify(out, get, raw, run)
    out = fixes.group(out)
    # the one-line fix is advice over the failing rules (a WARN), not one more failure to count
    res = fixes.fix_line(out, get, raw, run) if sum(1 for f in out if f.status == "fail") >= 2 else None
    if res is not None:
        line, fixed, left = res
        rs, _n = ruleset(release)
        x = _Ctx(rs, load_rules().get("rule", {}))
        if fixed and not left:
            x.add("fix_line", "warn", "one line fixes all %d failing rule(s): %s" % (len(fixed), ", ".join(fixed)),
                  override_line(line), alts=[line], fixed=fixed)
        elif fixed:
            x.add("fix_line", "warn", "one line fixes %d failing rule(s) (%s); still failing, with no override fix: "
                  "%s" % (len(fixed), ", ".join(fixed), ", ".join(left)), override_line(line), alts=[line],
                  fixed=fixed, left=left)
        out.extend(x.out)
    return plan, out, note


_ENV_INTERP = re.compile(r"\$\{oc\.env:([^,}]+)")
_REF_INTERP = re.compile(r"^\$\{(?:oc\.select:)?([\w.]+)(?:,[^}]*)?\}$")


def _unresolved(key: str, why: str, raw: Optional[Callable[[str, Any], Any]]) -> Tuple[str, str]:
    """(message, fix) for a number whose interpolation OmegaConf could not resolve: the unset
    environment variable or the cycle of references named, OmegaConf's own error quoted."""
    text = raw(key, None) if raw is not None else None
    text = text if isinstance(text, str) else ""
    env = _ENV_INTERP.search(text)
    if env is not None and "nvironment variable" in why:
        name = env.group(1).strip()
        return ("%s = %s: environment variable %s is not set (OmegaConf: %s)" % (key, text, name, why),
                "set %s in the launch environment (%s=... python3 -m ...), or give the interpolation a default: "
                "${oc.env:%s,VALUE}" % (name, name, name))
    chain = [key]
    k = key
    while raw is not None:
        r = raw(k, None)
        m = _REF_INTERP.match(r.strip()) if isinstance(r, str) else None
        if m is None:
            break
        t = m.group(1)
        k = k.rsplit(".", 1)[0] + t if t.startswith(".") else t
        chain.append(k)
        if k in chain[:-1]:
            return ("%s = %s: the interpolation is a cycle (%s) (OmegaConf: %s)" % (key, text, " -> ".join(chain), why),
                    "set %s to a number in the launch command (key=value)" % key)
    return ("%s = %s does not resolve (OmegaConf: %s)" % (key, text or "?", why),
            "fix the interpolation, or set %s to a number in the launch command (key=value)" % key)


def _unchanged(g: Callable[[str, Any], Any], get: Callable[[str, Any], Any], key: str) -> bool:
    mark = object()
    try:
        return g(key, mark) is get(key, mark) or g(key, mark) == get(key, mark)
    except Exception:
        return True


def _evaluate(get: Callable[[str, Any], Any], release: Optional[str], machine: Optional[Dict[str, Any]],
              model: Optional[ModelFacts], model_why: str, missing: Sequence[str],
              raw: Optional[Callable[[str, Any], Any]],
              module_names: Optional[Tuple[Optional[List[str]], str]],
              unresolved: Optional[Dict[str, str]] = None
              ) -> Tuple[Optional[bm.BatchPlan], List[Finding], str]:
    from . import model_rules as mr

    rs, note = ruleset(release)
    rules = load_rules().get("rule", {})
    x = _Ctx(rs, rules)
    _mandatory(x, missing)
    try:
        v = values(get)
    except ValueProblem as exc:
        why = (unresolved or {}).get(exc.key or "")
        if why is not None:
            msg, fix = _unresolved(exc.key or "", why, raw)
            x.add("config_values", "fail", msg, fix, key=exc.key, omegaconf_error=why)
        else:
            x.add("config_values", "fail", str(exc), "set it in the launch command (key=value)", key=exc.key)
        return None, x.out, note
    bad = bad_sizes(get, v)
    for key, val, hint in bad:
        x.add("config_values", "fail", "%s is %d: it must be 1 or more" % (key, val), "set %s to %s" % (key, hint),
              item=key.replace(".", "_"), key=key, value=val, alts=[{key: int(hint)}] if hint.isdigit() else [])
    if bad:
        return None, x.out, note
    mp = v.mg_tp * v.mg_pp * v.mg_cp if v.strategy == "megatron" else 1
    dp_div = mp if v.strategy == "megatron" and mp > 0 and v.world % mp == 0 else (
        v.sp if v.world % max(v.sp, 1) == 0 else 1)
    p = bm.plan(v.B, v.n, v.gpn, v.nnodes, v.tp, v.rdp, v.rpp, dp_div,
                v.mini, v.micro_gpu, v.lp_micro_gpu, v.ref_lp_micro_gpu if v.use_ref else None, v.dyn)
    _micro_set(x, v)
    _train_divisible(x, v, p)
    _mini_le_train(x, v)
    _global_micro(x, v)
    _sp(x, v)
    _val_temperature(x, v)
    _mini_micro(x, v, p)
    _rollout(x, v, p, model)
    _model_rules(x, v, model, model_why)
    mr.token_budgets(x, v, get, raw)
    mr.trust_remote_code(x, v, get, model)
    mr.lora_modules(x, v, get, model, module_names)
    if machine is not None:
        _machine(x, v, machine, model, get)
    return p, x.out, note


def mandatory_keys(leaves: Dict[str, Any], get: Callable[[str, Any], Any]) -> List[str]:
    """Keys of ``leaves`` (flattened resolved config) left as ``???`` that verl reads: those of
    actor_rollout_ref, data and trainer, and the reward model's when it is enabled."""
    prefixes = ["actor_rollout_ref.", "data.", "trainer.", "algorithm."]
    if _bool(get("reward.reward_model.enable", False)):
        prefixes.append("reward.reward_model.")
    return [k for k, v in leaves.items() if v == "???" and k.startswith(tuple(prefixes))]

