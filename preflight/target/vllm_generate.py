# A tiny offline generation with vLLM (or SGLang) in the target interpreter.
#
# ARGS: {"engine": "vllm"|"sglang", "workdir": DIR, "tp": int, "prompts": [[token ids]...],
#        "max_tokens": int, "gpu_budget_gib": float, "gpu_min_gib": float, "seed": int,
#        "mode": "fast"|"compile", "inproc": bool (engine core in this process; default true),
#        "extensions": [names] (load the core compiled extension after the import),
#        "go_file": PATH (after the import, wait until PATH exists before touching the GPU)}
# Writes DIR/model/config.json (a tiny Llama: hidden 128, 2 layers, 2 heads, 1 KV head, head_dim 64,
# vocab 512; no weights: load_format="dummy"; no tokenizer), sends every log line of this process and
# of the engine processes it starts to DIR/engine.log (the checker reads it, even after a kill), and
# reports through events on the original stdout:
#   phase {name}                  entering import / device / engine / generate / shutdown
#   imported {engine, version, torch, platform, seconds}
#   extension {ok, extensions | error_type, error, traceback}
#   model_inspect {how, seconds}  vLLM's model-info inspection done in this process, before the wait
#   waiting {go_file}             imported; the engine starts when go_file appears
#   device {gpus: [{index, name, capability, free_bytes, total_bytes}], gpu_memory_utilization}
#   settings {mode, kwargs, env, notes}  what the engine was started with ("fast": compiles nothing,
#                                 see _fast_settings; "compile": the rollout's default path)
#   settings_rejected {error}     this vLLM refused a fast setting; the plain eager engine was started
#   engine {seconds, dtype, tensor_parallel_size}
#   attention {backends, source}
#   generated {seconds, prompts, max_tokens, counts, tokens, deterministic, sample, tokens_per_s}
#   done {shutdown_seconds}
#   unsupported {reason}          the generation cannot run here (and why)
#   error {phase, error_type, error, traceback, kind?}
# Standard library only until the engine is imported; the engine is imported only in main().
import json
import os
import sys
import tempfile
import threading
import time
import traceback

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,  # the CPU attention backend rejects head_dim 16 (vllm_on_cpu.md)
    "vocab_size": 512,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
}
MAX_MODEL_LEN = 128
GIB = float(1 << 30)


def _redirect_output(log_path):
    """Keep the original stdout for events only; send fds 1 and 2 (inherited by every engine
    process) to ``log_path``. Rebinds the prelude's ``emit``."""
    global emit
    sys.stdout.flush()
    sys.stderr.flush()
    if not globals().get("_EVENTS"):  # the prelude writes events to the checker's file when it has one
        events = os.fdopen(os.dup(1), "w")  # os.dup: not inherited by child processes

        def _emit(event, **fields):
            fields["event"] = event
            events.write("@@PREFLIGHT@@ " + json.dumps(fields, default=str) + "\n")
            events.flush()

        emit = _emit
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    threading.Thread(target=_cap_log, args=(log_path,), name="cap-engine-log", daemon=True).start()


#: The most the engine log may hold (bytes): past it, it is emptied and goes on (its writers
#: append, so they write at the new end); the checker reads its tail.
LOG_CAP = 64 << 20


def _cap_log(path, every=0.02):
    """Keep ``path`` near :data:`LOG_CAP` bytes however fast the engine (or a broken package) prints: it is
    checked every ``every`` seconds (at about 1.3 GB/s into the page cache, 0.02 s adds 26 MB at most)."""
    while True:
        time.sleep(every)
        try:
            if os.path.getsize(path) > LOG_CAP:
                with open(path, "r+b") as fh:
                    fh.truncate(0)
                os.write(2, b"[verl-preflight: engine log emptied at its 64 MiB cap; what follows is newer]\n")
        except OSError:
            pass


def _fail(phase, exc, **extra):
    emit("error", phase=phase, error_type=type(exc).__name__, error=str(exc)[:4000],
         traceback=traceback.format_exc()[-8000:], **extra)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _write_model(workdir):
    model = os.path.join(workdir, "model")
    if not os.path.isdir(model):
        os.makedirs(model)
    with open(os.path.join(model, "config.json"), "w") as fh:
        json.dump(TINY_LLAMA, fh, indent=1)
    return model


