"""``preflight install``: resolve and lock the stack (as ``spec``, into ``PREFIX.spec/``), create a
venv at --prefix, install the lock with hashes required, then run the checks against it.
Idempotent: a prefix that already holds the same lock is left alone. Only a prefix the tool made
is changed (see :mod:`preflight.outputs.install`); two installs at one prefix run one after the
other. An interrupted or failed install leaves the prefix marked incomplete, which ``check``
reports and the next install resumes."""

import argparse
import json
import os
from typing import List, Optional, Sequence

from ..errors import UsageError
from ..paths import check_output_dir, read_text
from ..redact import strip_userinfo
from .argtypes import Parser, refuse_empty
from .output import teller
from .stack import add_stack_options, make_spec, resolve_stack, say_no_stack

NAME = "install"
HELP = "create a venv with the resolved, locked stack and check it"
EPILOG = """examples:
  python3 preflight.pyz install --verl 0.9.1 --prefix ~/venvs/verl
  python3 preflight.pyz install --lock verl-spec/requirements.lock --python 3.12 --prefix /opt/verl
  python3 preflight.pyz install --verl 0.9.1 --prefix /opt/verl -- --stage python,packages,imports
  python3 preflight.pyz install --wheelhouse wh.parts --prefix /opt/verl --system-site-packages   (offline)

options after '--' go to the checks run at the end ('check' options).
exit codes: 0 installed and ready, 1 installed but a check failed, 2 bad input or the install failed
"""



#: The largest requirements.lock read (a whole verl stack with hashes is about 200 KB).
LOCK_MAX_BYTES = 16 * 1024 * 1024

