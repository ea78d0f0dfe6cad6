"""The effective verl config of a launch: defaults, then the user's file, then the overrides,
composed by Hydra's own code (hydra-core's compose API), never by a copy of its rules.

Two ways, the first preferred:

* **hydra**: the target interpreter has verl and hydra-core. The target script ``verl_compose``
  composes from verl's packaged config directory with the target's own Hydra, so precedence,
  group selection, the override grammar and interpolation are verl's own.
* **stored**: no verl in the target. The same script runs under the checker's own interpreter with
  the hydra-core/omegaconf vendored in the zipapp, over the release's config tree stored in
  ``matrices/verl_config/<version>/`` (the wheel's ``verl/trainer/config/**.yaml`` byte for byte,
  tools/gen_verl_config.py), copied to a temporary directory for Hydra's file search path.

Either way Hydra reports the unresolved config after each step (defaults, file, overrides) and
the resolved one, and the result is a :class:`Composed`, whose :attr:`Composed.provenance` says
for every leaf whether it came from the defaults, the file or an override. Hydra's refusals
become a :class:`ConfigError` quoting Hydra's message, with a fix. Then the release's own code is
applied: a key that verl's config dataclass for that node lacks (``+key`` passes Hydra, verl's
``omega_conf_to_dataclass`` stops with TypeError) fails, and the fix names the key that
replaced it (``matrices/verl_config/renames.json``) or says to delete it.
"""

import atexit
import copy
import dataclasses
import difflib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.version import Version

from ..errors import UsageError
from ..paths import file_problem
from ..matrix import _read, parse_version
from ..redact import MASK as SECRET_MASK
from ..redact import add_secret, is_secret_key, redact
from .overrides import ConfigError, LaunchSpec, Override

__all__ = ["Composed", "ComposeUnsupported", "compose", "compose_stored", "stored_index", "stored_release",
           "release_doc", "stored_tree", "flatten", "provenance", "get_path", "MISSING", "redact_config_value",
           "FileUnreadable", "unknown_fields", "key_fix", "HYDRA_KEYS"]

MISSING = "???"  #: OmegaConf's mandatory-value marker
#: Keys hydra.utils.instantiate consumes itself before calling a ``_target_`` class.
HYDRA_KEYS = ("_target_", "_recursive_", "_convert_", "_partial_", "_args_")


class FileUnreadable(UsageError):
    """The saved config (``--file``/``--config``) cannot be read as a config: malformed YAML or
    JSON, or not a mapping. verl would fail on it too (a FAIL row in ``check``, exit 2 in
    ``config``)."""


