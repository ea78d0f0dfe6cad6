"""``preflight matrix show``: print the matrix rows for verl releases, with their sources."""

from typing import Optional

from rich.console import Console
from rich.table import Table

from . import Matrix, requirements_for_extras

__all__ = ["show"]

KEY = ("torch", "torchvision", "vllm", "sglang", "transformers", "tensordict", "ray", "flash-attn", "numpy")


def show(mx: Matrix, verl: Optional[str] = None) -> int:
    """Print one table row per verl release (or only ``verl``); returns the exit code."""
    console = Console(highlight=False)
    versions = [verl] if verl else mx.verl_versions()
    table = Table(title="verl releases (matrix %s)" % mx.version, show_lines=True)
    for col in ("verl", "python", "pins by extra", "vllm accepted at runtime", "key classes", "source"):
        table.add_column(col, overflow="fold")
    for v in versions:
        row = mx.verl(v)
        if row is None:
            console.print("error: verl %s is not in the matrix (known: %s)" % (v, ", ".join(mx.verl_versions())))
            return 2
        meta = row.get("_meta") or {}
        lines = meta.get("requires_dist") or []
        pins = []
        for extra in [""] + sorted({e for e in (row.get("backend_extras") or {}).values() if e} |
                                  ({row["core_extra"]} if row.get("core_extra") else set())):
            reqs = [r for r in requirements_for_extras(lines, [extra] if extra else [])
                    if r.name.lower() in KEY and r.specifier and (extra == "" or "extra" in str(r.marker))]
            if reqs:
                pins.append("%s: %s" % (extra or "base", ", ".join(sorted("%s%s" % (r.name, r.specifier) for r in reqs))))
        classes = "\n".join("%s = %s" % kv for kv in sorted((row.get("key_classes") or {}).items()))
        table.add_row(v, meta.get("requires_python") or "-", "\n".join(pins) or "-", row.get("vllm_runtime") or "-",
                      classes, "%s [%s]\n%s" % (row.get("source"), row.get("confidence", "?"), meta.get("source", "")))
    console.print(table)
    return 0
