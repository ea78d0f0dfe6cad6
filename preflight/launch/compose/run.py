"""Composition itself: Hydra in the target, or the vendored Hydra over a stored release."""

import copy
import dataclasses
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..overrides import ConfigError, LaunchSpec
from .errors import ComposeUnsupported
from .fields import BUILT, key_fix, launch_strategies, unknown_fields
from .files import check_user_file, unreadable_error
from .gate import check_config_dirs
from .inprocess import run_here
from .provenance import provenance
from .result import Composed
from .stored import hydra_path, release_doc, stored_release, stored_tree

_DEFAULTS: Dict[Tuple[str, str], Dict[str, Any]] = {}  #: (release, config name) -> composed defaults


def _args(spec: LaunchSpec, file: Optional[str], config_dir: Optional[str]) -> Dict[str, Any]:
    return {"config_name": spec.config_name or "ppo_trainer", "config_dir": config_dir,
            "file": os.path.abspath(file) if file else None, "overrides": spec.override_texts, "resolve": True}


def config_dir(spec: LaunchSpec) -> Optional[str]:
    """The launch's --config-path as an absolute directory (relative to its script), or None."""
    if not spec.config_path:
        return None
    cp = os.path.expanduser(spec.config_path)
    if not os.path.isabs(cp) and spec.entry and spec.entry.endswith(".py"):
        cp = os.path.join(os.path.dirname(os.path.abspath(spec.entry)), cp)
    # relative: as Hydra reads it, against the directory of the entry module (verl/trainer/ for
    # "-m verl.trainer.main_ppo", where "config" is verl's own config directory), never the working directory
    return os.path.abspath(cp) if os.path.isabs(cp) else cp


