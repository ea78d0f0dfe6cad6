"""The proof that the chosen requirement lines install: pip's recorded (or live) resolve for the target Python and platform."""

import re
from typing import Any, Dict, List

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix import AnySpec, Matrix
from .model import Resolution
from .candidates import verl_reqs
from .requirements import requirements_of
from .run import Run
from .stack import when_holds


def backend_owns(run: Run, bv: str, no_wheel: List[str], error: str = "") -> bool:
    """Whether every package pip found no wheel for is pinned (with a specifier) by backend
    release ``bv`` itself, so that another release of the backend may avoid it; False when one
    comes from verl, a bound or elsewhere (then the Python or platform is the obstacle)."""
    if not no_wheel:
        return True
    if any("%s (from verl)" % n in error for n in no_wheel):
        return False  # pip names verl (or its bound) as the one asking for it
    verl_side = {canonicalize_name(r.name) for r in verl_reqs(run, run.minors[-1]) if r.specifier}
    verl_side |= {canonicalize_name(b["package"]) for b in run.mx.bounds()
                  if when_holds(b.get("when") or {}, {"verl": run.verl})}
    if any(canonicalize_name(re.split(r"[<>=!~ \[]", n)[0]) in verl_side for n in no_wheel):
        return False  # verl (or a bound on verl) asks for it too: another backend release cannot avoid it  # a conflict without a named package: another release may resolve
    reqs = {canonicalize_name(r.name) for r in requirements_of(run.mx, run.backend, bv, [], run.minors[-1], run.arch) if r.specifier}
    return all(canonicalize_name(re.split(r"[<>=!~ \[]", n)[0]) in reqs for n in no_wheel)


def prove(run: Run, res: Resolution) -> None:
    """Attach the recorded proof of the chosen install line (:func:`preflight.proofs.lookup`, for
    the run's Python and architecture) and judge it (:func:`judge`)."""
    from .. import proofs

    judge(run.mx, run.verl, res, proofs.lookup(res.requirements, res.python or "", res.extra_index_urls,
                                               arch=run.arch))


def prove_now(mx: Matrix, res: Resolution, timeout: float) -> str:
    """Prove ``res``'s install line live (pip's resolver against PyPI, ``timeout`` seconds) and
    judge it in place of the recorded proof: problems, warnings and ``ok`` follow the live answer.
    Returns one line saying what happened (for the report's inputs)."""
    from .. import proofs

    if not res.requirements:
        return "live proof: no install line to prove"
    p = proofs.prove_live(res.requirements, res.python or "", res.arch, res.extra_index_urls, timeout=timeout)
    p.pop("report", None)
    p.pop("output_tail", None)
    res.problems = [x for x in res.problems if not x.startswith(("pip cannot install this set",
                                                                "the recorded resolve installs"))]
    res.warnings = [x for x in res.warnings if not x.startswith(("unproven:", "pip builds "))]
    judge(mx, res.verl, res, p)
    res.ok = not res.problems
    return "live proof (%s): %s" % (p.get("resolver") or "pip", p["status"] if p["status"] != "unproven"
                                    else "unproven: %s" % p.get("reason"))


def judge(mx: Matrix, verl: str, res: Resolution, p: Dict[str, Any]) -> None:
    """Put proof ``p`` on ``res`` and check the resolved set against the matrix rules: works-with
    bounds and known-bad rows. A failed proof (pip refused the line: a pin the index does not
    serve, no wheel for this Python or platform) or a violated rule is a problem; no proof is a
    warning (the stack is unproven); a package with only an sdist is named with what building it
    needs."""
    res.proof = {k: v for k, v in p.items() if k != "installed"}
    if p["status"] == "failed":
        builds = p.get("no_wheel") or p.get("source_builds") or []
        needs = p.get("build_needs") or {}
        res.problems.append("pip cannot install this set for CPython %s on Linux %s with binary wheels only, so the "
                            "stack does not install%s: %s (%s)" % (
                                res.python, res.arch, "; no wheel for: %s" % ", ".join(builds) if builds else "",
                                (p.get("error") or "")[-600:], p.get("file") or "live"))
        for name, need in sorted(needs.items()):
            res.problems.append("%s has only an sdist on the index: %s" % (
                name, re.sub(r"^an sdist only(?: on PyPI)?[:,]?\s*", "", need)))
        return
    if p["status"] != "proven":
        res.warnings.append("unproven: %s" % p.get("reason"))
        return
    have: Dict[str, str] = {canonicalize_name(k): v for k, v in p["installed"].items()}
    res.proof["packages"] = len(have)
    if p.get("source_builds"):
        needs = p.get("build_needs") or {}
        res.warnings.append("pip builds %s from source (no wheel on the index, only an sdist)%s; proven by %s" % (
            ", ".join(p["source_builds"]), "".join("; %s: %s" % (n, needs[n]) for n in p["source_builds"] if n in needs),
            p.get("reason") or p.get("resolver")))
    for b in mx.bounds():
        name = canonicalize_name(b["package"])
        if name in have and when_holds(b.get("when") or {}, have) and Version(have[name]) not in AnySpec(str(b["spec"])):
            res.problems.append("the recorded resolve installs %s %s, outside the works-with bound %s%s (%s; %s)" % (
                name, have[name], name, b["spec"], b["reason"], b["source"]))
    for r in mx.known_bad():
        name = canonicalize_name(r["package"])
        if name not in have or r.get("env") or r.get("prerelease_only"):
            continue
        if Version(have[name]) in AnySpec(str(r["versions"])) and when_holds(r.get("when") or {}, dict(have, verl=verl)):
            (res.problems if r.get("severity") == "fail" else res.warnings).append(
                "the recorded resolve installs %s %s: %s (%s)" % (name, have[name], r["reason"], r["source"]))
