"""Recorded proofs that a resolved stack installs: pip's own resolver, run for the target
interpreter and platform with binary wheels only, over the stack's requirements.

A proof is recorded by ``tools/record_proofs.py`` (network, PyPI) with::

    pip install --dry-run --ignore-installed --report FILE --only-binary=:all: \\
        --python-version X.Y --implementation cp --abi cpXY --abi abi3 --abi none \\
        --platform manylinux_2_5_x86_64 ... --platform manylinux_2_35_x86_64 \\
        --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \\
        REQUIREMENTS

(every platform tag a glibc 2.35 x86_64 target accepts), pip reading PyPI through the loopback
index of :mod:`preflight.proof_index` (each wheel's METADATA by range requests, kept in the tool's
cache; pages hold only the wheels the target's tags may admit), since this index announces no
PEP 658 metadata and pip would otherwise download every candidate wheel. The index ``matrices/proofs.json`` holds,
per proof id, the requirement set, Python, platform tags, resolver, date, status, the resolved
``name==version`` set and the trimmed report's file (``tests/data/proofs/<id>.json``). A proof
made for glibc G also holds on any newer glibc (its tags are a superset).

Requirements that point at files outside the package index (``flash-attn @ https://github...``)
are not part of a proof: the recorder could not reach them, and the proof says so.

A requirement the index serves only as an sdist (pyairports, flashinfer-python 0.2.5) is judged
from the sdist itself (:mod:`preflight.sdist_purity`, read through the same index): a pure-Python
one makes pip's resolver run again natively with ``--no-binary NAME`` (pip builds its metadata
with its build backend, as ``pip install`` would), and the proof names the source build; one that
needs a compiler keeps the set "failed" with what building it needs.

pip evaluates requirement markers (``python_version``, ``platform_machine``) for the interpreter it
runs under, not for ``--python-version``/``--platform``: each proof records the environment they
were evaluated in (``markers``). The recorder runs pip under the target's own CPython minor where
this machine has one (preferred); elsewhere (CPython 3.8, whose newest pip is older than 26; 3.14;
every aarch64 target) pip's own resolver runs in ``preflight/target/pip_markers.py``, which gives it
the target's whole PEP 508 marker environment (:mod:`preflight.marker_env`) in place of its
vendored ``packaging.markers.default_environment`` before pip's main runs the same command line;
``markers`` then reads "cpython 3.14.0 aarch64 (marker environment given to pip 26.1.2)". A
verdict whose markers were another interpreter's proves nothing (:func:`markers_problem`).
"""

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .pip_output import RESOLVER_REFUSALS, failure_facts, refused_by_resolver, short_error  # noqa: F401
from .proof_sdists import PYPI, build_needs, judge_file, judge_sdists, sdist_only, split_requirement  # noqa: F401

__all__ = ["proof_id", "proof_requirements", "platform_tags", "load_index", "lookup", "NOT_PROVABLE", "pip_command",
           "prove_live", "build_needs", "PYPI", "torch_index_reason", "short_error", "failure_facts",
           "refused_by_resolver"]

#: The index every proof is made against (pip's default; download.pytorch.org is not reachable here).

#: The glibc the recorded proofs are made for (Ubuntu 22.04; verl 0.7's images are ubuntu22.04).
DEFAULT_GLIBC = (2, 35)

NOT_PROVABLE = ("download.pytorch.org and wheels.vllm.ai are not reachable from the machine that records proofs "
                "(PyPI only): a stack needing them is unproven")


def platform_tags(glibc: Tuple[int, int] = DEFAULT_GLIBC, arch: str = "x86_64") -> List[str]:
    """Every manylinux tag a target with ``glibc`` (major, minor) on ``arch`` (x86_64, aarch64)
    accepts, newest first: manylinux_2_<minor>..manylinux_2_5 (aarch64: ..manylinux_2_17, the
    oldest aarch64 manylinux), each legacy alias (manylinux2014 = 2.17, manylinux2010 = 2.12,
    manylinux1 = 2.5; PEP 600, PEP 599; aarch64 has manylinux2014 only) right after its glibc, as
    packaging.tags orders them."""
    aliases = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    if arch != "x86_64":
        aliases = {17: "manylinux2014"}
    tags = []
    for m in range(glibc[1], 4 if arch == "x86_64" else 16, -1):
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
    inside: List[str] = []
    outside: List[str] = []
    for r in requirements:
        name = re.split(r"[\s<>=!~\[@;]", r.strip(), maxsplit=1)[0].lower().replace("_", "-")
        (outside if re.search(r"\s@\s", r) or name in SOURCE_BUILDS else inside).append(r)
    return inside, outside


