"""config stage: a verl launch checked before it starts.

Runs only when a launch command or a saved config is given (``check --launch "..."`` or
``check --config FILE``; the ``config`` command always gives one). Reads
``ctx.options.launch`` (:class:`preflight.context.LaunchOptions`): ``words`` (a string or argv
words), ``config_file``, ``gpus`` and ``nnodes`` (shorthands for trainer.n_gpus_per_node /
trainer.nnodes), ``given`` (compose even with no overrides: verl's defaults).

Rows: ``config.compose`` (the effective config), ``config.batch`` (the batch pipeline),
``config.rules.<rule>[.<role>]`` (verl's rules and the known silent failures, see
:mod:`preflight.launch.rules`), ``config.verl.*`` (verl's own start-up run dry in the target, when
it has verl: :mod:`preflight.checks.verl_startup`) and ``config.data.<file>.<column>`` (the datasets in
data.train_files / data.val_files that exist on this machine).
"""

import os
import re
from typing import Any, Dict, List, Optional

from packaging.version import Version

from ..errors import UsageError
from ..launch.compose import ComposeUnsupported, FileUnreadable, compose, flatten, get_path
from ..launch.overrides import ConfigError, parse_launch, parse_override
from ..launch.rules import Finding, entry_point, evaluate, mandatory_keys, ruleset
from ..matrix import parse_version
from ..paths import CODE_FIX, code_problem, not_run
from .base import Context, Outcome, check, errored, failed, passed, skipped, warned

__all__ = ["launch_facts", "launch_wrapper", "evaluation", "outcome_of", "rules_release", "not_ppo_reason"]

NO_LAUNCH = ("no launch command or config given: pass --launch \"python3 -m verl.trainer.main_ppo ...\" or "
             "--config FILE (or run 'preflight config -- <overrides>')")


def launch_facts(ctx: Context) -> Optional[Dict[str, Any]]:
    """The composed launch of this run (memoised), or None when none was given.

    Returns ``{"spec", "composed"}`` or ``{"error": ConfigError}`` or ``{"unsupported": exc}`` (with
    ``"usage"``: the UsageError when the --config file itself is unreadable) or ``{"skip": why}``
    (a non-PPO entry point whose config cannot be composed here); ``"entry"`` is the entry
    point's row of verl_rules.toml (None for an unknown program).
    """
    lo = ctx.options.launch
    launch = lo.words
    cfile = lo.config_file
    if not launch and not cfile and not lo.given:
        return None

    def build() -> Dict[str, Any]:
        try:
            spec = parse_launch(launch_wrapper(ctx)[0] if launch else [])
            if lo.gpus is not None:
                spec.overrides.append(parse_override("trainer.n_gpus_per_node=%d" % lo.gpus, "--gpus"))
            if lo.nnodes is not None:
                spec.overrides.append(parse_override("trainer.nnodes=%d" % lo.nnodes, "--nnodes"))
        except ConfigError as exc:
            return {"error": exc}
        except ValueError as exc:
            return {"error": ConfigError("launch_syntax", str(exc), "fix the quoting of the launch command")}
        foreign = None if cfile else _not_verl_launch(spec, launch)
        if foreign is not None:  # its config is not visible here: verl's defaults are not the user's config
            return {"spec": spec, "entry": None, "not_verl": foreign}
        release = ctx.verl_release()[0]  # the stored defaults' release when the target cannot compose
        ep = entry_point(spec.entry)
        if ep is None and spec.entry and not cfile:
            if spec.config_name is None:
                # a recipe's or the user's own entry point composes the config its @hydra.main names
                from ..launch.facts.wrapper import job_cwd
                from ..launch.own_entry import own_config

                own, why = own_config(spec.entry, job_cwd(launch_wrapper(ctx)[1]), dict(os.environ, **spec.env))
                if own is None:
                    return {"spec": spec, "entry": None, "not_verl": "%s is not one of verl's entry points and %s: "
                            "the config it composes (not verl's ppo_trainer) is not visible here, so it is not "
                            "checked" % (spec.entry, why)}
                spec.config_path = spec.config_path or own[0]
                spec.config_name = own[1]
            # composed (Hydra's verdict on its own config), but judged by none of main_ppo's rules
            ep = {"module": spec.entry, "kind": "recipe", "config_name": spec.config_name}
        gone = _absent(ep, release)
        if gone is not None:
            return {"spec": spec, "entry": ep, "error": gone}
        try:
            comp = compose(ctx.options.python, spec, cfile, release, timeout=min(ctx.options.timeout, 120))
        except ComposeUnsupported as exc:
            if ep is not None and ep["kind"] != "ppo":
                return {"spec": spec, "entry": ep, "skip": "%s; its config is not composed: %s (%s)" % (
                    _not_ppo(ep), exc.message, exc.fix)}
            return {"spec": spec, "entry": ep, "unsupported": exc}
        except UsageError as exc:  # an unreadable --config file: a row here, exit 2 in `config`
            return {"spec": spec, "entry": ep, "usage": exc}
        return {"spec": spec, "entry": ep, "composed": comp}
    return ctx.memo("launch", build)


