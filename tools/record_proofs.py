#!/usr/bin/env python3
"""Re-record the proofs that the stacks ``resolve`` names install (network: PyPI).

The sets: every (verl release x backend, none included x CPython minor x platform) the matrix
knows, resolved with no GPU or driver given (the install line ``spec`` and ``install`` would pass
for that Python and platform), plus every scenario of tests/data/scenarios.toml. For each set
that needs only PyPI, pip's own resolver runs for the target (preflight.proofs.pip_command:
``--dry-run --report --only-binary=:all: --python-version X.Y --platform manylinux_2_35_ARCH...``)
(through preflight.proof_index: no whole wheel is downloaded; metadata and pages are cached in
~/.cache/verl-preflight/proof-index, pages for --page-ttl seconds) and the recorder writes:

* tests/data/proofs/<id>.json: pip's report trimmed to name, version, requires_python and
  requires_dist of each resolved distribution, with the command, pip's version and the date;
* matrices/proofs.json: the index resolve reads offline (status, Python, arch, tags, pip, index,
  date, file, resolved name==version set; for a failure pip's explanation, the packages with no
  wheel, those with only an sdist and what building them needs).

pip runs under the target's own CPython minor where this machine has one (pyenv's, in a venv under
~/.cache/verl-preflight/native-pip with the --pip interpreter's pip, made once): pip evaluates
requirement markers (``python_version > "3.9"``) for the interpreter it runs under, so a 3.11 pip
proving 3.9 takes 3.11's branch of every marker. Where there is none (CPython 3.8, whose newest pip
is older than 26; 3.14; every aarch64 target), the --pip interpreter's pip runs with the target's
marker environment given to it (preflight/target/pip_markers.py; tools/markers_fidelity.py checks
that route against native runs), and the row's ``markers`` says so. A row whose markers were not
the target's (recorded before) is recorded again without --force. A set pip refuses only for sdist-only packages
that are pure Python is proven natively with ``--no-binary NAME`` (preflight.proofs.prove_live;
``--no-native`` leaves it unproven).

A set with a ``+cuXYZ`` torch needs download.pytorch.org, which this machine cannot reach: it is
listed as unproven and not run. Entries already recorded are kept (``--force`` re-records);
an interrupted run keeps what it finished. A set pip refuses (ResolutionImpossible, no matching
distribution, ResolutionTooDeep) is recorded "failed" with pip's words; one that runs past
--timeout stays "not recorded" with "timed out after N s" (unproven, retried next run). Below
15 GB free on the temporary directory's disk a set is skipped. ``--changes`` prints what a re-record changed (used by
``matrix refresh``). pip's configuration (PIP_CONFIG_FILE, PIP_* variables) is ignored, so the proof
is about the index, not this machine.

Usage: python3 tools/record_proofs.py [--jobs 2] [--arch x86_64,aarch64] [--force] [--pip PYTHON]
                                      [--only ID,...] [--python 3.9,...] [--list] [--limit N]
                                      [--timeout S] [--no-native]
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight import proof_refresh, proofs  # noqa: E402
from preflight.matrix import load  # noqa: E402
from preflight.resolve import ResolveError, resolve  # noqa: E402

INDEX = os.path.join(ROOT, "matrices", "proofs.json")
OUTDIR = os.path.join(ROOT, "tests", "data", "proofs")
_LOCK = threading.Lock()
#: Free bytes the recorder keeps on the temporary directory's disk (a set is skipped below it).
MIN_FREE = 15 * 10**9
PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


def scenarios() -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(id, kwargs for resolve) of every scenario in tests/data/scenarios.toml."""
    try:
        import tomllib as toml
    except ImportError:
        import tomli as toml  # type: ignore
    with open(os.path.join(ROOT, "tests", "data", "scenarios.toml"), "rb") as fh:
        data = toml.load(fh)
    for s in data.get("scenario", []):
        yield s["id"], {k: s.get(k) for k in ("verl", "backend", "gpu", "cc", "driver", "python")}


