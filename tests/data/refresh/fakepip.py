"""Stands in for ``python -m pip`` in tests/matrix/test_matrix_refresh.py: answers ``index versions``
and ``install --dry-run --report FILE REQ`` from the recorded files next to it, like pip would
on the machine they were recorded on (README.md). Logs each argv to $FAKEPIP_LOG."""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    if os.environ.get("FAKEPIP_LOG"):
        with open(os.environ["FAKEPIP_LOG"], "a") as fh:
            fh.write(json.dumps(argv) + "\n")
    args = argv[argv.index("pip") + 1:] if "pip" in argv else argv
    if "index" in args:
        path = os.path.join(HERE, "index-%s.txt" % args[-1])
        if not os.path.exists(path):
            sys.stderr.write("ERROR: No matching distribution found for %s\n" % args[-1])
            return 1
        sys.stdout.write(open(path).read())
        return 0
    if "install" in args and "--report" in args:
        report = args[args.index("--report") + 1]
        req = args[-1]
        if "===" in req:
            name, version = req.split("===")
            path = os.path.join(HERE, "report-%s-%s.json" % (name, version))
        else:
            name, version = req.split("==")
            path = os.path.join(HERE, "report-%s-%s-double-equals.json" % (name, version))
            if not os.path.exists(path):
                path = os.path.join(HERE, "report-%s-%s.json" % (name, version))
        if not os.path.exists(path):
            sys.stderr.write("ERROR: Could not find a version that satisfies the requirement %s\n"
                             "ERROR: No matching distribution found for %s\n" % (req, req))
            return 1
        shutil.copy(path, report)
        return 0
    sys.stderr.write("ERROR: fakepip does not know %r\n" % (args,))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