def launch_wrapper(ctx: Any) -> Any:
    """(inner launch words, :class:`preflight.launch.facts.wrapper.Wrapper`) of this run's launch
    (memoised): ``ray job submit``, ``torchrun`` or a shell script around verl's entry point."""
    from ..launch.facts.wrapper import launch_wrapper as memoised

    return memoised(ctx)


def _job_paths(ctx: Any, paths: List[str]) -> List[str]:
    """``paths`` as the job's driver finds them: a relative path is taken from the job's working
    directory (a ``ray job submit`` job's ``--working-dir``, else the directory the launch starts
    in), when the file is there."""
    from ..launch.facts.wrapper import job_cwd

    base = job_cwd(launch_wrapper(ctx)[1])
    out = []
    for p in paths:
        q = os.path.expanduser(p)
        if not os.path.isabs(q) and "://" not in q and os.path.exists(os.path.join(base, q)):
            q = os.path.join(base, q)
            out.append(q)
        else:
            out.append(p)
    return out


def _not_verl_launch(spec: Any, words: Any) -> Optional[str]:
    """Why the launch cannot be checked (a program that is not one of verl's entry points: a
    wrapper script, a recipe or own script given without any override), else None."""
    shown = " ".join(words) if isinstance(words, (list, tuple)) else str(words)
    if spec.program is None or entry_point(spec.entry) is not None:
        return None
    if spec.entry is None and (not _PROGRAM_PY.search(spec.program) or len(spec.ignored) > 1):
        return "%r is not a verl entry point (python3 -m verl.trainer.main_ppo ... or .../main_ppo.py ...): the " \
               "config it launches is not visible here, so it is not checked" % shown
    if spec.entry is not None and not spec.overrides:
        return "%s is not one of verl's entry points and the launch gives no overrides: its config is not visible " \
               "here, so it is not checked" % spec.entry
    return None


_PROGRAM_PY = re.compile(r"(^|/)(python[0-9.]*|uv|torchrun|ray)$")
NOT_VERL_FIX = ("pass the python command inside the script (python3 -m verl.trainer.main_ppo key=value ...) as the "
                "launch, or the saved config with --config FILE (config: --file FILE)")


def _absent(ep: Optional[Dict[str, Any]], release: Optional[str]) -> Optional[ConfigError]:
    """A ConfigError when the entry point's module is gone from ``release`` (absent_from)."""
    pv = parse_version(release) if release else None
    if ep is None or not ep.get("absent_from") or pv is None or Version(pv.base_version) < Version(ep["absent_from"]):
        return None
    return ConfigError("entry_absent", "verl %s has no module %s (absent from the wheels since %s): python -m %s "
                       "fails with ModuleNotFoundError" % (release, ep["module"], ep["absent_from"], ep["module"]),
                       "run %s instead, or install a verl release before %s" % (ep.get("replacement") or
                                                                               "an entry point of this release",
                                                                               ep["absent_from"]))


def _not_ppo(ep: Dict[str, Any]) -> str:
    if ep["kind"] == "recipe":
        return "%s is not one of verl's entry points: it runs its own trainer on its own config (%s), so the " \
               "batch, rollout and dataset rules of verl.trainer.main_ppo checked here do not apply; the " \
               "composition above is Hydra's own verdict on that config" % (ep["module"], ep["config_name"])
    return "%s is verl's %s entry point (config %s): the batch, rollout and dataset rules checked here are those " \
           "of PPO training (verl.trainer.main_ppo) and do not apply" % (ep["module"], ep["kind"].upper() if
                                                                        ep["kind"] == "sft" else ep["kind"],
                                                                        ep["config_name"])


