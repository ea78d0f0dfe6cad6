"""``preflight wheelhouse``: every wheel of a lock for an air-gapped machine, verified, optionally
split into parts for a size-limited transport; ``wheelhouse verify DIR`` checks (and reassembles)
one; ``wheelhouse --check DIR --python PATH`` says whether it is complete for an interpreter.
See :mod:`preflight.outputs.wheelhouse`."""

import argparse
import json
import os
import sys
from typing import Callable

from ..errors import UsageError
from ..paths import check_output_dir
from ..report.render import print_safe
from .output import teller

NAME = "wheelhouse"
HELP = "download and verify every wheel of a lock for an offline machine (split for transport)"
EPILOG = """examples:
  python3 preflight.pyz wheelhouse --lock verl-spec/requirements.lock --python 3.12 -o wh --split 64MiB
  python3 preflight.pyz wheelhouse --lock vllm.lock --python 3.12 -o wh --omit 'torch*=the node has torch' \\
      --omit 'nvidia-*=CUDA wheels of the torch on the node' --exclude-installed pip-list.json
  python3 preflight.pyz wheelhouse verify wh.parts          (reassembles parts, checks every wheel's sha256)
  python3 preflight.pyz wheelhouse --check wh --python /opt/verl/bin/python
  then, on the offline machine: python3 preflight.pyz install --wheelhouse wh.parts --python 3.12 --prefix /opt/verl

exit codes: 0 written / verified / complete; 1 --check: incomplete; 2 bad input, a download or hash failure
"""


def _omit(text: str):
    name, _, reason = text.partition("=")
    if not name.strip():
        raise argparse.ArgumentTypeError("give NAME or NAME=REASON (NAME may be a glob such as 'nvidia-*')")
    return name.strip(), reason.strip() or "left out with --omit"


def register(p: argparse.ArgumentParser) -> None:
    """Add ``wheelhouse``'s options."""
    p.add_argument("action", nargs="?", choices=("verify",), help="verify DIR: check (and reassemble) a wheelhouse")
    p.add_argument("dir", nargs="?", metavar="DIR", help="the wheelhouse (or parts) directory for verify")
    p.add_argument("--lock", metavar="FILE", help="requirements.lock or pylock.toml to serve")
    p.add_argument("-o", "--output", metavar="DIR", help="wheelhouse directory to write")
    p.add_argument("--python", metavar="X.Y|PATH",
                   help="target CPython minor (build, default 3.12), or the interpreter to check (--check)")
    p.add_argument("--platform", action="append", metavar="TAG",
                   help="platform tag the target accepts (repeat; default manylinux glibc 2.17..2.39 x86_64)")
    p.add_argument("--split", metavar="SIZE", help="also write parts of at most SIZE (e.g. 64MiB) to --parts-dir")
    p.add_argument("--parts-dir", metavar="DIR", help="where the parts go (default: DIR.parts)")
    p.add_argument("--omit", action="append", type=_omit, default=[], metavar="NAME[=REASON]",
                   help="leave pins matching NAME (a glob) out; the reason goes into the manifest (repeat)")
    p.add_argument("--exclude-installed", metavar="PYTHON|FILE",
                   help="leave out pins the target already has at that version: its interpreter, or a 'pip list "
                        "--format=json' / 'pip freeze' file from it")
    p.add_argument("--pyz", metavar="FILE", help="the checker zipapp to put beside the wheels (default: this one)")
    p.add_argument("--force", action="store_true", help="write into a non-empty -o/--parts-dir that is not a wheelhouse")
    p.add_argument("--check", metavar="DIR", help="is the wheelhouse DIR complete for --python PATH?")
    p.add_argument("--json", metavar="FILE", help="--check: also write the answer as JSON ('-' for stdout)")


def run(args: argparse.Namespace) -> int:
    """Build, verify or check a wheelhouse; see EPILOG for exit codes."""

    say = teller()
    if args.action == "verify":
        return _verify(args, say)
    if args.check:
        return _check(args, say)
    return _build(args, say)


