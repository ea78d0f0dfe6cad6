"""Evaluate one candidate stack (backend release on a Python): conflicts, torch variant, GPU and driver checks."""

from typing import AbstractSet, Any, Dict, List, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .candidates import torch_pin, verl_reqs
from .cuda import backend_wheel_cuda, driver_checks, gpu_checks, torch_variants, variant_problems
from .requirements import joint, named_reqs, requirements_of, spec_text
from .run import RANK, Run, add_problem, bname, cite


def shared_conflicts(run: Run, bv: str, v_reqs: List[Requirement], b_reqs: List[Requirement], ev: Dict[str, Any]) -> None:
    """Dependencies verl and the backend both constrain must admit a common version."""
    names: AbstractSet[str] = {canonicalize_name(r.name) for r in v_reqs} & {canonicalize_name(r.name) for r in b_reqs}
    for name in sorted(names - {"torch"}):
        specs = [r.specifier for r in named_reqs(v_reqs, name) + named_reqs(b_reqs, name)]
        if joint(specs, run.mx.versions(name)) is None:
            vs, bs = spec_text(named_reqs(v_reqs, name)), spec_text(named_reqs(b_reqs, name))
            add_problem(ev, "conflict", "verl %s requires %s%s but %s %s requires %s%s" % (
                run.verl, name, vs, bname(run), bv, name, bs))


def evaluate(run: Run, bv: str, extras: List[str], py: str,
              bcuda_override: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Evaluate the stack with backend ``bv`` on Python ``py`` (module doc, steps 2, 4 and 5).

    ``bcuda_override``: another published build of the backend (a vllm.toml ``other`` entry) to
    judge instead of the PyPI wheel. Returns a dict: ``fail`` (bool), ``problems``, ``warnings``,
    ``kinds`` (problem kinds: conflict, arch, major, driver, compat, data), ``citations``, and the
    choices (``torch``, ``variant``, ``bcuda``, ``min_driver``...).
    """
    mx = run.mx
    ev: Dict[str, Any] = {"bv": bv, "python": py, "problems": [], "warnings": [], "citations": [], "kinds": set(),
                          "fail": False}
    v_reqs = verl_reqs(run, py)
    b_reqs = requirements_of(mx, run.backend, bv, extras, py, run.arch)
    ev["b_reqs"], ev["v_reqs"] = b_reqs, v_reqs
    t, t_from, conflicts = torch_pin(run, bv, extras, py)
    for c in conflicts:
        add_problem(ev, "conflict", c)
    shared_conflicts(run, bv, v_reqs, b_reqs, ev)
    if ev["fail"]:
        return ev
    ev["torch"] = t
    pkg = t_from.split("==")[0]
    cite(ev, "torch", t, "metadata/%s.json %s requires torch==%s" % (pkg, t_from, t),
          (mx.meta(pkg, t_from.split("==")[1]) or {}).get("source", ""), "V")
    # the backend wheel's CUDA (a build chosen with --backend-build replaces the PyPI wheel)
    if run.build and not bcuda_override:
        row = mx.backend_build(run.backend, bv) or {}
        pypi_variant = "cu%s" % str(row.get("cuda", "")).replace(".", "")
        if run.build != pypi_variant:
            found = [o for o in row.get("other") or [] if o.get("variant") == run.build]
            if not found:
                add_problem(ev, "build", "%s %s has no recorded %s build (recorded: %s)" % (
                    bname(run), bv, run.build, ", ".join([pypi_variant + " (PyPI)"] + [
                        str(o["variant"]) for o in row.get("other") or []])))
                return ev
            bcuda_override = dict(found[0], source=row["source"], versions=row["versions"],
                                  confidence=max(found[0].get("confidence", "S"), row.get("confidence", "V"),
                                                 key=lambda c: RANK[c]))
            ev["backend_where"] = str(found[0]["where"]).format(version=bv)
    if bcuda_override:
        bcuda, brow = str(bcuda_override["cuda"]), bcuda_override
        label = "%s.toml build %s (%s)" % (run.backend, brow.get("versions", ""), brow.get("variant"))
    else:
        bcuda, brow = backend_wheel_cuda(run, bv, t)
        label = "%s.toml build %s" % (run.backend, (brow or {}).get("versions", ""))
    ev["bcuda"] = bcuda
    if brow is not None:
        cite(ev, "%s wheel CUDA" % run.backend, bcuda, label, brow["source"], brow.get("confidence", "S"))
    # the torch variant
    variants = torch_variants(run, t, int(bcuda.split(".")[0]) if bcuda else None)
    if not variants:
        add_problem(ev, "data", "torch %s's series has no CUDA variant in the matrix" % t)
        return ev
    best = ev["variant"] = variants[0]
    vrow = best["row"]
    cite(ev, "torch variant", best["variant"], "torch.toml variants.%s" % best["variant"], vrow.get("source", ""),
          vrow.get("confidence", "V"))
    if best["fails"]:
        variant_problems(run, t, bv, bcuda, variants, ev)
    elif run.cc:
        cite(ev, "torch arch list", best["arch_how"], "torch.toml variants.%s arch" % best["variant"],
              vrow.get("source", ""), vrow.get("confidence", "V"))
    # the backend wheel on this driver and GPU
    gpu_checks(run, bv, bcuda, ev)
    driver_checks(run, bv, bcuda, best, ev)
    return ev
