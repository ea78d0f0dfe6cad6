#!/usr/bin/env python3
"""Benchmark: prints figures, asserts nothing.

- zipapp size and build time;
- ``--version`` wall time (median of 5, under ``python3 -I -S``);
- a full ``check`` of a real verl 0.9.1 venv (the test suite's cached one; built if missing):
  wall time and the time of each stage (sum of its checks' durations).

Usage: python3 bench/bench.py [--python PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", help="interpreter to check (default: the cached verl[verl-core]==0.9.1 test venv)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    pyz = os.path.join(tmp, "preflight.pyz")
    t0 = time.monotonic()
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_pyz.py"), "-o", pyz], check=True,
                   stdout=subprocess.PIPE)
    print("build: %.2f s; pyz size: %d bytes (%.0f KiB)" % (time.monotonic() - t0, os.path.getsize(pyz),
                                                            os.path.getsize(pyz) / 1024))
    times = []
    for _ in range(5):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-I", "-S", pyz, "--version"], check=True, stdout=subprocess.PIPE)
        times.append(time.monotonic() - t0)
    print("--version: median %.3f s (min %.3f, max %.3f)" % (statistics.median(times), min(times), max(times)))
    python = args.python
    if not python:
        from envs import real_env

        python = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    out = os.path.join(tmp, "report.json")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", python, "--json", out],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    with open(out) as fh:
        data = json.load(fh)
    print("check --python %s: %.2f s wall, exit %d, %s" % (python, wall, proc.returncode, data["summary"]))
    per_stage = {}
    seen = set()
    for r in data["results"]:
        key = ".".join(r["id"].split(".")[:2])
        if key in seen:
            continue
        seen.add(key)
        per_stage[r["stage"]] = per_stage.get(r["stage"], 0.0) + r["duration_s"]
    for stage in data["stages"]:
        print("  stage %-9s %.2f s" % (stage, per_stage.get(stage, 0.0)))


if __name__ == "__main__":
    main()