def _gpus(tp, budget_gib, min_gib):
    """Free/total memory of the first ``tp`` visible GPUs (torch.cuda.mem_get_info) and the
    gpu_memory_utilization to use: ``budget_gib`` per GPU, less where free memory is short (1 GiB
    is left for each worker's CUDA context); below ``min_gib`` the generation is not started."""
    import torch

    n = torch.cuda.device_count()
    if n < tp:
        emit("error", phase="device", kind="too_few_gpus", error_type="ValueError",
             error="tensor_parallel_size %d needs %d GPUs, torch sees %d (CUDA_VISIBLE_DEVICES=%s)" % (
                 tp, tp, n, os.environ.get("CUDA_VISIBLE_DEVICES", "unset")), visible=n)
        os._exit(1)
    gpus = []
    for i in range(tp):
        free, total = torch.cuda.mem_get_info(i)
        cc = torch.cuda.get_device_capability(i)
        gpus.append({"index": i, "name": torch.cuda.get_device_name(i), "capability": "%d.%d" % cc,
                     "free_bytes": int(free), "total_bytes": int(total)})
    tightest = min(gpus, key=lambda g: g["free_bytes"])
    want = min(budget_gib * GIB, tightest["free_bytes"] * 0.9 - GIB)
    total = max(g["total_bytes"] for g in gpus)
    util = max(0.001, int(1000.0 * want / total) / 1000.0)  # rounded down: vLLM checks free >= util * total
    emit("device", gpus=gpus, gpu_memory_utilization=util, budget_gib=budget_gib)
    if want < min_gib * GIB:
        g = tightest
        emit("error", phase="device", kind="insufficient_gpu_memory", error_type="MemoryError",
             error="GPU %d (%s) has %.1f GiB free of %.1f GiB; the generation needs about %.1f GiB" % (
                 g["index"], g["name"], g["free_bytes"] / GIB, g["total_bytes"] / GIB, min_gib + 1),
             gpus=gpus)
        os._exit(1)
    bf16 = all(tuple(int(x) for x in g["capability"].split(".")) >= (8, 0) for g in gpus)
    return gpus, util, ("bfloat16" if bf16 else "float16")


def _worker_attention(worker):
    # Runs inside each vLLM worker (sent by collective_rpc): the attention backends it built.
    names = []
    runner = getattr(worker, "model_runner", None)
    for groups in getattr(runner, "attn_groups", None) or []:
        for group in groups:
            backend = getattr(group, "backend", None)
            try:
                names.append(str(backend.get_name()))
            except Exception:
                names.append(getattr(backend, "__name__", str(backend)))
    return sorted(set(names))


def _token_lists(outputs, engine):
    out = []
    for o in outputs:
        if engine == "vllm":
            out.append([int(t) for t in o.outputs[0].token_ids])
        else:
            ids = o.get("output_ids")
            if ids is None:
                ids = [None] * int((o.get("meta_info") or {}).get("completion_tokens") or 0)
            out.append([None if t is None else int(t) for t in ids])
    return out


