"""strategy=megatron: what the target must have (failure_cases #14, #15).

Per release (``[[megatron]]`` rows of matrices/verl_rules.toml): megatron-core at least the
documented version (or, for 0.1/0.2, the Megatron-LM checkout on PYTHONPATH), the other
distributions the release's Megatron extra installs, and the modules its Megatron workers import,
imported in the target with a deadline. A launch whose actor and critic use FSDP is not asked
for any of it.
"""

from typing import Any, Dict, List, Optional

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..launch.rules import load_rules
from ..matrix import parse_version
from ..probes.imports import run_imports
from ..shell import command
from .base import Context, Outcome, failed, passed, skipped

__all__ = ["megatron_row", "megatron_outcome"]


def megatron_row(release: Optional[str]) -> Optional[Dict[str, Any]]:
    """The ``[[megatron]]`` row covering ``release`` (None: unknown release or none recorded)."""
    pv = parse_version(release) if release else None
    if pv is None:
        return None
    v = Version(pv.base_version)
    for row in load_rules().get("megatron", []):
        if SpecifierSet(row["versions"]).contains(v, prereleases=True):
            return row
    return None


def megatron_outcome(ctx: Context, comp: Any, release: Optional[str]) -> Outcome:
    """The ``config.megatron`` outcome for a composed launch."""
    roles = [r for r, k in (("actor", "actor_rollout_ref.actor.strategy"), ("critic", "critic.strategy"))
             if comp.get(k) == "megatron" and (r == "actor" or _critic_used(comp))]
    if not roles:
        return passed("strategy is not megatron (%s): Megatron is not needed" % (
            comp.get("actor_rollout_ref.actor.strategy") or "fsdp"))
    row = megatron_row(release)
    if row is None:
        return skipped("Megatron needs of verl %s are not recorded" % release)
    ev: Dict[str, Any] = {"roles": roles, "release": release, "source": row["source"]}
    core = ctx.installed("megatron-core")
    problems: List[str] = []
    fixes: List[str] = []
    if row.get("needs_pythonpath"):
        pass  # the checkout is judged by the imports below
    elif core is None:
        problems.append("megatron-core is not installed")
        fixes.append(command(["pip", "install", "megatron-core>=%s" % row["core_min"]]) if row.get("core_min") else
                     command(["pip", "install", "verl[megatron]==%s" % release]) + " (megatron-core and its bridge)")
    elif row.get("core_min") and core.parsed is not None and core.parsed < Version(row["core_min"]):
        problems.append("megatron-core %s is older than %s, the oldest verl %s documents" % (
            core.version, row["core_min"], release))
        fixes.append(command(["pip", "install", "megatron-core>=%s" % row["core_min"]]))
    for d in row.get("dists", []):
        if ctx.installed(d) is None:
            problems.append("%s is not installed" % d)
            fixes.append(command(["pip", "install", "verl[megatron]==%s" % release if "megatron" in d else d]))
    ev["megatron_core"] = core.version if core else None
    items = []
    for spec in row.get("imports", []):
        mod, _c, attr = spec.partition(":")
        items.append({"id": spec, "module": mod, "attr": attr or None})
    res = ctx.memo("megatron_imports", lambda: run_imports(ctx.options.python, items, ctx.options.timeout))
    ev["imports"] = {k: {"state": r.get("state"), "error": r.get("error")} for k, r in res.items()}
    bad = [(k, r) for k, r in res.items() if r.get("state") != "ok"]
    if bad:
        k, r = bad[0]
        problems.append("import %s failed: %s: %s" % (k.replace(":", " ("), r.get("error_type") or r.get("state"),
                                                       (r.get("error") or "")[:200]) + (")" if ":" in k else ""))
        if row.get("needs_pythonpath"):
            fixes.append("put the Megatron-LM checkout (core_v0.4.0 with verl's patch) on PYTHONPATH; the "
                         "megatron-core wheel has no megatron.optimizer")
        elif not fixes:
            fixes.append("install the megatron-core version verl %s documents%s" % (
                release, " (>= %s)" % row["core_min"] if row.get("core_min") else ""))
    if problems:
        return failed("strategy=megatron (%s) but %s" % (", ".join(roles), "; ".join(problems)),
                      "; ".join(dict.fromkeys(fixes)), ev)
    return passed("strategy=megatron: megatron-core %s and the Megatron modules verl %s imports load" % (
        core.version if core else "(Megatron-LM on PYTHONPATH)", release), ev)


def _critic_used(comp: Any) -> bool:
    en = comp.get("critic.enable", None)
    if en is not None:
        return str(en).lower() in ("true", "1")
    return str(comp.get("algorithm.adv_estimator", "gae")) == "gae"
