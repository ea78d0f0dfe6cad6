"""A verified wheelhouse for offline installs: every wheel of a lock, for another machine.

:func:`build` runs on a connected machine. It reads a ``requirements.lock`` (``--hash`` lines) or
a ``pylock.toml`` (PEP 751), leaves out what the target already has (``--omit NAME=REASON``,
``--exclude-installed``; each reason goes into the manifest), asks pip which file it would take
for every pin on the *target* interpreter and platform (``pip install --dry-run --no-deps
--python-version --platform --implementation cp --report``: metadata only), names the pins that
only have a source distribution there *before* anything is downloaded (or builds them with
``pip wheel`` when the target is this machine's Python and platform), downloads the wheels with
``pip download --no-deps --require-hashes`` into a cache (``~/.cache/verl-preflight/wheelhouse``)
and checks each file's sha256 against the lock. The result is a PEP 503 "simple" directory
(``simple/<name>/<file>`` with ``index.html`` pages), ``wheelhouse.json`` (name, version,
sha256, size and the lock line each wheel serves), ``requirements.lock`` (what is served, with
the sha256 of each served file) and the checker zipapp.

:func:`split` cuts the wheelhouse into parts of at most N bytes (one uncompressed tar, cut; wheels
are compressed already) with ``wheelhouse.parts.json``; :func:`open_wheelhouse` reassembles
parts, checks every part and every wheel, and names any missing or corrupt file before anything
is installed. :func:`check_complete` answers whether a wheelhouse is complete for an
interpreter: pip resolves offline against it (the verdict), and the wheels' own metadata names
each missing package's requirer.

Nothing here resolves versions: pip does. Wheel metadata is read with :mod:`packaging`.
"""

import fnmatch
import hashlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import __version__
from ..atomic import make_dirs, remove_file, write_new
from ..errors import UsageError
from ..paths import file_problem, read_regular
from . import child

__all__ = ["LockEntry", "read_lock", "parse_size", "build", "split", "open_wheelhouse", "verify",
           "check_complete", "find_links", "missing_requirements", "installed_versions", "plan", "MANIFEST",
           "PARTS_MANIFEST", "SERVED_LOCK", "DEFAULT_PLATFORMS", "CACHE"]

MANIFEST = "wheelhouse.json"
PARTS_MANIFEST = "wheelhouse.parts.json"
SERVED_LOCK = "requirements.lock"
ARCHIVE = "wheelhouse.tar"
#: Platform tags a Linux x86_64 target accepts by default: manylinux glibc 2.17 .. 2.39 (a pip
#: cross-download needs every tag it may take named; 2.39 is Ubuntu 24.04's glibc).
DEFAULT_PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
#: Downloads are kept here between runs (pip download skips a file already present with its hash).
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "wheelhouse")
_CHUNK = 1 << 20

Say = Callable[[str], None]


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


#: The most bytes read from a manifest, a lock or a pip listing (a 200-wheel manifest is about 100 KB).
MAX_INPUT_BYTES = 64 << 20


def _read_text(path: str) -> str:
    """A manifest, lock or listing as text: regular files only, at most :data:`MAX_INPUT_BYTES`.
    Raises OSError (not a regular file, too large, unreadable) or ValueError (not UTF-8)."""
    return read_regular(path, MAX_INPUT_BYTES).decode("utf-8")


def _load_json(path: str) -> Any:
    """:func:`_read_text` parsed as JSON; raises OSError or ValueError."""
    return json.loads(_read_text(path))


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_size(text: str) -> int:
    """Bytes of a size such as ``64MiB``, ``60M``, ``1GiB``, ``500KB``, ``1048576``.

    Binary units (KiB, MiB, GiB and K, M, G) are powers of 1024; KB, MB, GB are powers of 1000.
    Raises UsageError for anything else or a size under 1 MiB (parts that small are a mistake).
    """
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(i?)(B?)\s*$", text or "", re.I)
    if not m:
        raise UsageError("--split %r: give a size such as 64MiB, 60M or 1GiB" % text)
    num, unit, binary, byte = m.groups()
    power = " KMG".index(unit.upper() or " ")
    base = 1000 if (byte and not binary and unit) else 1024
    size = int(float(num) * base ** power)
    if size < (1 << 20):
        raise UsageError("--split %r is under 1 MiB; give a size such as 64MiB" % text)
    return size


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
        text = _read_text(path)
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


# ---- the target's installed distributions (--exclude-installed) ---------------------------------
def installed_versions(source: str) -> Tuple[Dict[str, str], str]:
    """(canonical name -> version, description) of what a target already has, from an interpreter
    path (its metadata, read by ``target/info.py``), a ``pip list --format=json`` file or a
    ``pip freeze`` file. Raises UsageError when it is none of these."""
    if os.path.isfile(source) and os.access(source, os.X_OK) and not source.endswith((".json", ".txt")):
        from ..probes.process import run_script

        out = run_script(source, "info", timeout=60)
        info = out.last("info")
        if not info:
            raise UsageError("--exclude-installed %s: could not run it (%s)" % (source, out.describe()))
        return ({canonicalize_name(r["name"]): str(r.get("version")) for r in info.get("distributions", [])
                 if r.get("name")}, "installed in %s" % source)
    try:
        text = _read_text(source)
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
    out = {}
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


