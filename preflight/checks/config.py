"""config stage: a verl launch checked before it starts.

Runs only when a launch command or a saved config is given (``check --launch "..."`` or
``check --config FILE``; the ``config`` command always gives one). Reads from
``ctx.options.extra``: ``launch`` (a string or argv words), ``config_file``, ``gpus`` and
``nnodes`` (shorthands for trainer.n_gpus_per_node / trainer.nnodes), ``launch_given`` (compose
even with no overrides: verl's defaults).

Rows: ``config.compose`` (the effective config), ``config.batch`` (the batch pipeline),
``config.rules.<rule>[.<role>]`` (verl's rules and the known silent failures, see
:mod:`preflight.launch.rules`) and ``config.data.<file>.<column>`` (the datasets in
data.train_files / data.val_files that exist on this machine).
"""

import os
from typing import Any, Dict, List, Optional

from ..errors import UsageError
from ..launch.compose import ComposeUnsupported, compose, flatten
from ..launch.overrides import ConfigError, parse_launch, parse_override
from ..launch.rules import Finding, evaluate, mandatory_keys
from .base import Outcome, check, errored, failed, passed, skipped, warned

__all__ = ["launch_facts", "evaluation", "outcome_of", "rules_release"]

NO_LAUNCH = ("no launch command or config given: pass --launch \"python3 -m verl.trainer.main_ppo ...\" or "
             "--config FILE (or run 'preflight config -- <overrides>')")


def launch_facts(ctx: Any) -> Optional[Dict[str, Any]]:
    """The composed launch of this run (memoised), or None when none was given.

    Returns ``{"spec", "composed"}`` or ``{"error": ConfigError}`` or ``{"unsupported": exc}`` (with
    ``"usage"``: the UsageError when the --config file itself is unreadable).
    """
    extra = ctx.options.extra
    launch = extra.get("launch")
    cfile = extra.get("config_file")
    if not launch and not cfile and not extra.get("launch_given"):
        return None

    def build() -> Dict[str, Any]:
        try:
            spec = parse_launch(launch or [])
            if extra.get("gpus") is not None:
                spec.overrides.append(parse_override("trainer.n_gpus_per_node=%d" % extra["gpus"], "--gpus"))
            if extra.get("nnodes") is not None:
                spec.overrides.append(parse_override("trainer.nnodes=%d" % extra["nnodes"], "--nnodes"))
        except ConfigError as exc:
            return {"error": exc}
        except ValueError as exc:
            return {"error": ConfigError("launch_syntax", str(exc), "fix the quoting of the launch command")}
        release = ctx.verl_release()[0]  # used only when the target cannot compose (no verl)
        try:
            comp = compose(ctx.options.python, spec, cfile, release, timeout=min(ctx.options.timeout, 120))
        except ComposeUnsupported as exc:
            return {"spec": spec, "unsupported": exc}
        except UsageError as exc:  # an unreadable --config file: a row here, exit 2 in `config`
            return {"spec": spec, "usage": exc,
                    "unsupported": ComposeUnsupported(str(exc), "fix the file, pass it as JSON, or point --python "
                                                                "at the verl environment")}
        return {"spec": spec, "composed": comp}
    return ctx._memo("launch", build)


def rules_release(ctx: Any, comp: Any) -> Optional[str]:
    """The verl release whose rules apply: the installed one when Hydra composed in the target,
    else the one asked for (``--verl``, else the newest in the matrix), whose stored defaults may
    be a nearby release's."""
    if comp.method == "hydra":
        return comp.verl_version
    return ctx.verl_release()[0] or comp.verl_version


def evaluation(ctx: Any) -> Dict[str, Any]:
    """The rules run on the composed launch (memoised): ``{plan, findings, note, model, model_why}``."""
    from ..launch.model import read_model

    def build() -> Dict[str, Any]:
        comp = launch_facts(ctx)["composed"]
        env = dict(os.environ)
        env.update(comp.env)
        model, why = read_model(comp.get("actor_rollout_ref.model.path"), env)
        machine = {"nvml": ctx.nvml(), "host": ctx.host(), "env": env}
        missing = mandatory_keys(flatten(comp.resolved), comp.get)
        plan, found, note = evaluate(comp.get, rules_release(ctx, comp), machine, model, why, missing)
        return {"plan": plan, "findings": found, "note": note, "model": model, "model_why": why}
    return ctx._memo("launch_eval", build)


