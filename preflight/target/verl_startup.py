# verl's own start-up, run dry in the target: its main() over the composed config, up to the first
# Ray or worker call. Standard library at top level; verl, Hydra and Ray are imported inside main().
# parts: _verl_ignored.py _verl_batch.py _verl_lookups.py
#
# The sequence is verl's, not a copy: the entry module's @hydra.main function (its __wrapped__) runs
# on the config Hydra composes from verl's own config directory, so every check verl does before
# Ray (validate_config, worker-class imports, the tokenizer and processor, the reward manager, the RL
# datasets with their filtering, the sampler, the trainer's constructor) is verl's own. Inert
# stand-ins replace what needs a cluster:
#   * run_ppo (module global of the entry) becomes: take the TaskRunner class (the ray.remote
#     wrapper's own class) and call its run(config) in this process;
#   * the release's stop point (ResourcePoolManager.create_resource_pool, the first thing
#     init_workers does in every release from 0.3 to 0.9) raises the stop marker: workers are
#     never placed;
#   * ray.init/get/wait/put raise the stop marker too (a Ray call before that point is where the
#     dry run ends, and is named); the release's "inert" functions (0.9's transfer_queue.init and
#     close) do nothing.
# Where each of these lives per release (entry module, the functions timed as steps, the stop
# point, the reward function's getter) is data: ARGS["releases"], the host's
# preflight/launch/startup_releases.py; the entry for the installed verl's version is picked here.
# The Hugging Face hub is never reached: HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE are set, so a model id
# that is not in the local cache fails with the library's own "not cached" error, which is named.
#
# ARGS: {"entry": null | "verl.trainer.main_ppo", "config_name": "ppo_trainer", "config_dir": null | "/abs",
#        "overrides": ["k=v", ...], "score_rows": 4, "item_rows": 2, "length_rows": 256,
#        "releases": [[first_release, spec], ...], "batch": null | [[overrides], ...]}
# Events:
#   "no_verl"   {reason}
#   "env"       {verl_version, entry, config_dir, import_seconds, release_spec (first release of the spec)}
#   "step"      {name, state: "start" | "ok", seconds}: verl's own functions as main() calls them
#   "stopped"   {at, where, why}: the dry run reached its stop point (the first Ray or worker call)
#   "error"     {step, kind, message, file, line, function, frames, verl_frame}: verl raised
#   "facts"     {...}: what verl did silently (dataset sizes, rows filtered, batches, total steps...)
#   "reward"    {rows: [{data_source, ok, score | kind, message, file, line}], function}
#   "item"      {ok, keys | kind, message, file, line}: the dataset's __getitem__ on a few rows
#   "ignored"   {keys: [{override, name, parent, closest}], checked, files, seconds} | {error}: the
#               user's keys that no source file of the installed verl reads
import os
import sys
import time
import traceback


class _Stop(BaseException):
    """The dry run's stop point (a BaseException: verl's own `except Exception` cannot swallow it)."""

    def __init__(self, at, why):
        BaseException.__init__(self, at)
        self.at = at
        self.why = why


_STEP = {"name": "compose"}


def _verl_dir():
    import verl

    return os.path.dirname(os.path.abspath(verl.__file__))


def _frame_info(tb, verl_root):
    frames = traceback.extract_tb(tb)
    site = os.path.dirname(verl_root)
    out = []
    frames = [f for f in frames if f.filename != "<string>"]  # this script's own frames
    for fr in frames[-8:]:
        fn = fr.filename
        rel = os.path.relpath(fn, site) if fn.startswith(site + os.sep) else fn
        out.append({"file": rel, "line": fr.lineno, "function": fr.name})
    verl_frames = [f for f in frames if f.filename.startswith(verl_root + os.sep)]
    vf = None
    if verl_frames:
        f = verl_frames[-1]
        vf = {"file": os.path.relpath(f.filename, site), "line": f.lineno, "function": f.name}
    return out, vf


