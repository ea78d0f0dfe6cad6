"""config.verl: verl's own start-up, run dry in the target, judges the launch.

Runs when Hydra composed the launch in the target (the target has verl). Rows:

* ``config.verl.startup``: PASS when verl reached its first Ray or worker call; FAIL quoting the
  exception verl raised, its file:line inside verl, its kind and the smallest fix;
* ``config.verl.<effect>``: what verl did silently (rows its filter dropped, prompts over
  data.max_prompt_length, batches and total steps);
* ``config.verl.ignored``: the launch's override keys whose name no source file of the installed
  verl reads (a ``+``-added key Hydra took without a word, a misspelt or retired option): WARN
  with the nearest key verl's config has;
* ``config.verl.reward``: one call of the reward function on the first rows;
* ``config.verl.rules``: the rules' verdicts set beside verl's (a disagreement is a WARN naming
  the rule: a bug in the rule or in the dry start-up);
* ``config.verl.fix``: the rules' one-line fix re-run through verl's start-up: a fix verl rejects
  is named here, and the ``config.rules.fix_line`` row drops it.

Without verl in the target there are no such rows (one skip): the rules alone judge.
"""

import re
from typing import Any, Dict, List, Optional

from ..launch.compose.run import config_dir
from ..launch.facts.env import job_env
from ..launch.facts.wrapper import job_cwd, launch_wrapper
from ..launch.startup import (FULL_ROWS, Startup, beyond_startup, classify, compare, first_line, lookup_rows,
                              run_startup, run_startup_batch, silent_rows, where)
from .base import Context, Outcome, failed, passed, skipped, warned

__all__ = ["code_refusal", "startup_of", "startup_rows", "recheck_fix", "is_hub_id", "hub_offline"]


def _memo_key(extra: Optional[List[str]]) -> str:
    return "verl_startup:" + "\x00".join(extra or [])


def code_refusal(ctx: Context, facts: Optional[Dict[str, Any]]) -> Optional[str]:
    """``not run: ...`` when verl's dry start-up would import code another user can change
    (``paths.code_problem``): a ``*.py`` file the launch names (``custom_reward_function.path``,
    ``reward.custom_reward_function.path``, ``data.custom_cls.path``, a reward manager's
    ``module.path``...), or a model directory whose ``auto_map`` code runs with
    ``trust_remote_code=True``; None otherwise (memoised)."""
    comp = (facts or {}).get("composed")
    if comp is None or comp.error is not None:
        return None

    def judge() -> str:
        from ..launch.code import launch_code_refusal

        cwd = job_cwd(launch_wrapper(ctx)[1])
        return launch_code_refusal(comp, cwd) or ""
    return ctx.memo("verl_startup_refusal", judge) or None


def startup_of(ctx: Context, facts: Optional[Dict[str, Any]], extra: Optional[List[str]] = None,
               also: Optional[List[str]] = None) -> Optional[Startup]:
    """verl's dry start-up of this run's launch (memoised; ``extra`` overrides appended for a fix
    re-check), or None when the target has no verl (the launch was not composed there).
    ``facts``: :func:`preflight.checks.config.launch_facts` of this run. ``also``: another set of
    extra overrides whose start-up is wanted next (a fix to re-check): when neither is memoised
    yet, both run in one target process, verl imported once, and both are memoised."""
    facts = facts or {}
    comp = facts.get("composed")
    if not ctx.options.launch.startup:
        return None
    if comp is None or comp.error is not None or comp.method != "hydra" or ctx.options.launch.config_file:
        return None
    spec = facts["spec"]
    base = list(spec.override_texts)
    ep = facts.get("entry") or {}
    entry = ep.get("module") if ep.get("kind") == "ppo" else None
    cwd = job_cwd(launch_wrapper(ctx)[1])
    if code_refusal(ctx, facts):
        return None  # startup_rows says "not run"
    want = [extra] + ([also] if also is not None else [])
    todo = [x for x in want if ctx.peek(_memo_key(x)) is None]
    if len(todo) > 1:
        sts = run_startup_batch(ctx.options.python, [base + list(x or []) for x in todo], comp.config_name,
                                entry, timeout=ctx.options.timeout * len(todo), config_dir=config_dir(spec),
                                env=dict(comp.env), rows=FULL_ROWS, cwd=cwd)
        for x, st in zip(todo, sts):
            ctx.put(_memo_key(x), st)

    def run() -> Startup:
        return run_startup(ctx.options.python, base + list(extra or []), comp.config_name, config_dir(spec), entry,
                           timeout=ctx.options.timeout, env=dict(comp.env), cwd=cwd)
    return ctx.memo(_memo_key(extra), run)


