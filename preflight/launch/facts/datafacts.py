"""Data content the Hydra config cannot show: the reward scorer each data_source needs imports in
the target (verl's own default_compute_score called once per source), and prompt lengths in
tokens with the user's tokenizer and chat template against data.max_prompt_length."""

from typing import Any, Dict, List

from ..rules import Finding

__all__ = ["check"]


def _b(v: Any) -> bool:
    return v is True or str(v).lower() in ("true", "1")


def _reward(facts: Dict[str, Any]) -> List[Finding]:
    r = facts.get("reward")
    if r is None:
        return []
    if r.get("error"):
        return [Finding("reward", "skip", "reward scorers not imported: %s" % r["error"], item="imports")]
    bad = {s: x for s, x in (r.get("sources") or {}).items() if x.get("ok") is False}
    ok = sorted(s for s, x in (r.get("sources") or {}).items() if x.get("ok"))
    out: List[Finding] = []
    for s, x in sorted(bad.items()):
        if x.get("error_type") == "NotImplementedError":
            out.append(Finding("reward", "fail", "data_source %r: verl's default_compute_score has no scorer for it "
                               "(%s)" % (s, x.get("error")), "give a custom reward function "
                               "(custom_reward_function.path=... and .name=...), or fix the data_source values",
                               item="imports", evidence={"data_source": s}))
            continue
        mod = x.get("module") or "?"
        out.append(Finding("reward", "fail", "data_source %r: its scorer does not import in the target: %s: %s" % (
            s, x.get("error_type"), x.get("error")), "pip install the package that provides %s into the verl "
            "environment (e.g. math-verify for math_verify), or use a custom reward function" % mod,
            item="imports", evidence={"data_source": s, "module": mod},
            stops="%s in the reward manager at the first scored batch, after the first rollout" % x.get("error_type")))
    if not bad and ok:
        out.append(Finding("reward", "pass", "the scorers of %d data_source value(s) import in the target (%s)" % (
            len(ok), ", ".join(ok[:6])), item="imports", evidence={"sources": ok}))
    return out


def _prompts(get: Any, facts: Dict[str, Any]) -> List[Finding]:
    p = facts.get("prompts")
    if p is None:
        return []
    if p.get("error"):
        return [Finding("data", "skip", "prompt lengths not counted: %s" % p["error"], item="prompt_tokens")]
    limit, over, rows = p["limit"], p.get("over", 0), p.get("rows", 0)
    filt = _b(get("data.filter_overlong_prompts", False))
    trunc = str(get("data.truncation", "error") or "error")
    ev = {"rows": rows, "longest": p.get("longest"), "over": over, "examples": p.get("over_rows"),
          "limit": limit, "filter_overlong_prompts": filt, "truncation": trunc, "tokenizer": p.get("tokenizer"),
          "template_failed": p.get("failed")}
    failed = p.get("failed") or 0
    if failed and failed >= rows:  # nothing was counted: a PASS here would judge zero prompts
        return [Finding("data", "warn", "prompt lengths not counted: the model's chat template failed on all %d "
                        "row(s) read (%s)" % (rows, p.get("failed_error") or "see the template row"),
                        "give actor_rollout_ref.model.path a model directory with its tokenizer and chat template "
                        "(tokenizer_config.json), or fix the template", item="prompt_tokens", evidence=ev)]
    if not over:
        return [Finding("data", "pass", "prompt lengths with the model's tokenizer and chat template: the longest of "
                        "%d row(s) is %d token(s) <= data.max_prompt_length %d" % (rows, p.get("longest", 0), limit),
                        item="prompt_tokens", evidence=ev)]
    head = "%d of %d prompt(s) read are longer than data.max_prompt_length %d in tokens (longest %d, counted with " \
           "the model's tokenizer and chat template)" % (over, rows, limit, p.get("longest", 0))
    fix = "raise data.max_prompt_length to %d (and keep prompt + response within the model's context), or shorten " \
          "the prompts" % p.get("longest", 0)
    if filt:
        status = "fail" if over == rows else "warn"
        return [Finding("data", status, "%s: data.filter_overlong_prompts=True drops them%s" % (
            head, " — every row read, so the dataset is empty" if over == rows else ""), fix, item="prompt_tokens",
            evidence=ev, silent=over != rows)]
    if trunc == "error":
        return [Finding("data", "fail", "%s: with data.truncation=error and no filter, RLHFDataset raises on the "
                        "first such row" % head, fix + ", or set data.filter_overlong_prompts=True", item="prompt_tokens",
                        evidence=ev, stops="an error in RLHFDataset.__getitem__ ('Prompt length ... is longer than "
                                           "...') when the batch is loaded")]
    return [Finding("data", "warn", "%s: data.truncation=%s cuts them silently" % (head, trunc), fix,
                    item="prompt_tokens", evidence=ev, silent=True)]


def check(get: Any, facts: Dict[str, Any], data_files: List[str], model: Any) -> List[Finding]:
    """The reward-import and prompt-token rows."""
    return _reward(facts) + _prompts(get, facts)
