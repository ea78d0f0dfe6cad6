#!/usr/bin/env python3
"""Re-record the platform-resolve proofs of the stacks ``resolve`` chooses (network: PyPI).

For every scenario in tests/data/scenarios.toml whose resolution works (and every extra stack
given with --verl/--python), runs pip's own resolver for the target interpreter and platform with
binary wheels only (see preflight/proofs.py for the exact command), and writes:

* tests/data/proofs/<id>.json: pip's report trimmed to name, version, requires_python and
  requires_dist of each resolved distribution, with the command, pip's version and the date;
* matrices/proofs.json: the index resolve reads (status, Python, tags, resolver, date, file,
  resolved name==version set).

Entries already recorded are kept (``--force`` re-records them); an interrupted run keeps what it
finished. pip's configuration (PIP_CONFIG_FILE, /etc/xdg/pip constraints) is ignored so the proof
is about the index, not this machine: the proof is PyPI's truth. Pass --pip to use another pip
(default: this interpreter's; pip >= 22.2 needed for --dry-run --report).

Usage: python3 tools/record_proofs.py [--jobs 3] [--force] [--pip PYTHON] [--only ID] [--list]
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight import proofs  # noqa: E402
from preflight.matrix import load  # noqa: E402
from preflight.resolve import resolve  # noqa: E402

INDEX = os.path.join(ROOT, "matrices", "proofs.json")
OUTDIR = os.path.join(ROOT, "tests", "data", "proofs")
_LOCK = threading.Lock()


def scenarios():
    """(id, kwargs for resolve) of every scenario in tests/data/scenarios.toml."""
    try:
        import tomllib as toml
    except ImportError:
        import tomli as toml
    with open(os.path.join(ROOT, "tests", "data", "scenarios.toml"), "rb") as fh:
        data = toml.load(fh)
    for s in data.get("scenario", []):
        yield s["id"], {k: s.get(k) for k in ("verl", "backend", "gpu", "cc", "driver", "python")}


def pip_command(pip_python, reqs, python, report, tmp, no_binary=()):
    """The pip dry-run command line for ``reqs`` on CPython ``python``."""
    if no_binary:
        interp = _venv_for(python)
        return [interp, "-m", "pip", "--disable-pip-version-check", "--isolated", "install", "--dry-run",
                "--ignore-installed", "--progress-bar", "off", "--report", report, "--only-binary=:all:",
                "--no-binary", ",".join(no_binary)] + list(reqs)
    abi = "cp" + python.replace(".", "")
    cmd = [pip_python, "-m", "pip", "--disable-pip-version-check", "--isolated", "install", "--dry-run",
           "--ignore-installed", "--progress-bar", "off", "--report", report, "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none"]
    for t in proofs.platform_tags():
        cmd += ["--platform", t]
    if pip_major(pip_python) < 24:
        cmd += ["--target", os.path.join(tmp, "t")]  # older pip refuses --platform without --target
    return cmd + list(reqs)


_PIPV = {}


def _sdist_only(name):
    """True when the index serves no wheel at all for project ``name`` (only sdists): such a
    dependency is a named source build. A project with wheels, just none for this Python or
    platform (numpy 1.x on 3.13), or a release gone from the index, is a failure instead."""
    import urllib.request

    req = urllib.request.Request("https://pypi.org/simple/%s/" % name.lower(),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        files = json.load(urllib.request.urlopen(req, timeout=30)).get("files", [])
    except Exception:
        return False
    return bool(files) and not any(f["filename"].endswith(".whl") for f in files)


def _venv_for(python):
    """A venv of CPython ``python`` (pyenv) with a current pip, cached next to the prover."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from envs import find_python

    venv = os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "prover-py%s" % python)
    py = os.path.join(venv, "bin", "python")
    with _LOCK:
        if not os.path.exists(py):
            subprocess.run([find_python(python), "-m", "venv", venv], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "--isolated", "-U", "pip"], check=True,
                           env=dict(os.environ, PIP_CONFIG_FILE=os.devnull))
    pip_major(py)
    return py