# ---- pip -------------------------------------------------------------------------------------
def _pip(args: Sequence[str], timeout: float, python: Optional[str] = None,
         workdir: Optional[str] = None) -> subprocess.CompletedProcess:
    cmd = [python or sys.executable, "-m", "pip", "--disable-pip-version-check"] + list(args)
    env = dict(os.environ)
    for key in ("PYTHONNOUSERSITE", "PYTHONSAFEPATH"):
        env.pop(key, None)
    try:
        return child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         timeout=timeout, env=env, workdir=workdir)
    except subprocess.TimeoutExpired:
        raise UsageError("'pip %s' did not finish within %.0f s; check the network access to the index" % (
            args[0], timeout))
    except OSError as exc:
        raise UsageError("could not run pip with %s: %s" % (cmd[0], exc))


#: The first pip with ``--python`` (resolving for another interpreter's environment).
PIP_PYTHON_OPTION = (22, 3)


def _outer_pip(target: str, timeout: float) -> str:
    """An interpreter whose pip can resolve against ``target``, which has none: this checker's own
    when its pip is 22.3 or newer. Raises UsageError naming both ways out when there is none."""
    proc = _pip(["--version"], min(timeout, 60.0))
    m = re.match(r"pip (\d+)\.(\d+)", proc.stdout or "")
    if proc.returncode == 0 and m and (int(m.group(1)), int(m.group(2))) >= PIP_PYTHON_OPTION:
        return sys.executable
    raise UsageError("--python %s has no pip, and %s has no pip 22.3 or newer to resolve for it: add pip to it "
                     "(%s -m ensurepip) or run verl-preflight with a Python that has pip 22.3+" % (
                         target, sys.executable, shlex.quote(target)))


def _pip_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.splitlines()
    errs = [l for l in lines if l.startswith("ERROR") and "ResolutionImpossible" not in l]
    # a conflict: pip names the requirements that clash on the lines after "The conflict is caused by"
    for i, l in enumerate(lines):
        if "conflict is caused by" in l:
            errs.append("conflict: " + "; ".join(x.strip() for x in lines[i + 1:i + 4] if x.strip()))
            break
    errs = errs or [l for l in lines if l.startswith("ERROR")] or proc.stderr.strip().splitlines() \
        or proc.stdout.strip().splitlines()
    return (errs or ["exit %d" % proc.returncode])[-1][:400]


def _req_lines(entries: Iterable[LockEntry], with_hashes: bool = True) -> str:
    lines = []
    for e in entries:
        h = " ".join("--hash=sha256:%s" % x for x in e.hashes) if with_hashes and e.hashes else ""
        lines.append(("%s==%s %s" % (e.name, e.version, h)).strip())
    return "\n".join(lines) + "\n"


def _target_args(python: str, platforms: Sequence[str]) -> List[str]:
    out = ["--implementation", "cp", "--python-version", python]
    for p in platforms:
        out += ["--platform", p]
    return out


def _choose_files(entries: Sequence[LockEntry], python: str, platforms: Sequence[str], tmp: str,
                  timeout: float) -> Dict[str, Dict[str, Any]]:
    """canonical name -> {url, file, wheel} pip picks for each pin on the target (metadata only)."""
    req = os.path.join(tmp, "choose.txt")
    write_new(req, _req_lines(entries, with_hashes=False))
    report = os.path.join(tmp, "choose.json")
    proc = _pip(["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet", "--report", report,
                 "--target", os.path.join(tmp, "t")] + _target_args(python, platforms) + ["-r", req], timeout,
                workdir=tmp)
    if proc.returncode != 0 or not os.path.exists(report):
        raise UsageError("pip found no file for a pin of the lock on Python %s (%s): %s; nothing was downloaded" % (
            python, ", ".join(platforms[:2]) + (", ..." if len(platforms) > 2 else ""), _pip_error(proc)))
    data = _load_json(report)
    out = {}
    for item in data.get("install", []):
        url = (item.get("download_info") or {}).get("url") or ""
        fname = url.rsplit("/", 1)[-1].split("#", 1)[0]
        out[canonicalize_name(item["metadata"]["name"])] = {"url": url, "file": fname, "wheel": fname.endswith(".whl"),
                                                            "version": item["metadata"]["version"]}
    return out


def _this_machine_matches(python: str, platforms: Sequence[str]) -> Optional[str]:
    """An interpreter of Python ``python`` on this machine when this machine is a valid target
    (Linux x86_64 and its glibc among the platform tags), else None."""
    import platform as _platform

    from .lock import find_interpreter

    if sys.platform != "linux" or _platform.machine() != "x86_64":
        return None
    libc, ver = _platform.libc_ver()
    if libc != "glibc" or not ver:
        return None
    major, minor = (int(x) for x in ver.split(".")[:2])
    tags = {"manylinux_%d_%d_x86_64" % (major, minor), "linux_x86_64"}
    if not tags & set(platforms):
        return None
    return find_interpreter(python)


# ---- build -----------------------------------------------------------------------------------
def _index_html(title: str, links: Sequence[Tuple[str, str]]) -> str:
    body = "".join('<a href="%s">%s</a><br/>\n' % (href, text) for href, text in links)
    return "<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n%s</body></html>\n" % (title, body)


def _write(path: str, text: str) -> None:
    from ..atomic import write_atomic

    write_atomic(path, text)