def not_ppo_reason(ctx: Context, short: bool = False) -> Optional[str]:
    """Why the PPO rules are skipped for this launch (a non-PPO verl entry point), else None."""
    facts = launch_facts(ctx) or {}
    if facts.get("not_verl"):
        return "not checked: the launch is not a verl entry point (see config.compose)"
    ep = facts.get("entry")
    if ep is None or ep["kind"] == "ppo":
        return None
    return "PPO rules do not apply to %s (%s)" % (ep["module"], ep["kind"]) if short else _not_ppo(ep)


def rules_release(ctx: Context, comp: Any) -> Optional[str]:
    """The verl release whose rules apply: the installed one when Hydra composed in the target,
    else the one asked for (``--verl``, else the newest in the matrix), whose stored defaults may
    be a nearby release's."""
    if comp.method == "hydra":
        return comp.verl_version
    return ctx.verl_release()[0] or comp.verl_version


def evaluation(ctx: Context) -> Dict[str, Any]:
    """The rules run on the composed launch (memoised): ``{plan, findings, note, model, model_why}``."""
    from ..launch.model import read_model, remote_code_problem
    from ..launch.model_rules import meta_module_names, needs_meta_probe

    def build() -> Dict[str, Any]:
        comp = launch_facts(ctx)["composed"]
        machine = _job_machine(ctx, comp)
        env = machine["env"]
        model, why = read_model(comp.get("actor_rollout_ref.model.path"), env)
        missing = mandatory_keys(flatten(comp.resolved), comp.get)

        def raw(key: str, default: Any = None) -> Any:
            return get_path(comp.raw, key, default)
        names = None
        trust = bool(comp.get("actor_rollout_ref.model.trust_remote_code", False))
        if needs_meta_probe(comp.get, model):  # LoRA targets and no weight names on disk: build it on meta
            # never with another user's model code (config.verl.startup says "not run")
            names = meta_module_names(ctx.options.python, model, trust and not remote_code_problem(model, trust),
                                      timeout=min(ctx.options.timeout, 120))
        plan, found, note = evaluate(comp.get, rules_release(ctx, comp), machine, model, why, missing, raw=raw,
                                     module_names=names, unresolved=comp.resolve_errors)
        return {"plan": plan, "findings": found, "note": note, "model": model, "model_why": why}
    return ctx.memo("launch_eval", build)


def _job_machine(ctx: Context, comp: Any) -> Dict[str, Any]:
    """The machine facts the rules weigh, with the job's whole environment (this shell's, the launch
    line's VAR=value words, a wrapper's runtime_env env_vars or exports: facts.env.job_env) as
    ``env``; ``cvd_source`` says where CUDA_VISIBLE_DEVICES comes from, ``attached`` why the driver's
    CUDA_VISIBLE_DEVICES does not count the GPUs of the Ray cluster the job joins."""
    from ..launch.facts import env as job_env_mod

    wrapper = launch_wrapper(ctx)[1] if ctx.options.launch.words else None
    env = job_env_mod.job_env(dict(comp.env), wrapper)
    attached = None
    if wrapper is not None and wrapper.kind and "ray job submit" in wrapper.kind:
        attached = "the job is submitted to a running Ray cluster (ray job submit), whose GPUs were counted when it " \
            "started"
    elif env.get("RAY_ADDRESS"):
        attached = "RAY_ADDRESS=%s: verl's ray.init() joins that cluster, whose GPUs were counted when it started" % (
            env["RAY_ADDRESS"])
    return {"nvml": ctx.nvml(), "host": ctx.host(), "env": env, "launch_env": dict(comp.env), "job_env": True,
            "cvd_source": job_env_mod.source("CUDA_VISIBLE_DEVICES", env, wrapper)
            if "CUDA_VISIBLE_DEVICES" in env else None, "attached": attached}


def outcome_of(f: Finding, item: Optional[str] = None) -> Outcome:
    """A rule finding as a check outcome (item: ``item``, else the finding's id)."""
    from ..launch.overrides import override_line

    ev = dict(f.evidence)
    ev.update({"verl_check": f.check, "verl_where": f.where, "verl_stops": f.stops, "silent": f.silent})
    if f.alts:  # the fix as launch words, each re-checked against every rule
        ev["fix_overrides"] = [override_line(a) for a in f.alts]
    item = item or f.id
    if f.status == "fail":
        return failed(f.message, f.fix or "(no fix recorded)", ev, item=item)
    if f.status == "warn":
        return warned(f.message, f.fix or "(no fix recorded)", ev, item=item)
    if f.status == "skip":
        return skipped(f.message, evidence=ev, item=item)
    return passed(f.message, ev, item=item)


