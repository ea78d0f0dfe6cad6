"""``preflight spec``: resolve the stack for this machine (or a described one) and write a fixed
environment spec: requirements.lock (every package pinned with its hashes) and environment.json."""

import argparse
import os

from ..report.render import print_safe
from .output import teller
from .stack import add_stack_options, dry_run, make_spec, say_no_stack

NAME = "spec"
HELP = "write requirements.lock (pinned, hashed) and environment.json for a verl release"
EPILOG = """examples:
  python3 preflight.pyz spec --verl 0.9.1 -o verl-spec            this machine's driver, GPU and Python
  python3 preflight.pyz spec --verl 0.9.1 --gpu H200 --driver 580.95.05 --python 3.12 -o h200-spec
  python3 preflight.pyz spec --verl 0.9.1 --backend none --torch 2.13.0 --torch-index none --python 3.11 -o cpu-spec

exit codes: 0 written, 1 no stack works (nothing written), 2 bad input or pip could not resolve
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``spec``'s options."""
    add_stack_options(p)
    p.add_argument("-o", "--output", metavar="DIR", default="verl-spec", help="output directory (default verl-spec)")


def download_size(lock) -> str:
    """The lock's total download as text (``2.41 GB``), or why it is unknown (pip's resolution
    report carries no sizes; uv's does)."""
    sizes = [p.size for p in lock.packages]
    if sizes and all(isinstance(s, int) for s in sizes):
        return "%.2f GB" % (sum(sizes) / 1e9)
    known = [s for s in sizes if isinstance(s, int)]
    return ("at least %.2f GB (%d of %d artifacts with a known size)" % (sum(known) / 1e9, len(known), len(sizes))
            if known else "unknown (pip's resolution report has no sizes; with uv on PATH the lock has them)")


def run(args: argparse.Namespace) -> int:
    """Write the spec; 0 written, 1 no stack works."""

    from ..paths import check_output_dir

    check_output_dir(args.output, "-o")
    say = teller()
    if args.dry_run:
        return dry_run(args, "lock the complete set and write requirements.lock, pylock.toml and "
                                  "environment.json into %s" % args.output)
    mx, res, spec, paths = make_spec(args, args.output, say)
    if spec is None:
        say_no_stack(say, res, args)
        return 1
    say("%d packages pinned with hashes (%s); download size: %s" % (
        len(spec.lock.packages), spec.lock.mode, download_size(spec.lock)))
    for p in spec.post_install:
        say("after installing the lock: %s" % p)
    local = [x.name for x in spec.lock.packages if (x.url or "").startswith("file:")]
    if local:
        say("note: %d package(s) resolved to files on this machine (%s%s: pip's find-links or a file:// index); "
            "pylock.toml names those files, so it installs only where they exist; requirements.lock pins "
            "them by version and hash only" % (
                len(local), ", ".join(local[:5]), ", ..." if len(local) > 5 else ""))
    for p in paths:
        print_safe(os.path.abspath(p))
    return 0