def _verify(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """``wheelhouse verify DIR``: reassemble (parts) and check every wheel; 0, or a UsageError."""
    from ..outputs import wheelhouse as wh

    if not args.dir:
        raise UsageError("wheelhouse verify needs DIR: the wheelhouse or parts directory")
    d, m = wh.open_wheelhouse(args.dir, say, "wheelhouse verify")
    print_safe("%s: %d wheels for CPython %s verified (%d bytes); %d left out on purpose" % (
        d, len(m["wheels"]), m["python"], m.get("total_bytes", 0), len(m.get("omitted", []))))
    return 0


def _check(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """``wheelhouse --check DIR --python PATH``: 0 complete for that interpreter, 1 not."""
    from ..outputs import wheelhouse as wh

    if not args.python:
        raise UsageError("--check needs --python PATH: the interpreter to install into (e.g. /opt/verl/bin/python)")
    if not os.path.exists(args.python):
        raise UsageError("--python %s: no such interpreter; give the path of the Python to install into "
                         "(e.g. /opt/verl/bin/python)" % args.python)
    if os.path.isdir(args.python) or not os.access(args.python, os.X_OK):
        raise UsageError("--python %s: not an executable file; give the path of the Python to install into "
                         "(e.g. /opt/verl/bin/python)" % args.python)
    if args.json and args.json != "-":
        from ..paths import check_output_file

        check_output_file(args.json, "--json")  # before pip runs
    ans = wh.check_complete(args.check, args.python, say)
    if args.json:
        text = json.dumps(ans, indent=1, sort_keys=True) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            from ..atomic import write_atomic

            write_atomic(args.json, text, "--json")
    if not ans["python_matches"]:
        say("note: the wheelhouse is for CPython %s, %s is %s" % (ans["wheelhouse_python"], args.python,
                                                                   ans["python_version"]))
    if ans["complete"]:
        print_safe("complete: pip resolves every pin of %s for %s offline (%d to install, the rest already there)" % (
            ans["wheelhouse"], args.python, len(ans["would_install"])))
        for row in ans["missing"]:  # pip is the verdict; the metadata walk disagreeing is worth seeing
            print_safe("  note: metadata lists %s as unmet (required by %s)" % (row["name"], row["required_by"][0]))
        return 0
    print_safe("incomplete for %s: pip says: %s" % (args.python, ans["pip_error"]))
    for row in ans["missing"]:
        print_safe("  missing %s%s, required by %s%s" % (
            row["name"], " (%s there does not fit)" % row["have"] if row["have"] else "",
            "; ".join(row["required_by"][:3]), "; left out on purpose: %s" % row["omitted"]
            if row.get("omitted") else ""))
    return 1


def _build(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """``wheelhouse --lock FILE -o DIR [--split SIZE]``: build (and split) it; 0, or a UsageError."""
    from ..outputs import wheelhouse as wh
    from ..outputs.owned import check_dir_is_ours

    if not args.lock or not args.output:
        raise UsageError("wheelhouse needs --lock FILE and -o DIR (or 'verify DIR', or '--check DIR --python PATH')")
    check_output_dir(args.output, "-o")
    python = args.python or "3.12"
    if not all(x.isdigit() for x in python.split(".")) or python.count(".") != 1:
        raise UsageError("--python %s: give the target's CPython minor, e.g. 3.12" % python)
    size = wh.parse_size(args.split) if args.split else None
    parts_dir = args.parts_dir or (args.output.rstrip("/") + ".parts")
    if size:
        check_output_dir(parts_dir, "--parts-dir")
        if os.path.realpath(parts_dir) == os.path.realpath(args.output):
            raise UsageError("--parts-dir %s is the wheelhouse directory -o %s; give the parts their own directory "
                             "(default: %s.parts)" % (args.parts_dir, args.output, args.output.rstrip("/")))
    check_dir_is_ours(args.output, "-o", wh.MANIFEST, args.force)
    if size:
        check_dir_is_ours(parts_dir, "--parts-dir", wh.PARTS_MANIFEST, args.force)
    if args.pyz:
        wh.check_pyz(args.pyz)
    m = wh.build(args.lock, args.output, python, args.platform or wh.DEFAULT_PLATFORMS, args.omit,
                 args.exclude_installed, args.pyz, say=say)
    print_safe("%s: %d wheels, %d bytes, for CPython %s; %d pins left out%s" % (
        os.path.abspath(args.output), len(m["wheels"]), m["total_bytes"], python, len(m["omitted"]),
        "" if m.get("pyz") else " (no preflight.pyz copied: build it with tools/build_pyz.py and pass --pyz)"))
    for o in m["omitted"]:
        print_safe("  left out %s==%s: %s" % (o["name"], o["version"], o["reason"]))
    if size:
        doc = wh.split(args.output, parts_dir, size, say)
        print_safe("%s: %d parts of at most %d bytes (%s) + %s" % (os.path.abspath(parts_dir), len(doc["parts"]), size,
                                                             args.split, wh.PARTS_MANIFEST))
    return 0
