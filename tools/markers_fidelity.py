#!/usr/bin/env python3
"""Is pip's resolver given a target's marker environment (preflight/target/pip_markers.py) the
resolver run natively on that target? The independent truth is the native run: for each CPython
minor this machine has (pyenv's 3.9 ... 3.13, x86_64), the same install line is resolved (network:
PyPI, through preflight.proof_index's cache) three ways:

* natively, pip 26 under that CPython (tools/record_proofs.py's venv);
* given: pip 26 under the --pip interpreter (CPython 3.11) with the target's marker environment;
* plain: the same pip and command without it (what every proof recorded before did).

It prints, per Python, the three verdicts and installed-set sizes, whether given == native
(name==version, every one), and what plain got wrong. ``--fixture DIR`` also writes, for each
Python, the metadata pip's reports named (name, version, Requires-Python, Requires-Dist,
Provides-Extra, the wheel file name) of the union of the three sets, the recorded index pages the
offline test (tests/resolve/test_marker_env.py) serves on loopback.

Usage: nice -n 10 python3 tools/markers_fidelity.py [--pip PYTHON] [--python 3.9,3.10,...]
           [--stack verl==0.4.0/vllm] [--fixture DIR] [--timeout S]
"""

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))

from preflight import proofs  # noqa: E402
from preflight.matrix import load  # noqa: E402
from preflight.resolve import resolve  # noqa: E402


def _set(p: Dict[str, Any]) -> List[str]:
    return sorted("%s==%s" % kv for kv in (p.get("installed") or {}).items())


def _dists(p: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    out = {}
    for item in (p.get("report") or {}).get("install", []):
        m = item["metadata"]
        url = (item.get("download_info") or {}).get("url") or ""
        out["%s==%s" % (m["name"].lower(), m["version"])] = {
            "name": m["name"], "version": m["version"], "requires_python": m.get("requires_python"),
            "requires_dist": m.get("requires_dist") or [], "provides_extra": m.get("provides_extra") or [],
            "wheel": url.rsplit("/", 1)[-1]}
    return out


def main(argv: Any = None) -> int:
    import record_proofs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pip", default=sys.executable, help="interpreter whose pip 26 runs the given and plain resolves")
    ap.add_argument("--python", default="3.9,3.10,3.11,3.12,3.13")
    ap.add_argument("--stack", default="0.4.0/vllm", help="verl release/backend whose install line is resolved")
    ap.add_argument("--fixture", default="", help="write the union of the reports' metadata here, one file a Python")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args(argv)
    mx = load()
    verl, backend = a.stack.split("/")
    for py in a.python.split(","):
        r = resolve(mx, verl, backend, python=py, _options=False)
        if not r.requirements or r.python != py:
            print("py%s: no stack (%s)" % (py, (r.problems or ["?"])[0][:120]))
            continue
        native = record_proofs.native_python(a.pip, py, "x86_64")
        if not native:
            print("py%s: no native CPython %s with pip >= 26 here" % (py, py))
            continue
        runs = {}
        for how, kw in (("native", {"pip_python": native, "give_markers": False}),
                        ("given", {"pip_python": a.pip, "full_version": _full(native)}),
                        ("plain", {"pip_python": a.pip, "give_markers": False})):
            t0 = time.monotonic()
            p = proofs.prove_live(r.requirements, py, "x86_64", timeout=a.timeout, native_python=None, **kw)
            p["wall"] = round(time.monotonic() - t0, 1)
            runs[how] = p
        sets = {k: _set(p) for k, p in runs.items()}
        status = {k: p.get("recorded_status") or p["status"] for k, p in runs.items()}
        same = sets["given"] == sets["native"] and status["given"] == status["native"]
        print("py%s %s/%s: native %s %d dists (%s, %ss) | given %s %d dists (%ss, markers %s) | plain %s %d dists | "
              "given == native: %s" % (py, verl, backend, status["native"], len(sets["native"]),
                                       runs["native"].get("markers"), runs["native"]["wall"], status["given"],
                                       len(sets["given"]), runs["given"]["wall"], runs["given"].get("markers"),
                                       status["plain"], len(sets["plain"]), same), flush=True)
        if not same:
            print("   given - native: %s\n   native - given: %s" % (sorted(set(sets["given"]) - set(sets["native"])),
                                                                    sorted(set(sets["native"]) - set(sets["given"]))))
        plain_wrong = sorted(set(sets["plain"]) ^ set(sets["native"]))
        print("   plain differs from native in %d: %s" % (len(plain_wrong), " ".join(plain_wrong[:12]) or
                                                          (runs["plain"].get("error") or "")[:200]))
        if a.fixture:
            dists: Dict[str, Any] = {}
            for p in runs.values():
                dists.update(_dists(p))
            os.makedirs(a.fixture, exist_ok=True)
            doc = {"python": py, "full_version": _full(native), "stack": a.stack, "requirements": r.requirements,
                   "native": sets["native"], "given": sets["given"], "plain": sets["plain"],
                   "status": status, "pip": {k: p.get("pip") for k, p in runs.items()},
                   "date": runs["native"].get("date"), "dists": [dists[k] for k in sorted(dists)]}
            path = os.path.join(a.fixture, "%s-%s-py%s.json" % (verl, backend, py))
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=0, sort_keys=True)
                fh.write("\n")
            print("   wrote %s (%d dists)" % (path, len(dists)))
    return 0


def _full(py: str) -> str:
    import subprocess

    return subprocess.run([py, "-c", "import platform; print(platform.python_version())"], stdout=subprocess.PIPE,
                          universal_newlines=True, timeout=60).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
