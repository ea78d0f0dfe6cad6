"""A fixed environment spec: the complete transitive set pinned with hashes, resolved by pip.

:func:`resolve_lock` runs ``pip install --dry-run --ignore-installed --report`` for the top-level
pins with the chosen indexes, under an interpreter of the chosen Python when one exists here
(markers then evaluate exactly as on the target), else through pip's cross-resolution
(``--target`` with ``--python-version``/``--platform``, wheels only). The resolver is pip's;
nothing here resolves versions. :func:`render_lock` writes requirements.lock deterministically.
"""

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ..errors import UsageError

__all__ = ["Locked", "LockResult", "resolve_lock", "render_lock", "parse_lock", "find_interpreter"]

#: manylinux tags tried in cross-resolution (glibc 2.17 .. 2.39).
_PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64",
                                                                     "linux_x86_64"]


@dataclass
class Locked:
    """One pinned distribution: ``name``, ``version``, ``hashes`` (``sha256:HEX`` strings),
    ``url`` it would be downloaded from (evidence; not written to the lock)."""

    name: str
    version: str
    hashes: List[str] = field(default_factory=list)
    url: Optional[str] = None


@dataclass
class LockResult:
    """The resolved set (sorted by name), the indexes used and how pip was run."""

    packages: List[Locked]
    index_url: Optional[str]
    extra_index_urls: List[str]
    python: str
    mode: str  # "interpreter PATH" or "cross-resolution for Python X.Y"


def find_interpreter(minor: str) -> Optional[str]:
    """A CPython ``X.Y`` on this machine (PATH, then pyenv), or None."""
    import shutil

    cands = []
    found = shutil.which("python%s" % minor)
    if found and "/shims/" not in found:
        cands.append(found)
    root = os.path.expanduser("~/.pyenv/versions")
    if os.path.isdir(root):
        cands += [os.path.join(root, v, "bin", "python3") for v in sorted(os.listdir(root), reverse=True)
                  if v.startswith(minor + ".")]
    if "%d.%d" % sys.version_info[:2] == minor:
        cands.append(sys.executable)
    for c in cands:
        if c and os.path.exists(c):
            return c
    return None


def resolve_lock(requirements: Sequence[str], python: str, index_url: Optional[str] = None,
                 extra_index_urls: Sequence[str] = (), pip_python: Optional[str] = None,
                 timeout: float = 900.0, cross: bool = False) -> LockResult:
    """Resolve ``requirements`` for Python ``python`` (``"3.12"``) through pip's resolver.

    Args:
        requirements: top-level requirement strings (e.g. ``"torch==2.11.0"``).
        python: the target Python minor version.
        index_url, extra_index_urls: indexes (None keeps pip's configured index).
        pip_python: interpreter to run pip with (default: one of ``python`` on this machine, else
            the current one in cross-resolution mode).
        cross: resolve for Python ``python`` on manylinux x86_64 wheels whatever interpreters
            this machine has (pip's ``--python-version``/``--platform``).
    Raises:
        UsageError: pip could not resolve (its last error line is in the message).
    """
    interp = None if cross else (pip_python or find_interpreter(python))
    cross = interp is None
    if cross:
        interp = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [interp, "-m", "pip", "--disable-pip-version-check", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", report]
        if index_url:
            cmd += ["--index-url", index_url]
        for u in extra_index_urls:
            cmd += ["--extra-index-url", u]
        if cross:
            cmd += ["--target", os.path.join(tmp, "t"), "--only-binary=:all:", "--implementation", "cp",
                    "--python-version", python]
            for p in _PLATFORMS:
                cmd += ["--platform", p]
        cmd += list(requirements)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UsageError("pip did not resolve %s within %.0f s; check network access to the index" % (
                " ".join(requirements), timeout))
        if proc.returncode != 0 or not os.path.exists(report):
            errs = [l for l in proc.stderr.splitlines() if l.startswith("ERROR")] or proc.stderr.strip().splitlines()
            raise UsageError("pip could not resolve the stack: %s" % ((errs or ["no output"])[-1][:400]))
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
    pkgs = []
    for item in data.get("install", []):
        meta = item["metadata"]
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        h = ["sha256:%s" % hashes["sha256"]] if "sha256" in hashes else []
        pkgs.append(Locked(meta["name"], meta["version"], h, info.get("url")))
    pkgs.sort(key=lambda p: p.name.lower())
    mode = "cross-resolution for Python %s (wheels only)" % python if cross else "interpreter %s" % interp
    return LockResult(pkgs, index_url, list(extra_index_urls), python, mode)


def render_lock(res: LockResult, header: Sequence[str] = ()) -> str:
    """requirements.lock text: comment header, index lines, then ``name==version`` with its
    ``--hash`` lines, sorted by name. Same input, same bytes."""
    lines = ["# %s" % h for h in header]
    if res.index_url:
        lines.append("--index-url %s" % res.index_url)
    for u in res.extra_index_urls:
        lines.append("--extra-index-url %s" % u)
    for p in res.packages:
        if p.hashes:
            lines.append("%s==%s \\" % (p.name, p.version))
            lines.extend("    --hash=%s%s" % (h, " \\" if i < len(p.hashes) - 1 else "") for i, h in enumerate(p.hashes))
        else:
            lines.append("%s==%s  # no hash: the index served none" % (p.name, p.version))
    return "\n".join(lines) + "\n"


def parse_lock(text: str) -> Dict[str, str]:
    """name (lower case) -> version of every pinned line of a requirements.lock (for checks)."""
    out = {}
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        spec = line.split()[0]
        if "==" in spec:
            name, ver = spec.split("==", 1)
            out[name.lower()] = ver
    return out
