"""Recorded proofs that a resolved stack installs: pip's own resolver, run for the target
interpreter and platform with binary wheels only, over the stack's requirements.

A proof is recorded by ``tools/record_proofs.py`` (network, PyPI) with::

    pip install --dry-run --ignore-installed --report FILE --only-binary=:all: \\
        --python-version X.Y --implementation cp --abi cpXY --abi abi3 --abi none \\
        --platform manylinux_2_5_x86_64 ... --platform manylinux_2_35_x86_64 \\
        --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \\
        REQUIREMENTS

(every platform tag a glibc 2.35 x86_64 target accepts). The index ``matrices/proofs.json`` holds,
per proof id, the requirement set, Python, platform tags, resolver, date, status, the resolved
``name==version`` set and the trimmed report's file (``tests/data/proofs/<id>.json``). A proof
made for glibc G also holds on any newer glibc (its tags are a superset).

Requirements that point at files outside the package index (``flash-attn @ https://github...``)
are not part of a proof: the recorder could not reach them, and the proof says so.
"""

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["proof_id", "proof_requirements", "platform_tags", "load_index", "lookup", "NOT_PROVABLE"]

#: The glibc the recorded proofs are made for (Ubuntu 22.04; verl 0.7's images are ubuntu22.04).
DEFAULT_GLIBC = (2, 35)

NOT_PROVABLE = ("download.pytorch.org and wheels.vllm.ai are not reachable from the machine that records proofs "
                "(PyPI only): a stack needing them is unproven")


def platform_tags(glibc: Tuple[int, int] = DEFAULT_GLIBC, arch: str = "x86_64") -> List[str]:
    """Every manylinux tag a target with ``glibc`` (major, minor) accepts, newest first:
    manylinux_2_<minor>..manylinux_2_5, each legacy alias (manylinux2014 = 2.17, manylinux2010 =
    2.12, manylinux1 = 2.5; PEP 600, PEP 599) right after its glibc, as packaging.tags orders them."""
    aliases = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for m in range(glibc[1], 4, -1):
        tags.append("manylinux_%d_%d_%s" % (glibc[0], m, arch))
        if m in aliases:
            tags.append("%s_%s" % (aliases[m], arch))
    return tags


#: Packages the resolver names as source builds when no wheel fits (flash-attn): pip's binary-only
#: resolve cannot include them, so a proof leaves them out and says so.
SOURCE_BUILDS = ("flash-attn",)


def proof_requirements(requirements: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(requirements a proof covers, requirements left out: direct URLs outside the index, and
    the named source builds of :data:`SOURCE_BUILDS`)."""
    inside, outside = [], []
    for r in requirements:
        name = re.split(r"[\s<>=!~\[@;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-")
        (outside if re.search(r"\s@\s", r) or name in SOURCE_BUILDS else inside).append(r)
    return inside, outside


def proof_id(requirements: Sequence[str], python: str, extra_index_urls: Sequence[str] = ()) -> str:
    """A stable id of (Python, requirement set, extra indexes): 16 hex digits."""
    inside, _ = proof_requirements(requirements)
    blob = json.dumps([python, sorted(inside), sorted(extra_index_urls)])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


_CACHE: Dict[str, Dict[str, Any]] = {}


def load_index(directory: Optional[str] = None) -> Dict[str, Any]:
    """The proof index (matrices/proofs.json) as a dict; empty when absent."""
    from .matrix import read_file as _read  # the same lookup as every matrix file (zipapp or checkout)

    key = directory or ""
    if key not in _CACHE:
        raw = _read("proofs.json", directory)
        _CACHE[key] = json.loads(raw.decode("utf-8")) if raw else {"proofs": {}}
    return _CACHE[key]


def lookup(requirements: Sequence[str], python: str, extra_index_urls: Sequence[str] = (),
           directory: Optional[str] = None) -> Dict[str, Any]:
    """How the stack (``requirements`` on CPython ``python``) was proven.

    Returns a dict with ``status``: "proven" (pip resolved it with binary wheels), "failed" (pip
    could not: ``error`` has pip's message, ``source_builds`` the packages with only an sdist),
    "unproven" (it needs an index the recorder cannot reach) or "not recorded"; plus ``id``,
    ``resolver``, ``python``, ``platform_tags``, ``glibc``, ``date``, ``file``, ``installed``
    (name -> version) and ``left_out`` (requirements outside the index).
    """
    inside, outside = proof_requirements(requirements)
    pid = proof_id(requirements, python, extra_index_urls)
    base = {"id": pid, "python": python, "requirements": inside, "left_out": outside}
    idx = load_index(directory)
    row = (idx.get("proofs") or {}).get(pid)
    if row is None:
        if extra_index_urls:
            return dict(base, status="unproven", reason=NOT_PROVABLE + " (needs %s)" % ", ".join(extra_index_urls))
        return dict(base, status="not recorded",
                    reason="no recorded platform resolve for this set; record it with tools/record_proofs.py (network)")
    out = dict(base)
    out.update({k: row.get(k) for k in ("status", "resolver", "platform_tags", "glibc", "date", "file", "error",
                                        "source_builds", "no_wheel", "reason")})
    out["installed"] = dict(x.split("==", 1) for x in row.get("installed") or [])
    return out
