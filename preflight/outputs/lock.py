"""A fixed environment spec: the complete transitive set pinned with hashes, resolved by pip.

:func:`resolve_lock` runs ``pip install --dry-run --ignore-installed --report`` for the top-level
pins with the chosen indexes, under an interpreter of the chosen Python when one exists here
(markers then evaluate exactly as on the target), else through pip's cross-resolution
(``--target`` with ``--python-version``/``--platform``, wheels only). When uv is present (``$UV``
or on PATH), :func:`resolve_lock` asks ``uv pip compile`` instead (faster; the same cross-resolution:
the target Python and manylinux platform, wheels only, candidates from every index as pip takes
them, and pip's own index, find-links and constraint settings, which uv does not read itself). Nothing here resolves versions. :func:`render_lock` writes requirements.lock and
:func:`render_pylock` the PEP 751 ``pylock.toml`` of the same set (with packaging's ``pylock``
model and tomli-w, as ``pip lock`` does), both deterministically.
"""

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, cast

from ..atomic import write_new
from ..errors import UsageError
from ..probes import child

__all__ = ["Locked", "LockResult", "resolve_lock", "render_lock", "render_pylock", "unhashed", "parse_lock", "find_interpreter",
           "find_uv", "UV_PLATFORM"]

#: manylinux tags tried in cross-resolution (glibc 2.17 .. 2.39).
_PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64",
                                                                     "linux_x86_64"]


#: The platform ``uv pip compile`` resolves for: the newest glibc of :data:`_PLATFORMS` (uv's
#: manylinux targets include every older tag, as pip's list does).
UV_PLATFORM = "x86_64-manylinux_2_39"


@dataclass
class Locked:
    """One pinned distribution: ``name``, ``version``, ``hashes`` (``sha256:HEX`` strings; the first
    is the one of the file at ``url``),
    ``url`` it would be downloaded from (evidence; not written to the lock), ``size`` of that
    artifact in bytes when the resolver reports it (uv does; pip's report does not)."""

    name: str
    version: str
    hashes: List[str] = field(default_factory=list)
    url: Optional[str] = None
    size: Optional[int] = None


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


def find_uv() -> Optional[str]:
    """The uv binary: ``$UV`` (as pypa/build honours it), else ``uv`` on PATH, else None."""
    import shutil

    env = os.environ.get("UV")
    if env and os.path.isfile(env) and os.access(env, os.X_OK):
        return env
    return shutil.which("uv")


#: pip settings uv must be given to resolve what pip would (uv does not read pip's configuration):
#: pip's key -> (uv's environment variable, its list separator), as uv documents them.
_PIP_TO_UV = {"index-url": ("UV_INDEX_URL", " "), "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
              "find-links": ("UV_FIND_LINKS", ","), "constraint": ("UV_CONSTRAINT", " ")}


def _index_env(index_url: Optional[str], extra_index_urls: Sequence[str], pip_python: str,
               settings: Optional[Dict[str, List[str]]] = None) -> Dict[str, str]:
    """This process's environment with pip's index settings for a resolver run: index URLs may
    hold credentials, so they travel in PIP_INDEX_URL / PIP_EXTRA_INDEX_URL (space-separated),
    never in the command line that every user of the machine can read in the process list. The
    variable replaces pip's configured extra indexes, where ``--extra-index-url`` added to them:
    the ones ``pip_python``'s pip has configured (environment, then its files; ``settings``: its
    :func:`pip_settings` when the caller has them already) are kept after ours."""
    env = dict(os.environ)
    if index_url:
        env["PIP_INDEX_URL"] = index_url
    if extra_index_urls:
        conf = pip_settings(pip_python) if settings is None else settings
        theirs = [u for u in conf.get("extra-index-url", []) if u not in extra_index_urls]
        env["PIP_EXTRA_INDEX_URL"] = " ".join(list(extra_index_urls) + theirs)
    return env