def proof_id(requirements: Sequence[str], python: str, extra_index_urls: Sequence[str] = (),
             arch: str = "x86_64") -> str:
    """A stable id of (Python, requirement set, extra indexes, machine architecture): 16 hex
    digits. An x86_64 id is the same as before aarch64 proofs existed (the architecture is left
    out of its hash)."""
    inside, _ = proof_requirements(requirements)
    key: List[Any] = [python, sorted(inside), sorted(extra_index_urls)]
    if arch != "x86_64":
        key.append(arch)
    blob = json.dumps(key)
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


def torch_index_reason(extra_index_urls: Sequence[str]) -> str:
    """Why a set needing ``extra_index_urls`` (download.pytorch.org for a ``+cu126`` torch) is unproven."""
    return ("needs the PyTorch index (%s), not reachable here: a +cuXYZ torch has a local version only "
            "download.pytorch.org serves, and proofs are made against PyPI" % ", ".join(extra_index_urls))


def lookup(requirements: Sequence[str], python: str, extra_index_urls: Sequence[str] = (),
           directory: Optional[str] = None, arch: str = "x86_64") -> Dict[str, Any]:
    """How the stack (``requirements`` on CPython ``python``, Linux ``arch``) was proven.

    Returns a dict with ``status``: "proven" (pip resolved it with binary wheels), "failed" (pip
    could not: ``error`` has pip's message, ``no_wheel`` the packages it found no wheel for,
    ``source_builds`` those with only an sdist and ``build_needs`` what building them needs) or
    "unproven" (no recorded proof, or it needs an index the recorder cannot reach: ``reason``);
    plus ``id``, ``arch``, ``resolver``, ``pip``, ``index``, ``python``, ``platform_tags``,
    ``glibc``, ``date``, ``file``, ``installed`` (name -> version) and ``left_out``
    (requirements outside the index).
    """
    inside, outside = proof_requirements(requirements)
    pid = proof_id(requirements, python, extra_index_urls, arch)
    base = {"id": pid, "python": python, "arch": arch, "requirements": inside, "left_out": outside}
    idx = load_index(directory)
    row = (idx.get("proofs") or {}).get(pid)
    if row is None:
        if extra_index_urls:
            return dict(base, status="unproven", reason=torch_index_reason(extra_index_urls))
        return dict(base, status="unproven",
                    reason="no recorded proof of this install line for CPython %s on Linux %s (record it with "
                           "tools/record_proofs.py, or prove it live with --prove)" % (python, arch))
    return _row_out(base, row)


