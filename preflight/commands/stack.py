"""What several commands share, in one place (no command imports another's helpers):

* :func:`resolve_python`: the interpreter ``--python`` names (check, config, data, cluster);
* :func:`add_stack_options`, :func:`machine_facts`, :func:`resolve_args`, :func:`resolve_stack`:
  the release and machine options and the stack they resolve to (resolve, spec, install, image);
* :func:`make_spec`, :func:`dry_run`, :func:`machine_doc`: the spec written into a directory, or
  the plan printed instead (spec, install, image).
"""

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..errors import UsageError
from ..redact import redact_text
from ..report.render import print_safe
from .argtypes import index_url, verl_release

__all__ = ["resolve_python", "add_stack_options", "machine_facts", "resolve_args", "resolve_stack", "machine_doc",
           "dry_run", "make_spec"]


def resolve_python(path: Optional[str]) -> str:
    """The interpreter ``--python PATH`` names (default: the one running this), as an absolute
    path: a name on PATH, a venv directory (its bin/python) or a file. Raises UsageError naming
    ``--python`` when it does not exist or is not executable."""
    if path is None:
        return sys.executable
    expanded = os.path.expanduser(path)
    if os.sep not in expanded:
        import shutil

        found = shutil.which(expanded)
        if found:  # absolute: an empty PATH entry finds it in this directory, not the probe's
            return os.path.abspath(found)
    try:
        os.stat(expanded)
    except OSError as exc:  # no such file, a link loop, a name too long, a directory not searchable
        raise UsageError("--python %s: %s; pass the path of a Python interpreter (e.g. ~/venvs/verl/bin/python)" % (
            path, "no such file" if isinstance(exc, FileNotFoundError) else (exc.strerror or exc)))
    if os.path.isdir(expanded):
        cand = os.path.join(expanded, "bin", "python")
        if os.path.exists(cand):
            return os.path.abspath(cand)
        raise UsageError("--python %s is a directory without bin/python; pass the interpreter itself" % path)
    if not os.access(expanded, os.X_OK):
        raise UsageError("--python %s is not executable; pass the path of a Python interpreter" % path)
    return os.path.abspath(expanded)


def add_stack_options(p: argparse.ArgumentParser) -> None:
    """The options spec, install and image share: the release, the machine, overrides."""
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release, help="verl release (default: the newest in the matrix)")
    p.add_argument("--backend", choices=("vllm", "sglang", "none"), default=None,
                   help="rollout backend (default: vllm; 'none': verl without a rollout engine, its core extra only, "
                        "e.g. CPU-only test environments; the same spelling as check --backend none)")
    p.add_argument("--no-backend", dest="backend", action="store_const", const="none",
                   help=argparse.SUPPRESS)  # the old spelling of --backend none, still accepted
    p.add_argument("--driver", metavar="VERSION", default=None, help="NVIDIA driver (default: this machine's)")
    p.add_argument("--gpu", metavar="NAME", default=None, help="GPU name, e.g. H200 (default: this machine's)")
    p.add_argument("--cc", metavar="X.Y", default=None, help="compute capability instead of --gpu")
    p.add_argument("--python", metavar="X.Y", default=None, help="CPython minor of the environment, e.g. 3.12")
    p.add_argument("--backend-build", metavar="cuXYZ", default=None,
                   help="a published CUDA build of the backend instead of its PyPI wheel, e.g. cu129")
    p.add_argument("--arch", choices=("x86_64", "aarch64"), default=None,
                   help="machine architecture (Linux) of the environment (default: this machine's, or the one a "
                        "given --gpu implies)")
    p.add_argument("--no-probe", action="store_true", help="do not read this machine's GPUs (NVML)")
    p.add_argument("--torch", metavar="VERSION", default=None,
                   help="pin torch to this release instead of the resolved one (torchvision/torchaudio follow)")
    p.add_argument("--torch-index", metavar="URL", default=None, type=index_url,
                   help="index for torch ('none': only pip's configured indexes, e.g. a mirror or find-links); "
                        "a user:password in it is used for resolving but never written to a file")
    p.add_argument("--force", action="store_true",
                   help="replace files in the output directory that verl-preflight did not write (or that changed)")
    p.add_argument("--dry-run", action="store_true",
                   help="resolve and print what would be locked, written or installed; change nothing (seconds: "
                        "no package download, no lock)")