class ComposeUnsupported(Exception):
    """Nothing can compose what was asked: no stored config tree for the release or config name,
    or no Hydra in the checker itself; ``fix`` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


# ---- tree helpers ---------------------------------------------------------------------------
def _parts(key: str) -> List[str]:
    return [p for p in re.sub(r"\[(\d+)\]", r".\1", key).split(".") if p != ""]


def get_path(tree: Any, key: str, default: Any = None) -> Any:
    """Value at dotted ``key`` in nested dicts/lists, or ``default`` when a part is absent."""
    node = tree
    for p in _parts(key):
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return default
    return node


def _has(tree: Any, parts: Sequence[str]) -> bool:
    node = tree
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return False
    return True


def flatten(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """Leaves of ``tree`` by dotted path (lists and empty dicts are leaves)."""
    out: Dict[str, Any] = {}
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            out.update(flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
    elif prefix:
        out[prefix] = tree
    return out


# ---- stored config trees --------------------------------------------------------------------
def _json(rel: str) -> Optional[Dict[str, Any]]:
    raw = _read(os.path.join("verl_config", rel), None)
    return None if raw is None else json.loads(raw.decode("utf-8"))


def stored_index() -> Dict[str, Dict[str, Any]]:
    """Stored releases -> ``{"wheel", "sha256", "configs"}`` (``matrices/verl_config/index.json``)."""
    doc = _json("index.json") or {}
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
    doc = _json(version + ".json")
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
        data = _read(os.path.join("verl_config", version, *rel.split("/")), None)
        if data is None:
            shutil.rmtree(base, ignore_errors=True)
            raise ComposeUnsupported("matrices/verl_config/%s/%s is missing" % (version, rel),
                                     "rebuild the zipapp or restore matrices/ from the repository")
        dst = os.path.join(root, *rel.split("/"))
        from ..atomic import write_atomic

        write_atomic(dst, data, "verl's config tree", create_dirs=True)  # in this run's private directory
    _TREES[version] = root
    return root


def _hydra_path() -> List[str]:
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


# ---- the release's own rules: config dataclasses and renamed keys ----------------------------
def unknown_fields(final: Dict[str, Any], defaults: Dict[str, Any],
                   dataclasses_: Dict[str, Any]) -> List[Tuple[str, str]]:
    """Keys the user added to a node that verl turns into a dataclass lacking them.

    ``final``/``defaults``: unresolved trees; ``dataclasses_``: ``_target_`` -> ``{"fields"}`` (of
    that release, read from its source). Returns ``[(dotted key, _target_)]``; a key the release's
    own defaults already hold is never reported.
    """
    out: List[Tuple[str, str]] = []

    def walk(node: Any, path: List[str]) -> None:
        if isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [str(i)])
            return
        if not isinstance(node, dict):
            return
        target = node.get("_target_")
        info = dataclasses_.get(target) if isinstance(target, str) else None
        fields = (info or {}).get("fields")
        base = get_path(defaults, ".".join(path)) if path else defaults
        for k, v in node.items():
            if fields is not None and k not in fields and k not in HYDRA_KEYS and \
                    not (isinstance(base, dict) and k in base):
                out.append((".".join(path + [str(k)]), target))
            walk(v, path + [str(k)])
    walk(final, [])
    return out


def _renames(config_name: str) -> Dict[str, Dict[str, str]]:
    doc = _json("renames.json") or {}
    confs = doc.get("configs", {})
    return confs.get(config_name) or confs.get("ppo_trainer") or {}


def key_fix(key: str, release: Optional[str], config_name: str, tree: Dict[str, Any],
            dataclasses_: Dict[str, Any], text: str = "") -> Tuple[str, str]:
    """(why, fix) for an override of ``key`` that release ``release``'s config does not have.

    ``tree``: the composed (or default) unresolved config; ``text``: the override as written.
    A key verl dropped: the key that replaced it (followed to one that exists) or "delete it".
    A key under a node verl builds into a dataclass: "delete it" (``+key`` dies in verl too).
    Otherwise a near key, or ``+key`` when the node is a plain mapping verl reads as it is.
    """
    text = text or key
    value = text.split("=", 1)[1] if "=" in text else "..."
    parts = _parts(key)
    parent = get_path(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
    target = parent.get("_target_") if isinstance(parent, dict) else None
    fields = (dataclasses_.get(target) or {}).get("fields") if isinstance(target, str) else None
    if fields is not None and parts[-1] in fields:
        return "not in the YAML, but a field of %s" % target, "add it with +%s" % text.lstrip("+")
    ren = _renames(config_name)
    rec = ren.get(key)
    pv = parse_version(release) if release else None
    if rec and (pv is None or Version(rec["removed_in"]) <= Version(pv.public)):
        new, seen = rec.get("replacement") or "", set()
        while new and not _has(tree, _parts(new)) and new in ren and new not in seen:
            seen.add(new)
            new = ren[new].get("replacement") or ""
        why = "verl %s dropped %s (last in %s)" % (rec["removed_in"], key, rec["last_in"])
        if new and _has(tree, _parts(new)):
            return why + "; %s took its place" % new, "write %s=%s instead of %s" % (new, value, text)
        return why, "delete the override %s (verl %s has no such option)" % (text, release or rec["removed_in"])
    if fields is not None:
        near = difflib.get_close_matches(parts[-1], [f for f in fields if not f.startswith("_")], n=1, cutoff=0.75)
        why = "verl builds %s into %s, which has no field '%s' (a +%s passes Hydra, then verl stops with " \
              "TypeError: unexpected keyword argument)" % (".".join(parts[:-1]), target, parts[-1], key)
        if near:
            return why, "write %s.%s=%s instead of %s" % (".".join(parts[:-1]), near[0], value, text)
        return why, "delete the override %s" % text
    if ".megatron." in ".%s." % key and config_name != "ppo_megatron_trainer":
        return "the megatron keys live in ppo_megatron_trainer", \
            "add --config-name=ppo_megatron_trainer (the megatron keys live in that config)"
    cands = difflib.get_close_matches(key, list(flatten(tree)), n=1, cutoff=0.8)
    if cands:
        return "no such key (did you mean %s?)" % cands[0], "write %s=%s instead of %s" % (cands[0], value, text)
    return "no such key in the composed config", "add it with +%s if your own code reads it, else delete it" % \
        text.lstrip("+")


# ---- provenance -------------------------------------------------------------------------------
_REF = re.compile(r"\$\{\s*(?:oc\.select\s*:\s*)?(\.*[A-Za-z_][\w\-]*(?:\.[\w\-]+|\[\d+\])*)\s*[,}]")


def references(text: Any, path: str) -> List[str]:
    """Absolute keys a raw value interpolates (``${a.b}``, ``${.x}``, ``${oc.select:k,...}``), for
    provenance display only (OmegaConf resolves the values)."""
    if not isinstance(text, str) or "${" not in text:
        return []
    parent = _parts(path)[:-1]
    out: List[str] = []
    for k in _REF.findall(text):
        dots = len(k) - len(k.lstrip("."))
        full = (parent[:len(parent) - (dots - 1)] + _parts(k[dots:])) if dots else _parts(k)
        if full and ".".join(full) not in out and not k.startswith(("oc.", "oc_")):
            out.append(".".join(full))
    return out


def provenance(defaults: Dict[str, Any], after_file: Dict[str, Any], final: Dict[str, Any],
               overrides: Sequence[Override]) -> Dict[str, Dict[str, Any]]:
    """Where each leaf of ``final`` came from.

    Returns dotted path -> ``{"source": "default" | "file" | "override" | "--gpus" | "--nnodes",
    "override": text (when an override set it), "via": [keys it interpolates]}``. The last
    override naming the key or one of its parents wins; else "file" when the file added or changed
    it; else "default".
    """
    fd, ff, fl = flatten(defaults), flatten(after_file), flatten(final)
    out: Dict[str, Dict[str, Any]] = {}
    for path, val in fl.items():
        rec: Dict[str, Any] = {"source": "default"}
        for ov in overrides:
            if ov.kind != "delete" and (path == ov.key or path.startswith(ov.key + ".")):
                rec = {"source": ov.origin, "override": ov.text}
        if rec["source"] == "default" and (path not in fd or fd.get(path) != ff.get(path)) and path in ff:
            rec["source"] = "file"
        refs = references(val, path)
        if refs:
            rec["via"] = refs
        out[path] = rec
    return out


def effective_source(prov: Dict[str, Dict[str, Any]], path: str, _depth: int = 0) -> str:
    """The source to show for ``path``: its own, or, for an interpolated default, that of the key
    it copies (``default <- data.max_prompt_length (override)``)."""
    rec = prov.get(path)
    if rec is None:
        return "absent"
    src = rec["source"]
    if src == "default" and rec.get("via") and _depth < 5:
        for ref in rec["via"]:
            inner = effective_source(prov, ref, _depth + 1)
            if inner not in ("default", "absent"):
                return "%s via %s" % (inner.split(" via ")[0], ref)
    return src


# ---- secrets -------------------------------------------------------------------------------------
#: Name parts that say "secret" whatever the key; a key that merely ends in ``key`` (data.prompt_key)
#: or holds ``token`` inside (ppo_max_token_len_per_gpu) does not.
_PLAIN_SECRET_PARTS = {"secret", "password", "passwd", "pwd", "passphrase", "credential", "credentials", "auth",
                       "cookie", "apikey"}


def _plainly_secret(name: str) -> bool:
    parts = [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]
    return bool(_PLAIN_SECRET_PARTS.intersection(parts)) or parts[-1:] == ["token"] or \
        parts[-2:] in (["api", "key"], ["access", "key"], ["secret", "key"], ["private", "key"])


def redact_config_value(key: str, value: Any, schema: Any) -> Any:
    """The value of config ``key`` as it may be printed or written.

    ``schema``: the keys of the release's own defaults (a set of dotted paths). What
    :func:`preflight.redact.redact` masks inside values (tokens, URL passwords, KEY=value) is always
    masked. By name: a key outside verl's schema (the user's own ``+x.api_key=...``) is hidden
    when any part of it names a secret; one of verl's own keys is hidden only when its last part
    plainly does (``password``, ``api_key``, ``..._token``) and the value is a string, so
    ``data.prompt_key`` or ``actor.ppo_max_token_len_per_gpu`` keep their values.
    """
    if value in (None, "", [], {}):
        return value
    parts = _parts(key)
    if key in schema:
        if parts and _plainly_secret(parts[-1]) and isinstance(value, str):
            add_secret(value)  # hidden wherever it appears again (a value derived from it)
            return SECRET_MASK
    elif any(is_secret_key(p) for p in parts if not p.isdigit()):
        redact(value, "secret")  # registers it (and its leaves), as above
        return SECRET_MASK
    return redact(value)


# ---- the result -------------------------------------------------------------------------------
@dataclass
class Composed:
    """The effective config of one launch.

    Attributes:
        method: ``hydra`` (composed in the target by Hydra) or ``stored`` (matrices/verl_config).
        verl_version: release whose defaults were used.
        config_name: the trainer config (``ppo_trainer``).
        defaults, after_file, raw: unresolved trees after each step.
        resolved: the final tree with interpolations resolved.
        provenance: see :func:`provenance`.
        source: where the defaults came from (a directory or the stored file and its source note).
        notes: remarks for the user (nearest stored release, ignored words...).
        error: a :class:`ConfigError` when the composition itself fails as verl's would.
        resolve_errors: dotted path -> why its interpolation could not be resolved.
        env: environment assignments of the launch command.
        probe: how the composing process in the target ended (:meth:`ProbeOutput.evidence`), kept
            when it failed: with ``error`` kind ``compose_probe`` (Hydra never finished) or with
            ``method`` stored (the target could not compose at all, the stored defaults were used).
    """

    method: str
    verl_version: Optional[str]
    config_name: str
    defaults: Dict[str, Any] = field(default_factory=dict)
    after_file: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict)
    resolved: Dict[str, Any] = field(default_factory=dict)
    provenance: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    notes: List[str] = field(default_factory=list)
    error: Optional[ConfigError] = None
    resolve_errors: Dict[str, str] = field(default_factory=dict)
    env: Dict[str, str] = field(default_factory=dict)
    probe: Dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """Resolved value at dotted ``key`` (``default`` when absent)."""
        return get_path(self.resolved, key, default)

    def has(self, key: str) -> bool:
        """True when the resolved config has ``key``."""
        return _has(self.resolved, _parts(key))

    def source_of(self, key: str) -> str:
        """Display source of ``key`` (see :func:`effective_source`)."""
        return effective_source(self.provenance, key)

    def schema(self) -> set:
        """Dotted keys of the release's defaults (verl's own config keys)."""
        return set(flatten(self.defaults))

    def shown_values(self, keys: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Resolved values by dotted key (every leaf, or ``keys``), redacted for printing and
        writing (see :func:`redact_config_value`)."""
        schema = self.schema()
        leaves = flatten(self.resolved)
        keys = list(leaves) if keys is None else keys
        return {k: redact_config_value(k, leaves[k] if k in leaves else self.get(k), schema) for k in keys}

    def shown_overrides(self, overrides: Sequence[Override]) -> List[str]:
        """The override texts, with the value of a secret key masked (as :meth:`shown_values`)."""
        schema = self.schema()
        out = []
        for ov in overrides:
            if not ov.has_value:
                out.append(ov.text)
                continue
            head, _eq, val = ov.text.partition("=")
            shown = redact_config_value(ov.key, ov.value, schema)
            out.append("%s=%s" % (head, SECRET_MASK if shown == SECRET_MASK else redact(val)))
        return out

    def to_dict(self, full: bool = False) -> Dict[str, Any]:
        """JSON-ready summary; ``full`` adds every resolved leaf with its provenance. Every field is
        redacted: values key by key (:meth:`shown_values`), texts with :func:`redact`."""
        err = None if self.error is None else {"kind": self.error.kind, "message": redact(self.error.message),
                                               "fix": redact(self.error.fix)}
        d: Dict[str, Any] = {"method": self.method, "verl_version": self.verl_version,
                             "config_name": self.config_name, "source": redact(self.source),
                             "notes": [redact(n) for n in self.notes], "error": err,
                             "resolve_errors": {k: redact(v) for k, v in self.resolve_errors.items()}}
        if full:
            d["values"] = {k: {"value": v, "source": self.source_of(k)} for k, v in self.shown_values().items()}
        return d




