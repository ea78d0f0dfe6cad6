"""The console view of ``preflight resolve``'s answer: the chosen stack with the matrix row of each
choice, its proof, problems, warnings, options and the install command (one renderer of
:class:`preflight.resolve.Resolution`; JSON, markdown and the rest come from the report's rows
and ``resolution`` section)."""

from typing import List, Optional

from ..shell import quote as shell_quote


def view(rep, console, verbose: bool) -> None:
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
    console.print("verl %s with %s, Linux %s" % (res.verl, bname, getattr(res, "arch", "x86_64")))
    _bullets(console, how or [], "dim", " ")
    console.print()
    verdict = res.verdict
    head = {"works": ("A stack works (its install line is proven)", "bold green"),
            "unproven": ("A stack fits the matrix, but its install line is unproven", "bold yellow"),
            "does not install": ("No stack works: the chosen install line does not install", "bold red")}.get(
        verdict, ("No stack works", "bold red"))
    console.print(Text(head[0], style=head[1]),
                  Text("  (rests on %s rows)" % {"S": "secondary", "U": "unverified"}[res.confidence], style="yellow")
                  if res.confidence != "V" else "")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=12, no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    used = set()
    for label, group in _GROUPS:
        if label == "{backend}" and res.backend == "none":
            continue
        label = label.format(backend=bname)
        prefixes = tuple(p.format(b=res.backend) for p in group)
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
        text = {"proven": "works: %s resolved it for CPython %s, %s, on %s (%s)" % (
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
    from .render import localise_commands

    for it in items:  # the view's own text: redacted, and 'preflight resolve ...' as the tool was run
        grid.add_row(mark, Text(localise_commands(redact_text(it)) or "", style=style))
    console.print(grid)


def install_commands(res) -> List[str]:
    """pip command lines that install a resolution, arguments separated by two spaces (the report
    breaks lines there); flash-attn source builds go last, without build isolation, after torch."""
    
    idx = ["--extra-index-url %s" % u for u in res.extra_index_urls]
    first = [shell_quote(r) for r in res.requirements if not r.startswith("flash-attn==")]
    cmds = ["  ".join(["pip install"] + idx + first)]
    late = [shell_quote(r) for r in res.requirements if r.startswith("flash-attn==")]
    if late:
        cmds.append("  ".join(["pip install --no-build-isolation"] + late))
    return cmds
