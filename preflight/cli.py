"""Command line: ``preflight [check] [options]``, ``preflight matrix show|refresh``.

:func:`main` takes argv and returns the exit code; it is the only place where errors become
text and exit codes (0 ready, 1 not ready, 2 usage error or the checker's own failure).
"""

import argparse
import os
import sys
import time
from typing import List, Optional, Sequence

from . import __version__
from .report import EXIT_USAGE

__all__ = ["main", "build_parser", "UsageError"]

EPILOG_CHECK = """examples:
  python3 preflight.pyz                              check the interpreter running it
  python3 preflight.pyz check --python ~/venvs/verl/bin/python --json report.json
  python3 preflight.pyz check --verl 0.9.1 --stage host,python,packages
  python3 preflight.pyz check --skip nccl,vllm --timeout 60

stages, in order (each gated on the ones before): host, python, packages, imports, gpu, nccl, vllm
exit codes: 0 ready (warnings allowed), 1 not ready (a check failed), 2 usage error or checker failure
"""


class UsageError(Exception):
    """A bad command line or input; the message is printed as one line and the exit code is 2."""


def _stages_arg(text: str) -> List[str]:
    from .stages import STAGE_NAMES

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in STAGE_NAMES]
    if bad:
        raise argparse.ArgumentTypeError("unknown stage %s (stages: %s)" % (", ".join(bad), ", ".join(STAGE_NAMES)))
    return names


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number of seconds" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise UsageError("%s: %s (see '%s --help')" % (self.prog, message, self.prog))


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for every command (used by :func:`main` and the docs)."""
    p = _Parser(prog="preflight", description="Tells whether this machine can run verl, and why not.",
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG_CHECK)
    p.add_argument("--version", action="store_true", help="print the tool and matrix versions and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    c = sub.add_parser("check", help="run the staged checks (the default command)", epilog=EPILOG_CHECK,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--python", metavar="PATH", default=None,
                   help="interpreter to check (a venv's or conda env's python); default: the one running this")
    c.add_argument("--verl", metavar="VERSION", default=None,
                   help="verl release to check against when verl is not installed (default: the installed one, "
                        "else the newest in the matrix)")
    c.add_argument("--backend", choices=("vllm", "sglang"), default=None,
                   help="rollout backend to require (default: the installed one)")
    c.add_argument("--stage", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="only these stages (comma-separated, repeatable)")
    c.add_argument("--skip", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="leave out these stages")
    c.add_argument("--json", metavar="FILE", default=None, help="write the JSON report to FILE ('-' for stdout)")
    c.add_argument("--timeout", type=_positive, default=120.0, metavar="SECONDS",
                   help="limit for each subprocess check before its process group is killed (default 120)")
    c.add_argument("--nccl-world-size", type=int, default=None, metavar="N",
                   help="ranks for the nccl stage (default: every visible GPU)")
    c.add_argument("--nccl-backend", choices=("nccl", "gloo"), default="nccl",
                   help="collective backend of the nccl stage (gloo runs on CPU, for testing)")
    c.add_argument("--vllm-tp", type=int, default=1, metavar="N",
                   help="tensor_parallel_size of the vllm stage's generation (default 1)")
    c.add_argument("-v", "--verbose", action="store_true", help="show evidence under every row")

    m = sub.add_parser("matrix", help="show or refresh the compatibility matrix")
    msub = m.add_subparsers(dest="matrix_command", parser_class=_Parser)
    show = msub.add_parser("show", help="print matrix rows")
    show.add_argument("--verl", metavar="VERSION", default=None, help="only this verl release")
    ref = msub.add_parser("refresh", help="re-read package metadata through pip and rewrite matrices/metadata")
    ref.add_argument("--dir", default="matrices", help="the matrices/ directory to update (default ./matrices)")
    ref.add_argument("--package", action="append", default=None, help="only this package (repeatable)")
    ref.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    return p


def _normalise(argv: Sequence[str]) -> List[str]:
    argv = list(argv)
    commands = {"check", "matrix"}
    if not argv or (argv[0] not in commands and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "check")
    return argv


def _resolve_python(path: Optional[str]) -> str:
    if path is None:
        return sys.executable
    expanded = os.path.expanduser(path)
    if os.sep not in expanded:
        import shutil

        found = shutil.which(expanded)
        if found:
            return found
    if not os.path.exists(expanded):
        raise UsageError("--python %s: no such file; pass the path of a Python interpreter "
                         "(e.g. ~/venvs/verl/bin/python)" % path)
    if os.path.isdir(expanded):
        cand = os.path.join(expanded, "bin", "python")
        if os.path.exists(cand):
            return cand
        raise UsageError("--python %s is a directory without bin/python; pass the interpreter itself" % path)
    if not os.access(expanded, os.X_OK):
        raise UsageError("--python %s is not executable; pass the path of a Python interpreter" % path)
    return os.path.abspath(expanded)


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console

    from . import matrix as matrix_mod
    from .context import Context, Options
    from .report import Report, jsonreport
    from .report.console import LiveProgress, render
    from .runner import run
    from .stages import STAGE_NAMES

    python = _resolve_python(args.python)
    mx = matrix_mod.load()
    if args.verl and mx.verl(args.verl) is None:
        raise UsageError("--verl %s: not a verl release in the matrix (%s); known: %s" % (
            args.verl, mx.version, ", ".join(mx.verl_versions())))
    selected = [s for group in (args.stage or [list(STAGE_NAMES)]) for s in group]
    skipped = {s for group in (args.skip or []) for s in group}
    stages = [s for s in STAGE_NAMES if s in selected and s not in skipped]
    if not stages:
        raise UsageError("no stage left to run after --stage/--skip")
    to_stdout = args.json == "-"
    console = Console(stderr=to_stdout, highlight=False)
    opts = Options(python=python, verl=args.verl, timeout=args.timeout, nccl_world_size=args.nccl_world_size,
                   backend=args.backend, vllm_tp=args.vllm_tp, extra={"nccl_backend": args.nccl_backend})
    ctx = Context(opts, mx)
    t0 = time.time()
    with LiveProgress(console) as progress:
        results = run(ctx, stages, progress)
    info = ctx.target() or {}
    verl_v, how = ctx.verl_release()
    machine = {"host": ctx.host()}
    if "gpu" in stages or "nccl" in stages:
        machine["nvml"] = ctx.nvml()
    report = Report(results=results, stages=stages,
                    target={"python": python, "version": info.get("version_string"), "prefix": info.get("prefix"),
                            "executable": info.get("executable")},
                    verl={"version": verl_v, "chosen_by": how}, machine=machine,
                    tool_version=__version__, matrix_version=mx.version, started_at=t0,
                    duration_s=time.time() - t0)
    render(report, console, verbose=args.verbose)
    if args.json:
        if to_stdout:
            import json

            sys.stdout.write(json.dumps(jsonreport.to_dict(report), indent=2, default=str) + "\n")
        else:
            try:
                jsonreport.write(report, args.json)
            except OSError as exc:
                raise UsageError("--json %s: cannot write the report: %s" % (args.json, exc.strerror or exc))
    return report.exit_code


def cmd_matrix(args: argparse.Namespace) -> int:
    from . import matrix as matrix_mod

    if args.matrix_command == "refresh":
        from .matrix.refresh import PACKAGES, RefreshError, refresh

        if not os.path.isdir(args.dir):
            raise UsageError("--dir %s: no such directory; run from the repository root or pass --dir "
                             "path/to/matrices" % args.dir)
        pkgs = PACKAGES
        if args.package:
            unknown = [p for p in args.package if p not in PACKAGES]
            if unknown:
                raise UsageError("--package %s: not refreshed by this tool (choose from %s)" % (
                    ", ".join(unknown), ", ".join(sorted(PACKAGES))))
            pkgs = {p: PACKAGES[p] for p in args.package}
        try:
            diff, n = refresh(args.dir, pkgs, log=lambda s: print(s, file=sys.stderr, flush=True),
                              write=not args.dry_run)
        except RefreshError as exc:
            raise UsageError("matrix refresh: %s" % exc)
        sys.stdout.write(diff)
        print("%d releases read; %s" % (n, "no change" if not diff else "%d diff lines%s" % (
            diff.count("\n"), " (not written: --dry-run)" if args.dry_run else "")), file=sys.stderr)
        return 0
    mx = matrix_mod.load()
    from .matrix.show import show

    return show(mx, args.verl)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    from .matrix import MatrixError

    argv = _normalise(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.version:
            from . import matrix as matrix_mod

            print("verl-preflight %s (matrix %s)" % (__version__, matrix_mod.load().version))
            return 0
        if args.command == "matrix":
            if not args.matrix_command:
                raise UsageError("preflight matrix: choose 'show' or 'refresh'")
            return cmd_matrix(args)
        return cmd_check(args)
    except UsageError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return EXIT_USAGE
    except MatrixError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse --help
        return int(exc.code or 0)
    except Exception as exc:  # the checker's own failure: one line plus where to look
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)
        where = "%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno) if tb else "?"
        print("error: verl-preflight failed: %s: %s (at %s; please report it)" % (type(exc).__name__, exc, where),
              file=sys.stderr)
        return EXIT_USAGE
