"""The candidates: backend releases in verl's range, the torch pin each brings, the Pythons every part admits."""

from typing import Any, Dict, List, Optional, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix import AnySpec
from .requirements import exact_pin, named_reqs, py_ok, requirements_of
from .run import Run, bname, conf_flag


def verl_reqs(run: Run, py: str) -> List[Requirement]:
    return requirements_of(run.mx, "verl", run.verl, [run.extra] if run.extra else [], py, run.arch)


def backend_spec(run: Run) -> Tuple[Optional[SpecifierSet], Optional[AnySpec], List[str]]:
    """(specifier from verl's requirement, runtime gate, extras verl asks of the backend)."""
    py = run.minors[-1]
    reqs = named_reqs(verl_reqs(run, py), run.backend)
    spec = SpecifierSet(",".join(str(r.specifier) for r in reqs if str(r.specifier))) if reqs else None
    extras = sorted({e for r in reqs for e in r.extras})
    gate = None
    if run.backend == "vllm" and run.row.get("vllm_runtime"):
        gate = AnySpec(str(run.row["vllm_runtime"]))
    return spec, gate, extras


def backend_candidates(run: Run) -> Tuple[List[str], List[str]]:
    """(candidate backend versions, newest first and known-bad ones last; extras verl asks of the backend)."""
    spec, gate, extras = backend_spec(run)
    good: List[str] = []
    bad: List[str] = []
    unproven: List[str] = []
    failed = getattr(run, "failed_proofs", {}) or {}
    for v in reversed(run.mx.versions(run.backend)):
        pv = Version(v)
        if spec is not None and not spec.contains(pv, prereleases=True):
            continue
        if gate is not None and pv not in gate:
            continue
        (unproven if v in failed else bad if known_bad_rows(run, v) else good).append(v)
    return good + bad + unproven, extras


def known_bad_rows(run: Run, version: str) -> List[Dict[str, Any]]:
    out = []
    for r in run.mx.known_bad():
        if canonicalize_name(r["package"]) != run.backend or r.get("prerelease_only") or r.get("env"):
            continue  # env rows judge a run-time setting, not the stack
        if not SpecifierSet(str(r["versions"])).contains(Version(version), prereleases=True):
            continue
        when = r.get("when") or {}
        if "verl" in when and not SpecifierSet(str(when["verl"])).contains(Version(run.verl), prereleases=True):
            continue
        out.append(r)
    return out


def torch_pin(run: Run, bv: str, extras: List[str], py: str) -> Tuple[Optional[str], Optional[str], List[str]]:
    """(torch version, where it comes from, conflicts) for backend ``bv`` on Python ``py``."""
    b_reqs = requirements_of(run.mx, run.backend, bv, extras, py, run.arch)
    v_reqs = verl_reqs(run, py)
    bt, vt = exact_pin(b_reqs, "torch"), exact_pin(v_reqs, "torch")
    if bt and vt and Version(bt) != Version(vt):
        return None, None, ["%s %s pins torch==%s but verl %s pins torch==%s" % (bname(run), bv, bt, run.verl, vt)]
    if bt:
        return bt, "%s==%s" % (run.backend, bv), []
    if vt:
        return vt, "verl==%s" % run.verl, []
    return None, None, ["neither %s %s nor verl %s pins torch" % (bname(run), bv, run.verl)]


def pythons(run: Run, bv: str, extras: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """(CPython minors every part admits, oldest first; minor -> why it was dropped)."""
    mx = run.mx
    verl_rp = run.meta.get("requires_python")
    b_rp = (mx.meta(run.backend, bv) or {}).get("requires_python")
    tags = mx.backend_python_tags(run.backend, bv)
    ok: List[str] = []
    why: Dict[str, str] = {}
    for m in run.minors:
        if not py_ok(verl_rp, m):
            why[m] = "verl %s needs Python %s" % (run.verl, verl_rp)
            continue
        if not py_ok(b_rp, m):
            why[m] = "%s %s needs Python %s" % (bname(run), bv, b_rp)
            continue
        if tags and m not in tags["python"]:
            why[m] = "%s %s has wheels for Python %s only%s" % (bname(run), bv, ", ".join(tags["python"]), conf_flag(tags))
            continue
        t, _, _ = torch_pin(run, bv, extras, m)
        if t is None:
            why[m] = "no torch pin"
            continue
        trow = mx.torch_python(t)
        if not py_ok((mx.meta("torch", t) or {}).get("requires_python"), m) or (trow and m not in trow["python"]):
            why[m] = "torch %s has wheels for Python %s only" % (t, ", ".join(trow["python"]) if trow else "?")
            continue
        ok.append(m)
    return ok, why


def pick_python(run: Run, pys: List[str]) -> Tuple[str, str]:
    """(minor, why) among admissible ``pys``: the one asked for, else this interpreter's, else the
    release's image Python, else the newest."""
    if run.python in pys:
        return run.python, "asked for"
    if run.prefer in pys:
        return run.prefer, "this interpreter's minor"
    img = str(run.row.get("image_python") or "")
    if img in pys:
        return img, "the Python of verl %s's official image (verl.toml image_python)" % run.verl
    docs = str(run.row.get("docs_python") or "")
    if docs in pys:
        return docs, "the Python of verl's install docs (verl.toml docs_python%s)" % (
            ", [%s]" % run.row["docs_python_confidence"] if run.row.get("docs_python_confidence") else "")
    return pys[-1], "the newest minor every part supports"
