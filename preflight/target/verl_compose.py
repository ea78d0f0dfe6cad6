# Composes verl's trainer config with Hydra's own compose API. Two places run it:
#   * the target interpreter, with its own hydra-core and the installed verl's config directory;
#   * the checker's own interpreter when the target has no verl: with the hydra-core vendored in the
#     zipapp ("sys_path") over a release's stored config tree ("stored_dir", matrices/verl_config).
# The same script either way, so the two paths cannot drift.
# ARGS: {"config_name": "ppo_trainer", "config_dir": null | "/abs/dir" (a --config-path),
#        "file": null | "/abs/file.yaml", "overrides": ["key=value", ...], "resolve": true,
#        "stored_dir": null | "/abs/tree", "stored_version": "0.9.1", "sys_path": [...],
#        "skip_defaults": false (the caller has the defaults tree already: no "defaults" step),
#        "batch": null | [[overrides], ...] (compose each list alone: "case" events, nothing else)}
# Events:
#   "env"      {verl_version, hydra_version, omegaconf_version, config_dir (verl's), primary_dir, groups,
#               configs, stored}
#   "no_verl"  {reason}: verl or hydra-core is absent here
#   "tree"     {stage: "defaults" | "file" | "final", tree}: the unresolved config after each step
#   "resolved" {tree} or "resolve_error" {kind, message, tree (what resolves), errors {path: why}}
#   "error"    {stage, kind, message}: Hydra refused the composition (what verl would print); stage
#              "file" with a "file_error" {kind, message} before it: the --file could not be read.
#   "case"     {i, tree (resolved, or unresolved when resolution fails), resolve_error, error}
# verl is located with importlib.util.find_spec, never imported (its import is slow and heavy).
import importlib.util
import os
import shutil
import sys
import tempfile


def _version(dist):
    try:
        import importlib.metadata as md
    except ImportError:
        return None
    try:
        return md.version(dist)
    except Exception:
        return None


def _module_version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return None


def _verl_config_dir():
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        d = os.path.join(loc, "trainer", "config")
        if os.path.isdir(d):
            return d
    return None


def _groups(config_dir):
    groups, configs = {}, []
    for dirpath, dirnames, filenames in os.walk(config_dir):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("__"))
        rel = os.path.relpath(dirpath, config_dir).replace(os.sep, "/")
        opts = sorted(f[:-5] for f in filenames if f.endswith(".yaml"))
        if rel == ".":
            configs = opts
        elif opts:
            groups[rel] = opts
    return groups, configs


def _err(stage, exc):
    emit("error", stage=stage, kind=type(exc).__name__, message=str(exc).strip()[:3000])


def _compose(cdir, cname, search, ovs):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    extra = ["hydra.searchpath=[%s]" % ",".join(search)] if search else []
    with initialize_config_dir(config_dir=cdir, version_base=None):
        return compose(config_name=cname, overrides=list(ovs) + extra)


