"""``preflight matrix refresh``: regenerate matrices/metadata/*.json from package metadata.

The generated part of the matrix is each release's ``Requires-Python`` and ``Requires-Dist``
exactly as the package index serves them. They are read through pip
(``pip install --dry-run --no-deps --ignore-installed --report FILE NAME==VER``), which fetches
only the metadata where the index serves it (PEP 658) and honours the user's pip configuration,
mirrors and credentials. Constraints are the one setting set aside (``PIP_CONSTRAINT`` is pointed
at an empty file of its own for these reads): a machine-wide ``torch<=2.14.1`` limits what may be installed,
not what a release declares, and would otherwise make every newer torch unreadable.
A release pip cannot read is reported with pip's own error lines and skipped; everything read
before and after it is kept and written (:class:`RefreshError` then lists the failures).
Curated files (matrices/*.toml) are never touched.
"""

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ..probes import child

__all__ = ["PACKAGES", "fetch_metadata", "list_versions", "parse_index_versions", "parse_report", "select_versions",
           "refresh", "RefreshError"]

#: What the generated metadata covers: package -> specifier of the releases to record.
#: The ranges follow issue 3: every verl release, vLLM 0.4 to 0.33, torch 2.1 to 2.15 and the
#: torchvision/torchaudio/SGLang releases verl and vLLM pin.
PACKAGES: Dict[str, str] = {
    "verl": ">=0.1",
    "vllm": ">=0.4.0",
    "torch": ">=2.1.0",
    "torchvision": ">=0.16.0",
    "torchaudio": ">=2.1.0",
    "sglang": ">=0.4.4",
    "tensordict": ">=0.5.0",
}

Fetch = Callable[[str, str], Dict[str, object]]
Lister = Callable[[str], List[str]]


class RefreshError(RuntimeError):
    """pip could not list or read a package's metadata (message names the package and the fix).

    Raised by :func:`refresh` after it has written what it read: ``diff`` and ``count`` then hold
    that partial result and ``failures`` each failed item with pip's error."""

    def __init__(self, message: str, diff: str = "", count: int = 0, failures: Optional[List[str]] = None):
        super().__init__(message)
        self.diff, self.count, self.failures = diff, count, list(failures or [])


def _pip_error(stdout: str, stderr: str) -> str:
    """pip's real error: its ERROR lines and, for a resolution conflict, its explanation."""
    lines = (stdout + "\n" + stderr).splitlines()
    keep = [l.strip() for l in lines if l.startswith("ERROR") or "conflict is caused by" in l
            or l.startswith("    The user requested") or "constraint" in l.lower() and "requested" in l.lower()]
    return " | ".join(keep)[-1200:] or ((stderr.strip().splitlines() or ["pip failed with no output"])[-1])


_EMPTY: List[str] = []


def _env() -> Dict[str, str]:
    """The environment for pip: the user's, with constraints pointed at an empty file of our own
    (not /dev/null, which pip would read as a file: on a machine where it is a regular file, its
    contents became pip's constraints)."""
    if not _EMPTY or not os.path.exists(_EMPTY[0]):
        fd, path = tempfile.mkstemp(prefix="preflight-no-constraints-", suffix=".txt")
        os.close(fd)
        _EMPTY[:] = [path]
        import atexit

        def _drop() -> None:
            if os.path.exists(path):
                os.remove(path)

        atexit.register(_drop)
    env = dict(os.environ)
    env["PIP_CONSTRAINT"] = _EMPTY[0]  # see the module doc: constraints do not change a release's metadata
    return env


def _pip(python: str) -> List[str]:
    return [python, "-m", "pip", "--disable-pip-version-check"]


def list_versions(name: str, python: Optional[str] = None, timeout: float = 120.0) -> List[str]:
    """Versions of ``name`` the configured index offers (``pip index versions``), newest first.

    Raises RefreshError when pip fails (no network, unknown package).
    """
    cmd = _pip(python or sys.executable) + ["index", "versions", name]
    try:
        proc = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=timeout, env=_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RefreshError("pip index versions %s: %s" % (name, exc))
    found = parse_index_versions(proc.stdout) if proc.returncode == 0 else None
    if not found:
        raise RefreshError("pip could not list versions of %s: %s (check network access and pip's index "
                           "configuration)" % (name, _pip_error(proc.stdout, proc.stderr)))
    return found


def parse_index_versions(stdout: str) -> Optional[List[str]]:
    """The versions in ``pip index versions`` output (its "Available versions:" line), newest
    first; None when the line is missing."""
    m = re.search(r"Available versions:\s*(.+)", stdout)
    if not m:
        return None
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def fetch_metadata(name: str, version: str, python: Optional[str] = None,
                   timeout: float = 180.0) -> Dict[str, object]:
    """Requires-Python and Requires-Dist of ``name==version`` as the index serves them.

    The requirement is ``NAME===VER`` (arbitrary equality), so a local build found in a
    find-links directory (``torch 2.13.0+cpu``) is never read in place of the release itself.
    Requires-Python is ignored so that every release can be read from any interpreter.

    Returns ``{"requires_python": str|None, "requires_dist": [str...], "source": str}``.
    Raises RefreshError when pip cannot read it.
    """
    with child.scratch("preflight-refresh-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = _pip(python or sys.executable) + [
            "install", "--dry-run", "--no-deps", "--ignore-installed", "--ignore-requires-python", "--quiet",
            "--report", report, "%s===%s" % (name, version)]
        try:
            proc = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=timeout, env=_env(), workdir=tmp)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RefreshError("pip metadata read of %s==%s: %s" % (name, version, exc))
        if proc.returncode != 0 or not os.path.exists(report):
            raise RefreshError("%s==%s: %s" % (name, version, _pip_error(proc.stdout, proc.stderr)))
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
    return parse_report(data, name, version)