def startup_rows(ctx: Context, facts: Optional[Dict[str, Any]], found: List[Any]) -> List[Outcome]:
    """The ``config.verl.*`` rows (see the module doc); ``found``: the rules' findings."""
    if ctx.options.launch.config_file:
        return [skipped("a saved config (--config/--file) is judged by the rules; verl's dry start-up takes a "
                        "launch's overrides", item="startup")]
    if not ctx.options.launch.startup:
        return [skipped("--no-startup: verl's dry start-up was not run; the rules alone judge the launch "
                        "(config.rules), and their fix is not re-checked by verl", item="startup")]
    refused = code_refusal(ctx, facts)
    if refused:
        from ..paths import CODE_FIX

        return [failed("verl's dry start-up %s" % refused, CODE_FIX, {"refused": refused}, item="startup")]
    st = startup_of(ctx, facts)
    if st is None:
        return [skipped("the target has no verl: the rules alone judge the launch (config.rules)", item="startup")]
    ev = st.to_dict()
    if not st.ran:
        return [skipped("verl's dry start-up did not run: %s" % (st.no_verl or (st.probe or {}).get("exit")
                                                                or "no answer"),
                        evidence=dict(ev, probe=st.probe), item="startup")]
    out: List[Outcome] = []
    comp = (facts or {}).get("composed")
    model = comp.get("actor_rollout_ref.model.path") if comp is not None else None
    offline = hub_offline(job_env(getattr(comp, "env", None) or {},
                                  launch_wrapper(ctx)[1]))
    if st.error is not None and classify(st.error)[0] == "hub_not_cached" and is_hub_id(model) and offline:
        ev["kind"] = "hub_not_cached"
        out.append(failed("the model %s is not in this machine's Hugging Face cache and the job runs offline (%s): "
                          "it cannot download it, so it stops loading the tokenizer, as verl %s's dry start-up did "
                          "at %s" % (model, offline, st.verl_version, st.error.get("step")),
                          "download it once on this node (huggingface-cli download %s; HF_TOKEN for a gated model), "
                          "or unset %s for the job" % (model, offline.partition("=")[0]), ev, item="startup"))
    elif st.error is not None and classify(st.error)[0] == "hub_not_cached" and is_hub_id(model):
        ev["kind"] = "hub_not_cached"
        out.append(warned("verl %s's dry start-up stops at %s: the model %s is not in this machine's Hugging Face "
                          "cache; the job downloads it when it starts (the dry start-up never downloads), so verl's "
                          "later steps (datasets, reward, trainer) were not judged" % (
                              st.verl_version, st.error.get("step"), model or "(actor_rollout_ref.model.path)"),
                          "download it once (huggingface-cli download %s; HF_TOKEN for a gated model) and run "
                          "this again to have verl judge the whole launch" % (model or "<id>"), ev, item="startup"))
    elif st.error is not None:
        kind, fix = classify(st.error)
        ev["kind"] = kind
        out.append(failed("verl %s stops at %s: %s: %s (%s)" % (st.verl_version, st.error.get("step"),
                                                                 st.error.get("kind"), first_line(st.error.get("message"), 400),
                                                                 where(st.error)), fix, ev, item="startup"))
    elif st.stopped_at is None:
        out.append(warned("verl's dry start-up ended without reaching its stop point (%s)" % (
            (st.probe or {}).get("exit") or "main returned"), "see the evidence (probe)", dict(ev, probe=st.probe),
            item="startup"))
    else:
        w = st.where or {}
        out.append(passed("verl %s's own start-up accepts the launch: %s ran, stopped before %s (%s:%s) in %.1f s" % (
            st.verl_version, ", ".join(dict.fromkeys(st.steps)) or "main", st.stopped_at, w.get("file"),
            w.get("line"), st.seconds), ev, item="startup"))
    for item, status, msg, fix in silent_rows(st):
        evid: Dict[str, Any] = {"ignored": st.ignored} if item == "ignored" else {"facts": st.facts,
                                                                                  "lengths": st.lengths}
        if status == "fail":
            out.append(failed(msg, fix or "", evid, item=item))
        elif status == "warn":
            out.append(warned(msg, fix or "", evid, item=item))
        else:
            out.append(passed(msg, {"ignored": st.ignored} if item == "ignored" else {"facts": st.facts}, item=item))
    out += _reward_rows(st)
    for item, status, msg, fix in lookup_rows(st):
        out.append(failed(msg, fix or "", {"lookups": st.lookups}, item=item) if status == "fail"
                   else passed(msg, {"lookups": st.lookups}, item=item))
    dis = compare(found, st)
    if dis:
        out.append(warned("the rules and verl %s disagree on %d point(s): %s" % (
            st.verl_version, len(dis), "; ".join("%s (rules: %s; verl: %s)" % (d["rule"] or "no rule", d["rules"],
                                                                              d["verl"]) for d in dis)),
            "report it: a rule that disagrees with verl's own start-up is a bug in one of the two",
            {"disagreements": dis}, item="rules"))
    else:
        later = beyond_startup(found)
        out.append(passed("the rules agree with verl %s's start-up%s" % (st.verl_version, (
            "; %d rule FAIL(s) are about later steps the dry start-up stops before (workers, rollout, GPUs), so "
            "it neither confirms nor contradicts them: %s" % (len(later), ", ".join(dict.fromkeys(later))))
            if later else ""), {"disagreements": [], "beyond_startup": later}, item="rules"))
    rec = (facts or {}).get("fix_recheck")
    if rec is not None:
        out.append(rec)
    return out