def _resolve_partial(cfg):
    """(tree with every leaf that resolves resolved, {dotted path: why} for those that do not)."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    errors = {}

    def walk(node, path):
        if isinstance(node, dict):
            return dict((k, walk(v, path + [str(k)])) for k, v in node.items())
        if isinstance(node, list):
            return [walk(v, path + [str(i)]) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            key = ".".join(path)
            try:
                val = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
                return OmegaConf.to_container(val, resolve=True) if OmegaConf.is_config(val) else val
            except Exception as exc:
                errors[key] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300])
        return node
    return walk(raw, []), errors


class _LoadOnce:
    """OmegaConf.load for one batch: each distinct YAML text is parsed once and every later load of
    it gets a deep copy of that DictConfig (a copy costs about a tenth of the pure-Python parse, and a
    composition of ppo_trainer loads some 30 files). Only the public OmegaConf.load is replaced, and
    only while the batch runs; the texts are read from the files each time, so an edit is seen. An
    OmegaConf without its own load (a stub, a fork) is left alone: composing then fails or not on its
    own terms, never on this cache."""

    def __init__(self, omegaconf):
        self.oc, self.orig, self.seen = omegaconf, getattr(omegaconf, "load", None), {}
        # the staticmethod itself, put back as it was
        self.descriptor = vars(omegaconf).get("load") if isinstance(omegaconf, type) else None

    def load(self, file_):
        import copy
        import io

        if getattr(file_, "read", None) is None:
            return self.orig(file_)
        text = file_.read()
        if text not in self.seen:
            self.seen[text] = self.orig(io.StringIO(text))
        return copy.deepcopy(self.seen[text])

    def __enter__(self):
        if self.descriptor is not None and callable(self.orig):
            self.oc.load = self.load
        return self

    def __exit__(self, *exc):
        if self.descriptor is not None and callable(self.orig):
            self.oc.load = self.descriptor


def _batch(verl_dir, config_name, cases, resolve):
    from omegaconf import OmegaConf

    with _LoadOnce(OmegaConf):
        for i, ovs in enumerate(cases):
            _case(verl_dir, config_name, i, ovs, resolve)


def _case(verl_dir, config_name, i, ovs, resolve):
    from omegaconf import OmegaConf

    try:
        cfg = _compose(verl_dir, config_name, [], ovs)
    except Exception as exc:
        emit("case", i=i, error={"kind": type(exc).__name__, "message": str(exc).strip()[:2000]})
        return
    tree, rerr = None, None
    if resolve:
        try:
            tree = OmegaConf.to_container(cfg, resolve=True)
        except Exception as exc:
            rerr = {"kind": type(exc).__name__, "message": str(exc).strip()[:2000]}
    if tree is None:
        tree = OmegaConf.to_container(cfg, resolve=False)
    emit("case", i=i, tree=tree, resolve_error=rerr)


def main():
    for p in reversed(ARGS.get("sys_path") or []):
        if p not in sys.path:
            sys.path.insert(0, p)
    config_name = ARGS.get("config_name") or "ppo_trainer"
    user_dir = ARGS.get("config_dir")
    path = ARGS.get("file")
    overrides = list(ARGS.get("overrides") or [])
    stored = ARGS.get("stored_dir")
    verl_dir = stored or _verl_config_dir()
    if user_dir and not os.path.isabs(user_dir) and verl_dir:
        # Hydra reads a relative --config-path against the entry module's directory (verl/trainer/)
        user_dir = os.path.normpath(os.path.join(os.path.dirname(verl_dir), user_dir))
    try:
        from omegaconf import OmegaConf
        import hydra  # noqa: F401
        have_hydra = True
    except ImportError as exc:
        have_hydra = False
        hydra_error = str(exc)
    if verl_dir is None or not have_hydra:
        emit("no_verl", reason="verl is not installed" if verl_dir is None else "hydra-core/omegaconf missing: %s"
             % hydra_error)
        return
    if user_dir and not os.path.isabs(user_dir):
        # Hydra reads a relative --config-path against the file that declares @hydra.main:
        # verl/trainer/main_ppo.py
        user_dir = os.path.join(os.path.dirname(verl_dir), user_dir)
    groups, configs = _groups(verl_dir)
    emit("env", verl_version=ARGS.get("stored_version") if stored else _version("verl"),
         hydra_version=_version("hydra-core") if not stored else _module_version("hydra"),
         omegaconf_version=_version("omegaconf") if not stored else _module_version("omegaconf"),
         config_dir=verl_dir, primary_dir=user_dir or verl_dir, groups=groups, configs=configs, stored=bool(stored))
    if ARGS.get("batch") is not None:
        _batch(verl_dir, config_name, ARGS["batch"], ARGS.get("resolve", True))
        return

    tmp = tempfile.mkdtemp(prefix="preflight-compose-")
    try:
        # Step 1: the release's defaults (verl's own config directory, or the user's --config-path).
        base_dir = user_dir or verl_dir
        base_search = [] if base_dir == verl_dir else ["file://" + verl_dir]
        step_dir, step_name, step_search = base_dir, config_name, base_search
        steps = [] if ARGS.get("skip_defaults") else [("defaults", base_dir, config_name, base_search, [])]
        if path:
            # Step 2: the user's file. With a defaults list it is itself a primary config (its own
            # directory first, verl's configs on the search path); else it is merged over the
            # defaults as `_self_` of a one-file primary config, which is what Hydra does.
            try:
                data = OmegaConf.load(path)
                if not OmegaConf.is_dict(data):
                    raise ValueError("the top level is not a mapping of config keys")
            except Exception as exc:  # unreadable or not YAML: what verl's own load would raise
                emit("file_error", kind=type(exc).__name__, message=str(exc).strip()[:2000])
                _err("file", exc)
                return
            if "defaults" in data:
                own = []
                try:
                    own = list(OmegaConf.to_container(data).get("hydra", {}).get("searchpath") or [])
                except Exception:
                    own = []
                step_dir = os.path.dirname(os.path.abspath(path))
                step_name = os.path.splitext(os.path.basename(path))[0]
                step_search = own + base_search + (["file://" + base_dir] if base_dir != step_dir else [])
            else:
                with open(os.path.join(tmp, "preflight_user.yaml"), "w", encoding="utf-8") as fh:
                    fh.write("defaults:\n  - %s\n  - _self_\n" % config_name)
                    if len(data):  # an empty file is {} ("{}" after a block mapping is not YAML)
                        fh.write(OmegaConf.to_yaml(data))
                step_dir, step_name = tmp, "preflight_user"
                step_search = ["file://" + base_dir] + base_search
            steps.append(("file", step_dir, step_name, step_search, []))
        steps.append(("final", step_dir, step_name, step_search, overrides))
        cfg = None
        with _LoadOnce(OmegaConf):  # the steps load the same ~30 YAML files: each parsed once
            for stage, cdir, cname, search, ovs in steps:
                try:
                    cfg = _compose(cdir, cname, search, ovs)
                except Exception as exc:
                    _err(stage, exc)
                    return
                emit("tree", stage=stage, tree=OmegaConf.to_container(cfg, resolve=False))
        if ARGS.get("resolve", True):
            try:
                emit("resolved", tree=OmegaConf.to_container(cfg, resolve=True))
            except Exception as exc:
                tree, errors = _resolve_partial(cfg)
                emit("resolve_error", kind=type(exc).__name__, message=str(exc).strip()[:2000], tree=tree,
                     errors=errors)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
