#!/usr/bin/env python3
"""Generate matrices/verl_reward_sources.json: the data_source values verl's default reward
function knows, per release, read from each release's PyPI wheel.

For every release in matrices/metadata/verl.json it downloads the wheel (``pip download
--no-deps --only-binary :all:``; cached in ``--cache``), opens
``verl/utils/reward_score/__init__.py`` and parses ``default_compute_score`` (``_default_compute_score``
in releases before it was renamed) with :mod:`ast`: every ``data_source == "x"``,
``data_source in [...]`` and ``data_source.startswith("x")`` in it. Nothing is imported or run.
Release 0.1 keeps its scorer in ``verl/trainer/main_ppo.py`` (``_select_rm_score_fn``), which
is read the same way.

Usage: python3 tools/gen_reward_sources.py [--cache DIR] [--check]
``--check`` compares with the stored file and exits 1 when they differ.
"""

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "matrices", "verl_reward_sources.json")
FILES = ("verl/utils/reward_score/__init__.py", "verl/trainer/main_ppo.py")
FUNCS = ("default_compute_score", "_default_compute_score", "_select_rm_score_fn")


def wheel(version: str, cache: str) -> str:
    """Path of verl ``version``'s wheel in ``cache`` (downloaded with pip when absent)."""
    def present() -> List[str]:
        return [f for f in os.listdir(cache) if f.startswith("verl-%s-" % version) and f.endswith(".whl")]

    if not present():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "--disable-pip-version-check", "verl==%s" % version, "-d", cache], check=True)
    found = present()
    if not found:
        raise SystemExit("no wheel for verl %s in %s" % (version, cache))
    return os.path.join(cache, found[0])


def _strings(node: ast.AST) -> List[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _is_source(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "data_source"


def scan(src: str) -> Optional[Tuple[str, List[str], List[str]]]:
    """(function name, exact data_source values, prefixes) of the first scorer function in
    ``src``, or None when it has none."""
    tree = ast.parse(src)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name not in FUNCS:
            continue
        exact: List[str] = []
        prefixes: List[str] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and _is_source(node.left):
                for op, comp in zip(node.ops, node.comparators):
                    if isinstance(op, (ast.Eq, ast.In)):
                        exact += _strings(comp)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "startswith" and _is_source(node.func.value):
                for a in node.args:
                    prefixes += _strings(a)
        return fn.name, sorted(set(exact)), sorted(set(prefixes))
    return None


def one(version: str, cache: str) -> Dict[str, Any]:
    path = wheel(version, cache)
    with open(path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        for f in FILES:
            if f in names:
                got = scan(z.read(f).decode("utf-8"))
                if got:
                    fn, exact, prefixes = got
                    return {"sources": exact, "prefixes": prefixes, "file": f, "function": fn,
                            "wheel": os.path.basename(path), "sha256": sha}
    return {"sources": None, "prefixes": None, "file": None, "function": None, "wheel": os.path.basename(path),
            "sha256": sha, "note": "no default scorer function found in %s" % ", ".join(FILES)}


def generate(cache: str) -> Dict[str, Any]:
    with open(os.path.join(ROOT, "matrices", "metadata", "verl.json"), encoding="utf-8") as fh:
        releases = list(json.load(fh)["releases"])
    return {"generated_by": "tools/gen_reward_sources.py",
            "source": "each release's PyPI wheel (sha256 below): verl/utils/reward_score/__init__.py "
                      "default_compute_score (0.1: verl/trainer/main_ppo.py _select_rm_score_fn), parsed with ast",
            "versions": {v: one(v, cache) for v in releases}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/verl-preflight/wheels"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.cache, exist_ok=True)
    data = generate(a.cache)
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if a.check:
        with open(OUT, encoding="utf-8") as fh:
            same = fh.read() == text
        print("matrices/verl_reward_sources.json is %s" % ("up to date" if same else "stale: regenerate it"))
        return 0 if same else 1
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(text)
    print("wrote %s (%d releases)" % (OUT, len(data["versions"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