def machine_facts(args: argparse.Namespace) -> Tuple[Dict[str, Any], List[str]]:
    """Inputs for :func:`preflight.resolve.resolve` from the arguments, filled from this machine
    (NVML, the running interpreter) where not given; returns (kwargs, how each was obtained)."""
    kw: Dict[str, Any] = {"driver": args.driver, "gpu": args.gpu, "cc": args.cc, "python": args.python}
    how: List[str] = []
    need_nvml = not args.no_probe and (args.driver is None or (args.gpu is None and args.cc is None))
    snap: Dict[str, Any] = {}
    if need_nvml:
        from ..probes.nvml import snapshot

        snap = snapshot()
    err = (snap.get("error") or {}) if need_nvml else {}
    if args.driver is None:
        if snap.get("driver"):
            kw["driver"] = str(snap["driver"])
            how.append("driver %s from NVML" % kw["driver"])
        else:
            how.append("driver unknown (%s): not checked" % ("--no-probe" if args.no_probe else
                                                             "NVML: %s" % (err.get("kind") or "no driver")))
    if args.gpu is None and args.cc is None:
        devs = [d for d in snap.get("devices") or [] if d.get("capability")]
        if devs:
            low = min(devs, key=lambda d: tuple(int(x) for x in d["capability"].split(".")))
            kw["cc"] = low["capability"]
            names = sorted({"%s (%s)" % (d.get("name"), d["capability"]) for d in devs})
            how.append("GPU %s from NVML%s" % (", ".join(names), "; resolving for the oldest, %s" % low["capability"]
                                                if len(names) > 1 else ""))
        else:
            how.append("GPU unknown: compute capability not checked")
    arch = getattr(args, "arch", None)
    if arch is None and not args.no_probe and args.gpu is None and args.cc is None:
        import platform

        arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())
        if arch in ("x86_64", "aarch64"):
            how.append("architecture %s (this machine, platform.machine())" % arch)
        else:
            how.append("architecture %s (this machine) is not x86_64 or aarch64: resolved for x86_64" % arch)
            arch = None
    kw["arch"] = arch
    if args.python is None:
        kw["prefer_python"] = "%d.%d" % sys.version_info[:2]
        how.append("Python %s preferred (the interpreter running this; pass --python to require one)"
                   % kw["prefer_python"])
    return kw, how


def resolve_args(mx, verl: str, args: argparse.Namespace):
    """(Resolution, how the machine facts were obtained) for the machine options in ``args``;
    a ResolveError (bad --driver, unknown GPU...) becomes a UsageError."""
    from ..resolve import ResolveError, resolve

    kw, how = machine_facts(args)
    try:
        res = resolve(mx, verl, backend=args.backend, backend_build=getattr(args, "backend_build", None), **kw)
    except ResolveError as exc:
        raise UsageError(str(exc))
    if getattr(args, "prove", False):
        from ..resolve.proof import prove_now

        how.append(prove_now(mx, res, float(getattr(args, "prove_timeout", 180.0))))
    return res, how


def resolve_stack(args: argparse.Namespace) -> Tuple[Any, Any, List[str], Any]:
    """(matrix, resolution, how the machine facts were obtained, SpecOptions) for the arguments."""
    from .. import matrix as matrix_mod
    from ..outputs.spec import SpecOptions

    mx = matrix_mod.load()
    verl = args.verl or mx.verl_versions()[-1]
    mx.require_verl(verl)
    if args.torch and mx.torch_series(args.torch) is None:
        raise UsageError("--torch %s: not a torch release in the matrix" % args.torch)
    no_backend = args.backend == "none"
    res, how = resolve_args(mx, verl, args)  # --backend none: verl's core, its torch and the bounds
    opts = SpecOptions(torch=args.torch, torch_index=args.torch_index, no_backend=no_backend)
    return mx, res, how, opts


def machine_doc() -> Dict[str, Any]:
    """Stable facts of this machine for environment.json."""
    from ..outputs.environment import machine_facts as stable
    from ..probes.host import read_host
    from ..probes.nvml import snapshot

    return stable(read_host(), snapshot())


def dry_run(args: argparse.Namespace, what: str) -> int:
    """``--dry-run`` for spec, install and image: resolve (no pip, no download), print the stack, the
    top-level pins and ``what`` would happen, on stdout (the plan is the command's output, not its
    progress); 0 when a stack works, 1 when none does."""
    from ..outputs.spec import top_level

    say = print_safe
    mx, res, how, opts = resolve_stack(args)
    for h in how:
        say("machine: %s" % h)
    if not res.ok:
        say_no_stack(say, res, args)
        return 1
    reqs, extra, post = top_level(mx, res, opts)
    say("dry run: verl %s, Python %s, %s" % (res.verl, res.python, "no rollout backend" if opts.no_backend else
                                              "%s %s" % (res.backend, res.backend_version)))
    say("top-level pins: %s" % " ".join(reqs))
    for u in extra:
        say("extra index: %s" % u)
    for p in post:
        say("after the lock: %s" % p)
    say("would %s (nothing was written)" % what)
    return 0


