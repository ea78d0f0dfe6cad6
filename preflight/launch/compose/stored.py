"""The stored config trees of verl releases (``matrices/verl_config``, tools/gen_verl_config.py)."""

import atexit
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import Version

from ...matrix import parse_version, read_data
from .errors import ComposeUnsupported


def stored_json(rel: str) -> Optional[Dict[str, Any]]:
    """The JSON document ``matrices/verl_config/<rel>`` as a dict, or None when the zipapp holds no such file."""
    raw = read_data("verl_config/" + rel)
    return None if raw is None else json.loads(raw.decode("utf-8"))


def stored_index() -> Dict[str, Dict[str, Any]]:
    """Stored releases -> ``{"wheel", "sha256", "configs"}`` (``matrices/verl_config/index.json``)."""
    doc = stored_json("index.json") or {}
    return dict(doc.get("versions", {}))


def stored_release(version: Optional[str], config_name: Optional[str] = None) -> Tuple[str, List[str]]:
    """(stored release to compose with, notes): ``version`` itself when stored, else the newest
    stored release below it, else the oldest; only releases that have ``config_name``.

    Raises ComposeUnsupported when no stored release has that config.
    """
    idx = {v: d for v, d in stored_index().items() if config_name is None or config_name in d.get("configs", [])}
    if not idx:
        names = sorted({n for d in stored_index().values() for n in d.get("configs", [])})
        raise ComposeUnsupported("no stored verl release has config '%s' (stored configs: %s)" % (
            config_name, ", ".join(names) or "none"), "pass --config-name with one of those, or point --python at "
                                                      "an environment with verl so its own Hydra composes it")
    known = sorted(idx, key=Version)
    pv = parse_version(version) if version else None
    pick, notes = known[-1], []
    if pv is not None:
        exact = [v for v in known if Version(v) == Version(pv.public)]
        below = [v for v in known if Version(v) <= Version(pv.public)]
        pick = exact[0] if exact else (below[-1] if below else known[0])
        if Version(pick) != Version(pv.public):
            notes.append("no stored config tree for verl %s; composed with that of %s" % (version, pick))
    return pick, notes


def release_doc(version: str) -> Dict[str, Any]:
    """``matrices/verl_config/<version>.json``: files, configs, groups and the config dataclasses'
    fields of a stored release. Raises ComposeUnsupported when it is missing."""
    doc = stored_json(version + ".json")
    if doc is None:
        raise ComposeUnsupported("matrices/verl_config/%s.json is missing" % version,
                                 "rebuild the zipapp or restore matrices/ from the repository")
    return doc


_TREES: Dict[str, str] = {}


def _cleanup() -> None:
    for d in list(_TREES.values()):
        shutil.rmtree(os.path.dirname(d), ignore_errors=True)
    _TREES.clear()


def stored_tree(version: str) -> str:
    """A directory holding release ``version``'s stored config tree, for Hydra's file search path
    (written once per process to a temporary directory, removed at exit: the copy inside the
    zipapp is not a directory Hydra can search)."""
    if version in _TREES and os.path.isdir(_TREES[version]):
        return _TREES[version]
    doc = release_doc(version)
    base = tempfile.mkdtemp(prefix="preflight-verl-config-")
    if not _TREES:
        atexit.register(_cleanup)
    root = os.path.join(base, "config")
    for rel in sorted(doc["files"]):
        data = read_data("verl_config/%s/%s" % (version, rel))
        if data is None:
            shutil.rmtree(base, ignore_errors=True)
            raise ComposeUnsupported("matrices/verl_config/%s/%s is missing" % (version, rel),
                                     "rebuild the zipapp or restore matrices/ from the repository")
        dst = os.path.join(root, *rel.split("/"))
        from ...atomic import write_atomic

        write_atomic(dst, data, "verl's config tree", create_dirs=True)  # in this run's private directory
    _TREES[version] = root
    return root


def hydra_path() -> List[str]:
    """The sys.path entry that holds the checker's own hydra-core (the zipapp's vendored copy, or
    the installed one), for the composing child. Raises ComposeUnsupported when there is none."""
    import importlib.util

    out = []
    for mod in ("hydra", "omegaconf", "antlr4", "yaml"):
        spec = importlib.util.find_spec(mod)
        if spec is None or not spec.submodule_search_locations:
            raise ComposeUnsupported("the checker has no %s to compose with" % mod,
                                     "use dist/preflight.pyz (it carries hydra-core), or point --python at an "
                                     "environment with verl")
        top = os.path.dirname(list(spec.submodule_search_locations)[0])
        if top not in out:
            out.append(top)
    if sys.version_info < (3, 9):
        for mod in ("importlib_resources", "zipp"):
            spec = importlib.util.find_spec(mod)
            if spec is not None and spec.origin:
                top = os.path.dirname(os.path.dirname(spec.origin)) if spec.submodule_search_locations else \
                    os.path.dirname(spec.origin)
                if top not in out:
                    out.append(top)
    return out
