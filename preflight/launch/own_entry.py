"""A launch whose entry point is not one of verl's (``python3 -m recipe.dapo.main_dapo``, a script of
the user's): the config it composes is the one its own ``@hydra.main`` names, never verl's
``ppo_trainer``. Read from the module's source with ``ast`` (nothing is imported or run), where the
job finds it: the job's working directory (``python -m`` puts it first on ``sys.path``), then the
launch's PYTHONPATH."""

import ast
import os
from typing import List, Mapping, Optional, Tuple

__all__ = ["module_file", "hydra_main", "own_config"]


def module_file(entry: str, cwd: str, env: Mapping[str, str]) -> Tuple[Optional[str], List[str]]:
    """(the file of ``entry`` (a ``-m`` module name, or a script path), the places looked in). A
    module is looked for as ``a/b/c.py`` or ``a/b/c/__main__.py`` under ``cwd`` and each PYTHONPATH
    directory of ``env``."""
    if entry.endswith(".py") or os.sep in entry:
        path = entry if os.path.isabs(entry) else os.path.join(cwd, entry)
        return (path if os.path.isfile(path) else None), [path]
    rel = entry.replace(".", os.sep)
    looked = []
    for base in [cwd] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]:
        for cand in (os.path.join(base, rel + ".py"), os.path.join(base, rel, "__main__.py")):
            looked.append(cand)
            if os.path.isfile(cand):
                return cand, looked
    return None, looked


def _literal(node: ast.AST) -> Optional[str]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def hydra_main(source: str) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """(config_path, config_name) of the ``@hydra.main(...)`` decorator in ``source`` (either may be
    None when not given or not a literal), or None when there is no such decorator."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if not isinstance(dec, ast.Call):
                continue
            fn = dec.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name != "main" or not (isinstance(fn, ast.Attribute) and getattr(fn.value, "id", None) == "hydra"
                                      or isinstance(fn, ast.Name)):
                continue
            args = {k.arg: k.value for k in dec.keywords}
            for i, key in enumerate(("config_path", "config_name")):
                if key not in args and len(dec.args) > i:
                    args[key] = dec.args[i]
            return (_literal(args["config_path"]) if "config_path" in args else None,
                    _literal(args["config_name"]) if "config_name" in args else None)
    return None


def own_config(entry: str, cwd: str, env: Mapping[str, str]) -> Tuple[Optional[Tuple[str, str]], str]:
    """((config directory, config name) the entry point ``entry`` composes, or None; why not, when
    None: its module is not on this machine, or it names no config by a literal
    ``@hydra.main``)."""
    path, looked = module_file(entry, cwd, env)
    if path is None:
        return None, "its module is not on this machine (looked in %s)" % ", ".join(looked[:4])
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            found = hydra_main(fh.read(1 << 20))
    except OSError as exc:
        return None, "%s cannot be read (%s)" % (path, exc.strerror or exc)
    config_path, config_name = found or (None, None)
    if not config_name:
        return None, "%s names no config of its own with @hydra.main(config_path=..., config_name=...)" % path
    where = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), config_path or "."))
    return (where, config_name), ""
