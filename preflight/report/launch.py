"""Console and JSON presentation of a checked launch (for ``preflight config`` and ``data``).

Tables fit 80 columns (rich folds long keys and values); nothing here runs a check.
"""

import json
from typing import Any, Dict, List, Optional, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import Report
from ..result import Result, Status
from ..launch.batch import BatchPlan
from ..launch.compose import Composed, flatten

__all__ = ["KEY_VALUES", "shown_keys", "values_table", "plan_table", "results_table", "verdict", "header"]

#: The values that matter for a launch, in display order (absent keys are left out).
KEY_VALUES = (
    "data.train_files", "data.val_files", "data.prompt_key", "data.reward_fn_key", "data.train_batch_size",
    "data.max_prompt_length", "data.max_response_length",
    "trainer.nnodes", "trainer.n_gpus_per_node",
    "algorithm.adv_estimator", "algorithm.use_kl_in_reward",
    "actor_rollout_ref.model.path", "actor_rollout_ref.model.use_remove_padding",
    "actor_rollout_ref.actor.strategy", "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_micro_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.use_dynamic_bsz", "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size",
    "actor_rollout_ref.actor.fsdp_config.param_offload", "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    "actor_rollout_ref.actor.megatron.context_parallel_size",
    "actor_rollout_ref.rollout.name", "actor_rollout_ref.rollout.mode", "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout.tensor_model_parallel_size", "actor_rollout_ref.rollout.data_parallel_size",
    "actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.max_num_seqs",
    "actor_rollout_ref.rollout.prompt_length", "actor_rollout_ref.rollout.response_length",
    "actor_rollout_ref.rollout.max_model_len", "actor_rollout_ref.rollout.log_prob_micro_batch_size",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "critic.enable", "critic.ppo_mini_batch_size", "critic.ppo_micro_batch_size_per_gpu",
    "reward.custom_reward_function.path", "custom_reward_function.path",
)


def shown_keys(c: Composed, full: bool = False) -> List[str]:
    """Keys to print: every leaf with ``full``; else :data:`KEY_VALUES` present in the config
    plus every key the file or an override set."""
    leaves = list(flatten(c.resolved))
    if full:
        return leaves
    keys = [k for k in KEY_VALUES if c.has(k)]
    if c.get("actor_rollout_ref.actor.strategy") != "megatron":
        keys = [k for k in keys if ".megatron." not in k]
    extra = [k for k in leaves if k not in keys and c.provenance.get(k, {}).get("source", "default") != "default"]
    return keys + extra[:40]


