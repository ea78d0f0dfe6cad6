"""``preflight image``: a Dockerfile for the resolved stack (base image whose CUDA runs on this
host's driver, the right Python, the lock installed with hashes, the checker run at build time
for the stages that need no GPU and at start for the GPU ones), with --build to run a builder."""

import argparse
import copy
import os
import shutil
import subprocess
import sys

from ..errors import UsageError
from ..shell import command, quote
from ..paths import check_output_dir
from ..probes import child
from ..redact import redact_text
from ..report.render import print_safe
from .output import teller
from .stack import add_stack_options, make_spec, resolve_stack, say_no_stack

NAME = "image"
HELP = "write a Dockerfile (and lock) for the resolved stack; --build runs docker/podman/buildah"
EPILOG = """examples:
  python3 preflight.pyz image --verl 0.9.1 -o verl-image
  python3 preflight.pyz image --verl 0.9.1 --gpu H200 --driver 580.95.05 --python 3.12 -o verl-image --build

exit codes: 0 written (and built, with --build and a working builder), 1 no stack works,
            2 bad input, or the build failed
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``image``'s options."""
    add_stack_options(p)
    p.add_argument("-o", "--output", metavar="DIR", default="verl-image", help="build context directory")
    p.add_argument("--tag", default=None, help="image tag for --build (default verl:<version>)")
    p.add_argument("--build", action="store_true", help="build it with docker, podman or buildah when one works")


def _checker_path() -> str:
    """The zipapp this runs from, or None when running from a source tree."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isfile(root) else ""


def find_builder():
    """(name, argv prefix) of the first container builder whose engine answers, or (None, reason)."""
    tried = []
    for name, probe, cmd in (("docker", ["docker", "info"], ["docker", "build"]),
                             ("podman", ["podman", "info"], ["podman", "build"]),
                             ("buildah", ["buildah", "version"], ["buildah", "bud"])):
        if not shutil.which(name):
            continue
        try:
            ok = child.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return name, cmd
        tried.append("%s is installed but its engine does not answer ('%s' failed)" % (name, " ".join(probe)))
    return None, "; ".join(tried) or "no docker, podman or buildah on PATH"


def prefer_base_python(args: argparse.Namespace, say) -> None:
    """Without --python: use the base image's own Python (its distribution's, e.g. 3.12 on Ubuntu
    24.04) when the stack runs on it, rather than adding a third-party archive for another one.
    Sets ``args.python``; leaves it unset when the stack needs another Python."""
    if args.python is not None:
        return

    from ..outputs.dockerfile import base_image_for

    mx, res, _, _ = resolve_stack(args)
    if not res.ok:
        return
    variant = "cpu" if args.torch_index == "none" and (args.torch or "").endswith("cpu") else res.variant
    try:
        own = base_image_for(mx, variant or "cpu").get("python")
    except UsageError:
        return
    if not own or own == res.python:
        return
    trial = copy.copy(args)
    trial.python = own
    _, alt, _, _ = resolve_stack(trial)
    if alt.ok:
        args.python = own
        say("Python %s: the base image's own (the stack runs on it; %s was only a preference)" % (own, res.python))


def build_line(tag: str, out: str, secret: bool) -> str:
    """The ``docker build`` command printed for the context ``out`` and image ``tag``, every user
    value shell-quoted (:func:`preflight.shell.command`); with ``secret``, the ``--secret`` of the
    index's ~/.netrc, whose ``$HOME`` is the tool's own text, left for the user's shell."""
    return "docker build%s %s" % (' --secret "id=netrc,src=$HOME/.netrc"' if secret else "", command(["-t", tag, out]))


def run(args: argparse.Namespace) -> int:
    """Write the build context; with --build, build it or print the exact command."""
    from .. import __version__
    from ..outputs.dockerfile import ImageSpec, base_image_for, render_dockerfile


    say = teller()
    out = args.output

    check_output_dir(out, "-o")
    prefer_base_python(args, say)
    if args.dry_run:
        from .stack import dry_run

        return dry_run(args, "lock it and write a Dockerfile, the locks and the checker into %s%s" % (
            out, ", then build it" if args.build else ""))
    mx, res, spec, paths = make_spec(args, out, say, more_files=("Dockerfile", "preflight.pyz"))
    if spec is None:
        say_no_stack(say, res, args)
        return 1
    variant = "cpu" if args.torch_index == "none" and (args.torch or "").endswith("cpu") else res.variant
    base = base_image_for(mx, variant or "cpu", res.python)
    from ..outputs.owned import OutputDir

    outdir = OutputDir(out, "-o", args.force)
    checker = _checker_path()
    if checker:
        outdir.copy("preflight.pyz", checker)
    else:
        say("note: running from a source tree: build the zipapp (python3 tools/build_pyz.py) and copy "
            "dist/preflight.pyz into %s before building" % quote(out))
    text = render_dockerfile(ImageSpec(base=base, python=res.python, verl=res.verl, tool_version=__version__,
                                       index_secret=bool(spec.index_credentials)))
    if spec.post_install:
        text = text.replace("ENV PATH=/opt/verl/bin", "# after the lock (source build, needs the GPU toolchain):\n"
                            "# RUN /opt/verl/bin/python -m %s\nENV PATH=/opt/verl/bin" % spec.post_install[0].replace(
                                "pip install", "pip install", 1), 1)
    path = outdir.write("Dockerfile", redact_text(text))
    print_safe(os.path.abspath(path))
    tag = args.tag or "verl:%s" % res.verl
    secret = bool(spec.index_credentials)
    if secret:
        say("the index needs credentials: put them in ~/.netrc (machine HOST login USER password PW) and pass it "
            "as a build secret, never as a build argument (see README, Index credentials)")
    shown = build_line(tag, out, secret)
    if not args.build:
        say("build it with: %s" % shown)
        return 0
    name, cmd = find_builder()
    if name is None:
        say("no working container builder (%s); build it where one runs with:" % cmd)
        say("  %s" % shown)
        return 0
    say("building with %s ..." % name)
    from ..probes import child

    # its output shown live, each line redacted (a RUN step that prints a token shows ***)
    proc = child.run_live(cmd + (["--secret", "id=netrc,src=%s" % os.path.expanduser("~/.netrc")] if secret else [])
                          + ["-t", tag, out], sys.stderr)
    if proc.returncode != 0:
        raise UsageError("%s build of %s failed (exit %d); its output is above" % (name, out, proc.returncode))
    return 0