#: Largest config file read (bytes). A verl config is a few KB (a full dump of ppo_trainer about
#: 50 KB); anything far larger is data passed by mistake, and reading it would outlast --timeout.
MAX_CONFIG_BYTES = 1 << 20


def _check_user_file(path: str) -> None:
    """Raise UsageError when the saved config (``config --file``, ``check --config``) is absent, FileUnreadable when it is over
    :data:`MAX_CONFIG_BYTES` or a .json file is not a JSON mapping (YAML files are read by Hydra's
    OmegaConf in the composing process)."""
    why = file_problem(path)
    if why is not None:
        raise UsageError("config file %s: %s; pass the path of a saved verl config (YAML or JSON)" % (path, why))
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise FileUnreadable("config file %s is %.1f MiB, over the %d MiB a config can be (a verl config is a few KB); "
                             "pass the config itself, not data" % (path, size / float(1 << 20), MAX_CONFIG_BYTES >> 20))
    if path.lower().endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            raise FileUnreadable("config file %s: not valid JSON (%s); fix the file or pass the YAML" % (path, exc))
        except RecursionError:  # c03: 150000 nested objects
            raise FileUnreadable("config file %s: not valid JSON (nested too deeply for a config); fix the file or "
                                 "pass the YAML" % path)
        if not isinstance(data, dict):
            raise FileUnreadable("config file %s: the top level must be a mapping of config keys" % path)