def _row_out(base: Dict[str, Any], row: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    out.update({k: row.get(k) for k in ("status", "resolver", "pip", "index", "platform_tags", "glibc", "date", "file",
                                        "error", "source_builds", "no_wheel", "reason", "build_needs",
                                        "sdist_purity", "native", "markers")})
    if out["status"] == "not recorded":
        out["status"] = "unproven"
    out["installed"] = dict(x.split("==", 1) for x in row.get("installed") or [])
    if out.get("error"):
        out["error"] = short_error(out["error"])
    why = markers_problem(row, base["python"], base["arch"])
    if why and out["status"] in ("proven", "failed"):
        out.update(status="unproven", recorded_status=out["status"], reason=why)
    return out


#: The interpreter a recorded row's pip ran under when the row does not say (``markers``): every row
#: recorded before the recorder ran pip under the target's own CPython came from its pip 26 venv
#: (tests/envs.py "lock-tools": CPython 3.11.7 on x86_64), or, for the 2026-11-30 rows whose resolver
#: line says "under CPython X.Y", from that CPython on this x86_64 machine.
_OLD_RECORDER = "cpython 3.11.7 x86_64"


def markers_problem(row: Dict[str, Any], python: str, arch: str) -> Optional[str]:
    """None when pip evaluated the requirement markers of ``row`` (a recorded or live proof) for
    CPython ``python`` on Linux ``arch``, else why its verdict proves nothing for that target, one
    line. pip evaluates ``python_version``/``platform_machine`` markers for the interpreter it runs
    under whatever ``--python-version``/``--platform`` say, so a set resolved under another
    interpreter may hold packages the target never installs, or miss ones it does (a CPython 3.11
    pip proving 3.9 took numba 0.61.2, whose marker excludes 3.9; one on x86_64 proving aarch64
    keeps the x86_64-only CUDA wheels)."""
    got = row.get("markers")
    if not got:
        m = re.search(r"under CPython (\d+\.\d+)", str(row.get("resolver") or ""))
        got = "cpython %s x86_64" % m.group(1) if m else _OLD_RECORDER
    parts = str(got).split()
    if len(parts) >= 3 and parts[0] == "cpython" and ".".join(parts[1].split(".")[:2]) == python and parts[2] == arch:
        return None
    return ("pip evaluated the environment markers for %s, not CPython %s on %s, so its answer (%s) proves "
            "nothing for this target: record it under a CPython %s on %s (tools/record_proofs.py)" % (
                got, python, arch, row.get("status"), python, arch))


def pip_command(pip_python: str, requirements: Sequence[str], python: str, arch: str, report: str,
                pip_major: int = 26, index_url: Optional[str] = PYPI, target: Optional[str] = None,
                no_binary: Sequence[str] = ()) -> List[str]:
    """The argv of pip's resolver proving ``requirements`` for CPython ``python`` on Linux ``arch``::

        PIP -m pip --isolated install --dry-run --ignore-installed --report FILE --only-binary=:all:
            --index-url https://pypi.org/simple --python-version X.Y --implementation cp --abi cpXY
            --abi abi3 --abi none --platform manylinux_2_35_ARCH ... REQUIREMENTS

    ``pip_major`` < 24 adds ``--target`` (older pip refuses ``--platform`` without it). With
    ``index_url`` None neither ``--isolated`` nor ``--index-url`` is given: the caller passes the
    index in pip's environment (``PIP_INDEX_URL``, with every other ``PIP_*`` removed and
    ``PIP_CONFIG_FILE=/dev/null``), as for the loopback index whose URL holds a secret.

    With ``no_binary`` (pure-Python sdists pip may build: :func:`prove_live`) the command is the
    native one: ``--only-binary=:all: --no-binary NAME,...`` (after it: pip's later option wins)
    and ``--use-feature=inprocess-build-deps`` (the build backend is installed by this pip, so the
    index URL never reaches a child's argv), without ``--python-version``/``--platform`` (pip
    refuses them with a source build): ``pip_python`` must be a CPython ``python`` on ``arch``."""
    abi = "cp" + python.replace(".", "")
    cmd = [pip_python, "-m", "pip", "--disable-pip-version-check"] + (["--isolated"] if index_url else []) + [
           "--no-cache-dir", "install", "--dry-run",
           "--ignore-installed", "--progress-bar", "off", "--report", report, "--only-binary=:all:"] + (
           ["--index-url", index_url] if index_url else [])
    if no_binary:
        return cmd + ["--no-binary", ",".join(no_binary), "--use-feature=inprocess-build-deps"] + list(requirements)
    cmd += ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none"]
    for t in platform_tags(DEFAULT_GLIBC, arch):
        cmd += ["--platform", t]
    if pip_major < 24:
        cmd += ["--target", target or os.path.join(os.path.dirname(report), "t")]
    return cmd + list(requirements)


def pip_version_of(pip_python: str, timeout: float = 30.0) -> Optional[Tuple[int, ...]]:
    """(major, minor) of ``pip_python``'s pip, or None when it has none or does not answer."""
    ver = _pip_version(pip_python, timeout)
    return _vtuple(ver) if ver else None


def _pip_version(pip_python: str, timeout: float) -> Optional[str]:
    import subprocess

    from .probes import child

    try:
        out = child.run([pip_python, "-m", "pip", "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        return ""  # no answer in time: the proof's deadline, not a missing pip
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.split()
    return parts[1] if len(parts) > 1 and parts[0] == "pip" else None


def _reachable(index_url: str, timeout: float) -> Optional[str]:
    """None when a TCP connection to the index's host opens within ``timeout`` s, else why not."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(index_url)
    try:
        socket.create_connection((u.hostname or "", u.port or (443 if u.scheme == "https" else 80)), timeout).close()
    except OSError as exc:
        return "%s: %s" % (type(exc).__name__, exc)
    return None


def _clean_env() -> Dict[str, str]:
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)  # the index's truth, not this machine's pip config
    for k in list(env):
        if k.startswith("PIP_") and k != "PIP_CONFIG_FILE":
            env.pop(k)
    return env


def prove_live(requirements: Sequence[str], python: str, arch: str = "x86_64", extra_index_urls: Sequence[str] = (),
               timeout: float = 120.0, pip_python: Optional[str] = None, give_markers: bool = True,
               **more: Any) -> Dict[str, Any]:
    """:func:`_prove_live` (which documents every argument, ``more`` included, and the row), with pip run by default
    under a CPython ``python`` of this machine when there is one on PATH (``pythonX.Y``, with
    pip >= 22.2) and this machine is ``arch``, else this interpreter.

    Where ``pip_python`` is not the target (another minor, another machine), ``give_markers``
    (the default) runs pip's resolver through ``preflight/target/pip_markers.py`` with the
    target's marker environment (:func:`preflight.marker_env.target_environment`, its micro
    ``full_version``): ``markers`` then reads "cpython 3.14.0 aarch64 (marker environment given to
    pip 26.1.2)". Without it, a verdict pip reached with markers evaluated for another
    interpreter (:func:`markers_problem`) is "unproven" with why (``recorded_status`` keeps what
    pip said)."""
    if pip_python is None:
        pip_python = _target_python(python, arch)
        ver = _pip_version(pip_python, min(30.0, timeout)) if pip_python else None
        if pip_python and give_markers and (not ver or _vtuple(ver) < (22, 2)):
            pip_python = None  # its pip cannot prove: this interpreter's pip, given the target's markers
    out = _prove_live(requirements, python, arch, extra_index_urls, timeout, pip_python, give_markers=give_markers,
                      **more)
    why = markers_problem(out, python, arch) if out.get("markers") else None
    if why and out.get("status") in ("proven", "failed"):
        out.update(status="unproven", recorded_status=out["status"], reason=why)
    return out


def _target_python(python: str, arch: str) -> Optional[str]:
    """``pythonX.Y`` on PATH when it is CPython ``python`` on this machine's ``arch``, else None."""
    import shutil

    cand = shutil.which("python%s" % python)
    if not cand:
        return None
    got = _markers_of(cand, 10.0)
    if got and got[0] == "cpython" and ".".join(got[1].split(".")[:2]) == python and got[2] == arch:
        return cand
    return None


def _prove_live(requirements: Sequence[str], python: str, arch: str = "x86_64", extra_index_urls: Sequence[str] = (),
                timeout: float = 120.0, pip_python: Optional[str] = None, index_url: str = PYPI,
                metadata_index: bool = True, cache_dir: Optional[str] = None, page_ttl: float = 600.0,
                native_python: Optional[str] = None, give_markers: bool = False,
                full_version: Optional[str] = None) -> Dict[str, Any]:
    """Run pip's resolver now (network, bounded by ``timeout`` seconds in all) on exactly
    ``requirements`` for CPython ``python`` on Linux ``arch`` (see :func:`pip_command`), with
    ``pip_python``'s pip (default: this interpreter's; pip >= 22.2 for --dry-run --report).

    With ``metadata_index`` (the default) pip reads ``index_url`` through the loopback index of
    :mod:`preflight.proof_index`, which serves each wheel's METADATA (PEP 658) read by range
    requests and kept in ``cache_dir`` (project pages for ``page_ttl`` s), so no whole wheel is
    downloaded; pip's own temporary files live in a directory removed when the proof ends.

    Pure-Python sdists: when the binary-only resolve is refused and every package pip found no
    wheel for has only sdists (:func:`sdist_only`), each sdist is read through the same index and
    judged (:func:`judge_sdists`). If all are pure Python, pip's resolver runs again natively
    (``native_python``: a CPython ``python`` on ``arch``, this machine's, with pip >= 26; default
    ``pip_python`` when it is one) with ``--no-binary`` for exactly those names; pip then builds
    their metadata with their own build backend. Its answer is the proof (``source_builds`` and
    ``build_needs`` name them); with no such interpreter the set is "unproven" (``reason`` says
    why), never "does not install". One not pure keeps "failed", its ``build_needs`` saying what
    building it needs.

    Returns a row like :func:`lookup`'s, ``status`` "proven", "failed" (pip's resolver refused
    the set: ``refusal`` names how, ``error`` gives pip's words) or "unproven" (the index is
    unreachable, pip is missing or too old, the deadline passed: "timed out after N s", or the
    set needs an index other than PyPI: ``reason`` says which, in one line); ``seconds``: the
    resolver's wall time; ``command``: pip's argv after the interpreter (no index URL, no
    report path). Never raises for those."""
    import datetime
    import sys
    import time

    inside, outside = proof_requirements(requirements)
    pid = proof_id(requirements, python, extra_index_urls, arch)
    base = {"id": pid, "python": python, "arch": arch, "requirements": inside, "left_out": outside,
            "index": index_url, "date": datetime.date.today().isoformat(), "live": True}
    if extra_index_urls:
        return dict(base, status="unproven", reason=torch_index_reason(extra_index_urls))
    t0 = time.monotonic()
    why = _reachable(index_url, min(10.0, timeout))
    if why:
        return dict(base, status="unproven", reason="the index %s is unreachable (%s): no live proof" % (index_url, why))
    pip_python = pip_python or sys.executable
    ver = _pip_version(pip_python, min(30.0, timeout))
    if ver == "":
        return dict(base, status="unproven", reason="timed out after %d s: %s -m pip --version gave no answer in "
                    "time" % (timeout, pip_python))
    if ver is None or _vtuple(ver) < (22, 2):
        return dict(base, status="unproven", reason="%s has no pip >= 22.2 (found: %s) for a live proof; pass one "
                    "whose pip is newer" % (pip_python, ver or "none"))
    tags = platform_tags(DEFAULT_GLIBC, arch)
    markers = _markers_of(pip_python, min(30.0, timeout))
    note = _markers_note(markers, python, arch)
    base.update(pip=ver, glibc="%d.%d" % DEFAULT_GLIBC, markers=" ".join(markers) or "unknown",
                platform_tags="%s .. %s (%d tags)" % (tags[0], tags[-1], len(tags)))
    if note and give_markers:
        from .marker_env import describe, target_environment

        env = target_environment(python, arch, full_version)
        base.update(given_environment=env, markers=describe(env, ver),
                    resolver="pip %s --dry-run --report --only-binary=:all:, with the marker environment of CPython "
                             "%s on Linux %s given to pip in its own process (preflight/target/pip_markers.py; pip runs "
                             "under %s)" % (ver, env["python_full_version"], arch, " ".join(markers) or "?"))
    else:
        base["resolver"] = "pip %s --dry-run --report --only-binary=:all:%s" % (ver, note)
    if not metadata_index:
        return _run_pip(base, pip_python, ver, inside, python, arch, index_url, timeout, t0)
    from .proof_index import MetadataIndex

    with MetadataIndex(index_url, cache_dir=cache_dir, page_ttl=page_ttl, timeout=min(60.0, timeout),
                       python=python, platforms=tags) as ix:
        out = _run_pip(base, pip_python, ver, inside, python, arch, index_url, timeout, t0, ix)
        if out["status"] == "failed" and out.get("source_builds") and \
                {split_requirement(n)[0] for n in out.get("no_wheel") or []} <= {split_requirement(n)[0] for n in out["source_builds"]}:
            out = _sdist_route(out, base, native_python or pip_python, inside, python, arch, index_url, timeout, t0, ix)
    if ix.notes:
        out["cache_note"] = ix.notes[0]
    out["metadata"] = ("PEP 658 metadata of each wheel, read by range requests through a loopback index "
                       "(preflight.proof_index): %(metadata)d read, %(metadata_cached)d cached, %(pages)d pages read, "
                       "%(pages_cached)d cached, %(bytes)d bytes from the index, %(files_left_out)d files no tag of the target "
                       "admits left out of the pages" % ix.stats) + ("; %s" % ix.notes[0] if ix.notes else "")
    out["bytes"] = ix.stats["bytes"]
    return out


def _markers_of(py: str, timeout: float) -> List[str]:
    """[implementation, X.Y.Z, machine] of interpreter ``py``: the environment pip evaluates
    requirement markers in (pip's ``--python-version``/``--platform`` change the tags it accepts,
    not the markers: ``python_version``, ``platform_machine`` are the running interpreter's);
    [] when it does not answer."""
    import subprocess

    from .probes import child

    probe = "import platform, sys; print(sys.implementation.name, platform.python_version(), platform.machine())"
    try:
        got = child.run([py, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=timeout).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []
    return got if len(got) == 3 else []


def _markers_note(markers: List[str], python: str, arch: str) -> str:
    """"" when pip's markers are the target's (CPython ``python`` on ``arch``), else a clause
    saying for which interpreter they were evaluated."""
    if markers and markers[0] == "cpython" and ".".join(markers[1].split(".")[:2]) == python and markers[2] == arch:
        return ""
    return "; environment markers evaluated for %s (pip evaluates them for the interpreter it runs under, not " \
           "for --python-version/--platform)" % (" ".join(markers) or "an interpreter that did not say")


def _vtuple(ver: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", ver)[:2])


#: The oldest pip a native proof runs (``--use-feature=inprocess-build-deps``: the build backend is
#: installed in pip's own process, so the loopback index's URL never reaches a child's argv; pip
#: 23.x also downloads every wheel of a dry run after resolving).
NATIVE_PIP = (26, 0)


def native_interpreter(py: str, python: str, arch: str, timeout: float = 30.0) -> Tuple[Optional[str], str]:
    """(pip version, "") when interpreter ``py`` may prove natively for CPython ``python`` on
    Linux ``arch`` (it is a CPython ``python`` on this machine, whose architecture is ``arch``,
    with pip >= :data:`NATIVE_PIP`), else (None, why not: one phrase). The second item of a
    usable one is its description ("CPython 3.10.13 on x86_64 glibc 2.36")."""
    import platform
    import subprocess

    from .probes import child

    if platform.system() != "Linux" or platform.machine() != arch:
        return None, "this machine is %s %s, not Linux %s" % (platform.system(), platform.machine(), arch)
    probe = ("import platform, sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2], "
             "platform.python_version(), platform.machine())")
    try:
        got = child.run([py, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=timeout).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, "%s did not run (%s)" % (py, exc)
    if len(got) != 4 or got[0] != "cpython" or got[1] != python or got[3] != arch:
        return None, "%s is %s, not CPython %s on %s" % (py, " ".join(got[:2]) or "no answer", python, arch)
    ver = _pip_version(py, timeout)
    if not ver or _vtuple(ver) < NATIVE_PIP:
        return None, "%s has pip %s, older than the %d.%d a native proof needs" % (py, ver or "none", *NATIVE_PIP)
    libc = platform.libc_ver()
    return ver, "CPython %s on %s %s %s" % (got[2], arch, libc[0] or "libc", libc[1] or "?")


def _sdist_route(failed: Dict[str, Any], base: Dict[str, Any], native: str, inside: List[str], python: str,
                 arch: str, index_url: str, timeout: float, t0: float, ix: Any) -> Dict[str, Any]:
    """The answer for a binary-only refusal whose every missing package is sdist-only (see
    :func:`prove_live`): the failure with each sdist's purity and build needs, or the native
    resolve with those sdists built."""
    names = list(failed["source_builds"])
    from .sdist_purity import PURE_BUILD_NEEDS

    purity = judge_sdists(ix, names)
    failed = dict(failed, sdist_purity={n: p["why"] for n, p in purity.items()},
                  build_needs={n: PURE_BUILD_NEEDS if p.get("pure") else build_needs(n, None if p.get("error")
                                                                                     else p["why"])
                               for n, p in purity.items()})
    if any(p.get("error") for p in purity.values()):
        bad = [n for n, p in purity.items() if p.get("error")]
        return dict(failed, status="unproven", reason="pip's binary-only resolve needs %s from its sdist, which could "
                    "not be judged (%s): no proof either way" % (", ".join(bad), purity[bad[0]]["why"][:200]))
    if not all(p.get("pure") for p in purity.values()):
        return failed
    ver, what = native_interpreter(native, python, arch)
    if ver is None:
        if failed.get("given_environment"):  # no native interpreter: the binary-only verdict came through the launcher
            what = ("pip builds an sdist only natively (it refuses --python-version/--platform with a source build), "
                    "and this machine has no CPython %s on Linux %s with pip >= %d.%d" % ((python, arch) + NATIVE_PIP))
        return dict(failed, status="unproven", reason="pip's binary-only resolve needs %s from its sdist (pure Python: "
                    "pip builds it without a compiler), and no native proof ran: %s" % (
                        ", ".join(names), what.replace(native, "the interpreter given")))
    ix.sdist_projects.update(split_requirement(n)[0] for n in names)
    no_binary = sorted({split_requirement(n)[0] for n in names})
    nbase = dict(base, pip=ver, native=what, resolver="pip %s --dry-run --report --only-binary=:all: --no-binary %s, "
                 "natively under %s (this machine's tags; the index's pages hold only the wheels a glibc %d.%d "
                 "target's tags admit, and the sdists of %s)" % (ver, ",".join(no_binary), what, DEFAULT_GLIBC[0],
                                                                 DEFAULT_GLIBC[1], ", ".join(no_binary)))
    out = _run_pip(nbase, native, ver, inside, python, arch, index_url, timeout, t0, ix, no_binary)
    out["binary_only"] = {k: failed.get(k) for k in ("refusal", "error", "no_wheel")}
    out["sdist_purity"] = failed["sdist_purity"]
    if out["status"] != "proven":
        return dict(out, source_builds=names, build_needs=failed["build_needs"])
    # every sdist pip chose is one judged pure (a newer or older one than judged is judged now)
    from .sdist_purity import MAX_ARCHIVE, SdistError, judge_sdist

    judged = {p.get("filename") for p in purity.values()}
    built: List[str] = []
    for item in out["report"].get("install", []):
        url = ((item.get("download_info") or {}).get("url") or "")
        fn = url.rsplit("/", 1)[-1]
        if not fn or fn.endswith(".whl"):
            continue
        built.append(item["metadata"]["name"])
        if fn not in judged:
            got = [f for f in ix.sdist_files(item["metadata"]["name"]) if f["filename"] == fn]
            p = judge_file(ix, fn, got[0]["url"], MAX_ARCHIVE, judge_sdist, SdistError) if got else {
                "pure": False, "why": "pip built %s, which its index page does not list" % fn}
            out["sdist_purity"][item["metadata"]["name"]] = p["why"]
            if not p.get("pure"):
                return dict(failed, sdist_purity=out["sdist_purity"])
    return dict(out, source_builds=built or names, build_needs={n: PURE_BUILD_NEEDS for n in built or names})


def _text(x: Any) -> str:
    if x is None:
        return ""
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


def _looking_at(lines: Sequence[str]) -> str:
    """What pip's resolver was backtracking on last ("pip is looking at multiple versions of X")."""
    for line in reversed(lines):
        m = re.search(r"pip is (?:still )?looking at multiple versions of (\S+)", line)
        if m:
            return m.group(1)
    return ""


def _run_pip(base: Dict[str, Any], pip_python: str, ver: str, inside: List[str], python: str, arch: str,
             index_url: str, timeout: float, t0: float, ix: Any = None,
             no_binary: Sequence[str] = ()) -> Dict[str, Any]:
    """pip's resolver on ``inside`` against ``index_url`` or, with ``ix``, the loopback index in
    front of it; natively with ``no_binary`` (:func:`pip_command`); the row of :func:`prove_live`."""
    import subprocess

    import time

    from .probes import child

    index_errors: List[str] = ix.errors if ix is not None else []
    with child.scratch("preflight-proof-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = pip_command(pip_python, inside, python, arch, report, int(ver.split(".")[0]),
                          None if ix is not None else index_url, no_binary=no_binary)
        base = dict(base, command=[x if x != report else "REPORT" for x in cmd[1:]])
        left = timeout - (time.monotonic() - t0)
        env = _clean_env()
        given = base.get("given_environment") if not no_binary else None
        events = ""
        if given:  # pip's main in the launcher, its arguments and the environment in private files
            cmd, events = _launcher(pip_python, cmd[3:], given, tmp, env)
        if ix is not None:  # the loopback index: its URL holds the run's secret, never argv
            env["PIP_INDEX_URL"] = ix.url
        env["TMPDIR"] = os.path.join(tmp, "pip-tmp")  # pip's unpack dirs die with this run, killed or not
        os.mkdir(env["TMPDIR"])
        t1 = time.monotonic()
        try:
            proc = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                  timeout=max(1.0, left), env=env, cwd=tmp, workdir=tmp)
        except subprocess.TimeoutExpired as exc:
            lines = (_text(exc.stdout) + "\n" + _text(exc.stderr)).splitlines()
            on = _looking_at(lines)
            return dict(base, status="unproven", seconds=round(time.monotonic() - t1, 1),
                        reason="timed out after %d s: pip's resolver gave no verdict%s" % (
                            timeout, " (still backtracking on %s)" % on if on else ""))
        base = dict(base, seconds=round(time.monotonic() - t1, 1))
        if given:
            why = _launcher_problem(events, proc.returncode)
            if why:
                return dict(base, status="unproven", reason=why)
        if proc.returncode != 0 or not os.path.exists(report):
            lines = [x for x in (proc.stdout + "\n" + proc.stderr).splitlines() if ix is None or ix.token not in x]
            return _failed(base, lines, proc.returncode, index_url, index_errors, timeout, t0, ix)
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
    if given and data.get("environment") != given:  # pip's report names the environment it evaluated in
        return dict(base, status="unproven", reason="pip's report names another marker environment than the one "
                    "given (%s): no proof" % json.dumps(data.get("environment"), sort_keys=True)[:200])
    installed = {}
    for item in data.get("install", []):
        m = item["metadata"]
        installed[m["name"].lower()] = m["version"]
    return dict(base, status="proven", installed=installed, report=data)


def _launcher(pip_python: str, pip_args: List[str], environment: Dict[str, str], tmp: str,
              env: Dict[str, str]) -> Tuple[List[str], str]:
    """(argv, events file) running pip's main with ``pip_args`` under ``pip_python`` through
    ``preflight/target/pip_markers.py`` with the marker ``environment``: script and arguments go
    in 0600 files in the proof's private directory ``tmp`` (named in ``env``, which this
    updates), the argv is the fixed loader of every target script."""
    from .atomic import write_new
    from .probes.process import ARGS_ENV, EVENTS_ENV, SCRIPT_ENV, load_script, target_argv

    script, args, events = (os.path.join(tmp, n) for n in ("pip_markers.py", "args.json", "events"))
    write_new(script, load_script("pip_markers").encode("utf-8"), 0o600)
    write_new(args, json.dumps({"pip_args": pip_args, "environment": environment}).encode("utf-8"), 0o600)
    env.update({SCRIPT_ENV: script, ARGS_ENV: args, EVENTS_ENV: events})
    return target_argv(pip_python), events


def _launcher_problem(events: str, code: int) -> Optional[str]:
    """None when the launcher's event file says the marker environment took in pip, else why
    the run proves nothing (one line)."""
    from .probes.process import MARKER

    got: Dict[str, Any] = {}
    try:
        with open(events, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(MARKER):
                    got = json.loads(line[len(MARKER):])
    except (OSError, ValueError):
        pass
    if got.get("event") == "pip_markers" and got.get("ok"):
        return None
    return ("the target's marker environment could not be given to pip (preflight/target/pip_markers.py: %s; "
            "exit %d): no proof" % (got.get("error") or ("the check marker did not evaluate for the target" if got
                                                       else "no answer"), code))


def _failed(base: Dict[str, Any], lines: List[str], code: int, index_url: str, index_errors: List[str],
            timeout: float, t0: float, ix: Any) -> Dict[str, Any]:
    """The row of a pip run that exited ``code`` without a report (see :func:`_run_pip`)."""
    import time

    text, names = failure_facts(lines)
    if index_errors or any(w in text for w in ("NewConnectionError", "Max retries exceeded", "ConnectTimeout")):
        return dict(base, status="unproven", reason="the index %s could not be read during the proof: %s"
                    % (index_url, (index_errors[:1] or [text])[0][-200:]))
    refusal = refused_by_resolver(lines, names)
    if not refusal:  # pip crashed, the disk filled...: no verdict on the set
        return dict(base, status="unproven", reason="pip stopped without a resolver verdict (%s): no proof "
                    "either way" % (text[-200:] or "exit %d" % code))
    sdist = [n for n in names[:6] if sdist_only(n, min(20.0, max(1.0, timeout - (time.monotonic() - t0))),
                                                index_url, ix)]
    return dict(base, status="failed", error=text or "pip exited %d" % code, no_wheel=names,
                refusal=refusal, source_builds=sdist, build_needs={n: build_needs(n) for n in sdist},
                installed={}, output_tail="\n".join(lines[-40:]))
