"""Requirements the index serves only as an sdist: which they are, what building each needs, and
whether its sdist is pure Python (read in memory through the loopback index, judged by
:mod:`preflight.sdist_purity`). Used by :mod:`preflight.proofs` when pip's binary-only resolve
refuses a set for want of a wheel."""

import json
import re
from typing import Any, Dict, Optional, Sequence, Tuple

PYPI = "https://pypi.org/simple"

__all__ = ["build_needs", "split_requirement", "sdist_only", "judge_sdists", "judge_file"]


#: What building a package that has only an sdist on the index needs (pip's binary-only resolve
#: cannot take it). Sources: flashinfer's sdist is a JIT package (setup.py builds no kernels; they
#: compile on first use with nvcc: flashinfer-ai/flashinfer README "JIT"); flash-attn's setup.py.
_BUILD_NEEDS = {
    "flashinfer-python": "an sdist only: a JIT package whose CUDA kernels compile on first use, so the machine "
                         "needs a CUDA toolkit (nvcc) matching torch's CUDA at run time",
    "flash-attn": "an sdist only on PyPI: its setup.py downloads a prebuilt wheel from GitHub or compiles the CUDA "
                  "kernels (nvcc, torch installed first, --no-build-isolation; hours)",
}


def build_needs(name: str, finding: Optional[str] = None) -> str:
    """What building ``name`` from its sdist needs, one line: the recorded fact for the package
    (:data:`_BUILD_NEEDS`), else what its sdist shows (``finding``: the purity reader's line,
    :func:`preflight.sdist_purity.judge_sdist`), else a generic C/CUDA toolchain line."""
    key = re.split(r"[<>=!~ \[;]", name.strip(), maxsplit=1)[0].lower().replace("_", "-")
    if key in _BUILD_NEEDS:
        return _BUILD_NEEDS[key]
    if finding:
        return "an sdist only, not pure Python (its sdist %s): building it needs its build backend and a " \
               "C/C++ compiler (nvcc for CUDA sources) on the machine" % finding
    return ("an sdist only: building it needs its build backend and, for a compiled extension, a C/C++ compiler "
            "(and nvcc for CUDA code) on the machine")


def split_requirement(name: str) -> Tuple[str, Any]:
    """(normalized project, packaging SpecifierSet) of a name pip printed ("flashinfer_python==0.2.5",
    "pyairports", "numpy<2.0.0"); an unparsable specifier is the empty one."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet

    try:
        r = Requirement(name.strip())
        return re.sub(r"[-_.]+", "-", r.name).lower(), r.specifier
    except InvalidRequirement:
        return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ \[;]", name.strip(), maxsplit=1)[0]).lower(), SpecifierSet()


def _holds(spec: Any, version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return spec.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _wheel_version(filename: str) -> str:
    parts = filename[:-4].split("-")
    return parts[1] if len(parts) >= 5 else ""


def sdist_only(name: str, timeout: float = 20.0, index_url: str = PYPI, ix: Any = None) -> Optional[bool]:
    """True when the index serves only sdists for ``name`` (a project, with or without a
    specifier as pip printed it: "flashinfer_python==0.2.5"): among the releases the specifier
    admits there is an sdist and no wheel at all, so a binary-only install cannot take it (a
    source build); False when one has a wheel or there is no sdist; None when the index could not
    be read within ``timeout`` s. Reads the index's simple JSON (PEP 691), through ``ix`` (a
    :class:`preflight.proof_index.MetadataIndex`) when given."""
    import urllib.request

    project, spec = split_requirement(name)
    try:
        if ix is not None:
            sdists = [f["version"] for f in ix.sdist_files(project)]
            wheels = [_wheel_version(f) for f in ix.wheel_files(project)]
        else:
            req = urllib.request.Request("%s/%s/" % (index_url.rstrip("/"), project),
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})
            files = [f for f in json.load(urllib.request.urlopen(req, timeout=timeout)).get("files", [])
                     if not f.get("yanked")]
            from .proof_index import SDIST_SUFFIXES, sdist_version

            sdists = [sdist_version(f["filename"]) for f in files if f["filename"].lower().endswith(SDIST_SUFFIXES)]
            wheels = [_wheel_version(f["filename"]) for f in files if f["filename"].endswith(".whl")]
    except Exception:
        return None
    return any(_holds(spec, v) for v in sdists) and not any(_holds(spec, v) for v in wheels)


def judge_sdists(ix: Any, names: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """For each sdist-only ``name`` (see :func:`sdist_only`), the purity of the newest sdist the
    specifier admits: :func:`preflight.sdist_purity.judge_sdist`'s dict plus ``filename``, read
    through ``ix`` (in memory, at most :data:`preflight.sdist_purity.MAX_ARCHIVE` bytes, the
    index's per-request timeout). An archive refused or unreadable is ``pure`` False with the
    reason, ``error`` True when the index failed (no verdict either way)."""
    from packaging.version import InvalidVersion, Version

    from .sdist_purity import MAX_ARCHIVE, SdistError, judge_sdist

    out: Dict[str, Dict[str, Any]] = {}
    for name in names:
        project, spec = split_requirement(name)
        try:
            files = [f for f in ix.sdist_files(project) if _holds(spec, f["version"])]
        except (OSError, ValueError) as exc:
            out[name] = {"pure": False, "error": True, "why": "its index page could not be read (%s)" % exc}
            continue

        def key(f: Dict[str, Any]) -> Any:
            try:
                return (Version(f["version"]), f["filename"].endswith(".tar.gz"))
            except InvalidVersion:
                return (Version("0"), False)

        if not files:
            out[name] = {"pure": False, "why": "the index lists no sdist for it"}
            continue
        f = max(files, key=key)
        out[name] = judge_file(ix, f["filename"], f["url"], MAX_ARCHIVE, judge_sdist, SdistError)
    return out


def judge_file(ix: Any, filename: str, url: str, cap: int, judge: Any, refused: Any) -> Dict[str, Any]:
    """One sdist judged (see :func:`judge_sdists`)."""
    try:
        data = ix.download(url, cap)
    except (OSError, ValueError) as exc:
        return {"pure": False, "error": True, "filename": filename, "why": "its sdist could not be read (%s)" % exc}
    try:
        return dict(judge(data, filename), filename=filename)
    except refused as exc:
        return {"pure": False, "filename": filename, "why": "refused: %s" % exc}