def pip_major(pip_python):
    if pip_python not in _PIPV:
        out = subprocess.run([pip_python, "-m", "pip", "--version"], stdout=subprocess.PIPE, universal_newlines=True).stdout
        _PIPV[pip_python] = out.split()[1] if out else "0"
    return int(_PIPV[pip_python].split(".")[0])


def prove(pip_python, pid, reqs, python, timeout, no_binary=()):
    """Run pip for one set; returns (index row, trimmed report or None). ``no_binary``: packages
    allowed as sdists (then pip runs under a real CPython ``python`` with this machine's tags)."""
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    for k in list(env):
        if k.startswith("PIP_") and k != "PIP_CONFIG_FILE":
            env.pop(k)
    date = datetime.date.today().isoformat()
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = pip_command(pip_python, reqs, python, report, tmp, no_binary)
        row = {"requirements": list(reqs), "python": python, "glibc": "%d.%d" % proofs.DEFAULT_GLIBC,
               "platform_tags": "%s .. %s (%d tags)" % (proofs.platform_tags()[0], proofs.platform_tags()[-1],
                                                       len(proofs.platform_tags())),
               "resolver": ("pip %s --dry-run --report --only-binary=:all:" % _PIPV[pip_python]) if not no_binary else
               ("pip --dry-run --report --only-binary=:all: --no-binary %s under CPython %s (this machine's "
                "tags, glibc 2.36)" % (",".join(no_binary), python)), "date": date,
               "file": "tests/data/proofs/%s.json" % pid}
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            row.update(status="not recorded", reason="pip did not finish within %d s" % timeout)
            return row, None
        if proc.returncode != 0 or not os.path.exists(report):
            lines = (proc.stdout + "\n" + proc.stderr).splitlines()
            why = []
            if any("The conflict is caused by" in l for l in lines):  # pip's own explanation
                start = [i for i, l in enumerate(lines) if "The conflict is caused by" in l][0]
                why = [l.strip() for l in lines[start:start + 12] if l.strip() and not l.startswith("To fix")]
            errs = [l for l in lines if l.startswith("ERROR")] or proc.stderr.strip().splitlines()
            text = " ".join(why + errs)[-1500:] or "pip exited %d" % proc.returncode
            builds = set(re.findall(r"No matching distribution found for ([A-Za-z0-9_.\-]+)", text))
            if "no matching distributions available for your environment" in "\n".join(lines):
                at = [i for i, l in enumerate(lines) if "no matching distributions available" in l][0]
                for l in lines[at + 1:at + 8]:
                    if l.startswith("    ") and re.match(r"^\s+[A-Za-z0-9_.\-]+\s*$", l):
                        builds.add(l.strip())
            builds = sorted(b for b in builds if not re.match(r"^(verl|torch|vllm|sglang)\b", b))
            sdist_only = [b for b in builds if _sdist_only(re.split(r"[<>=!~ ]", b)[0])]
            row.update(status="failed", error=text, source_builds=sdist_only, no_wheel=builds)
            builds = sdist_only
            if builds and not no_binary:
                # a dependency with only an sdist: a named source build. Prove the rest with wheels only
                # and those built from source, under a real interpreter of that Python (pip refuses
                # sdists in cross-platform mode), and say so in the proof.
                row2, doc2 = prove(pip_python, pid, reqs, python, timeout, no_binary=builds)
                if row2["status"] == "proven":
                    row2["source_builds"] = builds
                    row2["reason"] = ("%s ha%s no wheel for this platform (sdist only): a named source build; the "
                                      "rest resolved with wheels only" % (", ".join(builds), "s" if len(builds) == 1
                                                                          else "ve"))
                    return row2, doc2
            doc = {"command": cmd[1:], "returncode": proc.returncode, "output_tail": "\n".join(lines[-60:]),
                   "date": date}
            return row, doc
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
    installed = []
    trimmed = []
    for item in data.get("install", []):
        m = item["metadata"]
        installed.append("%s==%s" % (m["name"].lower(), m["version"]))
        trimmed.append({"name": m["name"], "version": m["version"], "requires_python": m.get("requires_python"),
                        "requires_dist": m.get("requires_dist") or [], "requested": item.get("requested", False),
                        "wheel": os.path.basename(((item.get("download_info") or {}).get("url") or ""))})
    row.update(status="proven", installed=sorted(installed))
    doc = {"command": [c for c in cmd[1:] if not c.startswith(tempfile.gettempdir())], "pip": _PIPV[pip_python],
           "date": date, "python": python, "install": sorted(trimmed, key=lambda x: x["name"].lower())}
    return row, doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--force", action="store_true", help="re-record proofs already in the index")
    ap.add_argument("--pip", default=sys.executable, help="interpreter whose pip resolves (default: this one)")
    ap.add_argument("--only", default=None, help="only this proof id")
    ap.add_argument("--list", action="store_true", help="list the sets and their status, record nothing")
    ap.add_argument("--retry-failed", action="store_true",
                    help="also re-record every failed entry of the index (with its stored requirements)")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args(argv)
    mx = load()
    idx = proofs.load_index() if os.path.exists(INDEX) else {"proofs": {}}
    idx.setdefault("proofs", {})
    todo = {}
    for sid, kw in scenarios():
        r = resolve(mx, kw.pop("verl"), _options=False, **{k: v for k, v in kw.items() if v})
        if not r.requirements or r.problems and not (r.proof or {}).get("status") == "failed":
            continue
        p = proofs.lookup(r.requirements, r.python, r.extra_index_urls)
        if p["status"] == "unproven":
            continue
        todo.setdefault(p["id"], (p["requirements"], r.python, []))[2].append(sid)
    if a.retry_failed:
        for pid, row in idx["proofs"].items():
            if row.get("status") == "failed" and pid not in todo:
                todo[pid] = (row["requirements"], row["python"], ["(index)"])
    if a.only:
        todo = {k: v for k, v in todo.items() if k == a.only}
    if a.list:
        for pid, (reqs, py, sids) in sorted(todo.items()):
            print(pid, py, (idx["proofs"].get(pid) or {}).get("status", "-"), " ".join(reqs), "<-", ",".join(sids))
        return 0
    os.makedirs(OUTDIR, exist_ok=True)
    pending = [(pid, v) for pid, v in sorted(todo.items()) if a.force or pid not in idx["proofs"]
               or idx["proofs"][pid].get("status") == "not recorded"
               or a.retry_failed and idx["proofs"][pid].get("status") == "failed"]
    print("%d sets, %d to record" % (len(todo), len(pending)), flush=True)
    pip_major(a.pip)

    done = set()

    def one(item):
        pid, (reqs, py, sids) = item
        row, doc = prove(a.pip, pid, reqs, py, a.timeout)
        with _LOCK:  # keep what is done: write after each set
            if doc is not None:
                with open(os.path.join(OUTDIR, pid + ".json"), "w", encoding="utf-8") as fh:
                    json.dump(doc, fh, indent=1, sort_keys=True)
                    fh.write("\n")
            if os.path.exists(INDEX):  # another recorder may have written meanwhile: merge, do not clobber
                with open(INDEX, encoding="utf-8") as fh:
                    idx["proofs"] = dict(json.load(fh).get("proofs", {}), **{k: v for k, v in idx["proofs"].items()
                                                                            if k in done})
            idx["proofs"][pid] = row
            done.add(pid)
            idx["note"] = proofs.__doc__.split("\n\n")[1].replace("\n", " ")
            with open(INDEX + ".tmp", "w", encoding="utf-8") as fh:
                json.dump(idx, fh, indent=1, sort_keys=True)
                fh.write("\n")
            os.replace(INDEX + ".tmp", INDEX)
            if os.environ.get("RECORD_PROOFS_ROWS"):  # the raw rows, for merging by hand after a clash
                with open(os.environ["RECORD_PROOFS_ROWS"], "a") as fh:
                    fh.write(json.dumps({pid: row}) + "\n")
            print("%s %s py%s %s%s" % (pid, row["status"], py, " ".join(reqs[:6]),
                                        (": " + row.get("error", "")[-200:]) if row["status"] == "failed" else ""),
                  flush=True)

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(one, pending))
    return 0


if __name__ == "__main__":
    sys.exit(main())