def _error(exc, verl_root, step=None):
    frames, vf = _frame_info(exc.__traceback__, verl_root)
    last = frames[-1] if frames else {}
    msg = str(exc).strip()
    if not msg:  # a bare `assert` (verl 0.3-0.5's _validate_config): the statement is the message
        raw = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != "<string>"]
        if raw and raw[-1].line:
            msg = raw[-1].line.strip()
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in msg:
        msg += " (caused by %s: %s)" % (type(cause).__name__, str(cause).strip().splitlines()[0][:500])
    return {"step": step or _STEP["name"], "kind": type(exc).__name__, "message": msg[:3000],
            "file": last.get("file"), "line": last.get("line"), "function": last.get("function"),
            "frames": frames, "verl_frame": vf}


def _wrap(name, fn):
    def wrapped(*a, **k):
        prev = _STEP["name"]
        _STEP["name"] = name
        t0 = time.monotonic()
        emit("step", name=name, state="start")
        out = fn(*a, **k)
        emit("step", name=name, state="ok", seconds=round(time.monotonic() - t0, 3))
        _STEP["name"] = prev
        return out
    wrapped.__wrapped__ = fn
    return wrapped


def _resolve(ref):
    """``module:Name.attr`` -> (owner object, attribute name), or (None, None) when absent."""
    import importlib

    mod_name, _, path = ref.partition(":")
    try:
        obj = importlib.import_module(mod_name)
    except Exception:
        return None, None
    parts = path.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None, None
    return obj, parts[-1]


def _hook_module(mod, names):
    for n in names:
        f = getattr(mod, n, None)
        if callable(f) and not hasattr(f, "__wrapped__"):
            setattr(mod, n, _wrap(n, f))


def _hook_method(ref):
    owner, attr = _resolve(ref)
    if not isinstance(owner, type) or attr not in owner.__dict__:
        return
    f = owner.__dict__[attr]
    if getattr(f, "_preflight", False) or not callable(f):
        return
    w = _wrap("%s.%s" % (owner.__name__, attr), f)
    w._preflight = True
    setattr(owner, attr, w)


class _OnImport(object):
    """A meta-path finder that runs callbacks on a module right after it first executes, so a hook
    on a module verl may never import (0.9's main_ppo_v0 for a V1 launch) costs nothing and is
    still in place before verl's own code reads the module's names. The module keeps its own
    loader once executed."""

    def __init__(self):
        self.waiting = {}

    def when(self, name, fn):
        """``fn(module)`` now when ``name`` is imported, else right after its first execution."""
        mod = sys.modules.get(name)
        if mod is not None:
            fn(mod)
            return
        self.waiting.setdefault(name, []).append(fn)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        if name not in self.waiting:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        inner = spec.loader
        if inner is None or not hasattr(inner, "exec_module"):
            return spec
        fns = self.waiting.pop(name)

        class _After(object):
            def create_module(self, spec_):
                return inner.create_module(spec_)

            def exec_module(self, module):
                inner.exec_module(module)
                module.__loader__ = inner
                if getattr(module, "__spec__", None) is not None:
                    module.__spec__.loader = inner
                for fn in fns:
                    fn(module)

            def __getattr__(self, attr):
                return getattr(inner, attr)
        spec.loader = _After()
        return spec


_ON_IMPORT = _OnImport()


def _version_key(v):
    out = []
    for part in str(v).split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


#: Used when the host passes no release table (the 0.6 to 0.8 layout).
_DEFAULT_SPEC = {
    "entry": "verl.trainer.main_ppo",
    "hook_modules": ["verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.utils",
                     "verl.utils", "verl.utils.config", "verl.trainer.ppo.reward"],
    "functions": ["validate_config", "hf_tokenizer", "hf_processor", "load_reward_manager", "create_rl_dataset",
                  "create_rl_sampler", "omega_conf_to_dataclass", "get_custom_reward_fn"],
    "methods": ["verl.trainer.ppo.ray_trainer:RayPPOTrainer.__init__"],
    "stop": "verl.trainer.ppo.ray_trainer:ResourcePoolManager.create_resource_pool",
    "custom_reward": "verl.trainer.ppo.reward:get_custom_reward_fn",
    "default_score": "verl.utils.reward_score:default_compute_score",
    "inert": [],
}


