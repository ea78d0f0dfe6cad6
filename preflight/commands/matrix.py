"""``preflight matrix show|refresh``: print matrix rows; regenerate metadata through pip."""

import argparse
import os
import sys

from .argtypes import verl_release
from ..errors import UsageError
from ..report.render import print_safe

NAME = "matrix"
HELP = "show or refresh the compatibility matrix"
EPILOG = """examples:
  python3 preflight.pyz matrix show                         every verl release, with sources
  python3 preflight.pyz matrix show --verl 0.5.0
  python3 preflight.pyz matrix refresh --dir matrices --dry-run     what the index says now, as a diff
  python3 preflight.pyz matrix refresh --dir matrices --package vllm
"""


SHOW_EPILOG = """Each verl release: its Python range, rollout backends and vLLM gate, its requirements and every
extra's pins (torch, vLLM/SGLang, transformers, flash-attn...), its key classes, and the sources.
For torch and CUDA builds, drivers and known-bad pairs on one machine, use 'preflight resolve'.

examples:
  python3 preflight.pyz matrix show
  python3 preflight.pyz matrix show --verl 0.9.1
"""
REFRESH_EPILOG = """Reads each package's metadata (Requires-Dist, Requires-Python) from the index through pip and
rewrites matrices/metadata/*.json; needs network access.

examples:
  python3 preflight.pyz matrix refresh --dir matrices --dry-run       print the diff, write nothing
  python3 preflight.pyz matrix refresh --dir matrices --package vllm
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add the ``show`` and ``refresh`` sub-commands."""
    msub = p.add_subparsers(dest="matrix_command", parser_class=type(p))
    show = msub.add_parser("show", help="print matrix rows", epilog=SHOW_EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("--verl", metavar="VERSION", default=None, type=verl_release, help="only this verl release")
    ref = msub.add_parser("refresh", help="re-read package metadata through pip and rewrite matrices/metadata",
                          epilog=REFRESH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ref.add_argument("--dir", default="matrices", help="the matrices/ directory to update (default ./matrices)")
    ref.add_argument("--package", action="append", default=None, help="only this package (repeatable)")
    ref.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    ref.add_argument("--proofs", action="store_true", help="re-prove every recorded proof (matrices/proofs.json) "
                     "with pip's resolver against PyPI and print what changed (network; minutes a proof)")


def run(args: argparse.Namespace) -> int:
    """Run ``matrix show`` or ``matrix refresh``; return the exit code."""
    if not args.matrix_command:
        raise UsageError("preflight matrix: choose 'show' or 'refresh'")
    from .. import matrix as matrix_mod

    if args.matrix_command == "refresh":
        from ..matrix.refresh import PACKAGES, RefreshError, refresh

        if not os.path.isdir(args.dir):
            raise UsageError("--dir %s: no such directory; run from the repository root or pass --dir "
                             "path/to/matrices" % args.dir)
        if not args.dry_run:  # before the slow part (pip reading the index): can the result be written?
            from ..probes.host import unusable_dir

            why = unusable_dir(args.dir)
            ro = [f for f in sorted(os.listdir(args.dir)) if f.endswith(".toml")
                  and not os.access(os.path.join(args.dir, f), os.W_OK)]
            if why or ro:
                raise UsageError("--dir %s: %s; pass a directory you can write, or --dry-run to see the diff only" % (
                    args.dir, why or "cannot write %s" % ", ".join(ro)))
        if getattr(args, "proofs", False):
            from ..proof_refresh import reprove

            changed = reprove(args.dir, write=not args.dry_run, log=lambda s: print_safe(s, file=sys.stderr))
            for line in changed:
                print_safe(line)
            print_safe("proofs: %s" % ("no change" if not changed else "%d changed" % len(changed)), file=sys.stderr)
            return 0
        pkgs = PACKAGES
        if args.package:
            unknown = [p for p in args.package if p not in PACKAGES]
            if unknown:
                raise UsageError("--package %s: not refreshed by this tool (choose from %s)" % (
                    ", ".join(unknown), ", ".join(sorted(PACKAGES))))
            pkgs = {p: PACKAGES[p] for p in args.package}
        try:
            diff, n = refresh(args.dir, pkgs, log=lambda s: print_safe(s, file=sys.stderr),
                              write=not args.dry_run)
        except RefreshError as exc:
            if not exc.count and not exc.diff:
                raise UsageError("matrix refresh: %s" % exc)
            # a partial refresh: what was read is kept (and written unless --dry-run); pip's errors shown
            sys.stdout.write(exc.diff)
            print_safe("%d releases read; %s" % (exc.count, "%d diff lines" % exc.diff.count("\n") if exc.diff
                                                     else "no change"), file=sys.stderr)
            for f in exc.failures:
                print_safe("matrix refresh: FAILED %s" % f, file=sys.stderr)
            return 1
        sys.stdout.write(diff)
        print_safe("%d releases read; %s" % (n, "no change" if not diff else "%d diff lines%s" % (
            diff.count("\n"), " (not written: --dry-run)" if args.dry_run else "")), file=sys.stderr)
        return 0
    mx = matrix_mod.load()
    from ..report.matrix import show

    return show(mx, args.verl)
