"""The proof that the chosen requirement lines install: pip's recorded (or live) resolve for the target Python and platform."""

import re
from typing import List

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix import AnySpec
from .model import Resolution
from .requirements import requirements_of
from .run import Run
from .stack import when_holds


def backend_owns(run: Run, bv: str, no_wheel: List[str]) -> bool:
    """Whether every package pip found no wheel for is pinned (with a specifier) by backend
    release ``bv`` itself, so that another release of the backend may avoid it; False when one
    comes from verl, a bound or elsewhere (then the Python or platform is the obstacle)."""
    if not no_wheel:
        return True  # a conflict without a named package: another release may resolve
    reqs = {canonicalize_name(r.name) for r in requirements_of(run.mx, run.backend, bv, [], run.minors[-1], run.arch) if r.specifier}
    return all(canonicalize_name(re.split(r"[<>=!~ \[]", n)[0]) in reqs for n in no_wheel)


def prove(run: Run, res: Resolution) -> None:
    """Attach the recorded platform resolve of the chosen set (preflight.proofs) and check the
    resolved set against the matrix rules: works-with bounds and known-bad rows. A failed proof or
    a violated rule is a problem; a missing proof is a warning (the stack is unproven)."""
    from .. import proofs

    p = proofs.lookup(res.requirements, res.python or "", res.extra_index_urls, arch=run.arch)
    res.proof = {k: v for k, v in p.items() if k != "installed"}
    if p["status"] == "failed":
        builds = p.get("no_wheel") or p.get("source_builds") or []
        res.problems.append("pip cannot install this set for CPython %s on %s with binary wheels only%s: %s (%s)" % (
            res.python, "manylinux (glibc %s)" % p.get("glibc"),
            "; no wheel for this platform: %s" % ", ".join(builds) if builds else "", (p.get("error") or "")[-600:],
            p.get("file")))
        return
    if p["status"] != "proven":
        res.warnings.append("not proven to install: %s" % p.get("reason"))
        return
    have = {canonicalize_name(k): v for k, v in p["installed"].items()}
    res.proof["packages"] = len(have)
    if p.get("source_builds"):
        res.warnings.append("pip builds %s from source (no wheel for this platform, only an sdist): %s" % (
            ", ".join(p["source_builds"]), p.get("reason") or p.get("resolver")))
    for b in run.mx.bounds():
        name = canonicalize_name(b["package"])
        if name in have and when_holds(b.get("when") or {}, have) and Version(have[name]) not in AnySpec(str(b["spec"])):
            res.problems.append("the recorded resolve installs %s %s, outside the works-with bound %s%s (%s; %s)" % (
                name, have[name], name, b["spec"], b["reason"], b["source"]))
    for r in run.mx.known_bad():
        name = canonicalize_name(r["package"])
        if name not in have or r.get("env") or r.get("prerelease_only"):
            continue
        if Version(have[name]) in AnySpec(str(r["versions"])) and when_holds(r.get("when") or {}, dict(have, verl=run.verl)):
            (res.problems if r.get("severity") == "fail" else res.warnings).append(
                "the recorded resolve installs %s %s: %s (%s)" % (name, have[name], r["reason"], r["source"]))