def _short(v: Any, n: int = 48) -> str:
    s = json.dumps(v) if isinstance(v, (list, dict, bool)) or v is None else str(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def _section(key: str) -> str:
    parts = key.split(".")
    n = 2 if parts[0] in ("actor_rollout_ref", "reward", "critic") and len(parts) > 2 else 1
    return ".".join(parts[:n])


def values_table(c: Composed, full: bool = False) -> Table:
    """Values grouped by section (``actor_rollout_ref.rollout``...): key | value | from
    (default, file, override, --gpus, or 'override via <key>' for an interpolated default).
    Values are redacted (:meth:`Composed.shown`): a secret shows as ``***``."""
    keys = shown_keys(c, full)
    safe = c.shown_values(keys)
    failed = c.error is not None
    shown_defaults: Dict[str, Any] = {}
    if failed and c.defaults:
        from ..launch.compose import get_path, redact_config_value

        schema = c.schema()
        missing = object()
        for k in keys:
            d = get_path(c.defaults, k, missing)
            if d is not missing:
                shown_defaults[k] = redact_config_value(k, d, schema)
    sections: List[str] = []
    for k in keys:
        if _section(k) not in sections:
            sections.append(_section(k))
    key_w = min(44, max([len(k) - len(_section(k)) + 1 for k in keys] + [len(s) for s in sections] + [10]))
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("key", overflow="fold", width=key_w)
    t.add_column("value", overflow="fold", min_width=12)
    t.add_column("from", overflow="fold", style="dim", max_width=24)
    for sec in sections:
        t.add_row(Text(sec, style="cyan"), "", "")
        for k in [k for k in keys if _section(k) == sec]:
            src = c.source_of(k)
            val = safe[k]
            if failed and not src.startswith("default"):
                # Hydra applies no override when one of them fails: show verl's default, say so
                val = shown_defaults.get(k, val) if k in shown_defaults else val
                src = "default (%s not applied: composition failed)" % src.split(" via ")[0]
            style = "" if src.startswith("default") else "bold"
            t.add_row(Text("  " + k[len(sec) + 1:], style=style), Text(_short(val, 200 if full else 48)),
                      src.replace(" via ", " via\n") if len(src) > 30 else src)
    return t


def plan_table(p: BatchPlan) -> Table:
    """The batch pipeline rows: what | numbers | from."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column("what", no_wrap=True, style="cyan")
    t.add_column("numbers", overflow="fold")
    t.add_column("from", overflow="fold", style="dim")
    for label, value, how in p.rows:
        t.add_row(label, value, how)
    return t


_STYLE = {Status.PASS: ("PASS", "green"), Status.WARN: ("WARN", "yellow"), Status.FAIL: ("FAIL", "bold red"),
          Status.SKIP: ("SKIP", "dim"), Status.ERROR: ("ERROR", "bold magenta")}


def results_table(rows: Sequence[Result], verbose: bool = False) -> Table:
    """Findings: failures and warnings with verl's check, where it stops, and the fix; passes and
    skips on one line each."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column("status", no_wrap=True, width=5)
    t.add_column("finding", overflow="fold")
    order = {Status.FAIL: 0, Status.ERROR: 0, Status.WARN: 1, Status.SKIP: 3, Status.PASS: 2}
    for r in sorted(rows, key=lambda r: order[r.status]):
        label, style = _STYLE[r.status]
        rid = r.id.split(".", 1)[1] if "." in r.id else r.id
        body = Text()
        body.append(rid, style="bold" if r.status in (Status.FAIL, Status.WARN, Status.ERROR) else "dim")
        body.append("  ")
        body.append(r.message)
        ev = r.evidence or {}
        if r.status in (Status.FAIL, Status.WARN, Status.ERROR):
            if ev.get("verl_check"):
                body.append("\nverl: %s" % ev["verl_check"], style="dim")
            if ev.get("verl_stops"):
                body.append("\nstops: %s" % ev["verl_stops"], style="dim")
            if ev.get("verl_where"):
                body.append("\nwhere: %s" % ev["verl_where"], style="dim")
            if r.fix:
                body.append("\nfix: ", style="bold")
                body.append(r.fix)
        elif verbose and ev.get("verl_where"):
            body.append("\nwhere: %s" % ev["verl_where"], style="dim")
        t.add_row(Text(label, style=style), body)
    return t


def verdict(report: Report) -> Text:
    """The report's headline (``OK``/``WOULD FAIL``, :attr:`Report.headline`) with counts."""
    rows = report.results
    c = {s: sum(1 for r in rows if r.status == s) for s in Status}
    bad = c[Status.FAIL] + c[Status.ERROR]
    head = (report.headline, "bold red" if bad else "bold green")
    return Text.assemble(head, ": %d failed, %d warnings, %d passed, %d skipped" % (
        bad, c[Status.WARN], c[Status.PASS], c[Status.SKIP]))


def header(console: Console, python: str, version: Optional[str], verl: Optional[str], how: str) -> None:
    """The first lines: tool, target interpreter, verl release and how it was chosen
    (``verl: 0.9.1 (installed)``; a reason with its own brackets follows a comma instead:
    ``verl: 0.9.1, newest in the matrix (verl not installed)``)."""
    from .. import __version__

    console.print(Text.assemble(("verl-preflight ", "bold"), __version__))
    chosen = (", %s" if "(" in how else " (%s)") % how
    console.print(Text("target: %s (Python %s)   verl: %s%s" % (python, version or "?", verl or "?", chosen)))