def _target_fields(python: str, final: Dict[str, Any], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    """The installed verl's config dataclasses named by ``_target_`` in ``final`` (read with
    ``ast`` in the target by preflight/target/verl_fields.py); {} when that fails."""
    from ...probes.process import run_script

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
    if not ev:
        return {}
    fields = dict(ev["fields"])
    if isinstance(ev.get("built"), dict):
        fields[BUILT] = ev["built"]
    return fields


def _build(out: Any, spec: LaunchSpec, file: Optional[str], method: str, notes: List[str], python: str,
           timeout: float, release: Optional[str], fields: Any) -> Composed:
    """A Composed from the events of one verl_compose run (see the script's header)."""
    envev = out.last("env")
    env = dict(spec.env)
    trees = {e["stage"]: e["tree"] for e in out.events if e.get("event") == "tree"}
    err = out.last("error")
    if file and out.last("file_error") is not None:
        raise unreadable_error(file, out.last("file_error"))
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
        c.error = _hint(err, spec, rel, final or defaults, fields() if callable(fields) else fields,
                        launch_strategies(spec.overrides, after, defaults))
    elif "final" not in trees or getattr(out, "timed_out", False):
        # the process died or hung before Hydra answered, or while it resolved interpolations
        c.error = _probe_error(python, out, timeout)
        c.probe = out.evidence()
    else:
        dcs = fields() if callable(fields) else fields
        bad = unknown_fields(final, defaults, dcs)
        if bad:
            key, target = bad[0]
            text = next((o.text for o in spec.overrides if o.key.lstrip("+~") == key), key)
            why, fix = key_fix(key, rel, name, final, dcs, text, launch_strategies(spec.overrides, final, defaults))
            more = "" if len(bad) == 1 else " (and %s)" % ", ".join(k for k, _t in bad[1:4])
            c.error = ConfigError("unknown_field", "%s: %s%s" % (text, why, more), fix)
    return c


#: Overrides composed in this process at most (more, or longer, go to a child under the deadline).
MAX_INPROCESS_OVERRIDES = 400
MAX_INPROCESS_BYTES = 64 * 1024


def bounded(spec: LaunchSpec) -> bool:
    """True when composing ``spec``'s overrides is bounded work that may run in this process: no
    override interpolates (``${...}``: 17 self-doubling references take hours in OmegaConf's
    resolver, fault case c01), at most :data:`MAX_INPROCESS_OVERRIDES` of them, and at most
    :data:`MAX_INPROCESS_BYTES` in all. Anything else composes in a child under ``--timeout``."""
    texts = spec.override_texts
    return len(texts) <= MAX_INPROCESS_OVERRIDES and sum(len(t) for t in texts) <= MAX_INPROCESS_BYTES and \
        not any("${" in t for t in texts)


def compose_stored(spec: LaunchSpec, file: Optional[str] = None, release: Optional[str] = None,
                   env: Optional[Dict[str, str]] = None, timeout: float = 90.0) -> Composed:
    """Compose with the checker's own (vendored) Hydra over the stored config tree of ``release``
    (the nearest stored one; see :func:`stored_release`): in this process (:func:`run_here`) for
    plain overrides (:func:`bounded`), in a child of this interpreter under ``timeout`` when a
    ``file`` is read or an override interpolates (arguments through the probe API, never argv).

    ``file``: a saved config (YAML/JSON path) merged over the defaults. ``env``: the environment
    for ``${oc.env:...}`` (default: this process's, plus the launch's assignments). Raises
    ComposeUnsupported (no stored tree, no Hydra here), UsageError/FileUnreadable for ``file``;
    Hydra's refusal is :attr:`Composed.error`.
    """
    name = spec.config_name or "ppo_trainer"
    if file:
        check_user_file(file)
    check_config_dirs(spec.override_texts, file, config_dir(spec), name)
    own = config_dir(spec)
    # the user's own config directory holds the primary config (it extends verl's through its
    # defaults list): the release is picked by verl's trainer config, which the stored tree supplies
    in_own = own is not None and os.path.isabs(own) and os.path.isfile(os.path.join(own, name + ".yaml"))
    pick, notes = stored_release(release, "ppo_trainer" if in_own else name)
    tree = stored_tree(pick)
    args = _args(spec, file, own)
    if args["config_dir"] and not os.path.isabs(args["config_dir"]):
        args["config_dir"] = os.path.join(os.path.dirname(tree), args["config_dir"])
    args.update({"stored_dir": tree, "stored_version": pick, "sys_path": hydra_path()})
    child_env = {} if env is None else dict(env)
    child_env.update(spec.env)
    memo_key = (pick, name) if not file and not args["config_dir"] else None
    args["skip_defaults"] = memo_key in _DEFAULTS
    if file or not bounded(spec):  # a file, or overrides that can run away: a child, under the deadline
        from ...probes.process import run_script

        out = run_script(sys.executable, "verl_compose", args, timeout=timeout, env=dict(os.environ, **child_env))
        if out.last("env") is None and not out.timed_out:
            raise ComposeUnsupported("the vendored Hydra could not compose: %s" % out.describe(),
                                     "run the checker with a Python 3.8+ that can import the zipapp's hydra "
                                     "(stderr: %s)" % (out.stderr_tail.strip().splitlines() or ["-"])[-1][:200])
        if out.last("env") is None:
            out.events.insert(0, {"event": "env", "verl_version": pick, "config_dir": tree})
    else:  # plain overrides: bounded work, in this process (no process start, Hydra imported once)
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
    return _build(out, spec, file, "stored", list(notes), sys.executable, timeout, pick, dict(doc.get("dataclasses") or {}, **({BUILT: doc["built"]} if isinstance(doc.get("built"), dict) else {})))


def _hint(err: Dict[str, Any], spec: LaunchSpec, release: Optional[str], tree: Dict[str, Any],
          fields: Dict[str, Any], strategies: Optional[Dict[str, str]] = None) -> ConfigError:
    """Hydra's refusal as a ConfigError: Hydra's own first line, and the fix for that kind
    (``strategies``: the launch's own, :func:`launch_strategies`)."""
    msg = str(err.get("message") or "").strip()
    first = msg.splitlines()[0] if msg else err.get("kind", "error")
    name = spec.config_name or "ppo_trainer"
    fix = "fix the override or file named in the message"
    kind = "hydra_%s" % err.get("stage", "compose")
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        text = next((o.text for o in spec.overrides if o.key == key), key)
        why, fix = key_fix(key, release, name, tree, fields, text, strategies)
        first = "%s (%s)" % (first, why)
        kind = "key_not_in_release" if "(it came in verl " in why else "override_missing"
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
    from ...probes.process import run_script
    from ..rules import entry_point

    ep = entry_point(spec.entry)
    if spec.config_name is None and ep is not None:
        spec = dataclasses.replace(spec, config_name=ep["config_name"])  # the entry point's own config
    if file:
        check_user_file(file)
    check_config_dirs(spec.override_texts, file, config_dir(spec), spec.config_name or "ppo_trainer")
    env = dict(spec.env)
    out = run_script(python, "verl_compose", _args(spec, file, config_dir(spec)), timeout=timeout, env=env)
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
