"""The package's import graph: no cycle, no import from a lower layer to a higher one, no private
name imported across modules. Imports inside functions count: the graph is read with ``ast``
from every module under ``preflight/`` (the ``target/`` scripts run inside the checked
interpreter, stdlib only, and ``_vendor/`` is third-party code: both are left out).

The layer table below is the one statement of the architecture's floors (top to bottom). A
module belongs to the layer of the longest prefix that names it; it may import modules of its
own layer (the graph must stay acyclic) and of any layer below, never above.
"""

import ast
import functools
import os
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "preflight")

#: The floors, top to bottom.
#: - entry: the command line (argv in, exit code out);
#: - commands: one module per subcommand, plus what they share (output options, the stack);
#: - orchestration: running the staged checks (runner) and the cluster check over Ray;
#: - checks: the registered checks, one module per stage;
#: - domain: presentation (report/), the files the tool writes (outputs/), launch preflight
#:   (launch/), the stack planner (resolve/), the facts a check reads (context), the log
#:   classifier (explain/) and the rehearsal (rehearse/);
#: - facts: how facts are read (probes/: subprocesses, NVML, /proc) and the data (matrix/, proofs);
#: - leaf: modules that import nothing of the package but each other (results, errors,
#:   redaction, paths, the atomic writer, stage names, GPU arithmetic...).
LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("entry", ("preflight.__main__", "preflight.cli")),
    ("commands", ("preflight.commands",)),
    ("orchestration", ("preflight.runner", "preflight.cluster")),
    ("checks", ("preflight.checks",)),
    ("domain", ("preflight.report", "preflight.outputs", "preflight.launch", "preflight.resolve",
                "preflight.context", "preflight.explain", "preflight.rehearse")),
    ("facts", ("preflight.probes", "preflight.matrix", "preflight.proofs", "preflight.proof_index",
               "preflight.proof_sdists", "preflight.wheel_metadata",
               "preflight.proof_refresh", "preflight.marker_env",
               "preflight.pip_output")),
    ("leaf", ("preflight", "preflight.result", "preflight.errors", "preflight.redact", "preflight.paths",
              "preflight.atomic", "preflight.temproot", "preflight.stages", "preflight.pipes", "preflight.hw",
              "preflight.netif",
              "preflight.diagnose", "preflight.shell", "preflight.interrupts", "preflight.limits",
              "preflight.sdist_purity")),
)

#: Edges the layering still has, each with the change that removes it (none today: keep it so).
ALLOWED_UPWARD: Set[Tuple[str, str]] = set()
#: Import cycles still allowed (none: keep it so).
ALLOWED_CYCLES: List[Set[str]] = []
#: (importer, module, name) of private names still imported across modules.
ALLOWED_PRIVATE: Set[Tuple[str, str, str]] = set()
#: Packages whose modules still share private names among themselves (none: keep it so).
ALLOWED_PRIVATE_PACKAGES: Set[str] = set()


def _modules() -> Dict[str, str]:
    """module name -> path, for every module of the package but target/ and _vendor/."""
    out = {}
    for d, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(d, os.path.dirname(ROOT))
        parts = rel.split(os.sep)
        if len(parts) > 1 and parts[1] in ("target", "_vendor"):
            dirs[:] = []
            continue
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                name = parts + ([] if f == "__init__.py" else [f[:-3]])
                out[".".join(name)] = os.path.join(d, f)
    return out


MODULES = _modules()


