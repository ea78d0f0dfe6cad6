"""All rules of a release on one composed config, with unresolved keys explained and fixes re-checked."""

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from .. import batch as bm
from ..interpolation import reference_of
from ..overrides import override_line
from ..model import ModelFacts
from .table import load_rules, ruleset
from .finding import Finding
from .values import ValueProblem, as_bool, bad_sizes, values
from .context import RuleContext
from .batch_rules import (global_micro_rule, mandatory_rule, micro_set_rule, mini_le_train_rule, mini_micro_rule,
                          sp_rule, train_divisible_rule, val_temperature_rule)
from .rollout import rollout_rules
from .legacy import legacy_rule
from .machine import machine_rules, model_rules


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
            rules skipped); ``launch_env`` holds the launch line's own VAR=value words. With
            ``"job_env": True``, ``env`` is the job's whole environment (facts.env.job_env) and
            CUDA_VISIBLE_DEVICES is read from it, ``cvd_source`` naming where it comes from and
            ``attached`` why it does not count the GPUs (the job joins a running Ray cluster).
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
    from .. import fixes

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
        x = RuleContext(rs, load_rules().get("rule", {}))
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
        t = reference_of(raw(k, None), k)
        if t is None:
            break
        k = t
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
    from .. import model_rules as mr

    rs, note = ruleset(release)
    rules = load_rules().get("rule", {})
    x = RuleContext(rs, rules)
    mandatory_rule(x, missing)
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
    micro_set_rule(x, v)
    train_divisible_rule(x, v, p)
    mini_le_train_rule(x, v)
    global_micro_rule(x, v)
    sp_rule(x, v)
    val_temperature_rule(x, v)
    mini_micro_rule(x, v, p)
    rollout_rules(x, v, p, model)
    legacy_rule(x, get)
    model_rules(x, v, model, model_why)
    mr.token_budgets(x, v, get, raw)
    mr.trust_remote_code(x, v, get, model)
    mr.lora_modules(x, v, get, model, module_names)
    if machine is not None:
        machine_rules(x, v, machine, model, get)
    return p, x.out, note


def mandatory_keys(leaves: Dict[str, Any], get: Callable[[str, Any], Any]) -> List[str]:
    """Keys of ``leaves`` (flattened resolved config) left as ``???`` that verl reads: those of
    actor_rollout_ref, data and trainer, and the reward model's when it is enabled."""
    prefixes = ["actor_rollout_ref.", "data.", "trainer.", "algorithm."]
    if as_bool(get("reward.reward_model.enable", False)):
        prefixes.append("reward.reward_model.")
    return [k for k, v in leaves.items() if v == "???" and k.startswith(tuple(prefixes))]
