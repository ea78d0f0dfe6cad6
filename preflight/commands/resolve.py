"""``preflight resolve``: the stack that runs a verl release on this machine (or a described one),
each choice with the matrix row it comes from; or why none does and the nearest fixes."""

import argparse
from typing import Any, Dict, List

from .argtypes import verl_release
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
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release, help="verl release (default: the newest in the matrix)")
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
    p.add_argument("--arch", choices=("x86_64", "aarch64"), default=None,
                   help="machine architecture (Linux) the stack is for (default: this machine's, or the one a "
                        "given --gpu implies: GH200/GB200 sit on Grace, aarch64)")
    p.add_argument("--prove", action="store_true",
                   help="prove the chosen stack's install line now with pip's resolver against PyPI (network, "
                        "bounded by --prove-timeout) instead of the recorded proofs")
    p.add_argument("--prove-timeout", metavar="S", type=float, default=180.0,
                   help="deadline of the live proof in seconds (default 180)")
    p.add_argument("--no-probe", action="store_true",
                   help="do not read this machine (NVML); unknown facts are not checked")
    from .output import add_output_options

    add_output_options(p, "the resolution")


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
        if w.startswith("unproven:"):
            continue  # the proof row below says it
        rows.append(Result("resolve.warning-%d" % i, "resolve", Status.WARN, w,
                           fix="check the cited matrix rows' sources before relying on it ('preflight resolve "
                               "--format json' lists them)"))
    rows.append(proof_row(res))
    return rows


def proof_row(res) -> Any:
    """The report row of the answer's proof (``resolve.proof``): PASS "works" when pip's resolver
    proved the install line, WARN "unproven" when no proof exists, FAIL "does not install" when pip
    refused it; every format (console, JSON, markdown, JUnit...) carries it."""
    from ..result import Result, Status

    p = res.proof or {}
    verdict = res.verdict
    if verdict == "works":
        return Result("resolve.proof", "resolve", Status.PASS, "works: %s resolved the install line for CPython %s on "
                      "Linux %s (%s, %s)" % (p.get("resolver"), p.get("python"), p.get("arch") or res.arch,
                                            p.get("date"), p.get("file") or "live"), evidence=dict(p))
    if verdict == "does not install":
        return Result("resolve.proof", "resolve", Status.FAIL, "does not install: %s" % (p.get("error") or "")[-400:],
                      evidence=dict(p), fix="; or ".join(res.options) or "choose another release or Python")
    if verdict == "unproven":
        return Result("resolve.proof", "resolve", Status.WARN, "unproven: %s" % p.get("reason", "no proof"),
                      evidence=dict(p), fix="prove it now with 'preflight resolve --prove' (network, PyPI), or "
                                            "record it with tools/record_proofs.py")
    return Result("resolve.proof", "resolve", Status.SKIP, "no stack, so no install line to prove", evidence=dict(p))


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
    res, how = resolve_args(mx, verl, args)

    report = Report(results=rows_of(res), stages=["resolve"], verl={"version": res.verl, "chosen_by": "--verl" if
                                                                   args.verl else "newest in the matrix"},
                    tool_version=__version__, matrix_version=mx.version, started_at=t0, duration_s=time.time() - t0,
                    command=NAME, sections={"inputs": how, "resolution": res.to_dict()}, view=view)
    return emit(report, args)
