#!/usr/bin/env python3
"""The packages.bytecode row on a real interpreter, its fix run as printed, and the row again.

Prints figures, asserts nothing: the row before, the first command of its fix and how long it
took, the row after, and how long ``import torch`` (or ``--module``) takes in a process that writes
no bytecode (as the checker's probes run) before and after.

Usage: python3 bench/bytecode_fix.py --python PY [--preflight "CMD"] [--module torch]
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def row(pf, python):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run(pf + ["check", "--stage", "python,packages", "--python", python, "--json", out, "-q"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as fh:
            return next(r for r in json.load(fh)["results"] if r["id"] == "packages.bytecode")


def import_time(python, module):
    t0 = time.monotonic()
    subprocess.run([python, "-c", "import %s" % module], env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--preflight", default="%s -I -S %s" % (sys.executable, os.path.join(ROOT, "dist", "preflight.pyz")))
    ap.add_argument("--module", default="torch")
    a = ap.parse_args()
    pf = shlex.split(a.preflight)
    before = row(pf, a.python)
    print("before: %s  %s" % (before["status"].upper(), before["message"]))
    print("        import %s without writing bytecode: %.1f s" % (a.module, import_time(a.python, a.module)))
    if before["status"] != "warn":
        return
    print("fix:    %s" % before["fix"])
    m = re.search(r"byte-compile them once[^:]*: (.+?)(?: \(a module written|; )", before["fix"])
    cmd = m.group(1)
    t0 = time.monotonic()
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print("ran:    %s\n        exit %d in %.1f s%s" % (cmd, p.returncode, time.monotonic() - t0,
                                                       "; " + p.stdout.strip().splitlines()[-1][:200]
                                                       if p.stdout.strip() else ""))
    after = row(pf, a.python)
    print("after:  %s  %s" % (after["status"].upper(), after["message"]))
    print("        import %s without writing bytecode: %.1f s" % (a.module, import_time(a.python, a.module)))


if __name__ == "__main__":
    main()