def _same_file(src: str, dst: str) -> bool:
    try:
        return os.path.samefile(src, dst)
    except OSError:
        return False


def _copy(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` through a temporary name and a rename (a zipapp running from ``dst``
    keeps its file); nothing happens when both are the same file (a wheelhouse refreshed with
    its own zipapp)."""
    if _same_file(src, dst):
        return
    from ..atomic import copy_file

    copy_file(src, dst)


def _place(src: str, dst: str) -> None:
    if _same_file(src, dst):
        return
    from ..atomic import copy_file

    copy_file(src, dst, link=True)  # a hard link from the cache where it can, else a copy


def check_pyz(path: str, option: str = "--pyz") -> None:
    """Raise UsageError unless ``path`` is this checker's zipapp: a zip archive holding
    ``__main__.py`` and the ``preflight`` package (what tools/build_pyz.py writes)."""
    import zipfile

    fix = "pass the dist/preflight.pyz that 'python3 tools/build_pyz.py' writes"
    why = file_problem(path)
    if why:
        raise UsageError("%s %s: %s; %s" % (option, path, why, fix))
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError("%s %s: not a zipapp (%s); %s" % (option, path, getattr(exc, "strerror", None) or exc, fix))
    lacks = [n for n in ("__main__.py", "preflight/__init__.py") if n not in names]
    if lacks:
        raise UsageError("%s %s: a zip archive but not the verl-preflight zipapp (it has no %s); %s" % (
            option, path, " and no ".join(lacks), fix))


def _find_pyz() -> Optional[str]:
    here = os.path.abspath(__file__)
    m = re.match(r"^(.*?\.pyz)(/|$)", here)
    if m and os.path.isfile(m.group(1)):
        return m.group(1)
    cand = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))), "dist", "preflight.pyz")
    return cand if os.path.isfile(cand) else None


def _owned(out_dir: str) -> Optional[Dict[str, Optional[str]]]:
    """What an earlier build wrote into ``out_dir``, from its manifest: {path relative to
    ``out_dir``: the sha256 recorded when it was written, or None when the manifest names the file
    without one (a wheel: replaced even when corrupt; files of a manifest older than ``written``)}.
    None when ``out_dir`` holds no readable wheelhouse manifest."""
    try:
        m = _load_json(os.path.join(out_dir, MANIFEST))
        wheels = m["wheels"]
        out: Dict[str, Optional[str]] = {MANIFEST: None, "simple/index.html": None}
        for r in wheels:
            out[r["file"]] = None
            out["simple/%s/index.html" % r["key"]] = None
        out[m.get("served_lock") or SERVED_LOCK] = None
        if m.get("pyz"):
            out[m["pyz"]["file"]] = None
        for rel, digest in (m.get("written") or {}).items():
            out[rel] = digest
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _is_ours(out_dir: str, rel: str, owned: Optional[Dict[str, Optional[str]]]) -> bool:
    """True when the file ``rel`` in ``out_dir`` is one an earlier build wrote and (where its
    sha256 was recorded) nobody changed since."""
    from .owned import _has_our_header

    path = os.path.join(out_dir, rel)
    if owned is None or rel not in owned or os.path.islink(path) or not os.path.isfile(path):
        return False
    if owned[rel] is not None:
        return _sha256(path) == owned[rel]
    if rel == SERVED_LOCK or rel.endswith(".pyz"):  # written before hashes were recorded: its header says
        return _has_our_header(path)
    return True


def _refuse_theirs(out_dir: str, rels: Iterable[str], owned: Optional[Dict[str, Optional[str]]],
                   option: str = "-o") -> None:
    """UsageError listing the files among ``rels`` that exist in ``out_dir`` and are not this
    tool's (see :func:`_is_ours`); --force never replaces those. Nothing is changed."""
    theirs = sorted({r for r in rels if os.path.lexists(os.path.join(out_dir, r)) and not _is_ours(out_dir, r, owned)})
    if theirs:
        shown = ", ".join(theirs[:8]) + (" and %d more" % (len(theirs) - 8) if len(theirs) > 8 else "")
        raise UsageError("%s %s: would replace %d file(s) that no earlier wheelhouse build wrote there (or that "
                         "changed since): %s; move them away or choose another directory (--force does not replace "
                         "them; nothing was changed)" % (option, out_dir, len(theirs), shown))


def _downloaded(files_dir: str, listing: Sequence[str], e: LockEntry, chosen: str) -> str:
    """The file pip download saved for ``e``: the one with a sha256 the lock accepts (the hash
    filter may pick another platform tag than the metadata-only choice), else pip's choice."""
    if e.hashes:
        stem = re.sub(r"[-_.]+", "_", e.name).lower() + "-"
        for f in listing:
            if f.lower().startswith(stem) and f.endswith(".whl"):
                path = os.path.join(files_dir, f)
                if _sha256(path) in e.hashes:
                    return path
    return os.path.join(files_dir, chosen)


def build(lock_path: str, out_dir: str, python: str, platforms: Sequence[str] = DEFAULT_PLATFORMS,
          omit: Sequence[Tuple[str, str]] = (), exclude_installed: Optional[str] = None,
          pyz: Optional[str] = None, cache: str = CACHE, say: Say = lambda s: None,
          timeout: float = 3600.0) -> Dict[str, Any]:
    """Build the wheelhouse of ``lock_path`` for CPython ``python`` (``"3.12"``) on ``platforms``
    into ``out_dir`` and return its manifest (also written to ``out_dir/wheelhouse.json``).

    Raises UsageError (nothing downloaded) when a pin has no file for the target, when pins
    have only a source distribution there and this machine cannot build them for it (all of
    them are named), and (after downloading) when a file's sha256 is not one the lock accepts.
    """
    entries = read_lock(lock_path)
    owned = _owned(out_dir)
    pyz = pyz or _find_pyz()
    _refuse_theirs(out_dir, [MANIFEST, SERVED_LOCK, "simple/index.html"] + (["preflight.pyz"] if pyz else []), owned)
    inst = installed_versions(exclude_installed) if exclude_installed else None
    keep, left = plan(entries, omit, inst)
    say("%s: %d pins; %d to carry, %d left out" % (lock_path, len(entries), len(keep), len(left)))
    from ..atomic import tree_problem

    make_dirs(out_dir, "-o")
    files_dir = os.path.join(cache, "files")
    make_dirs(files_dir, "the wheel cache")
    why = tree_problem(cache, ("files", "built"))
    if why:  # pip would reuse wheels another user put there
        raise UsageError("the wheel cache %s is not this user's own: %s; remove it or fix its owner and mode "
                         "(nothing was downloaded)" % (cache, why))
    with tempfile.TemporaryDirectory(prefix="preflight-wheelhouse-") as tmp:
        say("asking pip which file each pin takes on CPython %s (%s ...), metadata only" % (python, platforms[0]))
        chosen = _choose_files(keep, python, platforms, tmp, timeout)
        missing = [e for e in keep if e.key not in chosen]
        if missing:
            raise UsageError("pip chose no file for %s; nothing was downloaded" % ", ".join(
                "%s==%s" % (e.name, e.version) for e in missing))
        sdists = [e for e in keep if not chosen[e.key]["wheel"]]
        builder = None
        if sdists:
            builder = _this_machine_matches(python, platforms)
            if builder is None:
                raise UsageError(
                    "%d pin(s) have only a source distribution for CPython %s on %s, and this machine cannot build "
                    "wheels for that target: %s. Nothing was downloaded. Run 'preflight wheelhouse' on a Linux "
                    "x86_64 machine with Python %s (it builds them with pip wheel), or build those wheels on the "
                    "target and add them" % (len(sdists), python, platforms[0], ", ".join(
                        "%s==%s (%s)" % (e.name, e.version, chosen[e.key]["file"]) for e in sdists), python))
            say("%d pin(s) have only a source distribution: %s; building wheels with %s" % (
                len(sdists), ", ".join("%s==%s" % (e.name, e.version) for e in sdists), builder))
        wheels = [e for e in keep if chosen[e.key]["wheel"]]
        if wheels:
            req = os.path.join(tmp, "download.txt")
            write_new(req, _req_lines(wheels))
            say("downloading %d wheels (cache %s)" % (len(wheels), files_dir))
            args = ["download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest", files_dir] + \
                _target_args(python, platforms) + ["-r", req]
            if all(e.hashes for e in wheels):
                args.insert(1, "--require-hashes")
            proc = _pip(args, timeout, workdir=tmp)
            if proc.returncode != 0:
                raise UsageError("pip download failed: %s" % _pip_error(proc))
        built: Dict[str, str] = {}
        if sdists:
            bdir = os.path.join(cache, "built", python)
            make_dirs(bdir, "the wheel cache")
            req = os.path.join(tmp, "build.txt")
            write_new(req, _req_lines(sdists))
            before = set(os.listdir(bdir))
            proc = _pip(["wheel", "--no-deps", "--quiet", "--wheel-dir", bdir, "-r", req], timeout, python=builder,
                        workdir=tmp)
            if proc.returncode != 0:
                raise UsageError("pip wheel could not build %s: %s" % (
                    ", ".join(e.name for e in sdists), _pip_error(proc)))
            for e in sdists:
                prefix = re.sub(r"[-_.]+", "_", e.name).lower() + "-" + e.version + "-"
                cands = [f for f in os.listdir(bdir) if f.lower().startswith(prefix) and f.endswith(".whl")]
                fresh = [f for f in cands if f not in before] or cands
                if not fresh:
                    raise UsageError("pip wheel built no wheel for %s==%s" % (e.name, e.version))
                built[e.key] = os.path.join(bdir, sorted(fresh)[-1])
    # hash-check, then place (only over files an earlier build wrote), index
    simple = os.path.join(out_dir, "simple")
    rows, bad, srcs = [], [], {}
    listing = os.listdir(files_dir)
    for e in keep:
        src = built.get(e.key) or _downloaded(files_dir, listing, e, chosen[e.key]["file"])
        if not os.path.isfile(src):
            bad.append("%s==%s: pip reported %s but the file is not in %s" % (e.name, e.version,
                                                                              chosen[e.key]["file"], files_dir))
            continue
        srcs[e.key] = src
        if e.key not in built and e.hashes and _sha256(src) not in e.hashes:
            bad.append("%s: sha256 %s is not one the lock accepts for %s==%s" % (os.path.basename(src), _sha256(src),
                                                                                 e.name, e.version))
    if bad:
        raise UsageError("the wheelhouse does not match the lock: %s" % "; ".join(bad[:5]))
    new = {MANIFEST, SERVED_LOCK, "simple/index.html"} | ({"preflight.pyz"} if pyz else set())
    for e in keep:
        new |= {"simple/%s/%s" % (e.key, os.path.basename(srcs[e.key])), "simple/%s/index.html" % e.key}
    same = {"simple/%s/%s" % (k, os.path.basename(v)) for k, v in srcs.items()}  # a wheel already there, byte
    same = {r for r in same if os.path.isfile(os.path.join(out_dir, r))  # for byte, loses nothing when replaced
            and _sha256(os.path.join(out_dir, r)) == _sha256(srcs[r.split("/")[1]])}
    _refuse_theirs(out_dir, new - same, owned)
    for rel in sorted(owned or {}):  # the earlier build's files this one does not write again (older wheels)
        if rel not in new and _is_ours(out_dir, rel, owned):
            remove_file(os.path.join(out_dir, rel), "-o")
            try:
                os.rmdir(os.path.dirname(os.path.join(out_dir, rel)))  # its package directory, once empty
            except OSError:
                pass
    make_dirs(simple, "-o")
    for e in keep:
        src = srcs[e.key]
        digest = _sha256(src)
        source = "index"
        if e.key in built:
            source = "built from the source distribution %s (lock sha256 %s) with pip wheel" % (
                chosen[e.key]["file"], ", ".join(h[:16] for h in e.hashes) or "none")
        d = os.path.join(simple, e.key)
        make_dirs(d, "-o")
        fname = os.path.basename(src)
        _place(src, os.path.join(d, fname))
        rows.append({"name": e.name, "key": e.key, "version": e.version, "file": "simple/%s/%s" % (e.key, fname),
                     "sha256": digest, "size": os.path.getsize(src), "lock_line": e.line, "source": source})
    if bad:
        raise UsageError("the wheelhouse does not match the lock: %s" % "; ".join(bad[:5]))
    for r in rows:
        _write(os.path.join(simple, r["key"], "index.html"), _index_html(
            "Links for %s" % r["key"], [("%s#sha256=%s" % (os.path.basename(r["file"]), r["sha256"]),
                                        os.path.basename(r["file"]))]))
    _write(os.path.join(simple, "index.html"), _index_html("Simple index", [(r["key"] + "/", r["key"]) for r in rows]))
    served = ["# verl-preflight %s wheelhouse for CPython %s (%s): %d packages served from this directory" % (
        __version__, python, platforms[0], len(rows)),
        "# install offline: pip install --no-index --find-links simple/<name> ... --require-hashes --no-deps -r "
        "requirements.lock (preflight install --wheelhouse DIR does it)"]
    served += ["# left out: %s==%s (%s)" % (o["name"], o["version"], o["reason"]) for o in left]
    for r in rows:
        served.append("%s==%s \\\n    --hash=sha256:%s" % (r["name"], r["version"], r["sha256"]))
    _write(os.path.join(out_dir, SERVED_LOCK), "\n".join(served) + "\n")
    pyz_row = None
    if pyz:
        _copy(pyz, os.path.join(out_dir, "preflight.pyz"))
        pyz_row = {"file": "preflight.pyz", "sha256": _sha256(pyz), "size": os.path.getsize(pyz)}
    written = {rel: _sha256(os.path.join(out_dir, rel)) for rel in sorted(new - {MANIFEST})
               if not rel.endswith(".whl")}
    with open(lock_path, "rb") as fh:
        lock_sha = hashlib.sha256(fh.read()).hexdigest()
    manifest = {"format": 1, "created_by": "verl-preflight %s" % __version__, "python": python,
                "implementation": "cp", "platforms": list(platforms),
                "lock": {"file": os.path.basename(lock_path), "sha256": lock_sha, "pins": len(entries)},
                "served_lock": SERVED_LOCK, "wheels": rows, "omitted": left, "pyz": pyz_row, "written": written,
                "total_bytes": sum(r["size"] for r in rows)}
    _write(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


# ---- split and reassemble ---------------------------------------------------------------------
def _tar_members(wh_dir: str) -> List[str]:
    m = _load_json(os.path.join(wh_dir, MANIFEST))
    names = [MANIFEST, SERVED_LOCK] + ([m["pyz"]["file"]] if m.get("pyz") else [])
    names += ["simple/index.html"]
    for r in m["wheels"]:
        names += [r["file"], "simple/%s/index.html" % r["key"]]
    return names


def split(wh_dir: str, parts_dir: str, part_size: int, say: Say = lambda s: None) -> Dict[str, Any]:
    """Write ``wh_dir`` as one tar (sorted members, fixed times: the same wheelhouse gives the same
    bytes) cut into parts of at most ``part_size`` bytes in ``parts_dir``, with
    ``wheelhouse.parts.json`` (each part's size and sha256, the whole tar's) and the zipapp
    beside them. Returns the parts manifest."""
    from ..atomic import open_atomic

    make_dirs(parts_dir, "--parts-dir")
    try:  # the parts an earlier split wrote here: the only ones removed
        old = _load_json(os.path.join(parts_dir, PARTS_MANIFEST))
        owned: Optional[Dict[str, Optional[str]]] = {p["file"]: None for p in old["parts"]}
        owned.update({PARTS_MANIFEST: None, "preflight.pyz": None})
    except (OSError, ValueError, KeyError, TypeError):
        owned = None
    mine = [f for f in os.listdir(parts_dir) if f.startswith(ARCHIVE + ".part-")]
    has_pyz = bool(_load_json(os.path.join(wh_dir, MANIFEST)).get("pyz"))
    _refuse_theirs(parts_dir, mine + [PARTS_MANIFEST] + (["preflight.pyz"] if has_pyz else []), owned, "--parts-dir")
    for f in mine:
        remove_file(os.path.join(parts_dir, f), "--parts-dir")

    class _Cutter(io.RawIOBase):
        def __init__(self):
            self.parts: List[Dict[str, Any]] = []
            self.whole = hashlib.sha256()
            self.total = 0
            self.fh = None
            self.cm = None
            self.h = None
            self.n = 0

        def writable(self):
            return True

        def _open(self):
            name = "%s.part-%03d" % (ARCHIVE, len(self.parts))
            self.cm = open_atomic(os.path.join(parts_dir, name), "--parts-dir")
            self.fh = self.cm.__enter__()
            self.h = hashlib.sha256()
            self.n = 0
            self.parts.append({"file": name})

        def _close(self):
            if self.fh is not None:
                self.cm.__exit__(None, None, None)
                self.parts[-1].update(size=self.n, sha256=self.h.hexdigest())
                self.fh = None

        def write(self, b):
            b = bytes(b)
            view = memoryview(b)
            while len(view):
                if self.fh is None or self.n >= part_size:
                    self._close()
                    self._open()
                take = min(len(view), part_size - self.n)
                chunk = view[:take]
                self.fh.write(chunk)
                self.h.update(chunk)
                self.whole.update(chunk)
                self.n += take
                self.total += take
                view = view[take:]
            return len(b)

    cut = _Cutter()
    with tarfile.open(fileobj=cut, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for name in _tar_members(wh_dir):
            path = os.path.join(wh_dir, name)
            info = tar.gettarinfo(path, arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o644
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    cut._close()
    m = _load_json(os.path.join(wh_dir, MANIFEST))
    doc = {"format": 1, "archive": ARCHIVE, "size": cut.total, "sha256": cut.whole.hexdigest(),
           "part_size": part_size, "parts": cut.parts, "wheels": len(m["wheels"]), "python": m["python"],
           "created_by": "verl-preflight %s" % __version__,
           "reassemble": "preflight wheelhouse verify DIR (or: cat %s.part-* > %s && tar xf %s)" % (ARCHIVE, ARCHIVE,
                                                                                                   ARCHIVE)}
    _write(os.path.join(parts_dir, PARTS_MANIFEST), json.dumps(doc, indent=1, sort_keys=True) + "\n")
    if m.get("pyz"):
        _copy(os.path.join(wh_dir, m["pyz"]["file"]), os.path.join(parts_dir, "preflight.pyz"))
    say("%d parts of at most %d bytes in %s (%d bytes in all)" % (len(cut.parts), part_size, parts_dir, cut.total))
    return doc


def _safe_members(tar: tarfile.TarFile) -> List[tarfile.TarInfo]:
    out = []
    for mem in tar.getmembers():
        n = mem.name
        if not _plain_name(n) or not (mem.isfile() or mem.isdir()):
            raise UsageError("the wheelhouse archive holds an unsafe entry %r; not extracting it" % n)
        out.append(mem)
    return out


def _extract(tar: tarfile.TarFile, dest: str) -> None:
    """Unpack the plain files and directories of ``tar`` into ``dest`` through the one writer
    (never through a link or a file another user put there)."""
    from ..atomic import open_atomic

    for mem in _safe_members(tar):
        path = os.path.join(dest, mem.name)
        if mem.isdir():
            make_dirs(path, "--wheelhouse")
            continue
        src = tar.extractfile(mem)
        with open_atomic(path, "--wheelhouse", create_dirs=True) as out:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                out.write(chunk)


def _parts_problem(doc: Any) -> Optional[str]:
    """What makes ``doc`` (a parsed wheelhouse.parts.json) unusable, or None: the shape
    :func:`split` writes, each part a plain file name in the parts directory."""
    if not isinstance(doc, dict) or not isinstance(doc.get("parts"), list) or not doc["parts"]:
        return "no list of parts"
    if not isinstance(doc.get("size"), int) or isinstance(doc.get("size"), bool) or not isinstance(
            doc.get("sha256"), str):
        return "no valid size and sha256 of the archive"
    for i, p in enumerate(doc["parts"]):
        if not (isinstance(p, dict) and _plain_name(p.get("file")) and "/" not in p["file"]
                and isinstance(p.get("size"), int) and not isinstance(p.get("size"), bool)
                and isinstance(p.get("sha256"), str)):
            return "part %d has no valid file, size and sha256" % i
    return None


def reassemble(parts_dir: str, dest: str, say: Say = lambda s: None) -> List[str]:
    """Check every part listed in ``parts_dir/wheelhouse.parts.json`` (present, size, sha256),
    then the joined archive's sha256, then unpack it into ``dest``. Returns the problems found
    (one line each: which part is missing or corrupt); nothing is unpacked unless there are none."""
    try:
        doc = _load_json(os.path.join(parts_dir, PARTS_MANIFEST))
    except (OSError, ValueError, RecursionError) as exc:
        return ["%s: cannot read %s (%s)" % (parts_dir, PARTS_MANIFEST, getattr(exc, "strerror", None)
                                             or type(exc).__name__)]
    bad = _parts_problem(doc)
    if bad:
        return ["%s: %s is not a parts manifest (%s)" % (parts_dir, PARTS_MANIFEST, bad)]
    problems = []
    for p in doc["parts"]:
        path = os.path.join(parts_dir, p["file"])
        if not os.path.isfile(path):
            problems.append("part %s is missing (%d bytes expected)" % (p["file"], p["size"]))
        elif os.path.getsize(path) != p["size"]:
            problems.append("part %s has %d bytes, expected %d (cut short or a different copy)" % (
                p["file"], os.path.getsize(path), p["size"]))
        elif _sha256(path) != p["sha256"]:
            problems.append("part %s is corrupt: its sha256 is not %s" % (p["file"], p["sha256"][:16]))
    if problems:
        return problems
    say("%d parts verified; joining %d bytes" % (len(doc["parts"]), doc["size"]))
    from ..atomic import open_atomic

    make_dirs(dest, "--wheelhouse")
    archive = os.path.join(dest, ARCHIVE + ".tmp")
    whole = hashlib.sha256()
    try:  # the joined archive is removed however this ends (a refused member, a full disk, Ctrl-C)
        with open_atomic(archive, "--wheelhouse") as out:
            for p in doc["parts"]:
                with open(os.path.join(parts_dir, p["file"]), "rb") as fh:
                    for chunk in iter(lambda: fh.read(_CHUNK), b""):
                        whole.update(chunk)
                        out.write(chunk)
        if whole.hexdigest() != doc["sha256"]:
            return ["the joined parts have sha256 %s, expected %s (parts out of order or from another build)" % (
                whole.hexdigest()[:16], doc["sha256"][:16])]
        with tarfile.open(archive) as tar:
            _extract(tar, dest)
    finally:
        remove_file(archive, "--wheelhouse")
    return []


def _manifest_problem(m: Any) -> Optional[str]:
    """What makes ``m`` (a parsed wheelhouse.json) unusable, or None: the shape :func:`build`
    writes (a mapping whose ``wheels`` is a list of {name, version, file, size, sha256}), and
    each file a plain name inside the wheelhouse (no absolute path, no ``..``)."""
    if not isinstance(m, dict):
        return "not a JSON object"
    wheels = m.get("wheels")
    if not isinstance(wheels, list):
        return "'wheels' is not a list"
    if not isinstance(m.get("python"), str):
        return "'python' is not a Python version"
    if not _plain_name(m.get("served_lock") or SERVED_LOCK):
        return "'served_lock' is not a file inside the wheelhouse"
    total = m.get("total_bytes", 0)
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        return "'total_bytes' is not a byte count"
    omitted = m.get("omitted", [])
    if not isinstance(omitted, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                and isinstance(o.get("reason", ""), str) for o in omitted):
        return "'omitted' is not a list of {name, reason}"
    for i, r in enumerate(wheels):
        if not isinstance(r, dict):
            return "wheel %d is not an object" % i
        for key, kind in (("name", str), ("key", str), ("version", str), ("file", str), ("sha256", str),
                          ("size", int)):
            if not isinstance(r.get(key), kind) or isinstance(r.get(key), bool):
                return "wheel %d has no valid %r" % (i, key)
        if not _plain_name(r["file"]) or not r["file"].endswith(".whl"):
            return "wheel %d's file %r is not a wheel inside the wheelhouse" % (i, r["file"])
    return None


def _plain_name(path: Any) -> bool:
    """True when ``path`` is a relative path that stays inside its directory (no ``..``, not absolute)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path:
        return False
    return ".." not in path.replace("\\", "/").split("/")


def verify(wh_dir: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """(manifest, problems): every wheel the manifest lists is present with its size and sha256,
    and the served lock is there. ``problems`` names each missing or corrupt file."""
    try:
        m = _load_json(os.path.join(wh_dir, MANIFEST))
    except (OSError, ValueError, RecursionError) as exc:
        return None, ["%s: no readable %s (%s); pass the directory 'preflight wheelhouse -o' wrote" % (
            wh_dir, MANIFEST, getattr(exc, "strerror", None) or type(exc).__name__)]
    bad = _manifest_problem(m)
    if bad:
        return None, ["%s: %s is not a wheelhouse manifest (%s); pass the directory 'preflight wheelhouse -o' wrote, "
                      "or build it again" % (wh_dir, MANIFEST, bad)]
    problems = []
    if not os.path.isfile(os.path.join(wh_dir, m.get("served_lock") or SERVED_LOCK)):
        problems.append("%s is missing" % (m.get("served_lock") or SERVED_LOCK))
    for r in m.get("wheels", []):
        path = os.path.join(wh_dir, r["file"])
        if not os.path.isfile(path):
            problems.append("%s==%s: %s is missing" % (r["name"], r["version"], r["file"]))
        elif os.path.getsize(path) != r["size"]:
            problems.append("%s==%s: %s has %d bytes, expected %d" % (r["name"], r["version"], r["file"],
                                                                     os.path.getsize(path), r["size"]))
        elif _sha256(path) != r["sha256"]:
            problems.append("%s==%s: %s is corrupt (sha256 differs from the manifest's %s)" % (
                r["name"], r["version"], r["file"], r["sha256"][:16]))
    return m, problems


def open_wheelhouse(path: str, say: Say = lambda s: None,
                    option: str = "--wheelhouse") -> Tuple[str, Dict[str, Any]]:
    """A verified wheelhouse directory and its manifest, from a wheelhouse or a parts directory
    (reassembled into ``path/wheelhouse`` first, once). Raises UsageError naming every missing
    or corrupt part or wheel, and ``option`` (how the user gave ``path``: ``--wheelhouse``,
    ``wheelhouse verify``, ``--check``) when ``path`` is not a directory; nothing is installed by
    then."""
    if not os.path.isdir(path):
        raise UsageError("%s %s: %s; pass the directory 'preflight wheelhouse -o' wrote "
                         "(or the one holding its parts)" % (option, path, "not a directory" if os.path.exists(path)
                                                            else "no such directory"))
    wh = path
    if not os.path.isfile(os.path.join(path, MANIFEST)) and os.path.isfile(os.path.join(path, PARTS_MANIFEST)):
        wh = os.path.join(path, "wheelhouse")
        if not os.path.isfile(os.path.join(wh, MANIFEST)):
            problems = reassemble(path, wh, say)
            if problems:
                raise UsageError("wheelhouse parts in %s are not usable%s: %s; copy the named part(s) again from "
                                 "the machine that built them" % (
                                     path, "" if option == "wheelhouse verify" else ", nothing was installed",
                                     "; ".join(problems)))
    m, problems = verify(wh)
    if problems:
        raise UsageError("wheelhouse %s is not usable%s: %s%s%s" % (
            wh, "" if option == "wheelhouse verify" else ", nothing was installed", "; ".join(problems[:6]),
            " (and %d more)" % (len(problems) - 6) if len(problems) > 6 else "",
            "" if m is None else "; rebuild it with 'preflight wheelhouse' or copy the named file(s) again"))
    say("wheelhouse %s: %d wheels verified (sha256), %d bytes" % (wh, len(m["wheels"]), m.get("total_bytes", 0)))
    return wh, m


def find_links(wh_dir: str, manifest: Dict[str, Any]) -> List[str]:
    """pip options that install from ``wh_dir`` and nothing else: ``--no-index`` and one
    ``--find-links`` per package directory."""
    out = ["--no-index"]
    for key in sorted({r["key"] for r in manifest["wheels"]}):
        out += ["--find-links", os.path.join(os.path.abspath(wh_dir), "simple", key)]
    return out


# ---- completeness for an interpreter ------------------------------------------------------------
def _wheel_requires(path: str) -> List[str]:
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
        for line in _wheel_requires(os.path.join(wh_dir, r["file"])):
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
        for who, _, req in reqs:
            for ex in list(wanted.get(who, {""})):
                env = dict(marker_env, extra=ex)
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
                k = canonicalize_name(req.name)
                cur = extras.setdefault(k, set())
                new = set(req.extras) - cur
                if new:
                    cur |= new
                    wanted.setdefault(k, {""}).update(new)
                    changed = True
    out: Dict[str, Dict[str, Any]] = {}
    for who, ver, req in reqs:
        for ex in list(wanted.get(who, {""})):
            env = dict(marker_env, extra=ex)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
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
    from ..probes.process import run_script

    wh, m = open_wheelhouse(path, say, option)
    out = run_script(python, "info", timeout=60)
    info = out.last("info")
    if not info:
        raise UsageError("--python %s: could not run it (%s)" % (python, out.describe()))
    installed = {canonicalize_name(r["name"]): str(r.get("version")) for r in info.get("distributions", [])
                 if r.get("name")}
    target_minor = ".".join(str(x) for x in info["version"][:2])
    missing = missing_requirements(wh, m, info.get("marker_env") or {}, installed)
    omitted = {canonicalize_name(o["name"]): o for o in m.get("omitted", [])}
    for row in missing:
        if row["name"] in omitted:
            row["omitted"] = omitted[row["name"]]["reason"]
    with tempfile.TemporaryDirectory(prefix="preflight-whcheck-") as tmp:
        req = os.path.join(tmp, "req.txt")
        write_new(req, "".join("%s==%s\n" % (r["name"], r["version"]) for r in m["wheels"]))
        report = os.path.join(tmp, "report.json")
        args = ["install", "--dry-run", "--quiet", "--report", report] + find_links(wh, m) + ["-r", req]
        pip_python = python
        if not info.get("has_pip"):  # a venv made by uv: another pip resolves against it (pip >= 22.3)
            pip_python = _outer_pip(python, timeout)
            args = ["--python", python] + args
        proc = _pip(args, timeout, python=pip_python, workdir=tmp)
        pip_ok = proc.returncode == 0 and os.path.exists(report)
        to_install = []
        if pip_ok:
            with open(report, encoding="utf-8") as fh:
                to_install = ["%s==%s" % (i["metadata"]["name"], i["metadata"]["version"])
                              for i in json.load(fh).get("install", [])]
    return {"wheelhouse": wh, "python": python, "python_version": info.get("version_string"),
            "python_matches": target_minor == m.get("python"), "wheelhouse_python": m.get("python"),
            "complete": pip_ok, "pip_error": None if pip_ok else _pip_error(proc), "would_install": to_install,
            "missing": missing, "wheels": len(m["wheels"])}
