"""The first dataset rows run through what verl will run on them, in the target interpreter.

* chat template: each row's messages rendered with the model's template in jinja2's
  ImmutableSandboxedEnvironment (what ``apply_chat_template`` does in RLHFDataset): a template
  that concatenates ``content`` as a string raises TypeError on structured content (a list of
  ``{type, text}`` parts; verl#2814), one that prints it shows the list's Python repr;
* custom reward function: loaded from ``custom_reward_function.path`` and called on each row
  with the row's ground truth as the response; it must return a finite number (or a dict with
  ``score``) within ``budget_s`` per call.

The work runs in ``preflight/target/data_smoke.py`` under a deadline.
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..paths import loads_json
from .model import ModelFacts
from .rules import Finding

__all__ = ["run_smoke", "template_findings", "reward_findings", "tokens"]

_TEMPLATE_META = dict(check="the first rows must render through the model's chat template (apply_chat_template)",
                      where="verl/utils/dataset/rl_dataset.py RLHFDataset.__getitem__ (tokenizer.apply_chat_template)",
                      stops="TypeError in the dataloader worker before the first step")
_REWARD_META = dict(check="the reward function returns a finite number (or a dict with 'score') quickly for each row",
                    where="verl/workers/reward_manager/naive.py NaiveRewardManager (compute_score)",
                    stops="an exception after the first rollout; NaN rewards or a slow function go unnoticed")


def tokens(model: ModelFacts) -> Tuple[str, str]:
    """(bos_token, eos_token) from tokenizer_config.json (string or ``{"content": ...}``)."""

    from .model import UnreadableModelFile, model_file

    try:
        tok_path = os.path.join(model.directory, "tokenizer_config.json")
        tok = loads_json(model_file(tok_path) or b"{}", tok_path)
    except (UnreadableModelFile, ValueError, UnicodeDecodeError, RecursionError):
        return "", ""

    def one(v: Any) -> str:
        if isinstance(v, dict):
            v = v.get("content")
        return v if isinstance(v, str) else ""
    return (one(tok.get("bos_token")), one(tok.get("eos_token"))) if isinstance(tok, dict) else ("", "")


def run_smoke(python: str, files: Sequence[str], prompt_key: str, source_key: str, model: Optional[ModelFacts],
              reward: Optional[Dict[str, Any]], rows: int = 4, timeout: float = 60.0) -> Dict[str, Any]:
    """Run the target script; returns ``{"events": [...], "probe": evidence}``.

    ``reward``: ``{"path", "name", "kwargs", "budget_s", "cwd"}`` or None. Never raises for the
    child; a probe that dies or hangs is in ``probe``.
    """
    from ..probes.process import run_script

    args: Dict[str, Any] = {"files": [os.path.abspath(f) for f in files], "prompt_key": prompt_key,
                            "source_key": source_key, "rows": rows, "template": None, "reward": reward}
    if model is not None and model.chat_template:
        args["template"] = model.chat_template
        args["bos_token"], args["eos_token"] = tokens(model)
    out = run_script(python, "data_smoke", args, timeout=timeout)
    return {"events": list(out.events), "probe": out.evidence(), "finished": out.returncode == 0,
            "timed_out": out.timed_out, "describe": out.describe()}


def _f(rule: str, status: str, msg: str, fix: Optional[str] = None, item: Optional[str] = None,
       meta: Optional[Dict[str, Any]] = None, **ev: Any) -> Finding:
    return Finding(rule, status, msg, fix, item, evidence=ev, **(meta or {}))


def template_findings(res: Dict[str, Any], model: Optional[ModelFacts], prompt_key: str) -> List[Finding]:
    """Findings on the chat template rendering (none when no template was given)."""
    evs = res["events"]
    if model is None:
        return [_f("chat_template", "skip", "chat template not checked: the model's files were not read",
                   meta=_TEMPLATE_META)]
    if not model.chat_template:
        return [_f("chat_template", "skip", "chat template not checked: %s has no chat_template in "
                   "tokenizer_config.json, chat_template.jinja or chat_template.json" % model.directory,
                   meta=_TEMPLATE_META)]
    nj = [e for e in evs if e.get("event") == "no_jinja"]
    if nj:
        return [_f("chat_template", "skip", "the target cannot import jinja2 (%s), which transformers needs for chat "
                   "templates" % nj[0]["error"], meta=_TEMPLATE_META)]
    t = [e for e in evs if e.get("event") == "template"]
    rows_ev = next((e for e in evs if e.get("event") == "rows"), None)
    count = int((rows_ev or {}).get("count") or 0)
    if not res.get("finished", True) and count and len(t) < count and all(e.get("ok") for e in t):
        # rows were read and a render never came back: not a pass (x03); at the deadline, verl's
        # dataloader would hang on the same row
        if res.get("timed_out"):
            return [_f("chat_template", "fail", "the chat template of %s did not finish rendering row %d within the "
                       "check's time limit (%s): verl's dataloader would stall on it the same way" % (
                           model.template_from, len(t), res.get("describe")),
                       "fix the template (a loop that does not end, or output that grows without bound); if it is "
                       "only slow, raise --timeout", meta=_TEMPLATE_META, rendered_rows=len(t), rows=count)]
        return [_f("chat_template", "warn", "the template check stopped at row %d of %d: %s; the template is not "
                   "known to render" % (len(t), count, res.get("describe")), meta=_TEMPLATE_META)]
    if not t:
        rows = next((e for e in evs if e.get("event") == "rows"), None)
        if rows is not None and not rows.get("count"):
            return [_f("chat_template", "skip", "no rows to render", meta=_TEMPLATE_META)]
        return [_f("chat_template", "skip", "the template check did not finish: %s" % res.get("describe"),
                   meta=_TEMPLATE_META)]
    src = "%s (%s)" % (model.template_from, model.directory)
    bad = [e for e in t if not e.get("ok")]
    if bad and bad[0].get("row") is None:
        e = bad[0]
        return [_f("chat_template", "fail", "the chat template in %s does not compile: %s: %s" % (
            src, e.get("error_type"), e.get("error")), "fix the template (or set a custom chat template)",
            meta=_TEMPLATE_META)]
    if bad:
        e = bad[0]
        structured = any(x.get("structured") for x in bad)
        if structured:
            return [_f("chat_template", "fail", "%d of %d rows fail the chat template of %s: %s: %s; the '%s' "
                       "messages hold structured content (a list of {type, text} parts) and this template treats "
                       "content as a string" % (len(bad), len(t), src, e.get("error_type"), e.get("error"),
                                                prompt_key),
                       "flatten content to strings for a text-only model (content = the parts' text joined), or "
                       "use a multimodal model whose processor template takes parts", meta=_TEMPLATE_META,
                       rows=[x.get("row") for x in bad])]
        return [_f("chat_template", "fail", "%d of %d rows fail the chat template of %s: %s: %s" % (
            len(bad), len(t), src, e.get("error_type"), e.get("error")),
            "fix the rows' messages so the template renders them (role and content strings)", meta=_TEMPLATE_META,
            rows=[x.get("row") for x in bad])]
    strung = [e for e in t if e.get("stringified")]
    if strung:
        return [_f("chat_template", "warn", "%d of %d rows render, but the template prints structured content as "
                   "a Python list ({'type': 'text', ...}) into the prompt (%s)" % (len(strung), len(t), src),
                   "flatten content to strings for a text-only model", meta=_TEMPLATE_META, silent=True)]
    return [_f("chat_template", "pass", "the first %d rows render through the chat template of %s" % (len(t), src),
               meta=_TEMPLATE_META)]


_KIND_TEXT = {"raises": "raises", "none": "returns None", "str": "returns a string", "not_finite": "returns NaN/inf",
              "dict_without_score": "returns a dict without 'score'", "other": "returns a non-number",
              "too_slow": "is too slow", "hangs": "does not return"}


def reward_findings(res: Dict[str, Any], reward: Dict[str, Any], key: str) -> List[Finding]:
    """Findings on the custom reward function smoke (time per call in the evidence)."""
    evs = res["events"]
    label = "%s:%s" % (reward["path"], reward["name"])
    load = next((e for e in evs if e.get("event") == "reward_load"), None)
    if load is None:
        rows = next((e for e in evs if e.get("event") == "rows"), None)
        if rows is not None and not rows.get("count"):
            return [_f("reward_function", "skip", "no rows to call %s on" % label, meta=_REWARD_META)]
        return [_f("reward_function", "fail", "loading %s did not finish (%s)" % (label, res.get("describe")),
                   "make the module import quickly, without side effects", meta=_REWARD_META)]
    if not load.get("ok"):
        missing_attr = load.get("error_type") == "AttributeError"
        return [_f("reward_function", "fail", "%s cannot be loaded: %s: %s" % (label, load.get("error_type"),
                                                                         load.get("error")),
                   "set %s.name to a function the file defines" % key if missing_attr else
                   "fix the module so it imports in the training environment", meta=_REWARD_META,
                   traceback=load.get("traceback"))]
    calls = [e for e in evs if e.get("event") == "reward"]
    if not calls:
        return [_f("reward_function", "fail", "%s: no call finished (%s)" % (label, res.get("describe")),
                   "make each call return within a second", meta=_REWARD_META)]
    secs = [c.get("seconds") or 0.0 for c in calls]
    timing = "%.1f ms per call (max %.1f ms, %d calls)" % (1000 * sum(secs) / len(secs), 1000 * max(secs), len(calls))
    bad = [c for c in calls if not c.get("ok")]
    ev: Dict[str, Any] = dict(calls=[{k: c.get(k) for k in ("row", "data_source", "kind", "value", "error_type", "error", "seconds")}
                     for c in calls], mean_s=sum(secs) / len(secs), max_s=max(secs))
    if not bad:
        return [_f("reward_function", "pass", "%s returns a finite score for the first %d rows (ground truth as the "
                   "response): %s" % (label, len(calls), timing), meta=_REWARD_META, **ev)]
    kinds: Dict[str, int] = {}
    for c in bad:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    first = bad[0]
    what = ", ".join("%s (%d)" % (_KIND_TEXT.get(k, k), n) for k, n in sorted(kinds.items()))
    detail = ""
    if first.get("kind") == "raises":
        detail = ": row %s: %s: %s" % (first.get("row"), first.get("error_type"), first.get("error"))
    elif first.get("value") is not None:
        detail = ": row %s gave %r" % (first.get("row"), first.get("value"))
    only_slow = set(kinds) == {"too_slow"}
    fixes = {"raises": "catch the exception inside the function and return 0.0 for an answer it cannot parse",
             "none": "return a float on every path (0.0 when the answer is wrong)",
             "str": "return a float, not a string (e.g. float(score))",
             "not_finite": "return a finite float (guard divisions and logs)",
             "dict_without_score": "return {'score': float, ...}",
             "other": "return a float",
             "hangs": "make every call return (no endless loops or blocking network calls; add a timeout)",
             "too_slow": "make each call fast (precompile, cache, or move heavy work out "
                                                    "of the call); verl calls it for every response of every step"}
    return [_f("reward_function", "warn" if only_slow else "fail", "%s %s on %d of %d rows%s; %s" % (
        label, what, len(bad), len(calls), detail, timing), "; ".join(fixes[k] for k in sorted(kinds)),
        meta=_REWARD_META, silent=only_slow or "not_finite" in kinds, **ev)]
