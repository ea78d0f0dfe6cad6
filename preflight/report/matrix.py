"""``preflight matrix show``: the matrix rows of verl releases, one block per release, with their
sources; readable at 80 columns (long values wrap inside their column)."""

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from rich.table import Table
from rich.text import Text

from ..matrix import Matrix, requirements_for_extras
from .console import SafeConsole as Console

__all__ = ["show", "release_block", "extra_pins"]

#: Dependencies whose pins the blocks list (others are left out to keep a block short).
KEY = ("torch", "torchvision", "torchaudio", "vllm", "sglang", "transformers", "flash-attn", "tensordict", "ray",
       "numpy", "megatron-core", "megatron-bridge", "mbridge", "transformer-engine", "sglang-kernel", "liger-kernel",
       "trl", "cupy-cuda13x")


def _extras(lines: Sequence[str]) -> List[str]:
    out = []
    for line in lines:
        try:
            r = Requirement(line)
        except Exception:
            continue
        for name in _marker_extras(str(r.marker or "")):
            if name not in out:
                out.append(name)
    return sorted(out)


def _marker_extras(marker: str) -> List[str]:

    return re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)


def extra_pins(mx: Matrix, version: str) -> List[Tuple[str, List[str]]]:
    """[(extra or "base", ["torch==2.11.0", ...])] of verl ``version``'s key dependencies (see
    :data:`KEY`), each extra listing only what its own marker adds; unconstrained ones show "(any)"."""
    meta = mx.meta("verl", version) or {}
    lines = meta.get("requires_dist") or []
    out = []
    for extra in [""] + _extras(lines):
        reqs = requirements_for_extras(lines, [extra] if extra else [])
        shown = []
        for r in reqs:
            if canonicalize_name(r.name) not in KEY:
                continue
            if extra and extra not in _marker_extras(str(r.marker or "")):
                continue
            text = "%s%s%s" % (r.name, "[%s]" % ",".join(sorted(r.extras)) if r.extras else "", r.specifier or " (any)")
            if text not in shown:
                shown.append(text)
        if shown:
            out.append((extra or "base", sorted(shown, key=str.lower)))
    return out


def release_block(mx: Matrix, version: str) -> Table:
    """A two-column grid describing verl ``version``: Python, pins per extra, runtime vLLM gate,
    official images, key classes, sources. Raises KeyError for an unknown release."""
    row = mx.verl(version)
    if row is None:
        raise KeyError(version)
    meta: Dict[str, Any] = row.get("_meta") or {}
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=12, no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    grid.add_row("Python", Text(meta.get("requires_python") or "any (no Requires-Python)"))
    backends = ", ".join("%s (%s)" % (b, "extra [%s]" % e if e else "install_requires")
                         for b, e in sorted((row.get("backend_extras") or {}).items()))
    grid.add_row("backends", Text(backends))
    if row.get("vllm_runtime"):
        grid.add_row("vLLM gate", Text("%s  (verl/third_party/vllm accepts at import)" % row["vllm_runtime"]))
    for extra, pins in extra_pins(mx, version):
        if extra == "base":
            grid.add_row("requires", Text(", ".join(pins)))
        else:
            grid.add_row("extra", Text.assemble(("[%s] " % extra, "bold"), ", ".join(pins)))
    for img in mx.images(version):
        grid.add_row("image", Text.assemble(
            img["image"], ("  %s; CUDA %s, cuDNN %s, Python %s, torch %s%s%s [%s]" % (
                "/".join(img.get("backend", [])), img.get("cuda") or "?", img.get("cudnn") or "?",
                img.get("python") or "?", img.get("torch") or "?",
                ", vLLM %s" % img["vllm"] if img.get("vllm") else "",
                ", SGLang %s" % img["sglang"] if img.get("sglang") else "", img["confidence"]), "dim")))
    for name, where in sorted((row.get("key_classes") or {}).items()):
        grid.add_row("class", Text("%s = %s" % (name, where)))
    grid.add_row("source", Text("%s [%s]" % (row.get("source"), row.get("confidence", "?")), style="dim"))
    if meta.get("source"):
        grid.add_row("", Text(str(meta["source"]), style="dim"))
    return grid


def show(mx: Matrix, verl: Optional[str] = None, console: Optional[Console] = None) -> int:
    """Print one block per verl release (or only ``verl``); returns 0. Raises UsageError for an
    unknown release."""
    console = console or Console(highlight=False)
    versions = [verl] if verl else mx.verl_versions()
    if verl:
        mx.require_verl(verl)
    console.print(Text.assemble(("verl releases", "bold"), "  matrix %s  (%d of %d)" % (
        mx.version, len(versions), len(mx.verl_versions()))))
    for v in versions:
        row = mx.verl(v) or {}
        console.print()
        console.print(Text.assemble(("verl %s" % v, "bold cyan"), ("  released %s" % row.get("released", "?"), "dim")))
        console.print(release_block(mx, v))
    return 0
