"""``preflight resolve``: the stack that runs a verl release on this machine (or a described one),
each choice with the matrix row it comes from; or why none does and the nearest fixes."""

import argparse
from typing import Any, Dict, List, Optional

from .stack import resolve_args

NAME = "resolve"
HELP = "choose the stack (Python, torch + CUDA variant, vLLM/SGLang, flash-attn) for a verl release"
EPILOG = """examples:
  python3 preflight.pyz resolve --verl 0.9.1                 this machine's driver, GPU and Python
  python3 preflight.pyz resolve --verl 0.9.1 --gpu H100 --driver 535.183.01
  python3 preflight.pyz resolve --verl 0.7.0 --backend sglang --cc 8.0 --python 3.12 --json stack.json

defaults: --driver and the GPU from NVML (unknown without a driver: not checked), --python from the
interpreter running this (a preference; an explicit --python is required), --verl the newest release
exit codes: 0 a stack works (warnings allowed), 1 no stack works, 2 bad input
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``resolve``'s options to its parser."""
    p.add_argument("--verl", metavar="VERSION", default=None, help="verl release (default: the newest in the matrix)")
    p.add_argument("--backend", choices=("vllm", "sglang", "none"), default=None,
                   help="rollout backend (default: vllm; 'none': verl without a rollout engine, its core extra "
                        "only, as spec --backend none)")
    p.add_argument("--no-backend", dest="backend", action="store_const", const="none",
                   help=argparse.SUPPRESS)  # spec's old spelling of --backend none
    p.add_argument("--driver", metavar="VERSION", default=None, help="NVIDIA driver version, e.g. 580.65.06 "
                   "(default: this machine's, from NVML)")
    p.add_argument("--gpu", metavar="NAME", default=None,
                   help="GPU name, e.g. H100 or 'RTX 5090' (default: this machine's)")
    p.add_argument("--cc", metavar="X.Y", default=None, help="compute capability instead of --gpu, e.g. 9.0")
    p.add_argument("--python", metavar="X.Y", default=None, help="CPython minor the stack must use, e.g. 3.12")
    p.add_argument("--backend-build", metavar="cuXYZ", default=None,
                   help="use this published CUDA build of the backend instead of its PyPI wheel, e.g. cu129")
    p.add_argument("--no-probe", action="store_true",
                   help="do not read this machine (NVML); unknown facts are not checked")
    from .output import add_output_options

    add_output_options(p, "the resolution")


def without_backend(mx, res):
    """``res`` (resolved for the default backend) as a stack with no rollout engine, the same
    top-level pins as ``spec --backend none``: verl's core extra and the paired torch; the
    backend's (and flash-attn's) pins, citations, notes and warnings are left out. Problems are
    kept (the torch choice still rests on the default backend's pin)."""
    import dataclasses

    b = res.backend
    row = mx.verl(res.verl) or {}
    core = row.get("core_extra")
    reqs = ["verl[%s]==%s" % (core, res.verl) if core else "verl==%s" % res.verl]
    reqs += [r for r in res.requirements if r.startswith("torch==")]

    def other(text: str) -> bool:
        low = str(text).lower()
        return b not in low and not low.startswith("flash-attn")

    extra = {"proof": {}} if any(f.name == "proof" for f in dataclasses.fields(res)) else {}
    return dataclasses.replace(  # the recorded install proof was for the set with the backend
        res, **extra, backend="none", backend_version=None, backend_cuda=None, flash_attn={}, requirements=reqs,
        citations=[c for c in res.citations if other(c.get("choice", ""))],
        notes=[n for n in res.notes if other(n)], warnings=[w for w in res.warnings if other(w)])


def rows_of(res) -> List[Any]:
    """The report rows of a :class:`preflight.resolve.Resolution` (stage ``resolve``): one pass
    per cited choice (``resolve.<choice>``), one fail per problem and one warn per warning, whose
    fix is the nearest option (or, for a warning alone, checking the cited rows)."""
    import re

    from ..result import Result, Status

    rows: List[Result] = []
    seen: Dict[str, int] = {}
    for c in res.citations:
        slug = re.sub(r"[^a-z0-9]+", "-", str(c.get("choice", "")).lower()).strip("-") or "choice"
        seen[slug] = seen.get(slug, 0) + 1
        rid = "resolve.%s" % slug + ("-%d" % seen[slug] if seen[slug] > 1 else "")
        rows.append(Result(rid, "resolve", Status.PASS, "%s: %s (%s)" % (c.get("choice"), c.get("value"), c.get("row")),
                           evidence=dict(c)))
    fix = "; or ".join(res.options) if res.options else None
    for i, p in enumerate(res.problems, 1):
        rows.append(Result("resolve.problem-%d" % i, "resolve", Status.FAIL, p,
                           fix=fix or "no stack in the matrix fits; see 'preflight matrix show' for the supported "
                                      "combinations"))
    for i, w in enumerate(res.warnings, 1):
        rows.append(Result("resolve.warning-%d" % i, "resolve", Status.WARN, w,
                           fix="check the cited matrix rows' sources before relying on it ('preflight resolve "
                               "--format json' lists them)"))
    return rows


def run(args: argparse.Namespace) -> int:
    """Resolve, print the report (and the JSON); 0 a stack works, 1 none does."""
    import time

    from .. import __version__
    from .. import matrix as matrix_mod
    from ..report import Report
    from .output import check_outputs, emit
    from ..report.resolve_view import view

    check_outputs(args)
    mx = matrix_mod.load()
    verl = args.verl or mx.verl_versions()[-1]
    t0 = time.time()
    if args.backend == "none":
        import copy

        args = copy.copy(args)
        args.backend = None
        res, how = resolve_args(mx, verl, args)
        res = without_backend(mx, res)
    else:
        res, how = resolve_args(mx, verl, args)

    report = Report(results=rows_of(res), stages=["resolve"], verl={"version": res.verl, "chosen_by": "--verl" if
                                                                   args.verl else "newest in the matrix"},
                    tool_version=__version__, matrix_version=mx.version, started_at=t0, duration_s=time.time() - t0,
                    command=NAME, sections={"inputs": how, "resolution": res.to_dict()}, view=view)
    return emit(report, args)