def _pick(releases, version):
    """(first release, spec) of the release table entry that holds for ``version``."""
    if not releases:
        return None, _DEFAULT_SPEC
    first, spec = releases[0]
    for f, s in releases:
        if _version_key(version) >= _version_key(f):
            first, spec = f, s
    return first, spec


def _plain_class(cls):
    meta = getattr(cls, "__ray_metadata__", None)
    inner = getattr(meta, "modified_class", None)
    return inner if inner is not None else cls


def _ray_stubs(ray):
    def stop(name):
        def f(*a, **k):
            raise _Stop("ray." + name, "verl calls Ray here; a dry start-up stops before Ray")
        return f
    for n in ("init", "get", "wait", "put"):
        if hasattr(ray, n):
            setattr(ray, n, stop(n))


def _stop_at(ref):
    """Make ``module:Class.method`` (the release's first worker call) raise the stop marker."""
    owner, attr = _resolve(ref)
    if owner is None:
        return
    at = ref.partition(":")[2]

    def _no_pool(self, *a, **k):
        raise _Stop(at, "the first worker call: placement groups")
    setattr(owner, attr, _no_pool)


def _find_self(tb, attr):
    """The innermost ``self`` on the traceback that has ``attr`` (the trainer), or None."""
    found = None
    while tb is not None:
        s = tb.tb_frame.f_locals.get("self")
        if s is not None and hasattr(s, attr):
            found = s
        tb = tb.tb_next
    return found


def _class_name(v):
    meta = getattr(v, "__ray_metadata__", None)
    inner = getattr(meta, "modified_class", None)
    if inner is not None:
        return getattr(meta, "class_name", None) or inner.__name__
    return getattr(v, "__name__", type(v).__name__)


def _rows(ds):
    for attr in ("dataframe", "df"):
        df = getattr(ds, attr, None)
        if df is not None:
            return df
    return None


def _num_rows(files):
    try:
        import pyarrow.parquet  # noqa: F401 - without pyarrow no count
    except ImportError:
        return None
    total = 0
    for f in files:
        try:
            total += parquet_file(os.path.expanduser(f)).metadata.num_rows
        except Exception:
            return None
    return total