def outcome_of(f: Finding, item: Optional[str] = None) -> Outcome:
    """A rule finding as a check outcome (item: ``item``, else the finding's id)."""
    ev = dict(f.evidence)
    ev.update({"verl_check": f.check, "verl_where": f.where, "verl_stops": f.stops, "silent": f.silent})
    item = item or f.id
    if f.status == "fail":
        return failed(f.message, f.fix or "(no fix recorded)", ev, item=item)
    if f.status == "warn":
        return warned(f.message, f.fix or "(no fix recorded)", ev, item=item)
    if f.status == "skip":
        return skipped(f.message, evidence=ev, item=item)
    return passed(f.message, ev, item=item)


@check("config.compose")
def compose_check(ctx: Any) -> Outcome:
    facts = launch_facts(ctx)
    if facts is None:
        return skipped(NO_LAUNCH)
    if "error" in facts:
        e = facts["error"]
        return failed(e.message, e.fix, {"kind": e.kind})
    if "unsupported" in facts:
        u = facts["unsupported"]
        return errored("cannot compose without Hydra: %s" % u.message, {"python": ctx.options.python}, fix=u.fix)
    c = facts["composed"]
    spec = facts["spec"]
    ev = {"method": c.method, "source": c.source, "verl_version": c.verl_version, "config_name": c.config_name,
          "overrides": spec.override_texts, "file": ctx.options.extra.get("config_file"), "notes": c.notes}
    if c.error is not None:
        return failed(c.error.message, c.error.fix, dict(ev, kind=c.error.kind))
    how = "Hydra in the target (verl %s)" % c.verl_version if c.method == "hydra" else \
        "verl %s's stored defaults" % c.verl_version
    msg = "%s composed with %s: %d override(s)%s" % (c.config_name, how, len(spec.overrides),
                                                     ", file %s" % os.path.basename(ctx.options.extra["config_file"])
                                                     if ctx.options.extra.get("config_file") else "")
    if c.resolve_errors:
        k, why = sorted(c.resolve_errors.items())[0]
        return warned("%s; %d value(s) do not resolve (%s: %s)" % (msg, len(c.resolve_errors), k, why),
                      "fix the interpolation in %s (verl fails when it reads that key)" % k,
                      dict(ev, resolve_errors=c.resolve_errors))
    return passed(msg, ev)


@check("config.batch", needs=("config.compose",))
def batch_check(ctx: Any) -> Outcome:
    ev = evaluation(ctx)
    p = ev["plan"]
    if p is None:
        bad = [f for f in ev["findings"] if f.rule == "config_values"]
        return failed(bad[0].message if bad else "batch numbers missing", bad[0].fix if bad else
                      "set data.train_batch_size and trainer.n_gpus_per_node", {"rules": ev["note"]})
    per_group = "" if p.rollout_groups is None else "; %d rollout group(s) of %s sequences" % (
        p.rollout_groups, p.sequences_per_group)
    msg = "%d prompts x %d = %d sequences per step on %d GPU(s): %s per GPU%s" % (
        p.prompts_per_step, p.rollout_n, p.sequences_per_step, p.world,
        "?" if p.sequences_per_gpu is None else p.sequences_per_gpu, per_group)
    return passed(msg, {"plan": p.to_dict(), "rules": ev["note"]})


@check("config.rules", needs=("config.compose",))
def rules_check(ctx: Any) -> List[Outcome]:
    ev = evaluation(ctx)
    return [outcome_of(f) for f in ev["findings"] if f.rule != "config_values"]


def _data_files(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


@check("config.data", needs=("config.compose",))
def data_check(ctx: Any) -> List[Outcome]:
    from ..launch.dataset import NoPyarrow, check_files

    c = launch_facts(ctx)["composed"]
    paths = _data_files(c.get("data.train_files")) + _data_files(c.get("data.val_files"))
    local = [p for p in paths if os.path.isfile(os.path.expanduser(p))]
    if not local:
        return [skipped("no dataset file of data.train_files / data.val_files is on this machine (%s)" % (
            ", ".join(paths) or "none set"))]
    custom = c.get("reward.custom_reward_function.path") or c.get("custom_reward_function.path")
    try:
        found, info = check_files(ctx.options.python, [os.path.expanduser(p) for p in local],
                                  str(c.get("data.prompt_key", "prompt") or "prompt"),
                                  str(c.get("data.reward_fn_key", "data_source") or "data_source"),
                                  rules_release(ctx, c), custom, timeout=ctx.options.timeout)
    except NoPyarrow as exc:
        return [skipped("the target interpreter cannot import pyarrow (%s), so verl could not read parquet "
                        "either" % exc)]
    except RuntimeError as exc:
        return [errored(str(exc))]
    out = [outcome_of(f, f.item) for f in found]
    missing = [p for p in paths if p not in local]
    if missing:
        out.append(skipped("not on this machine, not read: %s" % ", ".join(missing), item="absent"))
    return out