def grid(mx, arches: List[str]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(label, kwargs for resolve) of every release x backend (none too) x Python x platform."""
    for arch in arches:
        for v in mx.verl_versions():
            backends = sorted((mx.verl(v) or {}).get("backend_extras") or {}) + ["none"]
            for b in backends:
                for py in PYTHONS:
                    yield "%s/%s/py%s/%s" % (v, b, py, arch), {"verl": v, "backend": b, "python": py, "arch": arch}


_NATIVE_LOCK = threading.Lock()
_NATIVE: Dict[str, Any] = {}
#: Where the recorder keeps one venv per CPython minor with the --pip interpreter's pip version, for
#: native proofs of sets that need a pure-Python sdist (preflight.proofs.prove_live).
NATIVE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "native-pip")


def _cpython(minor: str) -> Any:
    """This machine's CPython ``minor`` (pyenv's first, then PATH), or None."""
    import glob

    for py in sorted(glob.glob(os.path.join(os.path.expanduser("~"), ".pyenv", "versions", minor + ".*", "bin",
                                            "python" + minor))) + [shutil.which("python" + minor) or ""]:
        if not py:
            continue
        try:
            got = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if got.strip() == minor:
            return py
    return None


def native_python(pip_python: str, minor: str, arch: str) -> Any:
    """An interpreter that proves natively for CPython ``minor`` on ``arch`` (see
    proofs.native_interpreter): ``pip_python`` when it is one, else a venv of this machine's
    CPython ``minor`` under NATIVE_DIR with ``pip_python``'s pip version (made once, with pip
    from the index); None where there is none (another architecture, no such CPython, a pip
    that does not run on it)."""
    if proofs.native_interpreter(pip_python, minor, arch)[0]:
        return pip_python
    with _NATIVE_LOCK:
        if minor in _NATIVE:
            return _NATIVE[minor]
        _NATIVE[minor] = None
        if arch != platform.machine():
            return None
        venv = os.path.join(NATIVE_DIR, "py" + minor)
        py = os.path.join(venv, "bin", "python")
        if not proofs.native_interpreter(py, minor, arch)[0]:
            base = _cpython(minor)
            if base is None:
                return None
            ver = subprocess.run([pip_python, "-m", "pip", "--version"], stdout=subprocess.PIPE,
                                 universal_newlines=True, timeout=60).stdout.split()[1]
            subprocess.run([base, "-m", "venv", "--clear", venv], check=False, timeout=300)
            for want in ("pip==" + ver, "pip>=%d.%d" % proofs.NATIVE_PIP):  # the newest that runs there else
                if subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", want],
                                  check=False, timeout=300).returncode == 0:
                    break
        if proofs.native_interpreter(py, minor, arch)[0]:
            _NATIVE[minor] = py
        return _NATIVE[minor]


def _full_version(py: str) -> Any:
    """``platform.python_version()`` of interpreter ``py`` ("3.8.18"), or None."""
    try:
        got = subprocess.run([py, "-c", "import platform; print(platform.python_version())"], timeout=60,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return got or None


def stale(row: Dict[str, Any]) -> bool:
    """True when ``row`` is to be recorded again without --force: never finished ("not
    recorded"), or pip evaluated its markers for another interpreter than the target's
    (proofs.markers_problem: a row made by a CPython 3.11 pip for 3.8, 3.14 or aarch64)."""
    if row.get("status") == "not recorded":
        return True
    return bool(proofs.markers_problem(row, row.get("python") or "", row.get("arch") or "x86_64"))


def record_one(pip_python: str, reqs: List[str], python: str, arch: str, timeout: int,
               metadata_index: bool = True, page_ttl: float = 3600.0,
               native: bool = True) -> Tuple[Dict[str, Any], Any]:
    """Prove one set live; (index row, trimmed report document or None). With ``native``, a set
    needing a pure-Python sdist is proven natively (:func:`native_python`)."""
    own = native_python(pip_python, python, platform.machine()) if native and arch == platform.machine() else None
    # pip evaluates requirement markers (python_version...) for the interpreter it runs under: the
    # target's own CPython minor, where this machine has one with a new pip, makes them the target's;
    # elsewhere (3.8 under pip 26, 3.14, aarch64) --pip's pip is given the target's marker
    # environment (preflight/target/pip_markers.py), its micro this machine's CPython's where it has one
    base = _cpython(python) if own is None else None
    full = _full_version(base) if base else None
    p = proofs.prove_live(reqs, python, arch, (), timeout=timeout, pip_python=own or pip_python,
                          metadata_index=metadata_index, page_ttl=page_ttl,
                          native_python=own, full_version=full)
    row = {k: p.get(k) for k in ("requirements", "python", "arch", "status", "reason", "pip", "index", "resolver",
                                 "glibc", "platform_tags", "date", "error", "no_wheel", "refusal", "seconds",
                                 "metadata", "native", "sdist_purity", "binary_only", "markers")
           if p.get(k) is not None}
    if p.get("source_builds"):
        row["source_builds"] = p["source_builds"]
        row["build_needs"] = p.get("build_needs") or {}
    if p["status"] == "unproven":
        row["status"] = "not recorded"  # retried on the next run
        return row, None
    row["file"] = "tests/data/proofs/%s.json" % p["id"]
    command = "pip " + " ".join(p["command"][2:]) if p.get("command") else "pip " + " ".join(
        proofs.pip_command("python", p["requirements"], python, arch, "REPORT")[3:])
    if p["status"] == "failed":
        row["source_builds"] = p.get("source_builds") or []
        row["build_needs"] = p.get("build_needs") or {}
        return row, {"command": command, "pip": p.get("pip"), "date": p.get("date"),
                     "output_tail": p.get("output_tail", "")}
    trimmed = []
    for item in p["report"].get("install", []):
        m = item["metadata"]
        trimmed.append({"name": m["name"], "version": m["version"], "requires_python": m.get("requires_python"),
                        "requires_dist": m.get("requires_dist") or [], "requested": item.get("requested", False),
                        "wheel": os.path.basename(((item.get("download_info") or {}).get("url") or ""))})
    row["installed"] = sorted("%s==%s" % (k, v) for k, v in p["installed"].items())
    doc = {"command": command, "pip": p.get("pip"), "date": p.get("date"), "python": python, "arch": arch,
           "install": sorted(trimmed, key=lambda x: x["name"].lower())}
    for k in ("native", "source_builds", "sdist_purity", "markers", "given_environment"):
        if p.get(k):
            doc[k] = p[k]
    return row, doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="concurrent pip processes (default 2)")
    ap.add_argument("--arch", default="x86_64,aarch64", help="platforms, comma-separated")
    ap.add_argument("--force", action="store_true", help="re-record proofs already in the index")
    ap.add_argument("--pip", default=sys.executable, help="interpreter whose pip resolves (default: this one)")
    ap.add_argument("--only", default=None, help="only these proof ids (comma-separated)")
    ap.add_argument("--python", default="", help="only sets for these CPython minors (comma-separated)")
    ap.add_argument("--no-native", action="store_true",
                    help="never prove natively (a set needing a pure-Python sdist stays unproven)")
    ap.add_argument("--list", action="store_true", help="list the sets and their status, record nothing")
    ap.add_argument("--limit", type=int, default=0, help="record at most this many sets")
    ap.add_argument("--first", default="", help="comma-separated label prefixes to record first "
                                                "(e.g. 0.5.0/none/py3.12/x86_64)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for one resolver run")
    ap.add_argument("--no-metadata-index", action="store_true",
                    help="let pip read the index directly (it downloads every wheel the index serves no PEP 658 "
                         "metadata for) instead of through preflight.proof_index")
    ap.add_argument("--page-ttl", type=float, default=3600.0, help="seconds a cached project page stays valid")
    a = ap.parse_args(argv)
    mx = load()
    with open(INDEX, encoding="utf-8") as fh:
        idx = json.load(fh)
    idx.setdefault("proofs", {})
    before = json.loads(json.dumps(idx["proofs"]))
    todo: Dict[str, Tuple[List[str], str, str, List[str]]] = {}
    sets = list(grid(mx, a.arch.split(","))) + [(sid, dict(kw, arch="x86_64")) for sid, kw in scenarios()]
    for label, kw in sets:
        kw = {k: v for k, v in kw.items() if v}
        try:
            r = resolve(mx, kw.pop("verl"), _options=False, **kw)
        except ResolveError:
            continue
        if not r.requirements or r.python != kw.get("python", r.python):
            continue  # no stack for this Python: resolve's own answer, nothing to prove
        if r.extra_index_urls:
            continue  # needs download.pytorch.org: unproven here
        pid = proofs.proof_id(r.requirements, r.python, (), r.arch)
        inside, _ = proofs.proof_requirements(r.requirements)
        todo.setdefault(pid, (inside, r.python or "", r.arch, []))[3].append(label)
    if a.only:
        for pid in a.only.split(","):  # a recorded set no grid cell names today: re-recorded from its own row
            row = idx["proofs"].get(pid)
            if pid not in todo and row:
                todo[pid] = (row["requirements"], row["python"], row.get("arch", "x86_64"), list(row.get("for") or []))
        todo = {k: v for k, v in todo.items() if k in a.only.split(",")}
    if a.python:
        todo = {k: v for k, v in todo.items() if v[1] in a.python.split(",")}
    if a.list:
        for pid, (reqs, py, arch, labels) in sorted(todo.items()):
            print(pid, py, arch, (idx["proofs"].get(pid) or {}).get("status", "-"), " ".join(reqs), "<-",
                  ",".join(labels[:3]))
        return 0
    os.makedirs(OUTDIR, exist_ok=True)
    rank = {"3.12": 0, "3.13": 1, "3.10": 2, "3.8": 3, "3.11": 4, "3.9": 5, "3.14": 6}  # the audit's Pythons first
    pending = [(pid, v) for pid, v in sorted(todo.items(), key=lambda kv: (rank.get(kv[1][1], 9), kv[1][2] != "aarch64"))
               if a.force or pid not in idx["proofs"] or stale(idx["proofs"][pid])]
    first = [f for f in a.first.split(",") if f]
    if first:
        pending.sort(key=lambda kv: min([i for i, f in enumerate(first) if any(lb.startswith(f) for lb in kv[1][3])]
                                        or [len(first)]))
    if a.limit:
        pending = pending[:a.limit]
    print("%d sets, %d to record" % (len(todo), len(pending)), flush=True)

    def one(item):
        pid, (reqs, py, arch, labels) = item
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if free < MIN_FREE:
            print("%s skipped: %.1f GB free in %s, below %d GB" % (pid, free / 1e9, tempfile.gettempdir(),
                                                                  MIN_FREE // 10**9), flush=True)
            return
        row, doc = record_one(a.pip, reqs, py, arch, a.timeout, not a.no_metadata_index, a.page_ttl, not a.no_native)
        row["for"] = labels[:8]
        with _LOCK:  # keep what is done: write after each set, merging what another recorder wrote
            if doc is not None:
                with open(os.path.join(OUTDIR, pid + ".json"), "w", encoding="utf-8") as fh:
                    json.dump(doc, fh, indent=1, sort_keys=True)
                    fh.write("\n")
            with open(INDEX, encoding="utf-8") as fh:
                cur = json.load(fh)
            cur.setdefault("proofs", {})[pid] = row
            cur["note"] = ("proofs of install lines: pip's resolver for the target CPython and Linux platform, "
                           "binary wheels only, PyPI (see preflight/proofs.py)")
            with open(INDEX + ".tmp", "w", encoding="utf-8") as fh:
                json.dump(cur, fh, indent=1, sort_keys=True)
                fh.write("\n")
            os.replace(INDEX + ".tmp", INDEX)
            idx["proofs"] = cur["proofs"]
            print("%s %s py%s %s %ss %s%s" % (pid, row["status"], py, arch, row.get("seconds", "-"), " ".join(reqs[:4]),
                                          (": " + (row.get("error") or row.get("reason") or "")[-160:])
                                          if row["status"] != "proven" else ""), flush=True)

    with ThreadPoolExecutor(max_workers=max(1, min(a.jobs, 2))) as ex:
        list(ex.map(one, pending))
    for line in proof_refresh.changes(before, idx["proofs"]):
        print("changed:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