def _args(spec: LaunchSpec, file: Optional[str], config_dir: Optional[str]) -> Dict[str, Any]:
    return {"config_name": spec.config_name or "ppo_trainer", "config_dir": config_dir,
            "file": os.path.abspath(file) if file else None, "overrides": spec.override_texts, "resolve": True}


def _config_dir(spec: LaunchSpec) -> Optional[str]:
    if not spec.config_path:
        return None
    cp = os.path.expanduser(spec.config_path)
    if not os.path.isabs(cp) and spec.entry and spec.entry.endswith(".py"):
        cp = os.path.join(os.path.dirname(os.path.abspath(spec.entry)), cp)
    return os.path.abspath(cp) if os.path.isabs(cp) or os.path.isdir(cp) else cp


def _target_fields(python: str, final: Dict[str, Any], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    """The installed verl's config dataclasses named by ``_target_`` in ``final`` (read with
    ``ast`` in the target by preflight/target/verl_fields.py); {} when that fails."""
    from ..probes.process import run_script

    targets: set = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("_target_"), str):
                targets.add(node["_target_"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(final)
    out = run_script(python, "verl_fields", {"targets": sorted(targets)}, timeout=timeout, env=env)
    ev = out.last("fields")
    return dict(ev["fields"]) if ev else {}


def _build(out: Any, spec: LaunchSpec, file: Optional[str], method: str, notes: List[str], python: str,
           timeout: float, release: Optional[str], fields: Any) -> Composed:
    """A Composed from the events of one verl_compose run (see the script's header)."""
    envev = out.last("env")
    env = dict(spec.env)
    trees = {e["stage"]: e["tree"] for e in out.events if e.get("event") == "tree"}
    err = out.last("error")
    if file and out.last("file_error") is not None:
        raise _unreadable(file, out.last("file_error"))
    defaults = trees.get("defaults", {})
    after = trees.get("file", defaults)
    final = trees.get("final", after)
    name = spec.config_name or "ppo_trainer"
    where = envev.get("primary_dir") or envev.get("config_dir")
    if method == "stored":
        where = "matrices/verl_config/%s/ (%s, composed by the vendored Hydra %s)" % (
            envev.get("verl_version"), name, envev.get("hydra_version"))
    else:
        where = "%s (Hydra %s in the target)" % (where, envev.get("hydra_version"))
    c = Composed(method, envev.get("verl_version"), name, defaults, after, final, source=where, notes=notes, env=env)
    res = out.last("resolved")
    if res is not None:
        c.resolved = res["tree"]
    else:
        rerr = out.last("resolve_error")
        c.resolved = rerr.get("tree", final) if rerr else final
        if rerr:
            c.resolve_errors = dict(rerr.get("errors") or {}) or {"(config)": rerr["message"].splitlines()[0]}
    c.provenance = provenance(defaults, after, final, spec.overrides)
    rel = release if method == "stored" else (c.verl_version or release)
    if err is not None:
        c.error = _hint(err, spec, rel, final or defaults, fields() if callable(fields) else fields)
    elif "final" not in trees:  # the process died or hung before Hydra answered
        c.error = _probe_error(python, out, timeout)
        c.probe = out.evidence()
    else:
        dcs = fields() if callable(fields) else fields
        bad = unknown_fields(final, defaults, dcs)
        if bad:
            key, target = bad[0]
            text = next((o.text for o in spec.overrides if o.key.lstrip("+~") == key), key)
            why, fix = key_fix(key, rel, name, final, dcs, text)
            more = "" if len(bad) == 1 else " (and %s)" % ", ".join(k for k, _t in bad[1:4])
            c.error = ConfigError("unknown_field", "%s: %s%s" % (text, why, more), fix)
    return c


def _script_code(name: str) -> Any:
    """The compiled script ``preflight/target/<name>.py`` alone (run_here gives it ARGS and emit,
    which the prelude defines in a child)."""
    if name not in _CODE:
        from .. import target as pkg

        path = os.path.join(os.path.dirname(pkg.__file__), name + ".py")
        loader = getattr(pkg, "__loader__", None)
        if loader is not None and hasattr(loader, "get_data"):
            src = loader.get_data(path).decode("utf-8")
        else:  # pragma: no cover - plain file loaders have get_data
            with open(path, encoding="utf-8") as fh:
                src = fh.read()
        _CODE[name] = compile(src, path, "exec")
    return _CODE[name]


_CODE: Dict[str, Any] = {}
_DEFAULTS: Dict[Tuple[str, str], Dict[str, Any]] = {}  #: (release, config name) -> composed defaults


def run_here(name: str, args: Dict[str, Any], env: Optional[Dict[str, str]] = None) -> Any:
    """Run target script ``name`` in this process (the checker's own, vendored Hydra): the same
    code and events as :func:`preflight.probes.process.run_script`, without a process start and a
    Hydra import per call. ``env`` is set in os.environ while it runs (``${oc.env:...}``), then
    restored. Returns a ProbeOutput (returncode 1 and the traceback as stderr when it raised)."""
    import time
    import traceback
    import warnings

    from ..probes.process import ProbeOutput

    out = ProbeOutput(argv=["<in-process %s>" % name])
    t0 = time.monotonic()

    def emit(event: str, **fields: Any) -> None:
        fields["event"] = event
        out.events.append(json.loads(json.dumps(fields, default=str)))
    saved = {k: os.environ.get(k) for k in (env or {})}
    try:
        os.environ.update(env or {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(_script_code(name), {"ARGS": json.loads(json.dumps(args)), "emit": emit, "__name__": "__main__"})
        out.returncode = 0
    except BaseException as exc:  # noqa: BLE001 - reported like a crashed probe
        if isinstance(exc, KeyboardInterrupt):
            raise
        out.returncode = 1
        out.stderr_tail = traceback.format_exc()[-2000:]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        out.duration_s = time.monotonic() - t0
    return out


def compose_stored(spec: LaunchSpec, file: Optional[str] = None, release: Optional[str] = None,
                   env: Optional[Dict[str, str]] = None, timeout: float = 90.0) -> Composed:
    """Compose with the checker's own (vendored) Hydra over the stored config tree of ``release``
    (the nearest stored one; see :func:`stored_release`): in this process (:func:`run_here`) for
    overrides alone, in a child of this interpreter under ``timeout`` when a ``file`` is read.

    ``file``: a saved config (YAML/JSON path) merged over the defaults. ``env``: the environment
    for ``${oc.env:...}`` (default: this process's, plus the launch's assignments). Raises
    ComposeUnsupported (no stored tree, no Hydra here), UsageError/FileUnreadable for ``file``;
    Hydra's refusal is :attr:`Composed.error`.
    """
    name = spec.config_name or "ppo_trainer"
    if file:
        _check_user_file(file)
    pick, notes = stored_release(release, name)
    tree = stored_tree(pick)
    args = _args(spec, file, _config_dir(spec))
    if args["config_dir"] and not os.path.isabs(args["config_dir"]):
        args["config_dir"] = os.path.join(os.path.dirname(tree), args["config_dir"])
    args.update({"stored_dir": tree, "stored_version": pick, "sys_path": _hydra_path()})
    child_env = {} if env is None else dict(env)
    child_env.update(spec.env)
    memo_key = (pick, name) if not file and not args["config_dir"] else None
    args["skip_defaults"] = memo_key in _DEFAULTS
    if file:  # a user's file can be large: read it in a child of this interpreter, under the deadline
        from ..probes.process import run_script

        out = run_script(sys.executable, "verl_compose", args, timeout=timeout, env=dict(os.environ, **child_env))
        if out.last("env") is None and not out.timed_out:
            raise ComposeUnsupported("the vendored Hydra could not compose: %s" % out.describe(),
                                     "run the checker with a Python 3.8+ that can import the zipapp's hydra "
                                     "(stderr: %s)" % (out.stderr_tail.strip().splitlines() or ["-"])[-1][:200])
        if out.last("env") is None:
            out.events.insert(0, {"event": "env", "verl_version": pick, "config_dir": tree})
    else:  # overrides only: bounded work, in this process (no process start, Hydra imported once)
        out = run_here("verl_compose", args, env=child_env)
    if memo_key is not None:
        if args["skip_defaults"]:
            out.events.insert(1, {"event": "tree", "stage": "defaults", "tree": copy.deepcopy(_DEFAULTS[memo_key])})
        else:
            got = [e["tree"] for e in out.events if e.get("event") == "tree" and e.get("stage") == "defaults"]
            if got:
                _DEFAULTS[memo_key] = copy.deepcopy(got[0])
    if out.last("env") is None:
        raise ComposeUnsupported("the vendored Hydra could not compose: %s" % out.describe(),
                                 "run the checker with a Python 3.8+ that can import the zipapp's hydra (stderr: "
                                 "%s)" % (out.stderr_tail.strip().splitlines() or ["-"])[-1][:200])
    doc = release_doc(pick)
    return _build(out, spec, file, "stored", list(notes), sys.executable, timeout, pick, doc.get("dataclasses") or {})


def _hint(err: Dict[str, Any], spec: LaunchSpec, release: Optional[str], tree: Dict[str, Any],
          fields: Dict[str, Any]) -> ConfigError:
    """Hydra's refusal as a ConfigError: Hydra's own first line, and the fix for that kind."""
    msg = str(err.get("message") or "").strip()
    first = msg.splitlines()[0] if msg else err.get("kind", "error")
    name = spec.config_name or "ppo_trainer"
    fix = "fix the override or file named in the message"
    kind = "hydra_%s" % err.get("stage", "compose")
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        text = next((o.text for o in spec.overrides if o.key == key), key)
        why, fix = key_fix(key, release, name, tree, fields, text)
        first, kind = "%s (%s)" % (first, why), "override_missing"
    elif "Could not append to config. An item is already at" in msg:
        fix, kind = "drop the '+' (an existing key is set with key=value) or use '++'", "append_existing"
    elif "Could not delete from config" in msg:
        fix, kind = "remove the ~ override: the key is not in the config (or has another value)", "delete_missing"
    elif "Ambiguous value" in msg:
        fix, kind = "write a list as key=[a,b], quote a string as key='a,b', or drop --multirun sweeps", \
            "ambiguous_value"
    elif "Error parsing override" in msg or "mismatched input" in msg or "extraneous input" in msg or \
            "no viable alternative" in msg or "token recognition error" in msg:
        fix = "fix the override's syntax (Hydra's grammar: quote values with special characters, e.g. " \
              "key='a b' inside the shell's quotes)"
        kind = "override_syntax"
    elif "Sweep parameters" in msg or "sweep" in msg.lower():
        fix = "give one value: a launch composes one config (sweeps need --multirun and a sweeper)"
    elif "Cannot find primary config" in msg or "MissingConfigException" in str(err.get("kind")):
        fix = "check --config-name/--config-path (or --file) against the configs of this verl release"
    elif "Could not find" in msg and "/" in msg:
        fix = "pick one of the options Hydra lists for that config group"
    return ConfigError(kind, "Hydra (%s step): %s" % (err.get("stage"), first), fix)


def compose(python: str, spec: LaunchSpec, file: Optional[str] = None, release: Optional[str] = None,
            timeout: float = 90.0) -> Composed:
    """The effective config of ``spec`` (+ ``file``) for the target interpreter ``python``.

    Hydra in the target when it has verl, else the vendored Hydra over the stored tree of
    ``release`` (:func:`compose_stored`). Raises FileUnreadable (a UsageError) for a ``file``
    that is not valid YAML/JSON, UsageError when it is absent, and ComposeUnsupported when
    neither way can compose.
    """
    from ..probes.process import run_script
    from .rules import entry_point

    ep = entry_point(spec.entry)
    if spec.config_name is None and ep is not None:
        spec = dataclasses.replace(spec, config_name=ep["config_name"])  # the entry point's own config
    if file:
        _check_user_file(file)
    env = dict(spec.env)
    out = run_script(python, "verl_compose", _args(spec, file, _config_dir(spec)), timeout=timeout, env=env)
    notes = list(spec.notes)
    if spec.entry and ep is None:
        notes.append("entry point %s is not one of verl's: composed with %s, the config of "
                     "verl.trainer.main_ppo (pass --config-name if it uses another)" % (
                         spec.entry, spec.config_name or "ppo_trainer"))
    if spec.ignored:
        notes.append("not read as overrides: %s" % " ".join(spec.ignored))
    if out.last("env") is not None:
        memo: Dict[str, Any] = {}

        def fields() -> Dict[str, Any]:
            if "f" not in memo:
                trees = [e["tree"] for e in out.events if e.get("event") == "tree"]
                memo["f"] = _target_fields(python, trees[-1] if trees else {}, env, min(timeout, 60.0))
            return memo["f"]
        return _build(out, spec, file, "hydra", notes, python, timeout, release, fields)
    failed_probe = out.last("no_verl") is None
    if failed_probe:
        notes.append("the target interpreter %s could not compose (%s); used the stored config tree" % (
            python, out.describe()))
    c = compose_stored(spec, file, release, env=dict(os.environ, **env), timeout=timeout)
    c.notes = notes + c.notes
    if failed_probe:
        c.probe = out.evidence()
    return c


def _unreadable(file: str, fe: Dict[str, Any]) -> FileUnreadable:
    text = str(fe.get("message") or "").strip()
    first = (text.splitlines() or [""])[0]
    where = re.findall(r"line \d+, column \d+", text)
    return FileUnreadable("config file %s: not valid YAML (%s: %s%s); fix the file" % (
        file, fe.get("kind"), first, " at %s" % where[-1] if where else ""))


def _probe_error(python: str, out: Any, timeout: float) -> ConfigError:
    """A composing process that ended without Hydra's answer, as a ConfigError of kind
    ``compose_probe`` (an ERROR row: the launch was not checked)."""
    tail = [ln for ln in out.stderr_tail.strip().splitlines() if ln.strip()]
    msg = "composing with Hydra in %s did not finish: %s%s" % (python, out.describe(),
                                                              "; stderr: %s" % tail[-1][:300] if tail else "")
    if out.timed_out:
        fix = "raise --timeout (it was %.0f s), or check why Hydra is slow in that environment" % timeout
    else:
        fix = "run the launch command itself in that environment to see the error (stderr tail in the evidence)"
    return ConfigError("compose_probe", msg, fix)