#: huggingface_hub's own truth values for its offline switch (huggingface_hub/constants.py:
#: ``ENV_VARS_TRUE_VALUES``, read from HF_HUB_OFFLINE or else TRANSFORMERS_OFFLINE, upper-cased).
_HUB_TRUE = ("1", "ON", "YES", "TRUE")


def hub_offline(env: Dict[str, str]) -> str:
    """``"NAME=value"`` when ``env`` (the job's environment) puts huggingface_hub offline, as
    huggingface_hub.constants.HF_HUB_OFFLINE reads it (``HF_HUB_OFFLINE``, or when that is unset or
    empty ``TRANSFORMERS_OFFLINE``, true for 1/ON/YES/TRUE in any case); ``""`` when it is online."""
    name = "HF_HUB_OFFLINE" if env.get("HF_HUB_OFFLINE") else "TRANSFORMERS_OFFLINE"
    value = env.get(name) or ""
    return "%s=%s" % (name, value) if value.upper() in _HUB_TRUE else ""


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(?:/[A-Za-z0-9][\w.\-]*)?\Z")


def is_hub_id(value: Any) -> bool:
    """True when ``value`` (a model path from the launch) reads as a Hugging Face hub id (``org/name``
    or ``name``), not a local path (absolute, ``./``, ``~``, more than one ``/``)."""
    return isinstance(value, str) and not value.startswith((".", "~")) and bool(_HUB_ID.match(value))


def _reward_rows(st: Startup) -> List[Outcome]:
    r = st.reward
    if not r:
        return []
    rows = r.get("rows") or []
    bad = [x for x in rows if not x.get("ok")]
    if r.get("error") or bad:
        e = r.get("error") or bad[0]
        return [failed("the reward function (%s) raised on %s: %s: %s (%s)" % (
            r.get("function"), "loading" if r.get("error") else "data_source %s" % e.get("data_source"),
            e.get("kind"), first_line(e.get("message"), 400), where(e)),
            "fix the reward function's imports or the data_source it scores (verl calls it on every batch)",
            {"reward": r}, item="reward")]
    if not rows:
        return []
    return [passed("the reward function (%s) scored %d row(s): %s" % (
        r.get("function"), len(rows), ", ".join("%s=%s" % (x.get("data_source"), x.get("score")) for x in rows[:4])),
        {"reward": r}, item="reward")]


def recheck_fix(ctx: Context, facts: Optional[Dict[str, Any]], found: List[Any]) -> None:
    """Re-run the rules' one-line fix (the ``fix_line`` finding) through verl's dry start-up, in
    place, before any row is built: a fix verl rejects loses its overrides and its text (never
    printed); the verdict is kept as ``facts["fix_recheck"]`` (a row of config.verl). No-op
    without verl in the target."""
    from ..launch.overrides import override_line

    line = next((f for f in found if f.rule == "fix_line" and f.alts), None)
    if line is None or facts is None:
        return
    words = override_line(line.alts[0]).split()
    if startup_of(ctx, facts, also=words) is None:  # the launch and its fix in one target process
        return
    again = startup_of(ctx, facts, words)
    if again is None or not again.ran:
        return
    if again.error is not None:
        kind, _fix = classify(again.error)
        line.evidence["verl_rejects"] = {"kind": kind, "message": first_line(again.error.get("message"), 400),
                                         "where": where(again.error), "fix": words}
        line.alts = []
        line.fix = "no one-line fix is offered: verl's own start-up rejects the rules' candidate (see config.verl.fix)"
        facts["fix_recheck"] = warned(
            "the rules' one-line fix is not offered: verl %s's start-up rejects it: %s (%s)" % (
                again.verl_version, first_line(again.error.get("message"), 400), where(again.error)),
            "fix the launch as config.verl.startup says", {"verl": again.to_dict()}, item="fix")
        return
    line.evidence["verl_accepts"] = True
    facts["fix_recheck"] = passed("the rules' one-line fix passes verl %s's start-up" % again.verl_version,
                                  {"fix": words, "seconds": round(again.seconds, 2)}, item="fix")