def pip_settings(python: Optional[str] = None) -> Dict[str, List[str]]:
    """pip's effective index-url, extra-index-url, find-links and constraint settings (from
    ``pip config list``: environment variables first, then site, user and global files), as
    ``{key: [values]}``; {} when pip cannot tell."""
    try:
        out = child.run([python or sys.executable, "-m", "pip", "config", "list"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    rank = {":env:": 0, "site": 1, "user": 2, "global": 3}
    best: Dict[str, tuple] = {}
    for line in out.splitlines():
        head, sep, value = line.partition("=")
        scope, _, key = head.rpartition(".")
        if not sep or key not in _PIP_TO_UV:
            continue
        r = rank.get(scope, 4)
        if key not in best or r < best[key][0]:
            best[key] = (r, value.strip().strip("'\""))
    return {k: v[1].split() for k, v in best.items()}


def _pip_error(stderr: str) -> str:
    """pip's last ``ERROR`` line (else its last line), at most 400 characters; when that line only
    introduces a traceback (pip's own crash: ``ERROR: Exception:``), the traceback's last line, which
    names the exception, is added."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("ERROR")] or lines
    msg = (errs or ["no output"])[-1]
    if msg.rstrip().endswith(":") and lines and lines[-1] != msg:
        msg = msg.rstrip() + " " + lines[-1].strip()
    return msg[:400]


def _uv_lock(uv: str, requirements: Sequence[str], python: str, index_url: Optional[str],
             extra_index_urls: Sequence[str], timeout: float) -> LockResult:
    try:
        import tomllib as toml  # Python >= 3.11
    except ImportError:  # pragma: no cover - 3.8-3.10
        import tomli as toml  # type: ignore[no-redef]
    with child.scratch("preflight-lock-") as tmp:
        req_in, out = os.path.join(tmp, "requirements.in"), os.path.join(tmp, "pylock.toml")
        write_new(req_in, "\n".join(requirements) + "\n")
        cmd = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--format", "pylock.toml",
               # sdists allowed where no wheel exists, as pip's own lock: binary-only, uv backtracked from
               # omegaconf 2.3 (its antlr4 runtime is an sdist) to omegaconf 1.4.1 and hydra-core 0.11,
               # which verl's trainer cannot import
               "--python-version", python, "--python-platform", UV_PLATFORM,
               "--index-strategy", "unsafe-best-match", "--no-header", "-o", out]
        conf = pip_settings()
        if index_url:
            conf["index-url"] = [index_url]
        conf["extra-index-url"] = list(conf.get("extra-index-url", [])) + [
            u for u in extra_index_urls if u not in conf.get("extra-index-url", [])]
        # index URLs, find-links and constraint locations may hold credentials: they go through
        # the environment, never the command line (which every user of the machine can read in
        # the process list); uv's variables take these lists space- or comma-separated
        env = dict(os.environ)
        for key, (var, sep) in sorted(_PIP_TO_UV.items()):
            values = conf.get(key) or []
            if values:
                env[var] = values[-1] if key == "index-url" else sep.join(values)
        try:
            proc = child.run(cmd + [req_in], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=timeout, workdir=tmp, env=env)
        except subprocess.TimeoutExpired:
            raise UsageError("uv did not resolve %s within %.0f s; check network access to the index (or unset UV / "
                             "take uv off PATH to lock with pip)" % (" ".join(requirements), timeout))
        if proc.returncode != 0 or not os.path.exists(out):
            errs = [l for l in proc.stderr.splitlines() if l.strip()]
            raise UsageError("uv could not resolve the stack: %s" % ((errs or ["no output"])[-1][:400]))
        with open(out, "rb") as fh:
            data = toml.load(fh)
    pkgs = []
    for row in data.get("packages", []):
        arts = list(row.get("wheels") or []) + ([row["sdist"]] if row.get("sdist") else [])
        every = ["sha256:%s" % a["hashes"]["sha256"] for a in arts if (a.get("hashes") or {}).get("sha256")]
        # the kept artifact's own hash first (pylock.toml pairs it with that URL), then the other files'
        # of the same version: uv lists one per wheel, and a sorted list paired a URL with another
        # file's hash, which every installer refuses
        own = ["sha256:%s" % arts[0]["hashes"]["sha256"]] if arts and (arts[0].get("hashes") or {}).get("sha256") else []
        hashes = own + sorted(set(every) - set(own))
        pkgs.append(Locked(row["name"], str(row["version"]), hashes, arts[0].get("url") if arts else None,
                           arts[0].get("size") if arts else None))
    pkgs.sort(key=lambda p: p.name.lower())
    return LockResult(pkgs, index_url, list(extra_index_urls), python,
                      "uv pip compile for Python %s, %s (an sdist only where no wheel exists)" % (python, UV_PLATFORM))


def resolve_lock(requirements: Sequence[str], python: str, index_url: Optional[str] = None,
                 extra_index_urls: Sequence[str] = (), pip_python: Optional[str] = None,
                 timeout: float = 900.0, cross: bool = False, use_uv: Optional[bool] = None) -> LockResult:
    """Resolve ``requirements`` for Python ``python`` (``"3.12"``) through pip's resolver, or
    uv's when uv is present.

    Args:
        requirements: top-level requirement strings (e.g. ``"torch==2.11.0"``).
        python: the target Python minor version.
        index_url, extra_index_urls: indexes (None keeps pip's configured index; uv is given pip's
            index, extra-index, find-links and constraint settings, :func:`pip_settings`).
        pip_python: interpreter to run pip with (default: one of ``python`` on this machine, else
            the current one in cross-resolution mode); given, pip is used.
        cross: resolve for Python ``python`` on manylinux x86_64 wheels whatever interpreters
            this machine has (pip's ``--python-version``/``--platform``; uv always does).
        use_uv: True requires uv, False forbids it, None (default) uses it when
            :func:`find_uv` finds it and ``pip_python`` is not given.
    Raises:
        UsageError: the resolver could not resolve (its last error line is in the message), or
            ``use_uv`` is True without uv.
    """
    uv = find_uv() if use_uv is not False and (use_uv or pip_python is None) else None
    if use_uv and not uv:
        raise UsageError("uv was asked for but is not on PATH (nor in $UV); install uv or lock with pip")
    if uv:
        return _uv_lock(uv, requirements, python, index_url, extra_index_urls, timeout)
    interp = None if cross else (pip_python or find_interpreter(python))
    cross = interp is None
    if cross:
        interp = sys.executable
    plats = _PLATFORMS if cross else _host_platforms()
    settings = pip_settings(interp) if index_url is None or extra_index_urls else {}  # read once, used twice
    with child.scratch("preflight-lock-") as tmp, _metadata_index(index_url, settings, interp, python, plats) as ix:
        report = os.path.join(tmp, "report.json")
        cmd = [interp, "-m", "pip", "--disable-pip-version-check", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", report]
        env = _index_env(ix.url if ix is not None else index_url, extra_index_urls, interp, settings)
        if cross:
            cmd += ["--target", os.path.join(tmp, "t"), "--only-binary=:all:", "--implementation", "cp",
                    "--python-version", python]
            for p in _PLATFORMS:
                cmd += ["--platform", p]
        if ix is not None:  # build requirements installed in pip's own process: no child argv holds the URL
            cmd.append("--use-feature=inprocess-build-deps")
        cmd += list(requirements)
        try:
            proc = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             timeout=timeout, workdir=tmp, env=env)
        except subprocess.TimeoutExpired:
            raise UsageError("pip did not resolve %s within %.0f s; check network access to the index" % (
                " ".join(requirements), timeout))
        if proc.returncode != 0 or not os.path.exists(report):
            err = _pip_error(proc.stderr)
            if ix is not None:  # the loopback index's per-run token never reaches a message
                err = err.replace(ix.url, ix.upstream).replace(ix.url.rsplit("/simple", 1)[0] + "/files/", "https://")
            raise UsageError("pip could not resolve the stack: %s" % err)
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
        pkgs = []
        for item in data.get("install", []):
            meta = item["metadata"]
            info = item.get("download_info") or {}
            hashes = (info.get("archive_info") or {}).get("hashes") or {}
            h = ["sha256:%s" % hashes["sha256"]] if "sha256" in hashes else []
            url = _upstream_url(ix, info.get("url"))
            pkgs.append(Locked(meta["name"], meta["version"], h or _local_hash(url), url))
    pkgs.sort(key=lambda p: p.name.lower())
    mode = "cross-resolution for Python %s (wheels only)" % python if cross else "interpreter %s" % interp
    return LockResult(pkgs, index_url, list(extra_index_urls), python, mode)


def _host_platforms() -> List[str]:
    """The Linux platform tags an interpreter of this machine could take (a superset of pip's:
    every manylinux glibc level to 2.44 for this machine's architecture)."""
    import platform

    arch = platform.machine() or "x86_64"
    return ["manylinux_2_%d_%s" % (n, arch) for n in range(17, 45)] + [
        "manylinux2014_%s" % arch, "manylinux2010_%s" % arch, "manylinux1_%s" % arch, "linux_%s" % arch]


@contextlib.contextmanager
def _metadata_index(index_url: Optional[str], settings: Dict[str, List[str]], pip_python: str, python: str,
                    platforms: Sequence[str]) -> Iterator[Optional[Any]]:
    """The loopback index of :mod:`preflight.proof_index` in front of PyPI, when PyPI is the index
    pip would read (``index_url`` is PyPI's, or none is given and pip has none configured): pip
    then reads each wheel's METADATA from it (range requests, kept in the tool's cache) instead of
    downloading every candidate wheel whole (several GB for a CUDA stack on an index that announces
    no PEP 658 metadata), when ``pip_python``'s pip is at least proofs.NATIVE_PIP (it installs an
    sdist's build requirements in its own process, so the index's per-run token never reaches a
    child's command line). The resolver, its candidates and the hashes on the pages are PyPI's own;
    another index is read directly, as before (None). Its pages hold only what pip could take for
    CPython ``python`` on ``platforms`` (wheels of other Pythons and platforms left out), sdists kept."""
    from ..proofs import NATIVE_PIP, PYPI, pip_version_of

    configured = settings.get("index-url") if index_url is None else [index_url]
    if configured and [u.rstrip("/") for u in configured] != [PYPI]:
        yield None
        return
    ver = pip_version_of(pip_python)
    if ver is None or ver < NATIVE_PIP:
        # an older pip installs an sdist's build requirements in a child pip given the index URL on
        # its argv (the per-run token would be readable in the process list), and downloads every
        # wheel of a dry run anyway: it reads the index directly
        yield None
        return
    from ..proof_index import MetadataIndex

    with MetadataIndex(PYPI, python=python, platforms=platforms, sdists=True) as ix:
        yield ix


def _local_hash(url: Optional[str]) -> List[str]:
    """``["sha256:HEX"]`` of the file a ``file://`` URL names (a pip ``--find-links`` directory's
    wheel: pip reports no hash for it), read here; [] for any other URL or an unreadable file."""
    if not url or not url.startswith("file://"):
        return []
    import hashlib
    from urllib.parse import unquote, urlsplit

    digest = hashlib.sha256()
    try:
        with open(unquote(urlsplit(url).path), "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return []
    return ["sha256:%s" % digest.hexdigest()]


def _upstream_url(ix: Optional[Any], url: Optional[str]) -> Optional[str]:
    """A wheel URL of the loopback index (``http://127.0.0.1:PORT/TOKEN/files/HOST/PATH``: the token
    must never reach a file) as the upstream's own URL; any other URL as it is."""
    if ix is None or not url or not url.startswith(ix.url.rsplit("/simple", 1)[0] + "/files/"):
        return url
    from urllib.parse import unquote

    host, _, path = url.split("/files/", 1)[1].partition("/")
    return ix.known(unquote(host), "/" + path)


def render_lock(res: LockResult, header: Sequence[str] = ()) -> str:
    """requirements.lock text: comment header, index lines (without userinfo, secret query values
    as ``***``: credentials are passed to pip another way, :func:`preflight.redact.strip_userinfo`), then ``name==version`` with its ``--hash`` lines, sorted by name.
    Same input, same bytes."""
    from ..redact import redact_text, strip_userinfo

    # a lock is shared (committed, copied into images): index credentials never go in (see
    # README, "Index credentials"), and no other secret either
    lines = ["# %s" % redact_text(h) for h in header]
    if res.index_url:
        lines.append("--index-url %s" % strip_userinfo(res.index_url))
    for u in res.extra_index_urls:
        lines.append("--extra-index-url %s" % strip_userinfo(u))
    for p in res.packages:
        if p.hashes:
            lines.append("%s==%s \\" % (p.name, p.version))
            lines.extend("    --hash=%s%s" % (h, " \\" if i < len(p.hashes) - 1 else "") for i, h in enumerate(p.hashes))
        else:
            lines.append("%s==%s  # no hash: the index served none" % (p.name, p.version))
    return "\n".join(lines) + "\n"


def unhashed(res: LockResult) -> List[str]:
    """Names of the locked distributions with no hash (the index served none and no local file
    gave one), sorted."""
    return sorted(p.name for p in res.packages if not p.hashes)


def render_pylock(res: LockResult) -> str:
    """pylock.toml (PEP 751, lock-version 1.0) of the same set as :func:`render_lock`: one
    ``[[packages]]`` per distribution with the artifact it was resolved to and its hashes, for
    ``pip install -r pylock.toml`` (pip >= 26.1) or ``uv pip install -r pylock.toml``
    (uv >= 0.6.15). Built with ``packaging.pylock`` (which validates it) and written with
    tomli-w; same input, same bytes (no timestamps). The lock is for one platform: its
    ``environments`` marker says which. "" when a distribution has no hash (:func:`unhashed`):
    PEP 751 requires one for every file."""
    from urllib.parse import unquote, urlsplit

    from ..redact import strip_userinfo
    import tomli_w
    from packaging.markers import Marker
    from packaging.pylock import Package, PackageSdist, PackageWheel, Pylock
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    if unhashed(res):
        return ""  # PEP 751 requires a hash for every file: no pylock.toml (build_spec says why)
    packages = []
    for p in sorted(res.packages, key=lambda p: canonicalize_name(p.name)):
        hashes: Dict[str, str] = {}
        for h in p.hashes:
            algo, _, hexd = h.partition(":")
            hashes.setdefault(algo, hexd)
        url = strip_userinfo(p.url) if p.url else None  # never an index's credentials (userinfo, ?token=) in a shared file
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) if url else None  # no ?query, no #fragment
        kw: Dict[str, Any] = {}
        if name and name.endswith(".whl"):
            kw["wheels"] = [PackageWheel(name=name, url=url, size=p.size, hashes=hashes)]
        elif url:
            kw["sdist"] = PackageSdist(name=name, url=url, size=p.size, hashes=hashes)
        packages.append(Package(name=canonicalize_name(p.name), version=Version(p.version), **kw))
    lock = Pylock(lock_version=Version("1.0"), created_by="verl-preflight",
                  environments=[Marker('sys_platform == "linux" and platform_machine == "x86_64" and '
                                       'python_version == "%s"' % res.python)],
                  requires_python=SpecifierSet("==%s.*" % res.python), packages=packages)
    data = lock.to_dict()
    Pylock.from_dict(data)  # packaging's PEP 751 validation (wheel names, hashes); raises PylockValidationError
    return tomli_w.dumps(cast(Dict[str, Any], data))


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
