"""The effective verl config of a launch: defaults, then the user's file, then the overrides.

Two ways, the first preferred:

* **hydra**: the target interpreter has verl (and so hydra-core and omegaconf). The target script
  ``verl_compose`` composes with Hydra's compose API from verl's packaged config directory, so
  precedence, group selection and interpolation are verl's own. It reports the unresolved config
  after each step (defaults, file, overrides) and the resolved one.
* **stored**: no verl in the target. The release's defaults come from
  ``matrices/verl_config/<version>/<config name>.json`` (generated from the real packaged YAML by
  tools/gen_verl_config.py); the file is merged over them (OmegaConf merge: dicts recursively,
  anything else replaced) and the overrides are applied in order with Hydra's rules
  (:func:`apply_override`); interpolations (``${a.b}``, ``${.x}``, ``${oc.select:k,default}``,
  ``${oc.env:VAR,default}``) are resolved by :class:`Resolver`.

Either way the result is a :class:`Composed`, whose :attr:`Composed.provenance` says for every
leaf whether it came from the defaults, the file or an override.
"""

import copy
import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.version import Version

from ..errors import UsageError
from ..matrix import _read, parse_version
from ..redact import MASK as SECRET_MASK
from ..redact import add_secret, is_secret_key, redact
from .overrides import ConfigError, LaunchSpec, Override, _element, _top_level_split

__all__ = ["Composed", "ComposeUnsupported", "compose", "compose_stored", "stored_index", "load_stored",
           "merge", "apply_override", "Resolver", "resolve", "flatten", "provenance", "get_path", "MISSING",
           "redact_config_value", "FileUnreadable"]

MISSING = "???"  #: OmegaConf's mandatory-value marker


class FileUnreadable(UsageError):
    """The saved config (``--file``/``--config``) cannot be read as a config: malformed YAML or
    JSON, or not a mapping. verl would fail on it too (a FAIL row in ``check``, exit 2 in
    ``config``)."""


class ComposeUnsupported(Exception):
    """The stored-defaults composer cannot do what was asked (a config group override, a file
    with its own defaults list); ``fix`` says how to get Hydra to do it."""

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