def parse_report(data: Dict[str, object], name: str, version: str) -> Dict[str, object]:
    """The metadata row of ``name==version`` from a parsed ``pip install --report`` document.

    Raises RefreshError when the report holds no install item, or one for another version.
    """
    try:
        item = data["install"][0]  # type: ignore[index]
        meta = item["metadata"]
    except (KeyError, IndexError, TypeError):
        raise RefreshError("%s==%s: pip's report lists nothing to install (pip too old for --report? "
                           "pip >= 23.0 is needed)" % (name, version))
    got = str(meta.get("version", version))
    if Version(got) != Version(version) or Version(got).local != Version(version).local:
        raise RefreshError("%s==%s: pip resolved %s instead; check find-links and index configuration"
                           % (name, version, got))
    return {
        "requires_python": meta.get("requires_python"),
        "requires_dist": sorted(meta.get("requires_dist") or []),
        "source": "package index metadata of %s==%s (read with pip --dry-run --report)" % (name, version),
    }


def select_versions(available: Iterable[str], spec: str) -> List[str]:
    """The final releases in ``available`` that ``spec`` admits, oldest first. Pre-releases,
    dev releases and local builds (``2.13.0+cpu`` from a find-links directory) are left out."""
    out = []
    sset = SpecifierSet(spec)
    for v in available:
        try:
            pv = Version(v)
        except InvalidVersion:
            continue
        if not pv.is_prerelease and not pv.is_devrelease and not pv.local and pv in sset:
            out.append(v)
    return sorted(out, key=Version)


def _is_local(version: str) -> bool:
    try:
        return bool(Version(version).local)
    except InvalidVersion:
        return False


def _dump(data: Dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def refresh(matrix_dir: str, packages: Optional[Dict[str, str]] = None,
            lister: Optional[Lister] = None, fetch: Optional[Fetch] = None,
            log: Callable[[str], None] = lambda s: None, write: bool = True) -> Tuple[str, int]:
    """Regenerate ``matrix_dir/metadata/<package>.json``; return (unified diff, releases read).

    Already-recorded releases are kept unless the index now reports different metadata;
    releases the index no longer lists are kept (the matrix never loses a row silently). Rows
    recorded under a local version (``2.13.0+cpu``: a local build, not a release) are dropped,
    which the diff shows. Curated files (``*.toml``) are never opened.
    ``lister`` and ``fetch`` default to pip; tests pass recorded data.
    """
    packages = packages or PACKAGES
    lister = lister or list_versions
    fetch = fetch or fetch_metadata
    diffs: List[str] = []
    failures: List[str] = []
    count = 0
    for name, spec in sorted(packages.items()):
        path = os.path.join(matrix_dir, "metadata", name + ".json")
        old_text = ""
        old: Dict[str, Any] = {"package": name, "releases": {}}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                old_text = fh.read()
            try:
                old = json.loads(old_text)
            except ValueError as exc:
                raise RefreshError("%s is not valid JSON (%s); restore it from the repository (git checkout -- %s) "
                                   "and refresh again" % (path, exc, path))
        releases = {v: row for v, row in dict(old.get("releases", {})).items()
                    if not _is_local(v)}
        try:
            wanted = select_versions(lister(name), spec)
        except RefreshError as exc:
            failures.append(str(exc))
            log("FAILED listing %s: %s" % (name, exc))
            wanted = []
        for version in wanted:
            log("reading %s==%s" % (name, version))
            try:
                releases[version] = fetch(name, version)
            except RefreshError as exc:  # keep what was read; report pip's error for this item
                failures.append(str(exc))
                log("FAILED %s" % exc)
                continue
            count += 1
        new = {"package": name, "generated_by": "preflight matrix refresh", "releases": releases}
        new_text = _dump(new)
        if new_text != old_text:
            diffs.extend(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                              "a/metadata/%s.json" % name, "b/metadata/%s.json" % name))
            if write:
                from ..atomic import write_atomic

                write_atomic(path, new_text, "--dir", create_dirs=True)
    if failures:
        raise RefreshError("%d item(s) could not be read (everything else was %s): %s" % (
            len(failures), "written" if write else "compared", "; ".join(failures[:5]) + (
                " (and %d more)" % (len(failures) - 5) if len(failures) > 5 else "")),
            "".join(diffs), count, failures)
    return "".join(diffs), count


if __name__ == "__main__":  # pragma: no cover - developer convenience
    t0 = time.time()
    d, n = refresh(sys.argv[1] if len(sys.argv) > 1 else "matrices", log=lambda s: print(s, flush=True))
    print("%d releases read in %.0f s; %d diff lines" % (n, time.time() - t0, d.count("\n")))
