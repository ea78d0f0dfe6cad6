"""The pins of a lock (``requirements.lock`` or ``pylock.toml``) and which of them a wheelhouse carries."""

import fnmatch
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...errors import UsageError
from .files import read_text


@dataclass
class LockEntry:
    """One pin of a lock: ``name`` (as written), ``version``, ``hashes`` (sha256 hex digests the
    lock accepts), ``line`` (the lock text that pins it, for the manifest), ``files`` (pylock.toml:
    file names the lock lists, empty for requirements.lock)."""

    name: str
    version: str
    hashes: List[str]
    line: str
    files: List[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        """The canonical (PEP 503) name."""
        return canonicalize_name(self.name)


def _read_requirements_lock(text: str, path: str) -> List[LockEntry]:
    out = []
    joined = re.sub(r"\\\r?\n", " ", text)
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        spec = line.split()[0]
        if "==" not in spec or "://" in spec:
            raise UsageError("%s: %r is not a 'name==version' pin; a wheelhouse needs a lock with every package "
                             "pinned (make one with 'preflight spec')" % (path, spec[:80]))
        name, version = spec.split("==", 1)
        name = name.split("[", 1)[0].split(";", 1)[0].strip()
        version = version.split(";", 1)[0].strip()
        hashes = [h.split(":", 1)[1] for h in re.findall(r"--hash[= ](sha256:[0-9a-fA-F]{64})", line)]
        out.append(LockEntry(name, version, [h.lower() for h in hashes], re.sub(r"\s+", " ", line)))
    return out


def _read_pylock(text: str, path: str) -> List[LockEntry]:
    try:
        import tomllib as toml  # type: ignore[import-not-found]
    except ImportError:
        import tomli as toml  # type: ignore[no-redef]
    try:
        data = toml.loads(text)
    except Exception as exc:
        raise UsageError("%s: not valid TOML (%s); pass a pylock.toml (PEP 751) or a requirements.lock" % (path, exc))
    pkgs = data.get("packages")
    if not isinstance(pkgs, list):
        raise UsageError("%s: no [[packages]] table; pass a pylock.toml (PEP 751) or a requirements.lock" % path)
    out = []
    for p in pkgs:
        name, version = p.get("name"), p.get("version")
        if not name or not version:
            raise UsageError("%s: a [[packages]] entry without name/version (%r); a wheelhouse needs every "
                             "package pinned" % (path, name))
        files = list(p.get("wheels") or [])
        if p.get("sdist"):
            files.append(p["sdist"])
        hashes = [str((f.get("hashes") or {}).get("sha256", "")).lower() for f in files]
        names = [f.get("name") or os.path.basename(str(f.get("url") or f.get("path") or "")) for f in files]
        out.append(LockEntry(name, str(version), [h for h in hashes if h], "[[packages]] name = %r version = %r"
                             % (name, str(version)), [n for n in names if n]))
    return out


def read_lock(path: str) -> List[LockEntry]:
    """The pins of ``path``: a ``requirements.lock`` (``name==version`` with ``--hash`` lines) or a
    ``pylock.toml`` (PEP 751: ``[[packages]]`` with ``wheels``/``sdist`` and their hashes).
    Raises UsageError naming the file for a missing file, an unpinned line or bad TOML."""
    try:
        text = read_text(path)
    except (OSError, ValueError) as exc:
        raise UsageError("--lock %s: %s; pass the requirements.lock or pylock.toml that 'preflight spec' wrote" % (
            path, getattr(exc, "strerror", None) or exc))
    base = os.path.basename(path)
    if base.endswith(".toml") or base.startswith("pylock"):
        entries = _read_pylock(text, path)
    else:
        entries = _read_requirements_lock(text, path)
    if not entries:
        raise UsageError("--lock %s pins no package" % path)
    return entries


def installed_versions(source: str) -> Tuple[Dict[str, str], str]:
    """(canonical name -> version, description) of what a target already has, from an interpreter
    path (its metadata, read by ``target/info.py``), a ``pip list --format=json`` file or a
    ``pip freeze`` file. Raises UsageError when it is none of these."""
    if os.path.isfile(source) and os.access(source, os.X_OK) and not source.endswith((".json", ".txt")):
        from ...probes.process import run_script

        probe = run_script(source, "info", timeout=60)
        info = probe.last("info")
        if not info:
            raise UsageError("--exclude-installed %s: could not run it (%s)" % (source, probe.describe()))
        return ({canonicalize_name(r["name"]): str(r.get("version")) for r in info.get("distributions", [])
                 if r.get("name")}, "installed in %s" % source)
    try:
        text = read_text(source)
    except (OSError, ValueError) as exc:
        raise UsageError("--exclude-installed %s: %s; pass the target's interpreter, or a file from 'pip list "
                         "--format=json' or 'pip freeze' run there" % (source, getattr(exc, "strerror", None) or exc))
    try:
        rows = json.loads(text)
        if isinstance(rows, list):
            return ({canonicalize_name(r["name"]): str(r["version"]) for r in rows if "name" in r and "version" in r},
                    "listed in %s" % source)
    except ValueError:
        pass
    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if "==" in line and not line.startswith("#"):
            n, v = line.split("==", 1)
            out[canonicalize_name(n.strip())] = v.strip().split()[0]
    if not out:
        raise UsageError("--exclude-installed %s: neither an interpreter, nor 'pip list --format=json' nor "
                         "'pip freeze' output" % source)
    return out, "listed in %s" % source


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def plan(entries: Sequence[LockEntry], omit: Sequence[Tuple[str, str]] = (),
         installed: Optional[Tuple[Dict[str, str], str]] = None) -> Tuple[List[LockEntry], List[Dict[str, str]]]:
    """(pins to carry, pins left out with their reason).

    ``omit``: (glob on the canonical name, reason) pairs; ``installed``: what the target has
    (:func:`installed_versions`) - a pin is left out when exactly that version is installed there.
    """
    keep, left = [], []
    for e in entries:
        why = None
        for pat, reason in omit:
            if fnmatch.fnmatchcase(e.key, canonicalize_name(pat) if "*" not in pat else pat.lower().replace("_", "-")):
                why = "--omit %s: %s" % (pat, reason)
                break
        if why is None and installed is not None:
            have = installed[0].get(e.key)
            if have is not None and _same_version(have, e.version):
                why = "%s %s" % (have, installed[1])
        if why:
            left.append({"name": e.name, "version": e.version, "reason": why, "lock_line": e.line})
        else:
            keep.append(e)
    return keep, left
