"""Whether a wheelhouse is complete for an interpreter: pip's offline verdict, and each missing
requirement with its requirers from the wheels' metadata."""

import json
import os
import zipfile
from typing import Any, Dict, Iterator, List, Set, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...errors import UsageError
from ...probes import child
from .files import Say
from .manifest import find_links, open_wheelhouse
from .pip import outer_pip, pip_error, run_pip


def wheel_requires(path: str) -> List[str]:
    """The Requires-Dist lines of the wheel at ``path``. Raises UsageError naming it when it is
    not a wheel (a zip archive) however its hash matched."""
    try:
        return _wheel_requires_unchecked(path)
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
        raise UsageError("%s is not a readable wheel (%s); rebuild the wheelhouse or copy that file again" % (
            path, getattr(exc, "strerror", None) or exc))


def _wheel_requires_unchecked(path: str) -> List[str]:
    with zipfile.ZipFile(path) as z:
        meta = [n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        if not meta:
            return []
        text = z.read(meta[0]).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    return [l.split(":", 1)[1].strip() for l in head.splitlines() if l.lower().startswith("requires-dist:")]


def _applying(reqs: List[Any], wanted: Dict[str, Set[str]], marker_env: Dict[str, str]) -> Iterator[Any]:
    """(who, version, requirement) for each requirement of ``reqs`` whose marker holds for one of
    the extras ``wanted`` of its owner (once per such extra), read lazily so extras added while
    iterating count."""
    for who, ver, req in reqs:
        for ex in list(wanted.get(who, {""})):
            if req.marker is None or req.marker.evaluate(dict(marker_env, extra=ex)):
                yield who, ver, req


def missing_requirements(wh_dir: str, manifest: Dict[str, Any], marker_env: Dict[str, str],
                         installed: Dict[str, str]) -> List[Dict[str, Any]]:
    """Every requirement of the served wheels that neither the wheelhouse nor the interpreter's
    installed distributions satisfy, read from each wheel's METADATA and evaluated with the
    target's marker environment (extras the requirers ask for included). Each row: ``name``,
    ``required_by`` (list of "requirer version: requirement"), ``have`` (a version that is there
    but does not fit, or None)."""
    have: Dict[str, str] = dict(installed)
    have.update({r["key"]: r["version"] for r in manifest["wheels"]})
    reqs: List[Tuple[str, str, Requirement]] = []
    extras: Dict[str, set] = {}
    for r in manifest["wheels"]:
        for line in wheel_requires(os.path.join(wh_dir, r["file"])):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            reqs.append((r["key"], r["version"], req))
    wanted = {r["key"]: {""} for r in manifest["wheels"]}
    # requested extras propagate: fastapi[standard] makes fastapi's 'standard' requirements count
    changed = True
    while changed:
        changed = False
        for _who, _, req in _applying(reqs, wanted, marker_env):
            k = canonicalize_name(req.name)
            cur = extras.setdefault(k, set())
            new = set(req.extras) - cur
            if new:
                cur |= new
                wanted.setdefault(k, {""}).update(new)
                changed = True
    out: Dict[str, Dict[str, Any]] = {}
    for who, ver, req in _applying(reqs, wanted, marker_env):
        k = canonicalize_name(req.name)
        got = have.get(k)
        ok = False
        if got is not None:
            try:
                ok = not req.specifier or req.specifier.contains(Version(got), prereleases=True)
            except InvalidVersion:
                ok = False
        if ok:
            continue
        row = out.setdefault(k, {"name": k, "required_by": [], "have": got})
        text = "%s %s: %s" % (who, ver, str(req).split(";")[0].strip())
        if text not in row["required_by"]:
            row["required_by"].append(text)
    return [out[k] for k in sorted(out)]


def check_complete(path: str, python: str, say: Say = lambda s: None, timeout: float = 600.0,
                   option: str = "--check") -> Dict[str, Any]:
    """Is the wheelhouse at ``path`` (or its parts) complete for interpreter ``python``?

    pip resolves offline (``pip install --dry-run --no-index --find-links ... --report``, with
    what ``python`` already has counting as installed): its verdict is ``complete``. The wheels'
    metadata gives ``missing`` (each with its requirers) and ``omitted`` says which of them were
    left out on purpose and why. Raises UsageError when the wheelhouse is corrupt or ``python``
    cannot run.
    """
    from ...probes.process import run_script

    wh, m = open_wheelhouse(path, say, option)
    out = run_script(python, "info", timeout=60)
    info = out.last("info")
    if not info:
        raise UsageError("--python %s: could not run it (%s)" % (python, out.describe()))
    installed: Dict[str, str] = {canonicalize_name(r["name"]): str(r.get("version")) for r in info.get("distributions", [])
                 if r.get("name")}
    target_minor = ".".join(str(x) for x in info["version"][:2])
    missing = missing_requirements(wh, m, info.get("marker_env") or {}, installed)
    omitted = {canonicalize_name(o["name"]): o for o in m.get("omitted", [])}
    for row in missing:
        if row["name"] in omitted:
            row["omitted"] = omitted[row["name"]]["reason"]
    with child.scratch("preflight-whcheck-") as tmp:
        req = os.path.join(tmp, "req.txt")
        from ...atomic import write_new

        write_new(req, "".join("%s==%s\n" % (r["name"], r["version"]) for r in m["wheels"]))
        report = os.path.join(tmp, "report.json")
        args = ["install", "--dry-run", "--quiet", "--report", report] + find_links(wh, m) + ["-r", req]
        pip_python = python
        if not info.get("has_pip"):  # a venv made by uv: another pip resolves against it (pip >= 22.3)
            pip_python = outer_pip(python, timeout)
            args = ["--python", python] + args
        proc = run_pip(args, timeout, python=pip_python, workdir=tmp)
        pip_ok = proc.returncode == 0 and os.path.exists(report)
        to_install = []
        if pip_ok:
            with open(report, encoding="utf-8") as fh:
                to_install = ["%s==%s" % (i["metadata"]["name"], i["metadata"]["version"])
                              for i in json.load(fh).get("install", [])]
    return {"wheelhouse": wh, "python": python, "python_version": info.get("version_string"),
            "python_matches": target_minor == m.get("python"), "wheelhouse_python": m.get("python"),
            "complete": pip_ok, "pip_error": None if pip_ok else pip_error(proc), "would_install": to_install,
            "missing": missing, "wheels": len(m["wheels"])}
