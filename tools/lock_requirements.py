#!/usr/bin/env python3
"""Lock a few top-level requirements into a requirements.lock for another machine.

Usage: python3 tools/lock_requirements.py --python 3.12 [--cross] -o FILE REQ [REQ ...]

pip resolves the complete set (``preflight.outputs.lock.resolve_lock``) under a CPython
``--python`` of this machine when there is one; ``--cross`` resolves for manylinux x86_64 wheels
from whatever Python runs pip. Prefer the real interpreter: pip evaluates environment markers
with the interpreter it runs under, not ``--python-version``, so a cross-resolution misses
requirements such as ``six; python_version > "3.11"``. Used to make the vLLM 0.24.0 lock that
``preflight wheelhouse`` carries to the H200 test machine (bench/h200_run.sh).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from preflight.outputs.lock import render_lock, resolve_lock  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="target CPython minor, e.g. 3.12")
    ap.add_argument("--cross", action="store_true", help="resolve for manylinux x86_64 wheels, not this machine")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("requirements", nargs="+")
    a = ap.parse_args()
    res = resolve_lock(a.requirements, a.python, pip_python=None, cross=a.cross)
    text = render_lock(res, ["top-level pins: %s" % " ".join(a.requirements),
                             "complete set resolved by pip for Python %s (%s)" % (a.python, res.mode)])
    with open(a.output, "w", encoding="utf-8") as fh:
        fh.write(text)
    print("%d packages -> %s (%s)" % (len(res.packages), a.output, res.mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