@check("config.compose")
def compose_check(ctx: Context) -> Outcome:
    facts = launch_facts(ctx)
    if facts is None:
        return skipped(NO_LAUNCH)
    if "skip" in facts:
        return skipped(facts["skip"])
    if "not_verl" in facts:
        return warned(facts["not_verl"], NOT_VERL_FIX, {"program": facts["spec"].program,
                                                        "entry": facts["spec"].entry})
    if "error" in facts:
        e = facts["error"]
        return failed(e.message, e.fix, {"kind": e.kind})
    if "usage" in facts:
        u = facts["usage"]
        if isinstance(u, FileUnreadable):  # verl could not read it either
            return failed(str(u), "fix the file (it must be a YAML or JSON mapping of config keys)",
                          {"file": ctx.options.launch.config_file})
        return errored(str(u), {"python": ctx.options.python, "file": ctx.options.launch.config_file},
                       fix="fix the file, pass it as JSON, or point --python at the verl environment")
    if "unsupported" in facts:
        u = facts["unsupported"]
        return errored("cannot compose without Hydra: %s" % u.message, {"python": ctx.options.python}, fix=u.fix)
    c = facts["composed"]
    spec = facts["spec"]
    ev = {"method": c.method, "source": c.source, "verl_version": c.verl_version, "config_name": c.config_name,
          "overrides": c.shown_overrides(spec.overrides), "file": ctx.options.launch.config_file,
          "notes": c.notes}
    if c.error is not None and c.error.kind == "compose_probe":  # the launch was not checked
        return errored(c.error.message, dict(ev, kind=c.error.kind, probe=c.probe), fix=c.error.fix)
    if c.error is not None:
        return failed(c.error.message, c.error.fix, dict(ev, kind=c.error.kind))
    how = "Hydra in the target (verl %s)" % c.verl_version if c.method == "hydra" else \
        "verl %s's stored defaults" % c.verl_version
    msg = "%s composed with %s: %d override(s)%s" % (c.config_name, how, len(spec.overrides),
                                                     ", file %s" % os.path.basename(ctx.options.launch.config_file)
                                                     if ctx.options.launch.config_file else "")
    if c.probe and c.method == "stored":
        return warned("%s, because the target interpreter could not compose (%s)" % (msg, c.probe.get("exit")),
                      "check that %s starts and imports hydra/omegaconf (stderr tail in the evidence); the stored "
                      "defaults may differ from the installed release's" % ctx.options.python,
                      dict(ev, probe=c.probe))
    if c.resolve_errors:
        k, why = sorted(c.resolve_errors.items())[0]
        return warned("%s; %d value(s) do not resolve (%s: %s)" % (msg, len(c.resolve_errors), k, why),
                      "fix the interpolation in %s (verl fails when it reads that key)" % k,
                      dict(ev, resolve_errors=c.resolve_errors))
    return passed(msg, ev)


@check("config.batch", needs=("config.compose",))
def batch_check(ctx: Context) -> Outcome:
    why = not_ppo_reason(ctx)
    if why:
        return skipped(why)
    ev = evaluation(ctx)
    p = ev["plan"]
    if p is None:
        bad = [f for f in ev["findings"] if f.rule == "config_values"]
        return failed("; ".join(f.message for f in bad) if bad else "batch numbers missing",
                      "; ".join(f.fix for f in bad if f.fix) if bad else
                      "set data.train_batch_size and trainer.n_gpus_per_node",
                      {"rules": ev["note"], "values": [f.evidence for f in bad]})
    per_group = "" if p.rollout_groups is None else "; %d rollout group(s) of %s sequences" % (
        p.rollout_groups, p.sequences_per_group)
    msg = "%d prompts x %d = %d sequences per step on %d GPU(s): %s per GPU%s" % (
        p.prompts_per_step, p.rollout_n, p.sequences_per_step, p.world,
        "?" if p.sequences_per_gpu is None else p.sequences_per_gpu, per_group)
    return passed(msg, {"plan": p.to_dict(), "rules": ev["note"]})


@check("config.rules", needs=("config.compose",))
def rules_check(ctx: Context) -> List[Outcome]:
    why = not_ppo_reason(ctx, short=True)
    if why:
        return [skipped(why)]
    ev = evaluation(ctx)
    from .verl_startup import recheck_fix

    recheck_fix(ctx, launch_facts(ctx), ev["findings"])  # a fix verl's own start-up rejects is never printed
    return [outcome_of(f) for f in ev["findings"] if f.rule != "config_values"]