def prove_spec(spec, res) -> str:
    """Record in ``spec.stack["proof"]`` how the spec's install line was proven live, and return
    the line to print. On x86_64 the lock is that proof (pip or uv resolved exactly these
    top-level lines for the target Python just now); on aarch64 the lock's wheels are x86_64
    ones, so pip's resolver runs again for aarch64 (preflight.proofs.prove_live, bounded).
    Raises UsageError when pip's resolver refuses the line."""
    from ..proofs import prove_live

    if getattr(res, "arch", "x86_64") == "x86_64":
        p = {"status": "proven", "live": True, "resolver": spec.lock.mode, "python": res.python, "arch": "x86_64",
             "packages": len(spec.lock.packages)}
    else:
        p = prove_live(spec.requirements, res.python or "", res.arch, spec.stack.get("extra_index_urls") or [],
                       timeout=180.0)
        p = {k: v for k, v in p.items() if k not in ("report", "installed", "output_tail")}
    spec.stack["proof"] = p
    if p["status"] == "proven":
        return "proof: works: %s resolved the install line for CPython %s on Linux %s" % (
            p.get("resolver"), res.python, p["arch"])
    if p["status"] == "failed":
        raise UsageError("the install line does not install on Linux %s: %s" % (res.arch, (p.get("error") or "")[-300:]))
    return "proof: unproven on Linux %s: %s" % (res.arch, p.get("reason"))


def make_spec(args: argparse.Namespace, out_dir: str, say, option: str = "-o",
              more_files: Tuple[str, ...] = ()) -> Tuple[Any, Any, Any, List[str]]:
    """Resolve, lock and write the spec into ``out_dir``; returns (matrix, resolution, spec, paths).
    Raises UsageError (exit 2) for bad input, a pip failure, or files in ``out_dir`` (the spec's
    and ``more_files``) that the tool did not write (without --force; checked before any work);
    returns res.ok False untouched."""
    from ..outputs.lock import find_uv
    from ..outputs.owned import OutputDir
    from ..outputs.spec import SPEC_FILES, build_spec, write_spec

    out = OutputDir(out_dir, option, getattr(args, "force", False))
    out.check(SPEC_FILES + tuple(more_files))
    mx, res, how, opts = resolve_stack(args)
    for h in how:
        if "not checked" in h or "unknown" in h:
            say("note: %s" % h)
    if not res.ok:
        return mx, res, None, []
    say(redact_text("resolved: verl %s, Python %s, torch %s (%s), %s" % (
        res.verl, res.python, args.torch or res.torch,
        "pip's configured indexes" if args.torch_index == "none" else args.torch_index or res.variant,
        "no rollout backend" if opts.no_backend else "%s %s" % (res.backend, res.backend_version))))
    say("locking the complete set with %s (metadata only) ..." % ("uv" if find_uv() else "pip"))
    spec = build_spec(mx, res, opts)
    say(prove_spec(spec, res))
    if spec.index_credentials:
        say("note: the user name and password of %s are used for this run only; requirements.lock and "
            "environment.json name the index without them: %s" % (
                redact_text(", ".join(spec.index_credentials)), spec.stack.get("private_index")))
    inputs = {"verl": res.verl, "backend": None if opts.no_backend else res.backend, "driver": res.driver,
              "cc": res.cc, "gpu": res.gpu, "python": res.python, "machine_from": how}
    paths = write_spec(spec, out_dir, mx, res, machine_doc(), inputs, out)
    return mx, res, spec, paths


def say_no_stack(say: Any, res: Any, args: Any) -> None:
    """Tell, through ``say``, that no stack works for the resolution ``res``: each problem, then
    each option with the command that selects it (as ``resolve`` lists them), for the machine the
    options described (``--gpu``/``--cc``/``--driver``/``--arch``) or this one."""
    given = [o for o in ("gpu", "cc", "driver", "arch") if getattr(args, o, None)]
    say("no stack works for verl %s on %s:" % (res.verl, "the machine given (%s)" % ", ".join(
        "--%s %s" % (o, getattr(args, o)) for o in given) if given else "this machine"))
    for p in res.problems:
        say("  - %s" % p)
    for o in res.options:
        say("  option: %s" % o)