def _generate(engine, llm, prompts, max_tokens):
    if engine == "vllm":
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, detokenize=False)
        batch = [{"prompt_token_ids": list(p)} for p in prompts]
        return _token_lists(llm.generate(batch, params, use_tqdm=False), engine)
    params = {"max_new_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}
    return _token_lists(llm.generate(input_ids=[list(p) for p in prompts], sampling_params=params), engine)


#: KV cache the fast path asks for per GPU: the 4 prompts x (6 + 16) tokens of the tiny model
#: take 2 layers x 1 KV head x 64 x 2 (K, V) x 2 bytes = 512 bytes per token; 32 MiB is 64k tokens.
KV_CACHE_BYTES = 32 << 20
#: Blocks asked for where vLLM has no kv_cache_memory_bytes (num_gpu_blocks_override): 64 x 16 tokens.
KV_BLOCKS = 64


def _fields(cls):
    import dataclasses

    try:
        return set(f.name for f in dataclasses.fields(cls))
    except TypeError:
        return set()


def _backend_enum(name):
    """vLLM's attention backend enum member ``name`` (the enum moved between releases), else the
    name itself (what the command line passes)."""
    import importlib

    for mod, cls in (("vllm.v1.attention.backends.registry", "AttentionBackendEnum"),
                     ("vllm.attention.backends.registry", "AttentionBackendEnum"),
                     ("vllm.platforms.interface", "_Backend")):
        try:
            enum = getattr(importlib.import_module(mod), cls)
            return enum[name]
        except Exception:
            continue
    return name


def _reads_env(name):
    """True when the installed vLLM reads environment variable ``name`` (it is among
    ``vllm.envs.environment_variables``); False when it does not or that table is missing."""
    try:
        import vllm.envs as envs

        return name in (getattr(envs, "environment_variables", None) or {})
    except Exception:
        return False


def _fast_settings(tp, gpus, n_prompts):
    """(LLM kwargs, environment, notes) that make the engine compile nothing for the tiny model,
    spelled for the installed vLLM: the names are read from its own EngineArgs/CompilationConfig
    fields (the keys changed across 0.8-0.33), never assumed from the version number.

    - enforce_eager: no CUDA graphs (and, from about 0.11, no torch.compile either);
    - compilation_config: mode NONE (0.11.2+) or level 0 (before), cudagraph_mode NONE (0.10.2+);
    - attention: FLASH_ATTN on compute capability 8.x/9.x (prebuilt FlashAttention 2/3 kernels in
      the vllm wheel: nothing to JIT), via attention_backend / attention_config where EngineArgs
      has them, else VLLM_ATTENTION_BACKEND (read by releases before about 0.14);
    - no FlashInfer sampler (VLLM_USE_FLASHINFER_SAMPLER=0: its kernels are JIT-compiled);
    - on a GPU, the V1 model runner where the release reads VLLM_USE_V2_MODEL_RUNNER: Model Runner V2
      (the default for Llama from about 0.20) prepares inputs and samples with Triton kernels, each
      JIT-compiled on a cold node (about 8 s of a cold engine start on an H200, vLLM 0.24.0); V1
      samples greedily with torch ops;
    - the smallest KV cache (kv_cache_memory_bytes, else num_gpu_blocks_override) and batch;
    - the engine core in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0): no second process that
      imports vLLM and torch again.
    """
    try:
        from vllm.engine.arg_utils import EngineArgs

        ea = _fields(EngineArgs)
    except Exception:  # a build without it: only the environment settings apply
        ea = set()
    kw, env, notes = {"enforce_eager": True}, {}, []
    try:
        from vllm.config import CompilationConfig

        cf = _fields(CompilationConfig)
    except Exception:
        cf = set()
    cc = {}
    if "mode" in cf:
        cc["mode"] = 0  # CompilationMode.NONE
    elif "level" in cf:
        cc["level"] = 0  # CompilationLevel.NO_COMPILATION
    if "cudagraph_mode" in cf:
        try:
            from vllm.config import CUDAGraphMode

            cc["cudagraph_mode"] = CUDAGraphMode.NONE
        except Exception:
            pass
    if cc and "compilation_config" in ea:
        kw["compilation_config"] = cc
    caps = [tuple(int(x) for x in g["capability"].split(".")) for g in gpus]
    if caps and all(8 <= c[0] <= 9 for c in caps):
        if "attention_backend" in ea:
            kw["attention_backend"] = _backend_enum("FLASH_ATTN")
        elif "attention_config" in ea:
            kw["attention_config"] = {"backend": _backend_enum("FLASH_ATTN")}
        else:
            env["VLLM_ATTENTION_BACKEND"] = "FLASH_ATTN"
    elif gpus:
        notes.append("attention backend left to vLLM on compute capability %s" % ", ".join(
            "%d.%d" % c for c in sorted(set(caps))))
    env["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    if gpus and _reads_env("VLLM_USE_V2_MODEL_RUNNER"):
        env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    if gpus:
        if "kv_cache_memory_bytes" in ea:
            kw["kv_cache_memory_bytes"] = KV_CACHE_BYTES
        elif "num_gpu_blocks_override" in ea:
            kw["num_gpu_blocks_override"] = KV_BLOCKS
    if "max_num_seqs" in ea:
        kw["max_num_seqs"] = max(1, n_prompts)
    if "max_num_batched_tokens" in ea:
        kw["max_num_batched_tokens"] = 2 * MAX_MODEL_LEN
    if ARGS.get("inproc", True):
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return kw, env, notes


def _plain(value):
    """``value`` as JSON keeps it: enums by name, containers element by element, anything else
    that JSON has no type for as its str()."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def _start_vllm(model, tp, seed, gpus, util, dtype):
    from vllm import LLM

    kwargs = dict(model=model, load_format="dummy", skip_tokenizer_init=True, enforce_eager=True,
                  max_model_len=MAX_MODEL_LEN, dtype=dtype, seed=seed, tensor_parallel_size=tp)
    if gpus:
        kwargs["gpu_memory_utilization"] = util
    mode = ARGS.get("mode", "fast")
    if mode == "compile":
        # the path verl's rollout takes by default: CUDA graphs and torch.compile on, vLLM's own
        # attention backend, sampler and engine process
        kwargs["enforce_eager"] = False
        emit("settings", mode=mode, kwargs=dict((k, _plain(v)) for k, v in kwargs.items() if k != "model"), env={})
        return LLM(**kwargs)
    fast, env, notes = _fast_settings(tp, gpus, len(ARGS.get("prompts") or [0] * 4))
    for k, v in env.items():
        os.environ.setdefault(k, v)  # a value the user set wins
    shown = list(env) + [k for k in ("VLLM_ENABLE_V1_MULTIPROCESSING",) if k not in env]
    emit("settings", mode=mode, kwargs=dict((k, _plain(v)) for k, v in fast.items()),
         env=dict((k, os.environ.get(k)) for k in shown), notes=notes)
    try:
        return LLM(**dict(kwargs, **fast))
    except Exception as exc:
        # a release that rejects one of the fast keys: say which, then start the plain eager engine
        text = str(exc)
        keys = [k for k in fast if k != "enforce_eager" and k in text]
        if "compilation_config" in fast and "CompilationConfig" in text and "compilation_config" not in keys:
            keys.append("compilation_config")
        if not keys or isinstance(exc, MemoryError):
            raise
        emit("settings_rejected", keys=keys, error_type=type(exc).__name__, error=text[:500])
        return LLM(**kwargs)


def _start_sglang(model, tp, seed, gpus, util, dtype):
    import dataclasses

    import sglang
    from sglang.srt.server_args import ServerArgs

    wanted = dict(model_path=model, load_format="dummy", skip_tokenizer_init=True, disable_cuda_graph=True,
                  context_length=MAX_MODEL_LEN, dtype=dtype, random_seed=seed, tp_size=tp,
                  mem_fraction_static=util)
    known = set(f.name for f in dataclasses.fields(ServerArgs))
    return sglang.Engine(**dict((k, v) for k, v in wanted.items() if k in known))


def _shutdown(engine, llm):
    if engine == "vllm":
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
    else:
        llm.shutdown()


def _load_extension(engine, names):
    """Load the engine's core compiled extension (the first of ``names`` present beside the
    package), as the imports stage's probe does; report ``extension`` {ok, name | error}."""
    import importlib

    mod = sys.modules.get(engine)
    d = os.path.dirname(getattr(mod, "__file__", None) or "")
    t0 = time.monotonic()
    try:
        files = os.listdir(d) if d else []
        found = [n for n in names if any(f.startswith(n + ".") and f.endswith(".so") for f in files)]
        if not found:
            raise ImportError("no compiled core extension (%s) in %s" % (", ".join(names), d))
        importlib.import_module("%s.%s" % (engine, found[0]))
        emit("extension", ok=True, extensions=found[:1], seconds=round(time.monotonic() - t0, 3))
    except BaseException as exc:
        emit("extension", ok=False, error_type=type(exc).__name__, error=str(exc)[:2000],
             traceback=traceback.format_exc()[-3000:], seconds=round(time.monotonic() - t0, 3))


def _inspect_model_in_process(arch):
    """Fill vLLM's model-info cache for ``arch`` in this process, before the engine starts.

    With a cold cache, vLLM inspects the model class in a child interpreter (to keep CUDA out of
    the parent), which imports vLLM and torch a second time: 21 s of a 40 s cold engine start on an
    H200 (vLLM 0.24.0, bench/RESULTS.md). This process runs the engine itself, so the inspection
    can run here, and it runs while the gpu and nccl stages do (CPU only: no CUDA call). Emits
    ``model_inspect`` {how, seconds}; any failure leaves vLLM's own path in place.
    """
    t0 = time.monotonic()
    try:
        from vllm.model_executor.models import registry as reg

        if not callable(getattr(reg, "_run_in_subprocess", None)) or not hasattr(reg.ModelRegistry,
                                                                                 "_try_inspect_model_cls"):
            emit("model_inspect", how="vLLM's own (this release has no in-process hook)", seconds=0.0)
            return
        reg._run_in_subprocess = lambda fn: fn()
        info = reg.ModelRegistry._try_inspect_model_cls(arch)
        emit("model_inspect", how="in this process" if info is not None else "failed here; vLLM's own",
             seconds=round(time.monotonic() - t0, 3))
    except BaseException as exc:  # evidence only: the engine start repeats it its own way
        emit("model_inspect", how="vLLM's own (%s: %s)" % (type(exc).__name__, str(exc)[:200]),
             seconds=round(time.monotonic() - t0, 3))


def main():
    engine = ARGS.get("engine", "vllm")
    workdir = ARGS.get("workdir") or tempfile.mkdtemp(prefix="preflight-%s-" % engine)
    tp = int(ARGS.get("tp", 1))
    prompts = ARGS.get("prompts") or [[1, 17, 33, 65], [1, 100, 200], [1, 7, 8, 9, 10], [1, 300, 301, 302, 303, 304]]
    max_tokens = int(ARGS.get("max_tokens", 16))
    seed = int(ARGS.get("seed", 0))
    _redirect_output(os.path.join(workdir, "engine.log"))
    model = _write_model(workdir)

    emit("phase", name="import")
    t0 = time.monotonic()
    try:
        if engine == "vllm":
            import vllm
            from vllm import LLM, SamplingParams  # noqa: F401  (vllm imports these lazily)
            version = getattr(vllm, "__version__", None)
        else:
            import sglang
            version = getattr(sglang, "__version__", None)
        import torch
    except BaseException as exc:
        _fail("import", exc)
    import_s = time.monotonic() - t0
    platform = None
    try:
        if engine == "vllm":
            from vllm.platforms import current_platform

            platform = str(current_platform.device_type)
        else:
            platform = "cuda" if torch.cuda.is_available() else "cpu"
            if platform == "cuda" and getattr(torch.version, "hip", None):
                platform = "rocm"
    except BaseException as exc:
        _fail("import", exc)
    emit("imported", engine=engine, version=version, torch=getattr(torch, "__version__", None),
         platform=platform, seconds=round(import_s, 3))
    if ARGS.get("extensions"):
        _load_extension(engine, ARGS["extensions"])
    if engine == "vllm" and ARGS.get("inproc", True):
        emit("phase", name="inspect")
        _inspect_model_in_process(TINY_LLAMA["architectures"][0])
    go = ARGS.get("go_file")
    if go:
        # imported once for the imports stage's row; the engine starts when the vllm stage asks
        emit("phase", name="wait")
        emit("waiting", go_file=go)
        while not os.path.exists(go):
            time.sleep(0.05)

    gpus, util, dtype = [], None, "bfloat16"
    if platform in ("cuda", "rocm"):
        emit("phase", name="device")
        try:
            gpus, util, dtype = _gpus(tp, float(ARGS.get("gpu_budget_gib", 7)), float(ARGS.get("gpu_min_gib", 2)))
        except BaseException as exc:
            _fail("device", exc)
    elif engine == "sglang":
        emit("unsupported", reason="no CUDA or ROCm GPU is visible to torch %s; this check runs SGLang's "
                                   "engine on GPUs only" % torch.__version__)
        os._exit(0)

    emit("phase", name="engine")
    t0 = time.monotonic()
    try:
        start = _start_vllm if engine == "vllm" else _start_sglang
        llm = start(model, tp, seed, gpus, util, dtype)
    except BaseException as exc:
        _fail("engine", exc)
    emit("engine", seconds=round(time.monotonic() - t0, 3), dtype=dtype, tensor_parallel_size=tp,
         gpu_memory_utilization=util)

    if engine == "vllm":
        try:
            per_worker = llm.collective_rpc(_worker_attention)
            emit("attention", backends=sorted(set(b for w in per_worker for b in (w or []))), source="workers")
        except BaseException as exc:  # evidence only: the log may still name it
            emit("attention", backends=[], source="unavailable: %s: %s" % (type(exc).__name__, str(exc)[:200]))
    else:
        backend = getattr(getattr(llm, "server_args", None), "attention_backend", None)
        emit("attention", backends=[str(backend)] if backend else [], source="server_args")

    emit("phase", name="generate")
    try:
        t0 = time.monotonic()
        first = _generate(engine, llm, prompts, max_tokens)
        gen_s = time.monotonic() - t0
        t0 = time.monotonic()
        second = _generate(engine, llm, prompts, max_tokens)
        again_s = time.monotonic() - t0
    except BaseException as exc:
        _fail("generate", exc)
    counts = [len(x) for x in first]
    total = sum(counts)
    # the first generation pays for what the engine builds lazily (a Triton kernel on a cold node);
    # the rate is the repeat's, the same work on a warm engine
    emit("generated", seconds=round(gen_s, 4), repeat_seconds=round(again_s, 4), prompts=len(prompts),
         max_tokens=max_tokens, counts=counts, tokens=total, deterministic=(first == second),
         sample=first[0] if first else [], tokens_per_s=round(sum(len(x) for x in second) / again_s, 1)
         if again_s > 0 else None)

    emit("phase", name="shutdown")
    t0 = time.monotonic()
    try:
        _shutdown(engine, llm)
    except BaseException as exc:  # the generation is proven; a slow teardown is killed by the checker
        emit("shutdown_error", error_type=type(exc).__name__, error=str(exc)[:500])
    emit("done", shutdown_seconds=round(time.monotonic() - t0, 3))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