def _files(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return [str(x) for x in v]


def _facts(trainer, runner, config, verl_root):
    from omegaconf import OmegaConf

    facts = {}
    tds = getattr(trainer, "train_dataset", None)
    vds = getattr(trainer, "val_dataset", None)
    for key, ds in (("train", tds), ("val", vds)):
        if ds is None:
            continue
        try:
            facts[key + "_rows"] = len(ds)
        except Exception:
            pass
        facts[key + "_dataset_class"] = type(ds).__module__ + "." + type(ds).__name__
    data = config.get("data") if hasattr(config, "get") else None
    if data is not None:
        for key in ("train", "val"):
            files = _files(OmegaConf.to_container(data, resolve=True).get(key + "_files"))
            raw = _num_rows(files)
            if raw is not None:
                facts[key + "_file_rows"] = raw
                if key + "_rows" in facts:
                    facts[key + "_rows_dropped"] = raw - facts[key + "_rows"]
        facts["filter_overlong_prompts"] = data.get("filter_overlong_prompts")
        facts["max_prompt_length"] = data.get("max_prompt_length")
        facts["truncation"] = data.get("truncation")
    for attr, key in (("train_dataloader", "train_batches"), ("val_dataloader", "val_batches")):
        dl = getattr(trainer, attr, None)
        if dl is not None:
            try:
                facts[key] = len(dl)
            except Exception:
                pass
    if getattr(trainer, "total_training_steps", None) is not None:
        facts["total_training_steps"] = trainer.total_training_steps
    smp = getattr(getattr(trainer, "train_dataloader", None), "sampler", None)
    if smp is not None:
        facts["sampler"] = type(smp).__name__
    for owner in (trainer, runner):
        m = getattr(owner, "role_worker_mapping", None)
        if m:
            facts["workers"] = dict((str(getattr(k, "name", k)), _class_name(v)) for k, v in m.items())
            break
    for attr in ("reward_fn", "val_reward_fn"):
        r = getattr(trainer, attr, None)
        if r is not None:
            facts[attr] = type(r).__module__ + "." + type(r).__name__
    tok = getattr(trainer, "tokenizer", None)
    if tok is not None:
        facts["tokenizer"] = type(tok).__name__
    facts["processor"] = type(getattr(trainer, "processor", None)).__name__ if getattr(trainer, "processor", None) \
        is not None else None
    return facts


def _gt(row):
    rm = row.get("reward_model")
    if isinstance(rm, dict):
        return rm.get("ground_truth")
    return None


def _records(df, n):
    try:
        return [dict(df[i]) for i in range(min(n, len(df)))]  # HF datasets
    except Exception:
        pass
    try:
        return df.head(n).to_dict("records")  # pandas
    except Exception:
        return []


def _score_fn(config, spec):
    owner, attr = _resolve(spec.get("custom_reward") or "")
    getter = getattr(owner, attr, None) if owner is not None else None
    if getter is not None:
        fn = getter(config)
        if fn is not None:
            return fn, "custom_reward_function"
    owner, attr = _resolve(spec.get("default_score") or "")
    fn = getattr(owner, attr, None) if owner is not None else None
    if fn is None:
        raise ImportError("verl's default scorer %s is not in the installed verl" % spec.get("default_score"))
    return fn, spec.get("default_score").replace(":", ".")


def _reward(trainer, config, verl_root, n, spec):
    ds = getattr(trainer, "train_dataset", None)
    df = _rows(ds) if ds is not None else None
    if df is None or n <= 0:
        return
    rows = _records(df, n)
    try:
        fn, name = _score_fn(config, spec)
    except Exception as exc:
        emit("reward", function=None, rows=[], error=_error(exc, verl_root, "reward_function"))
        return
    out = []
    for row in rows:
        ds_name = row.get("data_source")
        gt = _gt(row)
        rec = {"data_source": ds_name}
        try:
            sol = gt if isinstance(gt, str) else str(gt)
            score = fn(ds_name, sol, gt, row.get("extra_info"))
            rec["ok"] = True
            rec["score"] = score if isinstance(score, (int, float)) else str(score)[:200]
        except Exception as exc:
            rec["ok"] = False
            rec.update(_error(exc, verl_root, "reward_function"))
            rec.pop("frames", None)
        out.append(rec)
    emit("reward", function=name, rows=out)


def _items(trainer, verl_root, n, length_rows):
    ds = getattr(trainer, "train_dataset", None)
    if ds is None or n <= 0:
        return
    for i in range(min(n, len(ds))):
        try:
            item = ds[i]
            emit("item", i=i, ok=True, keys=sorted(str(k) for k in item)[:40])
        except Exception as exc:
            e = _error(exc, verl_root, "dataset.__getitem__")
            e.pop("frames", None)
            emit("item", i=i, ok=False, **e)
            return
    # prompts longer than max_prompt_length, counted with the user's tokenizer and verl's chat template
    df = _rows(ds)
    tok = getattr(trainer, "tokenizer", None)
    limit = getattr(ds, "max_prompt_length", None)
    key = getattr(ds, "prompt_key", "prompt")
    if df is None or tok is None or not limit or not hasattr(tok, "apply_chat_template"):
        return
    over, seen, longest = 0, 0, 0
    for row in _records(df, length_rows):
        msgs = row.get(key)
        try:
            ids = tok.apply_chat_template(list(msgs), add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        except Exception:
            continue
        seen += 1
        longest = max(longest, len(ids))
        if len(ids) > limit:
            over += 1
    emit("lengths", counted=seen, over_limit=over, longest=longest, max_prompt_length=limit)


def _compose(verl_cfg_dir, user_dir, name, overrides):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    if user_dir and not os.path.isabs(user_dir):
        # Hydra reads a relative --config-path against the entry module's directory (verl/trainer/)
        user_dir = os.path.normpath(os.path.join(os.path.dirname(verl_cfg_dir), user_dir))
    primary = user_dir or verl_cfg_dir
    extra = ["hydra.searchpath=[file://%s]" % verl_cfg_dir] if user_dir else []
    with initialize_config_dir(config_dir=primary, version_base=None):
        return compose(config_name=name, overrides=list(overrides) + extra)


def _job_cwd(path):
    """Run in the job's working directory, where verl resolves the launch's relative paths (data
    files, a reward file), as the job's driver does; the private directory the script started in,
    and '' (the current directory), are taken off sys.path first, so nothing in the user's
    directory is imported in verl's place."""
    if not path or not os.path.isdir(path):
        return
    here = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", here)]
    try:
        os.chdir(path)
    except OSError:
        pass


def _installed_verl():
    """(found, version): whether verl is importable here (a ``no_verl`` event is emitted when not)
    and its installed distribution's version (None when the metadata has none)."""
    import importlib.util
    try:
        if importlib.util.find_spec("verl") is None:
            emit("no_verl", reason="verl is not installed")
            return False, None
    except Exception as exc:
        emit("no_verl", reason=str(exc))
        return False, None
    try:
        from importlib.metadata import version as _v
        return True, _v("verl")
    except Exception:
        return True, None


def _install_hooks(entry, spec):
    """Hooks go on each module when verl imports it (at once for those the entry already imported):
    a module the launch never reaches is never imported for them. ``spec``: the release's entry of
    startup_releases (functions, hook_modules, methods, stop)."""
    names = list(spec.get("functions") or [])
    for name in [entry] + [m for m in spec.get("hook_modules") or [] if m != entry]:
        _ON_IMPORT.when(name, lambda m: _hook_module(m, names))
    for ref in spec.get("methods") or []:
        _ON_IMPORT.when(ref.partition(":")[0], lambda _m, ref=ref: _hook_method(ref))
    stop_ref = spec.get("stop") or ""
    if stop_ref:
        _ON_IMPORT.when(stop_ref.partition(":")[0], lambda _m: _stop_at(stop_ref))


def main():
    for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[k] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    _job_cwd(ARGS.get("job_cwd"))
    import importlib
    import importlib.util
    found, vv = _installed_verl()
    if not found:
        return
    spec_from, spec = _pick(ARGS.get("releases"), vv or "")
    entry = ARGS.get("entry") or spec.get("entry") or "verl.trainer.main_ppo"
    import io

    buf = io.StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    try:
        sys.stdout = sys.stderr = buf
        verl_root = _verl_dir()
    except BaseException as exc:  # verl's own __init__ failed (0.4's needs setuptools' pkg_resources)
        sys.stdout, sys.stderr = real_out, real_err
        if isinstance(exc, KeyboardInterrupt):
            raise
        spec_ = importlib.util.find_spec("verl")
        root = os.path.dirname(spec_.origin) if spec_ is not None and spec_.origin else ""
        emit("env", verl_version=vv, entry=entry, config_dir=None, import_seconds=None, release_spec=spec_from)
        emit("error", **_error(exc, root, "import verl"))
        return
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    t0 = time.monotonic()
    try:
        sys.stdout = sys.stderr = buf
        _STEP["name"] = "import " + entry
        import ray

        _ray_stubs(ray)
        for ref in spec.get("inert") or []:  # e.g. 0.9's TransferQueue: an inert stand-in
            owner, attr = _resolve(ref)
            if owner is not None:
                setattr(owner, attr, lambda *a, **k: None)
        mod = importlib.import_module(entry)
    except BaseException as exc:
        sys.stdout, sys.stderr = real_out, real_err
        if isinstance(exc, KeyboardInterrupt):
            raise
        emit("error", **_error(exc, verl_root, "import " + entry))
        return
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    if vv is None:
        vv = getattr(sys.modules.get("verl"), "__version__", None)
    cfg_dir = os.path.join(os.path.dirname(os.path.abspath(mod.__file__)), "config")
    ARGS["_cfg_dir"], ARGS["_entry_file"] = cfg_dir, mod.__file__
    emit("env", verl_version=vv, entry=entry, config_dir=cfg_dir, import_seconds=round(time.monotonic() - t0, 3),
         release_spec=spec_from)
    fn = getattr(getattr(mod, "main", None), "__wrapped__", None)
    if fn is None:
        emit("error", step="entry", kind="NoEntry", message="%s has no @hydra.main function main" % entry,
             file=None, line=None, function=None, frames=[], verl_frame=None)
        return
    while hasattr(fn, "__wrapped__"):  # 0.8: @deprecated around @hydra.main
        fn = fn.__wrapped__
    _install_hooks(entry, spec)
    state = {"runner": None}

    def dry_run_ppo(config, task_runner_class=None, *a, **k):
        cls = task_runner_class if task_runner_class is not None else mod.TaskRunner
        runner = _plain_class(cls)()
        state["runner"] = runner
        _STEP["name"] = "TaskRunner.run"
        runner.run(config)
    mod.run_ppo = dry_run_ppo
    batch = ARGS.get("batch")
    if batch is None:
        _one(fn, cfg_dir, ARGS.get("overrides") or [], state, verl_root, buf, real_out, real_err, spec)
        return
    libs = _library_dirs()
    known = set(sys.modules)
    for i, ovs in enumerate(batch):  # several launches, verl imported once: events follow their "case"
        emit("case", i=i)
        buf.seek(0)
        buf.truncate()
        _forget_user_modules(known, libs)
        try:
            _one(fn, cfg_dir, ovs, state, verl_root, buf, real_out, real_err, spec)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the dry run itself failed on this case: named, the next one runs
            emit("error", **_error(exc, verl_root, "preflight dry run"))


def _one(fn, cfg_dir, overrides, state, verl_root, buf, real_out, real_err, spec):
    """One launch through verl's main (events as documented above)."""
    state["runner"] = None
    try:
        cfg = _compose(cfg_dir, ARGS.get("config_dir"), ARGS.get("config_name") or "ppo_trainer",
                       overrides)
    except Exception as exc:
        emit("error", **_error(exc, verl_root, "compose"))
        return
    if ARGS.get("ignored", True):
        try:
            _ignored(cfg, overrides, verl_root, ARGS.get("_entry_file"))
        except Exception as exc:  # the search itself failed: said, the start-up still runs
            emit("ignored", error="%s: %s" % (type(exc).__name__, exc))
    _STEP["name"] = "main"
    stop = None
    t1 = time.monotonic()
    try:
        sys.stdout = sys.stderr = buf
        fn(cfg)
        result = ("returned", None)
    except _Stop as s:
        stop = s
        result = ("stopped", s)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        result = ("error", exc)
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    secs = round(time.monotonic() - t1, 3)
    if result[0] == "error":
        e = _error(result[1], verl_root)
        e["seconds"] = secs
        e["output_tail"] = buf.getvalue()[-1500:]
        emit("error", **e)
        return
    if result[0] == "returned":
        emit("stopped", at="main returned", where=None, why="main() returned without a Ray call", seconds=secs)
        return
    frames, _vf = _frame_info(stop.__traceback__, verl_root)
    caller = frames[-2] if len(frames) > 1 else None
    emit("stopped", at=stop.at, why=stop.why, where=caller, seconds=secs)
    _lookups(cfg, verl_root, spec)
    trainer = _find_self(stop.__traceback__, "train_dataset")
    if trainer is None:
        return
    emit("facts", **_facts(trainer, state["runner"], cfg, verl_root))
    sys.stdout = sys.stderr = buf
    try:
        _items(trainer, verl_root, int(ARGS.get("item_rows", 2)), int(ARGS.get("length_rows", 256)))
        _reward(trainer, cfg, verl_root, int(ARGS.get("score_rows", 4)), spec)
    finally:
        sys.stdout, sys.stderr = real_out, real_err



if __name__ == "__main__":
    main()
