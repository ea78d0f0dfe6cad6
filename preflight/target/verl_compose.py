# Composes verl's trainer config with Hydra's own compose API, in the target interpreter.
# ARGS: {"config_name": "ppo_trainer", "config_dir": null | "/abs/dir" (a --config-path),
#        "file": null | "/abs/file.yaml", "overrides": ["key=value", ...], "resolve": true}
# Events:
#   "env"      {verl_version, hydra_version, omegaconf_version, config_dir (verl's), primary_dir, groups,
#               configs}
#   "no_verl"  {reason}: verl or hydra is absent; "file_tree" follows when a YAML --file could be
#              read with omegaconf or PyYAML (else "no_yaml"), so the checker can compose itself.
#   "tree"     {stage: "defaults" | "file" | "final", tree}: the unresolved config after each step
#   "resolved" {tree} or "resolve_error" {kind, message}
#   "error"    {stage, kind, message}: Hydra refused the composition (what verl would print); stage
#              "file" with a "file_error" {kind, message} before it: the --file could not be read.
# verl is located with importlib.util.find_spec, never imported (its import is slow and heavy).
import importlib.util
import os
import shutil
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
    for name in sorted(os.listdir(config_dir)):
        full = os.path.join(config_dir, name)
        if os.path.isdir(full) and not name.startswith("__"):
            opts = sorted(f[:-5] for f in os.listdir(full) if f.endswith(".yaml"))
            if opts:
                groups[name] = opts
        elif name.endswith(".yaml"):
            configs.append(name[:-5])
    return groups, configs


def _load_yaml_tree(path):
    """The file as plain data (interpolations kept as text), with whatever YAML reader exists."""
    try:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(OmegaConf.load(path), resolve=False), "omegaconf"
    except ImportError:
        pass
    try:
        import yaml
    except ImportError:
        return None, None
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh), "PyYAML"


def _err(stage, exc):
    emit("error", stage=stage, kind=type(exc).__name__, message=str(exc).strip()[:3000])


def main():
    config_name = ARGS.get("config_name") or "ppo_trainer"
    user_dir = ARGS.get("config_dir")
    path = ARGS.get("file")
    overrides = list(ARGS.get("overrides") or [])
    verl_dir = _verl_config_dir()
    try:
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
        from omegaconf import OmegaConf
        have_hydra = True
    except ImportError as exc:
        have_hydra = False
        hydra_error = str(exc)
    if verl_dir is None or not have_hydra:
        emit("no_verl", reason="verl is not installed" if verl_dir is None else "hydra-core/omegaconf missing: %s"
             % hydra_error)
        if path:
            try:
                tree, reader = _load_yaml_tree(path)
            except Exception as exc:
                emit("file_error", kind=type(exc).__name__, message=str(exc)[:2000])
                return
            if reader is None:
                emit("no_yaml")
            else:
                emit("file_tree", tree=tree, reader=reader)
        return
    if user_dir and not os.path.isabs(user_dir):
        # Hydra reads a relative --config-path against the file that declares @hydra.main:
        # verl/trainer/main_ppo.py
        user_dir = os.path.join(os.path.dirname(verl_dir), user_dir)
    groups, configs = _groups(verl_dir)
    emit("env", verl_version=_version("verl"), hydra_version=_version("hydra-core"),
         omegaconf_version=_version("omegaconf"), config_dir=verl_dir, primary_dir=user_dir or verl_dir,
         groups=groups, configs=configs)

    tmp = tempfile.mkdtemp(prefix="preflight-compose-")
    try:
        # Step 1: the release's defaults (verl's own config directory, or the user's --config-path).
        base_dir = user_dir or verl_dir
        base_search = [] if base_dir == verl_dir else ["file://" + verl_dir]
        step_dir, step_name, step_search = base_dir, config_name, base_search
        steps = [("defaults", base_dir, config_name, base_search, [])]
        if path:
            # Step 2: the user's file. With a defaults list it is itself a primary config (its own
            # directory first, verl's configs on the search path); else it is merged over the
            # defaults as `_self_` of a one-file primary config, which is what Hydra does.
            try:
                data = OmegaConf.load(path)
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
                    fh.write(OmegaConf.to_yaml(data))
                step_dir, step_name = tmp, "preflight_user"
                step_search = ["file://" + base_dir] + base_search
            steps.append(("file", step_dir, step_name, step_search, []))
        steps.append(("final", step_dir, step_name, step_search, overrides))
        cfg = None
        for stage, cdir, cname, search, ovs in steps:
            GlobalHydra.instance().clear()
            extra = ["hydra.searchpath=[%s]" % ",".join(search)] if search else []
            try:
                with initialize_config_dir(config_dir=cdir, version_base=None):
                    cfg = compose(config_name=cname, overrides=list(ovs) + extra)
            except Exception as exc:
                _err(stage, exc)
                return
            emit("tree", stage=stage, tree=OmegaConf.to_container(cfg, resolve=False))
        if ARGS.get("resolve", True):
            try:
                emit("resolved", tree=OmegaConf.to_container(cfg, resolve=True))
            except Exception as exc:
                emit("resolve_error", kind=type(exc).__name__, message=str(exc).strip()[:2000])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
