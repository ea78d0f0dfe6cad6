"""The stack without a rollout engine (``--backend none``): verl's core extra, a torch build that
runs on the machine, and the matrix's works-with bounds.

The torch release is verl's own pin when its core has one, else the one the default backend's
stack pairs with verl (so ``--backend none`` and ``--backend vllm`` install the same torch when
both work), else the newest torch in the matrix that verl admits. Its CUDA variant is judged on
the GPU's compute capability and the driver alone: no backend wheel constrains the CUDA major, so
a driver too old for the backend's wheel can still run a cu126 torch.
"""

from typing import Any, Dict, List, Optional

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..hw import driver_supports_gpu
from ..matrix import Matrix
from .cuda import driver_text, torch_variants
from .model import Resolution
from .requirements import exact_pin, named_reqs, py_ok, requirements_of, spec_text
from .run import Run, cite
from .stack import when_holds


def core_requirement(mx: Matrix, verl: str) -> str:
    """The requirement line of verl's core (``verl[verl-core]==0.9.1``, ``verl==0.2``)."""
    core = (mx.verl(verl) or {}).get("core_extra")
    return "verl[%s]==%s" % (core, verl) if core else "verl==%s" % verl


def _core_extras(run: Run) -> List[str]:
    core = run.row.get("core_extra")
    return [str(core)] if core else []


def _torch_candidates(run: Run, paired: Optional[str], py: str) -> List[str]:
    """torch releases to try, best first: verl core's pin; else the default stack's torch, then
    every recorded torch release verl's core admits, newest first."""
    reqs = requirements_of(run.mx, "verl", run.verl, _core_extras(run), py, run.arch)
    pin = exact_pin(reqs, "torch")
    if pin:
        return [pin]
    spec = SpecifierSet(",".join(str(r.specifier) for r in named_reqs(reqs, "torch") if str(r.specifier)))
    out = [paired] if paired else []
    out += [t for t in reversed(run.mx.versions("torch")) if t not in out and Version(t) in spec
            and not Version(t).is_prerelease]
    return out


def _python_fits(run: Run, t: str, py: str) -> bool:
    trow = run.mx.torch_python(t)
    if trow is not None and py not in trow["python"]:
        return False
    return py_ok((run.mx.meta("torch", t) or {}).get("requires_python"), py) and \
        py_ok(run.meta.get("requires_python"), py)


def resolve_core(run: Run, default: Resolution, arch_note: List[str]) -> Resolution:
    """The ``--backend none`` answer for ``run`` (its backend field is the default backend's, whose
    stack is ``default``): the Resolution with ``backend`` "none" and the install line of
    :func:`core_lines`. ``arch_note``: notes on the machine architecture."""
    res = Resolution(verl=run.verl, backend="none", driver=run.driver, cc=run.cc, gpu=run.gpu,
                     python_requested=run.python, arch=run.arch)
    cite({"citations": res.citations}, "verl", run.verl, "metadata/verl.json verl==%s" % run.verl,
         run.meta.get("source") or run.row.get("source", ""), "V")
    if run.cc and run.driver:  # the GPU architecture's own driver branch rule, before any CUDA arithmetic
        ok, why_not, arow = driver_supports_gpu(run.mx.arch_driver(), run.driver, run.cc)
        if not ok:
            res.problems.append(why_not)
            return res
    pys = [run.python] if run.python else ([default.python] if default.python else []) + \
        [m for m in reversed(run.minors) if m != default.python]
    why: List[str] = []
    for py in pys:
        for t in _torch_candidates(run, default.torch, py):
            if not _python_fits(run, t, py):
                why.append("torch %s has no wheel for Python %s" % (t, py))
                continue
            variants = [v for v in torch_variants(run, t, None) if not v["fails"]]
            if not variants:
                why.append("no CUDA variant of torch %s runs here (%s)" % (t, ", ".join(
                    "%s: %s" % (v["variant"], "+".join(v["fails"])) for v in torch_variants(run, t, None))))
                continue
            same = [v for v in variants if t == default.torch and v["variant"] == default.variant]
            best = (same or variants)[0]  # the default stack's build when it runs here: one torch for both
            _fill_core(run, res, t, py, best)
            if t != default.torch and default.torch:
                res.notes.append("torch %s, not the %s stack's %s: %s" % (
                    t, default.backend, default.torch, "; ".join(default.problems[:1]) or "verl admits it"))
            res.notes += arch_note
            return res
    res.problems.append("no torch build fits verl %s's core on this machine%s: %s" % (
        run.verl, " with Python %s" % run.python if run.python else "", "; ".join(why[:3]) or "no torch in range"))
    return res


def _fill_core(run: Run, res: Resolution, t: str, py: str, best: Dict[str, Any]) -> None:
    res.python, res.torch, res.variant, res.cuda = py, t, best["variant"], best["cuda"]
    res.index_url, res.torch_from_pypi = best["index"], best["pypi"]
    drv = best["drv"]
    res.min_driver = drv["native"] or drv["compat"]
    res.min_driver_compat = drv["compat"] or drv["native"]
    if run.driver and drv["status"] == "compat":
        res.warnings.append("driver %s runs CUDA %s only through minor-version compatibility (%s)" % (
            run.driver, best["cuda"], driver_text(drv)))
    cite({"citations": res.citations}, "torch", t, "verl core / default stack torch", "metadata/torch.json", "V")
    cite({"citations": res.citations}, "torch variant", best["variant"], "torch.toml variants.%s" % best["variant"],
         best["row"].get("source", ""), best["row"].get("confidence", "V"))
    res.requirements = core_lines(run, res)
    res.extra_index_urls = [] if best["pypi"] else [best["index"]]


def core_lines(run: Run, res: Resolution) -> List[str]:
    """The install line of verl's core: verl, torch (with its local variant when it is not PyPI's
    build) and every works-with bound that holds for (verl, torch), combined with verl's own
    specifier on that package; ``res.bounds`` gets the rows applied."""
    local = "" if res.torch_from_pypi else "+" + str(res.variant)
    lines = [core_requirement(run.mx, run.verl), "torch==%s%s" % (res.torch, local)]
    v_reqs = requirements_of(run.mx, "verl", run.verl, _core_extras(run), res.python or "", run.arch)
    versions = {"verl": run.verl, "torch": res.torch or ""}
    names: List[str] = []
    for b in run.mx.bounds():
        if not when_holds(b.get("when") or {}, versions):
            continue
        name: str = canonicalize_name(b["package"])
        res.bounds.append({"id": b["id"], "package": name, "spec": str(b["spec"]), "reason": b["reason"],
                           "source": b["source"], "confidence": b.get("confidence", "V")})
        if name not in names:
            names.append(name)
    for name in names:
        reqs = named_reqs(v_reqs, name) + [Requirement(name + b["spec"]) for b in res.bounds if b["package"] == name]
        text = spec_text(reqs)
        if name in ("transformers", "tensordict", "ray"):
            setattr(res, name, text)
        lines.append(name + text)
    return lines