@check("config.verl", needs=("config.compose",))
def verl_check(ctx: Context) -> List[Outcome]:
    """verl's own start-up, dry in the target (:mod:`preflight.checks.verl_startup`): its verdict,
    what it did silently, the reward function on a few rows, and where the rules disagree."""
    from .verl_startup import startup_rows

    why = not_ppo_reason(ctx, short=True)
    if why:
        return [skipped(why, item="startup")]
    return startup_rows(ctx, launch_facts(ctx), evaluation(ctx)["findings"])


def _data_files(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


@check("config.data", needs=("config.compose",))
def data_check(ctx: Context) -> List[Outcome]:
    from ..launch.dataset import NoPyarrow, check_files

    why = not_ppo_reason(ctx, short=True)
    if why:
        return [skipped(why)]
    c = launch_facts(ctx)["composed"]
    paths: List[str] = []
    seen = set()
    for p in _job_paths(ctx, _data_files(c.get("data.train_files")) + _data_files(c.get("data.val_files"))):
        real = os.path.realpath(os.path.expanduser(p))
        if real not in seen:  # train and val may name the same file: read and report it once
            seen.add(real)
            paths.append(p)
    from ..paths import dir_files, file_problem

    # a file or directory reached through another user's link to what they cannot read is never read
    # nor listed: it is a 'not_regular' row below, with the reason (paths.foreign_link)
    local = [p for p in paths if os.path.isfile(os.path.expanduser(p)) and not file_problem(p)]
    listed = {p: dir_files(p, ".parquet") for p in paths if os.path.isdir(os.path.expanduser(p))}  # listed once
    dirs = [p for p, (why, _ok, _bad) in listed.items() if not why]
    out: List[Outcome] = []
    rs, _note = ruleset(rules_release(ctx, c))
    for d in dirs:
        inside = [os.path.basename(f) for f in listed[d][1]]
        fix = ("list the files instead: [%s]" % ",".join(os.path.join(d, f) for f in inside[:3]) +
               (" (and the other %d)" % (len(inside) - 3) if len(inside) > 3 else "")) if inside else \
            "point it at the parquet files (the directory has none)"
        ev = {"path": d, "parquet_files": len(inside)}
        item = "directory_%s" % (os.path.basename(d.rstrip("/")) or "root")
        if rs.get("data_files_are_files"):
            out.append(failed("%s is a directory: verl %s reads data.train_files / data.val_files as files and stops "
                              "with ValueError 'Unsupported file format' (it takes .parquet, .json or .jsonl)" % (
                                  d, rs["label"]), fix, ev, item=item))
        else:
            out.append(warned("%s is a directory: verl 0.9.1 stops on it (ValueError 'Unsupported file format'); "
                              "not recorded for verl %s" % (d, rs["label"]), fix, ev, item=item))
    odd = [p for p in paths if p not in local and p not in dirs and os.path.exists(os.path.expanduser(p))]
    for p in odd:  # a FIFO or a device: never opened (a FIFO blocks), and verl cannot read it as a table
        why = listed[p][0] if p in listed else file_problem(p)
        out.append(failed("%s: %s" % (p, why), "point data.train_files / data.val_files at the parquet "
                          "files", {"path": p}, item="not_regular"))
    if not local and out:
        return out
    if not local and not paths:
        return [skipped("data.train_files / data.val_files are not set")]
    absent_fix = ("put the files where every training node reads them, or fix the path: verl stops at "
                  "create_rl_dataset (FileNotFoundError) on a node without them")
    if not local:
        return [warned("no dataset file of data.train_files / data.val_files is on this machine (%s): not read" % (
            ", ".join(paths)), absent_fix, {"paths": paths})]
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
    out += [outcome_of(f, f.item) for f in found]
    out += _smoke(ctx, c, local, found)
    missing = [p for p in paths if p not in local and p not in dirs and p not in odd]
    if missing:
        out.append(warned("not on this machine, not read: %s" % ", ".join(missing), absent_fix, {"paths": missing},
                          item="absent"))
    return out


def _smoke(ctx: Context, c: Any, local: List[str], found: List[Finding]) -> List[Outcome]:
    """The first rows through the model's chat template and the custom reward function
    (:mod:`preflight.launch.smoke`), when the files were readable."""
    from ..launch.smoke import reward_findings, run_smoke, template_findings

    if any(f.status == "fail" and f.item and f.item.endswith((".file", ".rows", ".prompt")) for f in found):
        return []  # the rows themselves are bad; the data rows above say so
    model = evaluation(ctx).get("model")
    rs, _note = ruleset(rules_release(ctx, c))
    key = rs.get("custom_reward_key", "reward.custom_reward_function")
    path = c.get(key + ".path") or c.get("custom_reward_function.path")
    reward = None
    refused: List[Outcome] = []
    if isinstance(path, str) and path and not path.startswith("pkg://"):
        file = path[len("file://"):] if path.startswith("file://") else path
        why = code_problem(os.path.expanduser(file)) if os.path.isfile(os.path.expanduser(file)) else None
        if why:  # importing it would run another user's code as this user (root)
            refused.append(failed(not_run("the reward function %s" % file, why), CODE_FIX,
                                  {"path": os.path.abspath(os.path.expanduser(file))}, item="reward_function.smoke"))
        elif os.path.isfile(os.path.abspath(os.path.expanduser(file))):
            kw = c.get(key + ".reward_kwargs") or c.get("custom_reward_function.reward_kwargs") or {}
            reward = {"path": os.path.abspath(os.path.expanduser(file)),
                      "name": c.get(key + ".name") or c.get("custom_reward_function.name") or "compute_score",
                      "kwargs": kw if isinstance(kw, dict) else {}, "budget_s": 1.0}
    if (model is None or not model.chat_template) and reward is None:
        return [outcome_of(f, "chat_template") for f in template_findings({"events": []}, model, "")] + refused
    prompt_key = str(c.get("data.prompt_key", "prompt") or "prompt")
    res = run_smoke(ctx.options.python, [os.path.expanduser(p) for p in local], prompt_key,
                    str(c.get("data.reward_fn_key", "data_source") or "data_source"), model, reward,
                    timeout=min(ctx.options.timeout, 120))
    out = [outcome_of(f, "chat_template") for f in template_findings(res, model, prompt_key)]
    if reward is not None:
        out += [outcome_of(f, "reward_function.smoke") for f in reward_findings(res, reward, key)]
    return out + refused


@check("config.megatron", needs=("config.compose",))
def megatron_check(ctx: Context) -> Outcome:
    """strategy=megatron (actor or critic): megatron-core is installed in the target, at least the
    release's documented version, and the modules verl's Megatron workers import load
    (failure_cases #14, #15). FSDP launches are never asked for Megatron."""
    from .megatron import megatron_outcome

    why = not_ppo_reason(ctx, short=True)
    if why:
        return skipped(why)
    facts = launch_facts(ctx) or {}
    comp = facts.get("composed")
    if comp is None or comp.error is not None:
        return skipped("the launch did not compose")
    return megatron_outcome(ctx, comp, rules_release(ctx, comp))


@check("config.facts", needs=("config.compose",))
def facts_check(ctx: Context) -> List[Outcome]:
    """Facts outside the Hydra config (:mod:`preflight.launch.facts`): the launcher around the entry
    point, the variables the job inherits, Ray's temp dir, the loggers' credentials, reward scorer
    imports, prompt lengths in tokens, Megatron layers vs pipeline sizes, features per release."""
    from ..launch.facts import gather

    why = not_ppo_reason(ctx, short=True)
    facts = launch_facts(ctx) or {}
    comp = facts.get("composed")
    if why or comp is None or comp.error is not None:
        return [skipped(why or "the launch did not compose")]
    wrapper = launch_wrapper(ctx)[1]
    paths = _job_paths(ctx, _data_files(comp.get("data.train_files")) + _data_files(comp.get("data.val_files")))
    local = sorted({os.path.expanduser(p) for p in paths if os.path.isfile(os.path.expanduser(p))})
    found = gather(ctx.options.python, comp.get, rules_release(ctx, comp), dict(comp.env), wrapper,
                   evaluation(ctx).get("model"), local, timeout=min(ctx.options.timeout, 120),
                   verl_target=comp.method == "hydra", overridden=[o.key for o in facts["spec"].overrides])
    out = [outcome_of(f) for f in found]
    if wrapper.kind:
        out.insert(0, passed("launcher %s: read %s; ignored %s%s" % (
            wrapper.kind, ", ".join("%s %s" % rv for rv in wrapper.read) or "nothing",
            ", ".join(wrapper.ignored) or "nothing", "; " + "; ".join(wrapper.notes) if wrapper.notes else ""),
            wrapper.to_dict(), item="launcher"))
    return out