def merge(base: Any, over: Any) -> Any:
    """OmegaConf merge of plain data: dicts merge key by key (recursively), anything else in
    ``over`` replaces. Neither input is changed."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = copy.deepcopy(base)
        for k, v in over.items():
            out[k] = merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


# ---- stored defaults ------------------------------------------------------------------------
def stored_index() -> Dict[str, List[str]]:
    """Stored releases -> config names (``matrices/verl_config/index.json``)."""
    raw = _read(os.path.join("verl_config", "index.json"), None)
    if raw is None:
        return {}
    return dict(json.loads(raw.decode("utf-8")).get("versions", {}))


def load_stored(version: Optional[str], config_name: str) -> Tuple[Dict[str, Any], List[str]]:
    """(stored document, notes) for the release nearest ``version`` (the newest at or below it,
    else the oldest stored) that has ``config_name``.

    Raises ComposeUnsupported when no release has that config stored.
    """
    idx = {v: names for v, names in stored_index().items() if config_name in names}
    if not idx:
        raise ComposeUnsupported("no stored defaults for config '%s' (stored: %s)" % (
            config_name, ", ".join(sorted({n for ns in stored_index().values() for n in ns})) or "none"),
            "point --python at an environment with verl installed so Hydra composes it")
    known = sorted(idx, key=Version)
    pv = parse_version(version) if version else None
    pick = known[-1]
    notes: List[str] = []
    if pv is not None:
        below = [v for v in known if Version(v) <= Version(pv.base_version)]
        pick = below[-1] if below else known[0]
        if Version(pick) != Version(pv.public):
            notes.append("no stored defaults for verl %s; using those of %s" % (version, pick))
    raw = _read(os.path.join("verl_config", pick, config_name + ".json"), None)
    if raw is None:
        raise ComposeUnsupported("stored defaults verl_config/%s/%s.json are missing" % (pick, config_name),
                                 "rebuild the zipapp or restore matrices/ from the repository")
    return json.loads(raw.decode("utf-8")), notes


# ---- Hydra's override rules on plain data ---------------------------------------------------
def _suggest(tree: Dict[str, Any], key: str) -> str:
    cands = difflib.get_close_matches(key, list(flatten(tree)), n=1, cutoff=0.75)
    return (" (did you mean %s?)" % cands[0]) if cands else ""


def apply_override(tree: Dict[str, Any], ov: Override, groups: Optional[Dict[str, List[str]]] = None,
                   config_name: str = "ppo_trainer") -> None:
    """Apply one override to ``tree`` in place, as Hydra does on the composed (struct) config.

    ``key=v`` needs an existing key; ``+key=v`` needs it absent (parents are created);
    ``++key=v`` sets it either way; ``~key`` deletes an existing key (``~key=v`` only if the value
    is v). A dict value merges into an existing dict. Raises ConfigError with Hydra's complaint,
    and ComposeUnsupported for a config group override (``model_engine=megatron``), which needs
    Hydra's defaults list.
    """
    groups = groups or {}
    head = ov.key.split("@")[0].split("/")[0]
    if "@" in ov.key or "/" in ov.key or (head in groups and "." not in ov.key and isinstance(ov.value, str)
                                          and ov.value in groups[head]):
        raise ComposeUnsupported("'%s' selects a config group option; the stored defaults cannot re-run Hydra's "
                                 "defaults list" % ov.text,
                                 "point --python at an environment with verl so Hydra composes it (or use "
                                 "--config-name for a whole trainer config)")
    parts = _parts(ov.key)
    exists = _has(tree, parts)
    if ov.kind == "delete":
        if not exists:
            raise ConfigError("delete_missing", "Hydra: could not delete '%s': the key does not exist" % ov.key,
                              "remove the override %s" % ov.text)
        parent = get_path(tree, ".".join(parts[:-1])) if len(parts) > 1 else tree
        if ov.has_value and parent[parts[-1]] != ov.value:
            raise ConfigError("delete_mismatch", "Hydra: could not delete '%s': its value is %r, not %r" % (
                ov.key, parent[parts[-1]], ov.value), "write ~%s without a value" % ov.key)
        del parent[parts[-1] if isinstance(parent, dict) else int(parts[-1])]
        return
    if ov.kind == "set" and not exists:
        fix = "add it with +%s" % ov.text
        if ".megatron." in ".%s." % ov.key and config_name != "ppo_megatron_trainer":
            fix = "add --config-name=ppo_megatron_trainer (the megatron keys live in that config), or %s" % fix
        raise ConfigError("override_missing", "Hydra: could not override '%s': no such key in the composed config%s"
                          % (ov.key, _suggest(tree, ov.key)), fix)
    if ov.kind == "add" and exists:
        raise ConfigError("append_existing", "Hydra: could not append '%s': the key already exists" % ov.key,
                          "drop the '+' (%s) or use '++'" % ov.text.lstrip("+"))
    node = tree
    for p in parts[:-1]:
        if isinstance(node, list) and p.isdigit():
            node = node[int(p)]
            continue
        if not isinstance(node, dict):
            raise ConfigError("override_missing", "Hydra: could not override '%s': '%s' is not a mapping" % (
                ov.key, p), "check the key path with preflight config --print")
        if p not in node or not isinstance(node[p], (dict, list)):
            node[p] = {}
        node = node[p]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = copy.deepcopy(ov.value)
    elif isinstance(node.get(last), dict) and isinstance(ov.value, dict):
        node[last] = merge(node[last], ov.value)
    else:
        node[last] = copy.deepcopy(ov.value)


# ---- interpolation ----------------------------------------------------------------------------
class _InterpError(Exception):
    pass


def _scan_interp(text: str, start: int) -> int:
    """Index just past the ``}`` closing the ``${`` at ``start``."""
    depth, i, quote = 0, start, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"" and depth > 0:
            quote = c
        elif text.startswith("${", i):
            depth += 1
            i += 2
            continue
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _InterpError("unclosed interpolation in %r" % text)


def _segments(text: str) -> List[Tuple[bool, str]]:
    """``(is_interpolation, text)`` pieces of a string; ``\\${`` is a literal ``${``."""
    out: List[Tuple[bool, str]] = []
    i, lit = 0, []
    while i < len(text):
        if text.startswith("\\${", i):
            lit.append("${")
            i += 3
        elif text.startswith("${", i):
            if lit:
                out.append((False, "".join(lit)))
                lit = []
            end = _scan_interp(text, i)
            out.append((True, text[i + 2:end - 1]))
            i = end
        else:
            lit.append(text[i])
            i += 1
    if lit:
        out.append((False, "".join(lit)))
    return out


_RESOLVER = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*:(.*)$", re.S)


class Resolver:
    """OmegaConf's interpolation on plain data (the subset verl's configs use).

    Supports absolute ``${a.b}``, relative ``${.x}``/``${..x}``, ``${oc.select:key,default}``,
    ``${oc.env:VAR,default}``, nesting, and string interpolation (``x_${a}``). A whole-string
    interpolation keeps the referenced value's type. ``???`` stays ``???``; ``oc.select`` on a
    missing or ``???`` key gives its default. Errors (an absent key, a cycle, an unknown resolver)
    are kept in :attr:`errors` by path and the raw text is left in place.
    """

    def __init__(self, root: Dict[str, Any], env: Optional[Dict[str, str]] = None) -> None:
        self.root = root
        self.env = os.environ if env is None else env
        self.errors: Dict[str, str] = {}
        self._cache: Dict[Tuple[str, ...], Any] = {}
        self._stack: List[Tuple[str, ...]] = []

    def tree(self) -> Dict[str, Any]:
        """The whole config, resolved."""
        return self._node((), self.root)

    def value(self, key: str) -> Any:
        """Resolved value at dotted ``key``; raises KeyError when absent."""
        parts = tuple(_parts(key))
        if not _has(self.root, parts):
            raise KeyError(key)
        return self._node(parts, get_path(self.root, key))

    def _node(self, path: Tuple[str, ...], node: Any) -> Any:
        if isinstance(node, dict):
            return {k: self._node(path + (str(k),), v) for k, v in node.items()}
        if isinstance(node, list):
            return [self._node(path + (str(i),), v) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            if path in self._cache:
                return self._cache[path]
            if path in self._stack:
                raise _InterpError("interpolation cycle at %s" % ".".join(path))
            self._stack.append(path)
            try:
                val = self._string(node, path[:-1])
            except _InterpError as exc:
                if not self._stack[:-1]:  # record at the top level only
                    self.errors[".".join(path)] = str(exc)
                    val = node
                else:
                    raise
            finally:
                self._stack.pop()
            self._cache[path] = val
            return val
        return node

    def _string(self, text: str, parent: Tuple[str, ...]) -> Any:
        segs = _segments(text)
        if len(segs) == 1 and segs[0][0]:
            return self._interp(segs[0][1], parent)
        out = []
        for is_interp, t in segs:
            if is_interp:
                v = self._interp(t, parent)
                out.append("None" if v is None else (str(v).lower() if isinstance(v, bool) else str(v)))
            else:
                out.append(t)
        return "".join(out)

    def _lookup(self, key: str, parent: Tuple[str, ...]) -> Tuple[bool, Any]:
        key = key.strip()
        dots = len(key) - len(key.lstrip("."))
        if dots:
            up = dots - 1
            if up > len(parent):
                raise _InterpError("relative key %r goes above the root" % key)
            base = parent[:len(parent) - up]
            parts = base + tuple(_parts(key[dots:]))
        else:
            parts = tuple(_parts(key))
        if not _has(self.root, parts):
            return False, None
        return True, self._node(parts, get_path(self.root, ".".join(parts)))

    def _arg(self, text: str, parent: Tuple[str, ...]) -> Any:
        t = text.strip()
        if "${" in t:
            return self._string(t, parent)
        try:
            return _element(t, t)
        except ConfigError:
            return t

    def _interp(self, body: str, parent: Tuple[str, ...]) -> Any:
        m = _RESOLVER.match(body)
        if not m:
            found, val = self._lookup(body, parent)
            if not found:
                raise _InterpError("interpolation key '%s' not found" % body.strip())
            return val
        name, args = m.group(1), _top_level_split(m.group(2))
        if name == "oc.select":
            found, val = self._lookup(args[0], parent)
            if found and val != MISSING:
                return val
            return self._arg(args[1], parent) if len(args) > 1 else None
        if name == "oc.env":
            var = args[0].strip()
            if var in self.env:
                return self.env[var]
            if len(args) > 1:
                d = self._arg(args[1], parent)
                return None if d is None else str(d)
            raise _InterpError("environment variable '%s' not found" % var)
        raise _InterpError("resolver '%s' is not supported by the stored-defaults composer" % name)


def resolve(tree: Dict[str, Any], env: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(resolved copy of ``tree``, errors by dotted path); see :class:`Resolver`."""
    r = Resolver(tree, env)
    return r.tree(), r.errors


def references(text: Any, path: str) -> List[str]:
    """Absolute keys a raw value interpolates (``oc.select`` keys included), for provenance."""
    if not isinstance(text, str) or "${" not in text:
        return []
    parent = _parts(path)[:-1]
    out: List[str] = []

    def walk(s: str) -> None:
        try:
            segs = _segments(s)
        except _InterpError:
            return
        for is_interp, body in segs:
            if not is_interp:
                continue
            m = _RESOLVER.match(body)
            keys = [_top_level_split(m.group(2))[0]] if m and m.group(1) == "oc.select" else ([] if m else [body])
            for k in keys:
                k = k.strip()
                dots = len(k) - len(k.lstrip("."))
                full = (parent[:len(parent) - (dots - 1)] + _parts(k[dots:])) if dots else _parts(k)
                if full and ".".join(full) not in out:
                    out.append(".".join(full))
            if m:
                for a in _top_level_split(m.group(2))[1:]:
                    if "${" in a:
                        walk(a)
    walk(text)
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


def _read_user_file(path: str) -> Optional[Dict[str, Any]]:
    """A JSON file's content, or None for YAML (read in the target). Raises UsageError for a
    missing file and FileUnreadable for one that is not JSON or is over :data:`MAX_CONFIG_BYTES`."""
    if not os.path.isfile(path):
        raise UsageError("--file %s: no such file; pass the path of a saved verl config (YAML or JSON)" % path)
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise FileUnreadable("--file %s is %.1f MiB, over the %d MiB a config can be (a verl config is a few KB); "
                             "pass the config itself, not data" % (path, size / float(1 << 20), MAX_CONFIG_BYTES >> 20))
    if path.lower().endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            raise FileUnreadable("--file %s: not valid JSON (%s); fix the file or pass the YAML" % (path, exc))
        if not isinstance(data, dict):
            raise FileUnreadable("--file %s: the top level must be a mapping of config keys" % path)
        return data
    return None


def compose_stored(spec: LaunchSpec, file_tree: Optional[Dict[str, Any]], release: Optional[str],
                   env: Optional[Dict[str, str]] = None) -> Composed:
    """Compose from the stored defaults of ``release`` (see module doc). Never runs a process.

    Raises ComposeUnsupported for what only Hydra can do; a Hydra-style refusal of an override
    is returned as :attr:`Composed.error`.
    """
    name = spec.config_name or "ppo_trainer"
    if spec.config_path:
        raise ComposeUnsupported("--config-path %s: a user config directory needs Hydra" % spec.config_path,
                                 "point --python at an environment with verl so Hydra composes it")
    doc, notes = load_stored(release, name)
    groups = doc.get("groups") or {}
    defaults = doc["config"]
    after = copy.deepcopy(defaults)
    if file_tree is not None:
        ft = dict(file_tree)
        dl = ft.pop("defaults", None)
        ft.pop("hydra", None)
        if dl is not None:
            names = [d for d in dl if isinstance(d, str)]
            if [d for d in dl if not isinstance(d, str)] or [d for d in names if d not in (name, "_self_")]:
                raise ComposeUnsupported("the file has its own defaults list %s; only [%s, _self_] can be followed "
                                         "without Hydra" % (dl, name),
                                         "point --python at an environment with verl so Hydra composes it")
            if names and names[-1] != "_self_":
                notes.append("the file lists _self_ before %s: its values are overridden by the defaults" % name)
                after = merge(ft, defaults)
            else:
                after = merge(defaults, ft)
        else:
            after = merge(defaults, ft)
    final = copy.deepcopy(after)
    out = Composed("stored", doc.get("verl"), name, defaults, after, final,
                   source="matrices/verl_config/%s/%s.json (%s)" % (doc.get("verl"), name, doc.get("source", "")),
                   notes=notes, env=dict(spec.env))
    try:
        for ov in spec.overrides:
            apply_override(final, ov, groups, name)
    except ConfigError as exc:
        out.error = exc
    env_all = dict(os.environ if env is None else env)
    env_all.update(spec.env)
    out.resolved, out.resolve_errors = resolve(final, env_all)
    out.provenance = provenance(defaults, after, final, spec.overrides)
    return out


def _hint(err: Dict[str, Any], spec: LaunchSpec) -> ConfigError:
    msg = str(err.get("message") or "").strip()
    first = msg.splitlines()[0] if msg else err.get("kind", "error")
    fix = "fix the override or file named in the message"
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        fix = "add it with +%s=..., or check the spelling with preflight config --print" % key
        if ".megatron." in ".%s." % key and (spec.config_name or "ppo_trainer") != "ppo_megatron_trainer":
            fix = "add --config-name=ppo_megatron_trainer (the megatron keys live in that config)"
    elif "already at" in msg:
        fix = "drop the '+' or use '++' to override an existing key"
    elif "Ambiguous value" in msg:
        fix = "write a list as key=[a,b] or quote a string as key='a,b'"
    elif "Cannot find primary config" in msg or "MissingConfigException" in str(err.get("kind")):
        fix = "check --config-name/--config-path (or --file) against the configs of this verl release"
    return ConfigError("hydra_%s" % err.get("stage", "compose"), "Hydra (%s step): %s" % (err.get("stage"), first), fix)


def compose(python: str, spec: LaunchSpec, file: Optional[str] = None, release: Optional[str] = None,
            timeout: float = 90.0) -> Composed:
    """The effective config of ``spec`` (+ ``file``) for the target interpreter ``python``.

    Hydra in the target when it has verl, else the stored defaults of ``release``. Raises
    FileUnreadable (a UsageError) for a ``file`` that is not valid YAML/JSON, UsageError when it
    is absent or YAML with no YAML reader in the target, and
    ComposeUnsupported when the stored path cannot follow the request.
    """
    from ..probes.process import run_script
    from .rules import entry_point

    ep = entry_point(spec.entry)
    if spec.config_name is None and ep is not None:
        spec = dataclasses.replace(spec, config_name=ep["config_name"])  # the entry point's own config
    file_json = _read_user_file(file) if file else None
    config_dir = None
    if spec.config_path:
        cp = os.path.expanduser(spec.config_path)
        if not os.path.isabs(cp) and spec.entry and spec.entry.endswith(".py"):
            cp = os.path.join(os.path.dirname(os.path.abspath(spec.entry)), cp)
        config_dir = os.path.abspath(cp) if os.path.isabs(cp) or os.path.isdir(cp) else cp
    env = dict(spec.env)
    out = run_script(python, "verl_compose", {
        "config_name": spec.config_name or "ppo_trainer", "config_dir": config_dir,
        "file": os.path.abspath(file) if file else None, "overrides": spec.override_texts, "resolve": True,
    }, timeout=timeout, env=env)
    envev = out.last("env")
    notes = list(spec.notes)
    if spec.entry and ep is None:
        notes.append("entry point %s is not one of verl's: composed with %s, the config of "
                     "verl.trainer.main_ppo (pass --config-name if it uses another)" % (
                         spec.entry, spec.config_name or "ppo_trainer"))
    if spec.ignored:
        notes.append("not read as overrides: %s" % " ".join(spec.ignored))
    if envev is not None:
        trees = {e["stage"]: e["tree"] for e in out.events if e.get("event") == "tree"}
        err = out.last("error")
        if file and out.last("file_error") is not None:
            raise _unreadable(file, out.last("file_error"))
        defaults = trees.get("defaults", {})
        after = trees.get("file", defaults)
        final = trees.get("final", after)
        c = Composed("hydra", envev.get("verl_version"), spec.config_name or "ppo_trainer", defaults, after, final,
                     source="%s (Hydra %s in the target)" % (envev.get("primary_dir") or envev.get("config_dir"),
                                                              envev.get("hydra_version")),
                     notes=notes, env=env)
        if err is not None:
            c.error = _hint(err, spec)
        elif "final" not in trees:  # the process died or hung before Hydra answered
            c.error = _probe_error(python, out, timeout)
            c.probe = out.evidence()
        res = out.last("resolved")
        mine, errors = resolve(final, dict(os.environ, **env))
        c.resolved = res["tree"] if res is not None else mine
        if res is None:
            rerr = out.last("resolve_error")
            c.resolve_errors = errors or ({"(config)": rerr["message"]} if rerr else {})
        c.provenance = provenance(defaults, after, final, spec.overrides)
        return c
    failed_probe = out.last("no_verl") is None
    if failed_probe:
        notes.append("the target interpreter %s could not compose (%s); used the stored defaults" % (
            python, out.describe()))
    file_tree = file_json
    if file and file_json is None:
        if out.last("file_tree") is not None:
            file_tree = out.last("file_tree")["tree"]
        elif out.last("file_error") is not None:
            fe = out.last("file_error")
            raise _unreadable(file, fe)
        elif out.last("no_yaml") is not None:
            raise UsageError("--file %s is YAML and %s has neither omegaconf nor PyYAML to read it; pass the config "
                             "as JSON or point --python at the verl environment" % (file, python))
        elif out.timed_out:
            raise UsageError("--file %s: reading it in %s took longer than --timeout %.0f s; raise --timeout or "
                             "pass a smaller config" % (file, python, timeout))
        else:
            raise UsageError("--file %s could not be read: the reading process in %s %s; run that interpreter on "
                             "the file to see why, or pass the config as JSON" % (file, python, out.describe()))
        if not isinstance(file_tree, dict):
            raise FileUnreadable("--file %s: the top level must be a mapping of config keys" % file)
    c = compose_stored(spec, file_tree, release, env=dict(os.environ, **env))
    c.notes = notes + c.notes
    if failed_probe:
        c.probe = out.evidence()
    return c


def _unreadable(file: str, fe: Dict[str, Any]) -> FileUnreadable:
    text = str(fe.get("message") or "").strip()
    first = (text.splitlines() or [""])[0]
    where = re.findall(r"line \d+, column \d+", text)
    return FileUnreadable("--file %s: not valid YAML (%s: %s%s); fix the file" % (
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