def _imports(mod: str, path: str) -> Iterator[Tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every import of the package in ``path``,
    at any depth (function bodies included)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    pkg = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "preflight" and not target.startswith("preflight."):
                continue
            for alias in node.names:
                sub = target + "." + alias.name
                if sub in MODULES:  # from . import child: the module itself
                    yield sub, "", node.lineno
                else:
                    yield target, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "preflight" or alias.name.startswith("preflight."):
                    yield alias.name, "", node.lineno


@functools.lru_cache(maxsize=None)
def _all_imports() -> Dict[str, List[Tuple[str, str, int]]]:
    return {m: list(_imports(m, p)) for m, p in MODULES.items()}


def _edges() -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {m: {} for m in MODULES}
    for m, found in _all_imports().items():
        for target, _, line in found:
            if target != m:
                out[m].setdefault(target, line)
    return out


def layer_of(mod: str) -> int:
    """Index in :data:`LAYERS` (0 is the top) of the longest prefix naming ``mod``; -1 if none."""
    best, where = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:  # the top package itself ("preflight") names only its __init__
            if (mod == p or (p != "preflight" and mod.startswith(p + "."))) and len(p) > best:
                best, where = len(p), i
    return where


def _cycles(edges: Dict[str, Dict[str, int]]) -> List[Set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[Set[str]] = []
    counter = [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


def test_the_graph_is_read():
    """The reader sees imports at every depth: runner's function-level import of the stage
    modules is dynamic, but cli's top-level import of commands and install's function-level
    import of check are both edges."""
    edges = _edges()
    assert "preflight.commands" in edges["preflight.cli"]
    assert "preflight.commands.check" in edges["preflight.commands.install"]  # inside run_checks()
    assert len(MODULES) > 60 and not any(".target" in m or "_vendor" in m for m in MODULES)


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if layer_of(m) < 0)
    assert not missing, "add these modules to LAYERS in tests/test_layers.py: %s" % ", ".join(missing)


def test_no_import_cycle():
    cycles = [c for c in _cycles(_edges()) if c not in ALLOWED_CYCLES]
    assert not cycles, "import cycles (imports inside functions count): %s" % "; ".join(
        " <-> ".join(sorted(c)) for c in cycles)


def test_no_upward_import():
    bad = []
    for m, targets in _edges().items():
        for t, line in targets.items():
            if t in MODULES and layer_of(t) < layer_of(m) and (m, t) not in ALLOWED_UPWARD:
                bad.append("%s:%d imports %s (%s above %s)" % (m, line, t, LAYERS[layer_of(t)][0],
                                                               LAYERS[layer_of(m)][0]))
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(bad))


def test_allowances_are_still_needed():
    """An allowed edge that is gone must leave the lists (so they only shrink)."""
    edges = _edges()
    cycles = _cycles(edges)
    assert all(t in edges[m] for m, t in ALLOWED_UPWARD), "remove the fixed edge from ALLOWED_UPWARD"
    assert all(c in cycles for c in ALLOWED_CYCLES), "remove the fixed cycle from ALLOWED_CYCLES"


def _private_imports() -> List[Tuple[str, str, str, int]]:
    out = []
    for m, found in _all_imports().items():
        for target, name, line in found:
            leaf = name or target.rpartition(".")[2]
            if leaf.startswith("_") and not leaf.startswith("__") and not (not name and target in MODULES
                                                                           and target.startswith(m + ".")):
                out.append((m, target, leaf, line))
    return out


def test_no_private_name_imported_across_modules():
    bad = ["%s:%d imports %s from %s" % (m, line, name, t) for m, t, name, line in _private_imports()
           if (m, t, name) not in ALLOWED_PRIVATE
           and not any(m.startswith(p + ".") and t.startswith(p + ".") for p in ALLOWED_PRIVATE_PACKAGES)]
    assert not bad, "private names imported across modules (make them public, with a docstring):\n" + "\n".join(bad)


@pytest.mark.parametrize("source, expected", [
    ("from ..matrix import _read\n", [("preflight.matrix", "_read")]),
    ("def f():\n    from .process import _x as y\n", [("preflight.probes.process", "_x")]),
    ("import preflight._private\n", [("preflight._private", "_private")]),
    ("from . import process\n", []),
])
def test_the_private_name_reader(tmp_path, source, expected):
    """The reader on known sources: a private name at the top, inside a function (aliased), a
    private module; a public module is not one."""
    path = tmp_path / "mod.py"
    path.write_text(source)
    got = []
    for target, name, _ in _imports("preflight.probes.mod", str(path)):
        leaf = name or target.rpartition(".")[2]
        if leaf.startswith("_") and not leaf.startswith("__"):
            got.append((target, leaf))
    assert got == expected


def test_checks_reach_context_through_public_accessors():
    """No check module reads the Context's private state (``ctx._memo``, ``ctx._facts``)."""
    bad = []
    for m, p in MODULES.items():
        if not m.startswith("preflight.checks."):
            continue
        with open(p, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ctx" \
                    and node.attr.startswith("_"):
                bad.append("%s:%d ctx.%s" % (m, node.lineno, node.attr))
    assert not bad, "\n".join(bad)
