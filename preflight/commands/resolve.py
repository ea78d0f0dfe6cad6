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
                    command=NAME, sections={"inputs": how, "resolution": res.to_dict()}, view=_view)
    return emit(report, args)


def _view(rep, console, verbose: bool) -> None:
    """The console view of a resolve report, drawn from its redacted ``resolution`` section."""
    import dataclasses

    from ..resolve import Resolution

    names = {f.name for f in dataclasses.fields(Resolution)}
    res = Resolution(**{k: v for k, v in rep.sections["resolution"].items() if k in names})
    render(res, console, rep.sections["inputs"], rep.matrix_version)


_GROUPS = (
    ("Python", ("python",)),
    ("verl", ("verl",)),
    ("{backend}", ("{b}", "{b} wheel CUDA", "{b} GPU floor")),
    ("torch", ("torch", "torch variant", "torch arch list")),
    ("driver", ("driver for CUDA", "CUDA ")),
    ("GPU", ("compute capability", "toolkit for compute capability")),
    ("flash-attn", ("flash-attn",)),
)


def _value(res, label: str) -> str:
    if label == "Python":
        asked = res.python_requested
        return "%s%s" % (res.python or "-", " (asked: %s)" % asked if asked and asked != res.python else "")
    if label == "verl":
        return res.verl
    if label == "torch":
        if not res.torch:
            return "-"
        if not res.variant:
            return res.torch
        return "%s %s (CUDA %s), %s" % (res.torch, res.variant, res.cuda, "the plain PyPI wheel" if res.torch_from_pypi
                                        else "from %s" % res.index_url)
    if label == "driver":
        need = ">= %s" % res.min_driver if res.min_driver else "?"
        if res.min_driver_compat and res.min_driver_compat != res.min_driver:
            need += " (>= %s with minor-version compatibility)" % res.min_driver_compat
        return "%s; the stack needs %s" % (res.driver or "unknown", need)
    if label == "GPU":
        return "%s%s" % (res.gpu + ", " if res.gpu else "", "compute capability %s" % res.cc if res.cc else "unknown")
    if label == "flash-attn":
        fa = res.flash_attn or {}
        if not fa:
            return "-"
        return "%s: %s" % (fa.get("version") or "-", fa.get("wheel") or fa["status"])
    return "%s%s" % (res.backend_version or "-",
                     ", wheel built with CUDA %s" % res.backend_cuda if res.backend_cuda else "")


def render(res, console, how: Optional[List[str]] = None, matrix_version: str = "") -> None:
    """Print a :class:`preflight.resolve.Resolution` as a report that reads at 80 columns."""
    from rich.table import Table
    from rich.text import Text

    bname = {"vllm": "vLLM", "sglang": "SGLang"}.get(res.backend, "no rollout engine")
    console.print(Text.assemble(("verl-preflight resolve", "bold"), "  matrix %s" % matrix_version))
    console.print("verl %s with %s" % (res.verl, bname))
    _bullets(console, how or [], "dim", " ")
    console.print()
    console.print(Text("A stack works" if res.ok else "No stack works", style="bold green" if res.ok else "bold red"),
                  Text("  (rests on %s rows)" % {"S": "secondary", "U": "unverified"}[res.confidence], style="yellow")
                  if res.confidence != "V" else "")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=12, no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    used = set()
    for label, prefixes in _GROUPS:
        if label == "{backend}" and res.backend == "none":
            continue
        label = label.format(backend=bname)
        prefixes = tuple(p.format(b=res.backend) for p in prefixes)
        cell = Text(_value(res, label))
        for i, c in enumerate(res.citations):
            if i in used or not any(c["choice"].startswith(p) for p in prefixes):
                continue
            used.add(i)
            conf = "" if c["confidence"] == "V" else " [%s]" % c["confidence"]
            cell.append("\n  %s: %s%s" % (c["choice"], c["row"], conf), style="dim" if not conf else "yellow")
        grid.add_row(label, cell)
    for name in ("transformers", "tensordict", "ray"):
        v = getattr(res, name)
        if v is not None:
            grid.add_row(name, Text((v or "any") + ("  (verl and %s metadata)" % bname if res.backend != "none"
                                                    else "  (verl metadata)")))
    for b in getattr(res, "bounds", []) or []:
        grid.add_row("bound", Text("%s%s (%s; %s)" % (b["package"], b["spec"], b["id"], b["source"]), style="dim"))
    proof = getattr(res, "proof", {}) or {}
    if proof:
        text = {"proven": "installs: %s resolved it for CPython %s, %s, on %s (%s)" % (
            proof.get("resolver"), proof.get("python"), proof.get("platform_tags"), proof.get("date"), proof.get("file")),
            "failed": "does not install: %s (%s)" % (proof.get("error"), proof.get("file"))}.get(
            proof.get("status"), "%s: %s" % (proof.get("status"), proof.get("reason")))
        if proof.get("left_out"):
            text += "; not part of the proof: %s" % ", ".join(proof["left_out"])
        grid.add_row("proof", Text(text, style="green" if proof.get("status") == "proven" else "yellow"))
    console.print(grid)
    for title, items, style in (("Problems", res.problems, "red"), ("Warnings", res.warnings, "yellow"),
                                ("Options", res.options, "cyan"), ("Notes", res.notes, "dim")):
        if items:
            console.print()
            console.print(Text(title, style="bold " + style))
            _bullets(console, items)
    if res.ok and res.requirements:
        console.print()
        console.print(Text("Install (in a fresh environment with Python %s)" % res.python, style="bold"))
        for cmd in install_commands(res):
            words = cmd.split("  ")
            for i, w in enumerate(words):
                console.print(Text(("  " if i == 0 else "      ") + w + (" \\" if i < len(words) - 1 else "")),
                              overflow="fold")
    if res.images:
        console.print()
        console.print(Text("Official images of verl %s" % res.verl, style="bold"))
        lines = []
        for img in res.images:
            runs = {"native": "runs on this driver", "compat": "runs through minor-version compatibility",
                    "too_old": "needs a newer driver", "unknown": ""}[img["driver"]]
            lines.append("%s: CUDA %s, Python %s, torch %s%s%s" % (
                img["image"], img["cuda"] or "?", img["python"] or "?", img["torch"] or "?",
                "; %s" % runs if runs else "", "" if img["confidence"] == "V" else " [%s]" % img["confidence"]))
        _bullets(console, lines)


def _bullets(console, items: List[str], style: str = "", mark: str = "-") -> None:
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    from ..redact import redact_text
    from ..report.invocation import localise_commands

    for it in items:  # the view's own text: redacted, and 'preflight resolve ...' as the tool was run
        grid.add_row(mark, Text(localise_commands(redact_text(it)) or "", style=style))
    console.print(grid)


def install_commands(res) -> List[str]:
    """pip command lines that install a resolution, arguments separated by two spaces (the report
    breaks lines there); flash-attn source builds go last, without build isolation, after torch."""
    import shlex

    idx = ["--extra-index-url %s" % u for u in res.extra_index_urls]
    first = [shlex.quote(r) for r in res.requirements if not r.startswith("flash-attn==")]
    cmds = ["  ".join(["pip install"] + idx + first)]
    late = [shlex.quote(r) for r in res.requirements if r.startswith("flash-attn==")]
    if late:
        cmds.append("  ".join(["pip install --no-build-isolation"] + late))
    return cmds