def register(p: argparse.ArgumentParser) -> None:
    """Add ``install``'s options."""
    add_stack_options(p)
    p.add_argument("--prefix", metavar="DIR", required=True, help="the virtual environment to create or reuse (one verl-preflight made; the spec goes to DIR.spec/)")
    p.add_argument("--lock", metavar="FILE", default=None,
                   help="install this requirements.lock instead of resolving (needs --python)")
    p.add_argument("--wheelhouse", metavar="DIR",
                   help="install offline from a 'preflight wheelhouse' directory or its parts (reassembled and "
                        "verified first; no index is used)")
    p.add_argument("--system-site-packages", action="store_true",
                   help="the venv sees the base interpreter's packages (e.g. a node's preinstalled torch)")
    p.add_argument("--uv", action="store_true", default=None, help="require uv (default: uv when in $UV or on PATH, else pip)")
    p.add_argument("--no-check", action="store_true", help="install only")
    p.add_argument("check_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _python_of(prefix: str) -> str:
    """X.Y of the venv at ``prefix`` (from pyvenv.cfg's version line)."""
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return ".".join(value.strip().split(".")[:2])
    except OSError:
        pass
    return ""


def satisfied_lock(args: argparse.Namespace, prefix: str, spec_dir: str):
    """The lock path when ``prefix`` is a complete install of the lock ``spec_dir`` holds and that
    lock was made for the same top-level pins, indexes and Python as the stack resolved now
    (seconds: no pip); else None. The installed marker records the lock's sha256; the lock's header
    its top-level pins; the venv's pyvenv.cfg its Python."""

    from ..outputs.install import INCOMPLETE, INSTALLED, lock_digest
    from ..outputs.spec import top_level

    lock = os.path.join(spec_dir, "requirements.lock")
    marker = os.path.join(prefix, INSTALLED)
    if not (os.path.isfile(lock) and os.path.isfile(marker)) or os.path.exists(os.path.join(prefix, INCOMPLETE)):
        return None
    try:
        with open(lock, encoding="utf-8") as fh:
            text = fh.read()
        with open(marker, encoding="utf-8") as fh:
            recorded = json.load(fh).get("lock_sha256")
    except (OSError, ValueError):
        return None
    if recorded != lock_digest(text):
        return None
    mx, res, _, opts = resolve_stack(args)
    if not res.ok:
        return None
    reqs, extra, _ = top_level(mx, res, opts)
    lines = text.splitlines()
    indexes = [l for l in lines if l.startswith("--extra-index-url ")]
    same = ("# top-level pins: %s" % " ".join(reqs) in lines and _python_of(prefix) == res.python
            and indexes == ["--extra-index-url %s" % strip_userinfo(u) for u in extra])
    return lock if same else None


def run(args: argparse.Namespace) -> int:
    """Install, then check; see the module docstring for exit codes."""
    from ..outputs.install import install
    from ..outputs.lock import find_interpreter

    say = teller()
    prefix = os.path.abspath(os.path.expanduser(args.prefix))
    from ..outputs.install import check_prefix

    check_prefix(prefix)  # ownership first: nothing is ever run from a prefix another user controls
    check_output_dir(prefix, "--prefix")

    if args.lock:  # read before anything is made: a lock that is not text, or pins nothing, is a usage error
        from ..atomic import run_problem
        from ..outputs.lock import parse_lock
        from ..outputs.lockcheck import check_lock

        fix = "run 'preflight spec -o DIR' and pass DIR/requirements.lock"
        text = read_text(args.lock, LOCK_MAX_BYTES, "--lock", fix)
        theirs = run_problem(args.lock)
        if theirs:  # what it pins (and from where) runs as this user: another user must not choose it
            raise UsageError("--lock %s: another user can change it (%s); review it and copy it to a file only you "
                             "can write, or %s" % (args.lock, theirs, fix))
        check_lock(text, args.lock)
        if not parse_lock(text):
            raise UsageError("--lock %s: no pinned requirement (name==version) in it; %s" % (args.lock, fix))
    pip_args = []
    if args.wheelhouse:
        from ..outputs.wheelhouse import SERVED_LOCK, find_links, open_wheelhouse

        if args.lock:
            raise UsageError("--wheelhouse brings its own lock; leave --lock out")
        wh_dir, manifest = open_wheelhouse(args.wheelhouse, say)
        args.lock = os.path.join(wh_dir, manifest.get("served_lock") or SERVED_LOCK)
        if args.python and args.python != manifest["python"]:
            raise UsageError("--python %s but the wheelhouse holds wheels for CPython %s; pass --python %s" % (
                args.python, manifest["python"], manifest["python"]))
        args.python = manifest["python"]
        pip_args = find_links(wh_dir, manifest)
        left = manifest.get("omitted") or []
        if left:
            say("note: %d pin(s) of the lock are not in the wheelhouse, left out on purpose (reasons in %s): %s" % (
                len(left), os.path.join(wh_dir, "wheelhouse.json"), ", ".join(
                    "%s==%s" % (o["name"], o["version"]) for o in left)))
    if args.dry_run and not args.lock:
        from .stack import dry_run

        return dry_run(args, "lock it into %s.spec, create the venv %s and install the lock with hashes "
                                  "required, then check it" % (prefix.rstrip("/"), prefix))
    if args.lock:
        if not args.python:
            raise UsageError("--lock needs --python X.Y (the Python the lock was resolved for)")
        lock_path, python = args.lock, args.python
        if args.dry_run:
            from ..outputs.lock import parse_lock as _parse
            from ..report.render import print_safe

            n = len(_parse(read_text(lock_path, LOCK_MAX_BYTES, "--lock", "pass the requirements.lock 'spec' wrote")))
            print_safe("dry run: would create the venv %s with Python %s and install the %d pins of %s with hashes "
                "required%s (nothing was changed)" % (prefix, python, n, lock_path,
                                                     ", then check it" if not args.no_check else ""))
            return 0
        creds: List[str] = []
    else:
        spec_dir = prefix.rstrip("/") + ".spec"
        done = satisfied_lock(args, prefix, spec_dir)
        if done is not None:  # the prefix already holds the lock of this very stack: no pip resolution
            say("%s already holds the lock of this stack (%s): nothing to resolve or install" % (prefix, done))
            mx = res = spec = None
            paths = [done]
        else:
            check_output_dir(spec_dir, "--prefix")
            mx, res, spec, paths = make_spec(args, spec_dir, say, option="--prefix (its spec directory)")
        creds = []
        if done is not None:
            lock_path, python = done, args.python or _python_of(prefix)
        elif spec is None:
            say_no_stack(say, res, args)
            raise UsageError("nothing installed: no stack works for verl %s on this machine (see "
                             "'preflight resolve --verl %s')" % (res.verl, res.verl))
        else:
            lock_path, python = paths[0], res.python
            creds = spec.index_credentials
            for p in spec.post_install:
                say("note: after the lock, run in the prefix: %s" % p)
    base = find_interpreter(python)
    if base is None:
        raise UsageError("no Python %s on this machine to create the venv with; install it (e.g. 'uv python "
                         "install %s', deadsnakes, or conda) and run again" % (python, python))
    from ..atomic import run_problem

    theirs = run_problem(base)
    if theirs:  # the venv is made by it: its code runs now, as this user
        say("warning: the base Python %s is not only yours and root's (%s): another user can change what runs "
            "here; install a Python only you and root can write, or pass its path with --python" % (base, theirs))
    result = install(lock_path, prefix, base, say=say, use_uv=args.uv, pip_args=pip_args,
                     system_site_packages=args.system_site_packages, index_urls=creds)
    say("%s: %s with %s (%s)" % (prefix, "installed" if result.changed else "already up to date, nothing changed",
                                 result.tool, result.python))
    if args.no_check:
        return 0
    return run_checks(result.python, args.check_args, args.backend)


def run_checks(python: str, check_args: Optional[Sequence[str]], backend: Optional[str]) -> int:
    """Run ``preflight check`` against the installed ``python`` with the options given after
    ``--`` (``check_args``; ``--backend none`` added when the install had no backend) through
    the check command's own parser and run (the runner), not the whole command line; returns
    its exit code. Raises UsageError for a bad check option."""
    from . import check

    extra = [a for a in (check_args or []) if a != "--"]
    if backend == "none" and "--backend" not in extra:
        extra = ["--backend", "none"] + extra
    argv = ["--python", python] + extra
    parser = Parser(prog="preflight check", description=check.HELP, epilog=check.EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    check.register(parser)
    parsed = parser.parse_args(argv)
    refuse_empty(parser, parsed, argv)
    return check.run(parsed)
