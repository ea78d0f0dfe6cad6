"""Every handed failure case (shared/reference/failure_cases.md, failure_cases_2.md, failure_cases_3.md)
run through the product as a user would: ``python3 -m preflight`` from this checkout, on the case's
small input. One line per case: number, kind, caught (a FAIL, or where the case accepts it a WARN,
row naming the cause), right fix (that row's fix says what the case's text gives as the fix), and
how the input was made. Totals by kind at the end. Prints figures; asserts nothing.

    python3 bench/handed_cases.py            # every case
    python3 bench/handed_cases.py 1 44 53    # only these
    python3 bench/handed_cases.py -v         # also the matching row's message and fix

Inputs:
- packages/imports (check stage): a venv (``python -m venv --without-pip`` of the case's CPython,
  from pyenv) holding ``NAME-VER.dist-info`` with the real Requires-Dist recorded in
  matrices/metadata/ and stub modules where the case's import fails; compiled extensions are real
  ``.so`` files built with gcc where the case is about one (12).
- GPU/driver facts: tests/fake_nvml.FakeNvml served as the ``pynvml`` module of the checker's NVML
  subprocess (a ``pynvml.py`` on PYTHONPATH that builds a FakeNvml from $HANDED_FAKE_NVML); the
  product's code is unchanged. Host facts (cpu counts, /dev/shm, memory) the product reads from the
  machine itself are not faked: those cases say so.
- cluster: a real local Ray cluster (tests/raycluster.py, loopback only) under the cached
  ``ray-cluster`` test env's Python (tests/envs.py), nodes declaring the case's GPUs.
- log texts: the case's quoted error through ``explain -``.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

VERBOSE = "-v" in sys.argv
TMP = tempfile.mkdtemp(prefix="handed-all-")
_MATRIX = None

BASE = ["python3", "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=grpo", "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.name=vllm",
        "trainer.logger=[console]"]
TMPL = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def matrix():
    global _MATRIX
    if _MATRIX is None:
        from preflight import matrix as m

        _MATRIX = m.load()
    return _MATRIX


# ---- inputs ---------------------------------------------------------------------------------------

def pyenv_python(minor):
    from envs import find_python

    return find_python(minor)


def fake_env(name, minor, dists, files=None):
    """A venv of CPython ``minor`` with ``dists`` ((name, version[, requires])) as dist-infos, the
    requires taken from matrices/metadata/ when not given, and ``files`` ({site-relative path: text})."""
    venv = os.path.join(TMP, name)
    subprocess.run([pyenv_python(minor), "-m", "venv", "--without-pip", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    site = subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()
    for d in dists:
        dname, ver = d[0], d[1]
        if len(d) > 2:
            req = list(d[2])
        else:
            row = matrix().meta(dname, ver)
            req = list(row["requires_dist"]) if row else []
        info = os.path.join(site, "%s-%s.dist-info" % (dname.replace("-", "_"), ver))
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w") as fh:
            fh.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
                dname, ver, "".join("Requires-Dist: %s\n" % r for r in req)))
        for fn, text in (("RECORD", ""), ("INSTALLER", "pip\n")):
            with open(os.path.join(info, fn), "w") as fh:
                fh.write(text)
    for rel, text in (files or {}).items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(text, bytes):
            with open(path, "wb") as fh:
                fh.write(text)
        else:
            with open(path, "w") as fh:
                fh.write(text)
    return py, site


def torch_stub(version, cuda="12.4", abi=False):
    return ("__version__ = %r\nclass version:\n    cuda = %r\n    hip = None\n"
            "class _C:\n    _GLIBCXX_USE_CXX11_ABI = %r\n" % (version, cuda, abi))


def model(name, cfg, tok=None, files=()):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    if tok is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            json.dump(tok, fh)
    for f in files:
        open(os.path.join(d, f), "w").close()
    return d


def nvml_env(spec):
    """Environment that makes the checker's NVML subprocess read ``spec`` (FakeNvml's arguments)."""
    shim = os.path.join(TMP, "nvml-shim")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "pynvml.py"), "w") as fh:
        fh.write("import json, os, sys\nsys.path.insert(0, %r)\nimport fake_nvml\n"
                 "_s = json.loads(os.environ['HANDED_FAKE_NVML'])\n"
                 "for _g in _s.get('gpus', []):\n    _g['cc'] = tuple(_g.get('cc', (9, 0)))\n"
                 "_f = fake_nvml.FakeNvml(**_s)\n"
                 "NVMLError = fake_nvml.NVMLError\n"
                 "def __getattr__(name):\n    return getattr(_f, name)\n" % os.path.join(ROOT, "tests"))
    return {"PYTHONPATH": ROOT + os.pathsep + shim, "HANDED_FAKE_NVML": json.dumps(spec)}


# ---- running the product --------------------------------------------------------------------------

def cli(args, env=None, stdin=None, timeout=600):
    """``python3 -m preflight ARGS --json - -q`` from the checkout; (rc, rows)."""
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "preflight"] + args, input=stdin, capture_output=True, text=True,
                       env=e, cwd=ROOT, timeout=timeout)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return p.returncode, [{"id": "CRASH", "status": "error", "message": (p.stdout + p.stderr)[-600:]}]
    return p.returncode, doc.get("results", [])


def check(py, stages, extra=(), env=None):
    return cli(["check", "--python", py, "--stage", stages, "--json", "-", "-q"] + list(extra), env=env)


def config(verl, gpus, words, extra=(), env=None):
    return cli(["config", "-q", "--json", "-", "--verl", verl, "--gpus", str(gpus)] + list(extra) + ["--"] + words,
               env=env)


def _text(r, fix=False):
    return " ".join([r.get("id", ""), r.get("message", "")] + ([r.get("fix") or ""] if fix else []))


def _has(text, needles):
    """``needles``: a list of alternatives strings 'a|b'; every one must match (case-insensitive)."""
    t = text.lower()
    return all(any(n.lower() in t for n in alt.split("|")) for alt in needles)


def judge(rows, cause, fix, statuses=("fail",), fix_in_message=False):
    """The first row of ``statuses`` whose id+message+fix names every ``cause`` needle; whether
    its fix names every ``fix`` needle (``fix_in_message``: resolve's warning rows, whose fix field
    is generic, state the fix in the message)."""
    for r in rows:
        if r.get("status") in statuses and _has(_text(r, True), cause):
            return r, _has((r.get("fix") or "") + (" " + r.get("message", "") if fix_in_message else ""), fix)
    return None, False


def control(result, rows, cause, what):
    """``result`` of the failing input, marked wrong when the same cause FAILs on the case's valid
    variant ``what`` too (a rule that fires on everything is not a catch)."""
    neg, _ = judge(rows, cause, [""])
    if neg is not None and result[0] is not None:
        return None, False, "negative control (%s) FAILs too: %s" % (what, neg["id"])
    return result[0], result[1], None


# ---- the cases ------------------------------------------------------------------------------------

CASES = []


def case(num, kind, how=""):
    def deco(fn):
        CASES.append((num, kind, how, fn))
        return fn
    return deco


@case(1, "packages", "fake venv py3.10: torch 2.6.0+cu126, vllm 0.6.3 (real Requires-Dist)")
def c01():
    py, _ = fake_env("c01", "3.10", [("verl", "0.2.0.post2"), ("torch", "2.6.0+cu126", []), ("vllm", "0.6.3")],
                     {"torch/__init__.py": torch_stub("2.6.0+cu126", "12.6", True), "vllm/__init__.py": ""})
    rc, rows = check(py, "python,packages")
    return judge(rows, ["torch==2.4.0", "2.6.0"], ["verl[vllm]==0.2.0.post2|torch==2.4.0|vllm>=0.8|vllm==0.8"])


@case(3, "packages", "fake venv py3.10: torch 2.6.0, torchvision 0.20.1, no vllm; launch rollout.name=vllm")
def c03():
    py, _ = fake_env("c03", "3.10", [("verl", "0.4.0"), ("torch", "2.6.0", []), ("torchvision", "0.20.1")],
                     {"torch/__init__.py": torch_stub("2.6.0"), "torchvision/__init__.py": ""})
    rc, rows = check(py, "python,packages,imports", ["--launch", "actor_rollout_ref.rollout.name=vllm"])
    a = judge(rows, ["torchvision", "2.5.1"], ["torchvision==0.21|0.21.0"])
    b = judge(rows, ["no rollout engine|vllm is not installed"], ["verl[vllm]"])
    both = bool(a[0] and b[0])
    return (a[0] if both else None), (a[1] and b[1])


@case(4, "packages", "fake venv py3.10: verl 0.3.0.post1, torch 2.6.0, tensordict 0.5.0 whose import fails")
def c04():
    td = ("from torch.multiprocessing.reductions import ForkingPickler\n")
    py, _ = fake_env("c04", "3.10", [("verl", "0.3.0.post1"), ("torch", "2.6.0", []), ("tensordict", "0.5.0")],
                     {"torch/__init__.py": torch_stub("2.6.0"), "torch/multiprocessing/__init__.py": "",
                      "torch/multiprocessing/reductions.py": "", "tensordict/__init__.py": td})
    rc, rows = check(py, "python,packages,imports")
    return judge(rows, ["tensordict", "ForkingPickler|torch 2.6|torch>=2.6|2.6"], ["tensordict==0.6.2|tensordict>=0.6.2|tensordict>=0.12"])


@case(6, "packages", "fake venv py3.10: verl 0.3.0.post1, vllm 0.7.4.dev0; env VLLM_USE_V1=1")
def c06():
    py, _ = fake_env("c06", "3.10", [("verl", "0.3.0.post1"), ("torch", "2.5.1", []),
                                     ("vllm", "0.7.4.dev0", ["torch==2.5.1"])],
                     {"torch/__init__.py": torch_stub("2.5.1"), "vllm/__init__.py": ""})
    rc, rows = check(py, "python,packages", env={"VLLM_USE_V1": "1"})
    a = judge(rows, ["0.7.4", "development|nightly|untested"], ["vllm==0.7.3"], ("fail", "warn"))
    b = judge(rows, ["VLLM_USE_V1"], ["VLLM_USE_V1=0|unset"], ("fail", "warn"))
    # no row may offer a vLLM outside verl 0.3.0.post1's range (vllm<=0.8.2) as the thing to install
    wrong = [r["id"] for r in rows if "'vllm>=0.8.3'" in (r.get("fix") or "") and "install" in (r.get("fix") or "")]
    if wrong:
        return (a[0] if a[0] and b[0] else None), False, "a fix outside verl's range: %s" % ",".join(wrong)
    return (a[0] if a[0] and b[0] else None), a[1] and b[1]


@case(8, "python", "pyenv CPython 3.9.18 venv with no packages, --verl 0.9.1")
def c08():
    py, _ = fake_env("c08", "3.9", [])
    rc, rows = check(py, "python", ["--verl", "0.9.1"])
    return judge(rows, ["3.9", "3.10"], ["3.10|3.11|3.12"])



def so_file(path, symbol=None):
    """A real shared object at ``path`` (gcc): with ``symbol``, it needs that undefined C++ symbol, so
    loading it fails with the genuine 'undefined symbol' error."""
    src = path + ".c"
    with open(src, "w") as fh:
        if symbol:
            fh.write("extern void %s(void);\nvoid PyInit_x(void) { %s(); }\n" % (symbol, symbol))
        else:
            fh.write("void pf_empty(void) {}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", path, src] + ([] if symbol else []), check=True)
    os.unlink(src)


def shm_tmpfs(mib):
    """argv prefix: run in a private mount namespace whose /dev/shm is a ``mib`` MiB tmpfs (root)."""
    return ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=%dm tmpfs /dev/shm && exec "$@"' % mib, "sh"]


def meminfo(gib):
    """argv prefix: run with a /proc/meminfo that says ``gib`` GiB (a bind mount in a private namespace)."""
    path = os.path.join(TMP, "meminfo-%d" % gib)
    kb = gib << 20
    with open(path, "w") as fh:
        fh.write("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n" % (kb, kb - 4096, kb - 4096))
    return ["unshare", "-m", "sh", "-c", 'mount --bind %s /proc/meminfo && exec "$@"' % path, "sh"]


def cli_wrapped(prefix, args, env=None, timeout=600):
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.update(env or {})
    p = subprocess.run(prefix + [sys.executable, "-m", "preflight"] + args, capture_output=True, text=True, env=e,
                       cwd=ROOT, timeout=timeout)
    try:
        return p.returncode, json.loads(p.stdout).get("results", [])
    except ValueError:
        return p.returncode, [{"id": "CRASH", "status": "error", "message": (p.stdout + p.stderr)[-600:]}]


V100 = {"name": "Tesla V100-SXM2-32GB", "cc": [7, 0], "total": 32768}
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "total": 81559, "nvlinks": 18}


@case(9, "gpu", "fake NVML (tests/fake_nvml): driver 535.183.01, CUDA 12080; fake venv torch 2.8.0+cu129 (cuda 12.9)")
def c09():
    py, _ = fake_env("c09", "3.12", [("verl", "0.9.1", []), ("torch", "2.8.0+cu129", []), ("vllm", "0.11.0", [])],
                     {"torch/__init__.py": torch_stub("2.8.0+cu129", "12.9"), "vllm/__init__.py": ""})
    env = nvml_env({"gpus": [dict(H100)], "driver": "535.183.01", "cuda": 12080})
    rc, rows = check(py, "packages,gpu", env=env)
    return judge(rows, ["12.9", "12.2|12.8|535"], ["cu12|cuda-compat|driver|cu126|cu128|cu124"])


@case(11, "config", "fake NVML: 4 x Tesla V100 (7.0); config --verl 0.9.1 use_remove_padding=True")
def c11():
    env = nvml_env({"gpus": [dict(V100) for _ in range(4)], "driver": "550.54.14", "cuda": 12040})
    rc, rows = config("0.9.1", 4, BASE + ["actor_rollout_ref.model.use_remove_padding=True"], env=env)
    return judge(rows, ["compute capability 7.0|7.0", "flash|remove_padding|bf16"],
                 ["use_remove_padding=False", "float16|fp16|sdpa|eager"])


@case(12, "imports", "fake venv py3.11: torch 2.6.0 (ABI 0), flash-attn 2.8.0.post2 with a gcc-built .so needing a cxx11 symbol")
def c12():
    sym = "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    py, site = fake_env("c12", "3.11", [("verl", "0.4.1", []), ("torch", "2.6.0", []), ("flash-attn", "2.8.0.post2", [])],
                        {"torch/__init__.py": torch_stub("2.6.0", "12.4", False),
                         "flash_attn/__init__.py": "__version__ = '2.8.0.post2'\nimport flash_attn_2_cuda\n"})
    so_file(os.path.join(site, "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"), sym)
    rc, rows = check(py, "packages,imports")
    return judge(rows, ["flash", "ABI|abi|undefined symbol"], ["2.7.4.post1|cxx11abiFALSE|build"])


MEGATRON_LAUNCH = "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.strategy=megatron"


@case(14, "imports", "fake venv py3.10: verl 0.2.0.post2 + the megatron-core 0.4.0 wheel (no megatron.optimizer); --launch strategy=megatron")
def c14():
    py, _ = fake_env("c14", "3.10", [("verl", "0.2.0.post2", []), ("torch", "2.4.0", []), ("megatron-core", "0.4.0", [])],
                     {"torch/__init__.py": torch_stub("2.4.0"), "megatron/__init__.py": "",
                      "megatron/core/__init__.py": "__version__ = '0.4.0'\n"})
    rc, rows = check(py, "packages,imports,config", ["--launch", MEGATRON_LAUNCH])
    r = judge(rows, ["megatron.optimizer"], ["PYTHONPATH"])
    rc2, rows2 = check(py, "packages,imports,config", ["--launch", MEGATRON_LAUNCH.replace("=megatron", "=fsdp")])
    neg = [x["id"] for x in rows2 if x.get("status") == "fail" and "megatron" in _text(x, True).lower()]
    if neg:
        return r[0], False, "FSDP launch also asked for Megatron: %s" % ",".join(neg)
    return r


@case(15, "packages", "fake venv py3.10: verl 0.3.0.post1 + megatron-core 0.4.0; --launch strategy=megatron")
def c15():
    py, _ = fake_env("c15", "3.10", [("verl", "0.3.0.post1", []), ("torch", "2.5.1", []), ("megatron-core", "0.4.0", [])],
                     {"torch/__init__.py": torch_stub("2.5.1"), "megatron/__init__.py": "",
                      "megatron/core/__init__.py": "__version__ = '0.4.0'\n"})
    rc, rows = check(py, "packages,imports,config", ["--launch", MEGATRON_LAUNCH])
    return judge(rows, ["megatron", "0.4"], ["0.11|core_r0.11"])



def ray_py():
    from envs import real_env

    return real_env("ray-cluster", ["ray==2.60.0", "torch==2.13.0"])


def cluster_run(py, env, args, prefix=()):
    out = os.path.join(TMP, "cluster-%d.json" % time.monotonic_ns())
    p = subprocess.run(list(prefix) + [sys.executable, "-m", "preflight", "cluster", "--python", py, "--json", out]
                       + list(args), env=dict(env, PYTHONPATH=ROOT), cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    if not os.path.exists(out):
        return p.returncode, [{"id": "CRASH", "status": "error", "message": (p.stdout + p.stderr)[-600:]}]
    with open(out) as fh:
        return p.returncode, json.load(fh).get("results", [])


@case(16, "cluster", "real Ray env (ray-cluster test env); RAY_ADDRESS=127.0.0.1:<closed port>; cluster")
def c16():
    from raycluster import closed_port, ray_env

    d = tempfile.mkdtemp(prefix="pfr-", dir="/tmp")
    env = dict(ray_env(d), RAY_ADDRESS="127.0.0.1:%d" % closed_port())
    rc, rows = cluster_run(ray_py(), env, ["--timeout", "30"])
    shutil.rmtree(d, ignore_errors=True)
    return judge(rows, ["RAY_ADDRESS", "not reachable|unreachable|no GCS|dead"], ["ray stop|unset RAY_ADDRESS"])


def torch_py():
    from envs import real_env

    return real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])  # tests/checks/test_nccl_stage.py's


@case(18, "nccl", "injected fault on CPU ranks: 2 gloo ranks (cached verl091-core env), rank 1's first all_reduce hangs "
                  "while NCCL_P2P_DISABLE is unset (--nccl-inject 1:hang_p2p); fake NVML 2 x RTX 5880 Ada under one "
                  "PCIe host bridge (PHB); not the ACS hardware itself. Control: the same run without the fault")
def c18():
    env = nvml_env({"gpus": [{"name": "NVIDIA RTX 5880 Ada Generation", "cc": [8, 9], "total": 49140}] * 2,
                    "ancestor": 30})
    base = ["--nccl-backend", "gloo", "--nccl-world-size", "2", "--timeout", "15"]
    rc, rows = check(torch_py(), "gpu,nccl", base + ["--nccl-inject", "1:hang_p2p"], env=env)
    r = judge(rows, ["nccl.allreduce", "P2P path hangs", "ACS|IOMMU"], ["setpci|pci=noacs|BIOS", "NCCL_P2P_DISABLE=1"])
    rc, healthy = check(torch_py(), "gpu,nccl", base, env=env)
    return control(r, healthy, ["P2P path hangs"], "no fault")


@case(19, "host", "private mount namespace (unshare -m) with a 64 MiB tmpfs on /dev/shm; fake NVML 4 x A100")
def c19():
    env = nvml_env({"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "cc": [8, 0], "total": 81920} for _ in range(4)]})
    rc, rows = cli_wrapped(shm_tmpfs(64), ["check", "--stage", "host", "--json", "-", "-q"], env=env)
    return judge(rows, ["/dev/shm", "64 MiB"], ["--shm-size|--ipc=host"])


@case(21, "cluster", "taskset -c 0 (1 of this machine's CPUs usable), no cluster: cluster -- ray_kwargs.ray_init.num_cpus=null")
def c21():
    from raycluster import ray_env

    d = tempfile.mkdtemp(prefix="pfr-", dir="/tmp")
    rc, rows = cluster_run(ray_py(), ray_env(d), ["--timeout", "60", "--", "ray_kwargs.ray_init.num_cpus=null"],
                           prefix=["taskset", "-c", "0"])
    shutil.rmtree(d, ignore_errors=True)
    return judge(rows, ["CPU", "usable"], ["num_cpus=1"])


@case(22, "config", "/proc/meminfo bind-mounted to 96 GiB (unshare -m); fake NVML 8 x A800 80 GB; 7B model dir")
def c22():
    m = model("qwen7b-22", Q7, {"chat_template": TMPL})
    env = nvml_env({"gpus": [{"name": "NVIDIA A800-SXM4-80GB", "cc": [8, 0], "total": 81920} for _ in range(8)]})
    rc, rows = cli_wrapped(meminfo(96), ["config", "-q", "--json", "-", "--verl", "0.9.1", "--"] + BASE + [
        "trainer.n_gpus_per_node=8", "actor_rollout_ref.model.path=" + m], env=env)
    return judge(rows, ["host|RAM|memory", "96"], ["offload|more memory|fewer|RAM"], ("fail", "warn"))


Q7 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28,
      "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 131072, "vocab_size": 152064,
      "intermediate_size": 18944}
MEG = ["python3", "-m", "verl.trainer.main_ppo", "--config-name=ppo_megatron_trainer"] + BASE[3:]


@case(23, "config", "config --verl 0.9.1 --gpus 16 (rules, no verl)")
def c23():
    rc, rows = config("0.9.1", 16, BASE + ["trainer.nnodes=3", "data.train_batch_size=32"])
    return judge(rows, ["train_batch_size", "48"], ["train_batch_size to 48|train_batch_size=48|train_batch_size to 96"])


@case(25, "config", "config --verl 0.9.1 --gpus 8, Megatron TP2 PP2 on 6 nodes")
def c25():
    rc, rows = config("0.9.1", 8, MEG + ["actor_rollout_ref.actor.strategy=megatron",
                                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                                        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
                                        "trainer.nnodes=6", "data.train_batch_size=16"])
    return judge(rows, ["train_batch_size", "24"], ["train_batch_size to 12|train_batch_size to 24|train_batch_size=24|train_batch_size=12"])


@case(28, "config", "config --verl 0.9.1 --gpus 8: normalised mini 1 < micro 4, and mini 0 (two runs)")
def c28():
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                                         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"])
    a = judge(rows, ["micro"], ["ppo_micro_batch_size_per_gpu to 1|ppo_micro_batch_size_per_gpu=1"])
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=4"])
    b = judge(rows, ["mini", "0"], ["ppo_mini_batch_size to 8|ppo_mini_batch_size=8|ppo_mini_batch_size to 16"])
    return (a[0] if a[0] and b[0] else None), a[1] and b[1]


@case(30, "config", "fake NVML: 8 x 80 GiB, GPU 0 has 12 GiB used by another process; gpu_memory_utilization=0.9")
def c30():
    gpus = [{"name": "NVIDIA H100 80GB HBM3", "cc": [9, 0], "total": 81920, "used": 12288 if i == 0 else 0}
            for i in range(8)]
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.rollout.gpu_memory_utilization=0.9"],
                      env=nvml_env({"gpus": gpus}))
    return judge(rows, ["gpu_memory_utilization|vLLM wants", "68|free"], ["gpu_memory_utilization=0.8"])


def parquet(name, rows_py):
    """A parquet file written by the cached data-jinja test env's pyarrow (tests/envs.py)."""
    from envs import real_env

    py = real_env("data-jinja", ["pyarrow==19.0.1", "jinja2==3.1.6"])
    path = os.path.join(TMP, name)
    subprocess.run([py, "-c", "import json, sys, pyarrow as pa, pyarrow.parquet as pq; "
                    "pq.write_table(pa.Table.from_pylist(json.loads(sys.argv[2])), sys.argv[1])",
                    path, json.dumps(rows_py)], check=True)
    return path, py


@case(31, "data", "parquet [question, answer] (pyarrow of the data-jinja test env); data --python <it> --verl 0.9.1")
def c31():
    path, py = parquet("gsm8k-raw.parquet", [{"question": "1+1?", "answer": "#### 2"}] * 4)
    rc, rows = cli(["data", "--python", py, "--verl", "0.9.1", "--json", "-", "-q", path])
    return judge(rows, ["reward_model|data_source|prompt"], ["preprocess|gsm8k.py"])



@case(33, "config", "config --verl 0.9.1: ...fsdp_config.grad_offload=False, then the '+' form (two runs)")
def c33():
    w = BASE + ["actor_rollout_ref.actor.fsdp_config.grad_offload=False"]
    a = judge(config("0.9.1", 8, w)[1], ["grad_offload"], ["delete|remove"])
    b = judge(config("0.9.1", 8, BASE + ["+actor_rollout_ref.actor.fsdp_config.grad_offload=False"])[1],
              ["grad_offload"], ["delete|remove"])
    if a[0] and "add it with +" in (a[0].get("fix") or ""):
        return a[0], False
    return (a[0] if a[0] and b[0] else None), a[1] and b[1]


@case(34, "config", "Qwen3 model dir (max_position 40960); use_dynamic_bsz, ppo_max_token_len_per_gpu=16384")
def c34():
    m = model("qwen3", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
                        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                        "max_position_embeddings": 40960, "vocab_size": 151936}, {"chat_template": TMPL})
    rc, rows = config("0.9.1", 8, BASE + ["data.max_prompt_length=8192", "data.max_response_length=32768",
                                         "actor_rollout_ref.model.path=" + m, "actor_rollout_ref.actor.use_dynamic_bsz=True",
                                         "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384",
                                         "actor_rollout_ref.rollout.n=4"])
    return judge(rows, ["max_token_len|token_len_per_gpu", "40960"], ["40960"])


@case(36, "packages", "fake venv py3.12: verl 0.7.0, vllm 0.11.0, transformers 5.1.0 (real Requires-Dist), stub transformers without AutoModelForVision2Seq")
def c36():
    py, _ = fake_env("c36", "3.12", [("verl", "0.7.0"), ("torch", "2.8.0", []), ("vllm", "0.11.0"),
                                     ("transformers", "5.1.0", [])],
                     {"torch/__init__.py": torch_stub("2.8.0", "12.8"), "vllm/__init__.py": "",
                      "transformers/__init__.py": "__version__ = '5.1.0'\nclass AutoModelForImageTextToText: pass\n"})
    rc, rows = check(py, "python,packages")
    return judge(rows, ["transformers", "5.1.0|5"], ["transformers<5|0.7.1"])


@case(37, "packages", "fake venv py3.12: verl 0.7.0, vllm 0.12.0 (real Requires-Dist) with a vllm.worker.worker_base stub importing ExecuteModelRequest")
def c37():
    py, site = fake_env("c37", "3.12", [("verl", "0.7.0"), ("torch", "2.9.0", []), ("vllm", "0.12.0"),
                                        ("transformers", "4.57.1", [])],
                        {"torch/__init__.py": torch_stub("2.9.0", "12.8"), "vllm/__init__.py": "__version__='0.12.0'\n",
                         "vllm/sequence.py": "", "vllm/worker/__init__.py": "",
                         "vllm/worker/worker_base.py": "from vllm.sequence import ExecuteModelRequest\n"})
    os.makedirs(os.path.join(site, "vllm"), exist_ok=True)
    so_file(os.path.join(site, "vllm", "_C.abi3.so"))
    rc, rows = check(py, "python,packages")
    return judge(rows, ["0.12", "ExecuteModelRequest|0.7.0"], ["0.7.1", "0.11"])


@case(39, "gpu", "NCCL_SOCKET_IFNAME=ib0 on this host (its /sys/class/net); check --stage gpu,nccl --nccl-backend gloo")
def c39():
    have = sorted(os.listdir("/sys/class/net"))
    py, _ = fake_env("c39", "3.11", [("torch", "2.6.0", [])], {"torch/__init__.py": torch_stub("2.6.0")})
    rc, rows = check(py, "gpu,nccl", ["--nccl-backend", "gloo"], env={"NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "INFO"})
    r = judge(rows, ["NCCL_SOCKET_IFNAME", "ib0"], [have[0]] if have else ["unset"])
    return r[0], r[1], "NCCL_SOCKET_IFNAME=ib0 on this host (interfaces: %s); check --stage gpu,nccl --nccl-backend gloo" % (
        ", ".join(have))


def c41_inputs():
    tmpl = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}")
    m = model("qwen-math", {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
                            "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
                            "max_position_embeddings": 4096, "vocab_size": 151936}, {"chat_template": tmpl})
    rows_py = [{"data_source": "openai/gsm8k", "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": "12"}, "extra_info": {"index": i},
                "prompt": [{"role": "user", "content": [{"type": "text", "text": "A baker has 2 trays of 6 rolls. "
                                                                                  "How many rolls?"}]}]}
               for i in range(4)]
    path, py = parquet("train-41.parquet", rows_py)
    return m, path, py


@case(41, "data", "4-row parquet, content as [{type, text}] parts (data-jinja env's pyarrow + jinja2); qwen2 dir with a string-concatenating template; data and config")
def c41():
    m, path, py = c41_inputs()
    rc, rows = cli(["data", "--python", py, "--verl", "0.9.1", "--model", m, "--json", "-", "-q", path])
    a = judge(rows, ["content", "template|chat"], ["flatten|string"])
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m, "data.train_files=" + path,
                                         "data.val_files=" + path], extra=["--python", py])
    b = judge(rows, ["content", "template|chat"], ["flatten|string"])
    return (a[0] if a[0] and b[0] else None), a[1] and b[1], (
        "" if a[0] and b[0] else "data %s, config %s; " % ("caught" if a[0] else "missed", "caught" if b[0] else "missed")
    ) + "parquet with content parts (data-jinja env's pyarrow + jinja2); data and config"


@case(42, "config", "InternVL dir with auto_map and two .py files; config --verl 0.9.1 --gpus 2")
def c42():
    m = model("internvl", {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
                           "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                                        "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                                        "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
                           "llm_config": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                                          "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
                                          "num_key_value_heads": 2, "max_position_embeddings": 32768,
                                          "vocab_size": 151674}, "vision_config": {"model_type": "intern_vit_6b"}},
              {"chat_template": TMPL}, files=("configuration_internvl_chat.py", "modeling_internvl_chat.py"))
    rc, rows = config("0.9.1", 2, BASE + ["actor_rollout_ref.model.path=" + m, "data.max_prompt_length=1024",
                                         "data.max_response_length=1024"])
    return judge(rows, ["trust_remote_code"], ["actor_rollout_ref.model.trust_remote_code=True",
                                              "data.trust_remote_code=True"])


def resolve(args):
    return cli(["resolve", "--json", "-", "-q"] + args)


@case(44, "resolve", "resolve --verl 0.6.0 --gpu H100 --driver 570.86.15 --python 3.12")
def c44():
    p = subprocess.run([sys.executable, "-m", "preflight", "resolve", "--verl", "0.6.0", "--gpu", "H100", "--driver",
                        "570.86.15", "--python", "3.12", "--json", "-", "-q"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=300)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return None, False, "resolve crashed: " + (p.stdout + p.stderr)[-200:]
    rows = doc.get("results", [])
    r = judge(rows, ["async", "vllm.v1.engine.utils|CoreEngineProcManager|0.10|0.6.1"], ["0.10|0.6.1"],
              ("fail", "warn"), fix_in_message=True)
    return r


@case(45, "resolve", "resolve --verl 0.4.1 --gpu V100 --driver 550.54.14 --python 3.10")
def c45():
    rc, rows = resolve(["--verl", "0.4.1", "--gpu", "V100", "--driver", "550.54.14", "--python", "3.10"])
    return judge(rows, ["bf16|bfloat16", "float16|fp16|half"], ["dtype=float16"], ("fail", "warn"), fix_in_message=True)


@case(46, "config", "fake venv py3.11 with transformers 4.57.1 metadata and a stub CONFIG_MAPPING_NAMES (qwen3, no qwen3_5); qwen3_5 dir")
def c46():
    names = ["llama", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3"]
    ca = "CONFIG_MAPPING_NAMES = {%s}\n" % ", ".join("%r: %r" % (n, n.title() + "Config") for n in names)
    py, _ = fake_env("c46", "3.11", [("transformers", "4.57.1", [])],
                     {"transformers/__init__.py": "__version__ = '4.57.1'\n", "transformers/models/__init__.py": "",
                      "transformers/models/auto/__init__.py": "", "transformers/models/auto/configuration_auto.py": ca})
    m = model("qwen35", {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                         "text_config": {"model_type": "qwen3_5_text", "hidden_size": 2048, "num_hidden_layers": 24,
                                         "num_attention_heads": 16, "num_key_value_heads": 4,
                                         "max_position_embeddings": 262144, "vocab_size": 248320}},
              {"chat_template": TMPL})
    rc, rows = config("0.8.0", 8, BASE + ["actor_rollout_ref.model.path=" + m], extra=["--python", py])
    return judge(rows, ["qwen3_5", "transformers"], ["5.2|transformers>=5|0.9"])


@case(47, "config", "Qwen2.5-7B dims (28 heads); rollout TP 8; config --verl 0.9.1 --gpus 8")
def c47():
    m = model("qwen7b", Q7, {"chat_template": TMPL})
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m,
                                         "actor_rollout_ref.rollout.tensor_model_parallel_size=8"])
    r = judge(rows, ["tensor_model_parallel_size", "28"], ["tensor_model_parallel_size=4|tensor_model_parallel_size to 4"])
    return control(r, config("0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m,
                                                 "actor_rollout_ref.rollout.tensor_model_parallel_size=4"])[1],
                   ["tensor_model_parallel_size", "28"], "TP 4")


@case(48, "config", "llama base dir, tokenizer_config without chat_template; config --verl 0.9.1")
def c48():
    m = model("base", {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                       "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                       "max_position_embeddings": 16384, "vocab_size": 32256}, {"tokenizer_class": "X"})
    rc, rows = config("0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m])
    return judge(rows, ["chat_template|chat template"], ["custom_chat_template|instruct"])


@case(49, "config", "reward file defining char_count_reward_function; reward_manager=prime; config --verl 0.5.0")
def c49():
    rw = os.path.join(TMP, "rw.py")
    with open(rw, "w") as fh:
        fh.write("def char_count_reward_function(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    return 0.0\n")
    rc, rows = config("0.5.0", 8, BASE + ["reward_model.reward_manager=prime", "custom_reward_function.path=" + rw,
                                         "custom_reward_function.name=char_count_reward_function"])
    return judge(rows, ["prime", "pickl|serializ|naive"], ["naive|0.6"])


@case(50, "config", "lora_rank=1 with vLLM rollout; config --verl 0.6.0")
def c50():
    rc, rows = config("0.6.0", 8, BASE + ["actor_rollout_ref.model.lora_rank=1", "actor_rollout_ref.model.lora_alpha=2",
                                         "actor_rollout_ref.model.target_modules=all-linear",
                                         "actor_rollout_ref.rollout.load_format=safetensors"])
    r = judge(rows, ["lora_rank", "8"], ["lora_rank=8|lora_rank to 8|0.6.1"])
    return control(r, config("0.6.0", 8, BASE + ["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16",
                                                 "actor_rollout_ref.model.target_modules=all-linear",
                                                 "actor_rollout_ref.rollout.load_format=safetensors"])[1],
                   ["lora_rank"], "lora_rank=8")


@case(51, "config", "Qwen3.5 MoE dir (2 KV heads); Megatron TP 4 with use_mbridge; config --verl 0.9.1")
def c51():
    m = model("qwen35moe", {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                            "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048,
                                            "num_hidden_layers": 40, "num_attention_heads": 16,
                                            "num_key_value_heads": 2, "num_experts": 256,
                                            "max_position_embeddings": 262144, "vocab_size": 248320}},
              {"chat_template": TMPL})
    rc, rows = config("0.9.1", 8, MEG + ["actor_rollout_ref.model.path=" + m,
                                        "actor_rollout_ref.actor.megatron.use_mbridge=True",
                                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
                                        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=4"])
    return judge(rows, ["tensor_model_parallel_size", "num_query_groups|num_key_value_heads|KV heads|KV groups"],
                 ["tensor_model_parallel_size=2|tensor_model_parallel_size to 2"], ("fail", "warn"))


@case(52, "config", "prompt 2048 + response 8192; config --verl 0.5.0 (and 0.9.1 as the negative control)")
def c52():
    w = BASE + ["data.max_prompt_length=2048", "data.max_response_length=8192"]
    r = judge(config("0.5.0", 8, w)[1], ["max_num_batched_tokens"], ["10240"])
    neg = judge(config("0.9.1", 8, w)[1], ["max_num_batched_tokens"], [""])
    if neg[0]:
        return r[0], False, "0.9.1 negative control gives a false FAIL %s" % neg[0]["id"]
    return r



def with_cluster(nodes, fn):
    """Start a local Ray cluster (tests/raycluster.py; each node a dict of RayCluster.add's
    arguments) under the ray-cluster test env, run ``fn(cluster)``, stop it."""
    from raycluster import RayCluster

    c = RayCluster()
    try:
        for n in nodes:
            c.add(ray_py(), **n)
        return fn(c)
    finally:
        c.stop()


@case(53, "cluster", "local Ray cluster: head {CPU 16, GPU 4} + worker {CPU 16, GPU 2} (declared GPUs); cluster -- n_gpus_per_node=3 nnodes=2")
def c53():
    def run(c):
        return cluster_run(ray_py(), c.env, ["--address", c.address, "--verl", "0.9.1", "--collective", "none",
                                             "--stage", "host", "--timeout", "60", "--", "trainer.n_gpus_per_node=3",
                                             "trainer.nnodes=2"])
    rc, rows = with_cluster([{"num_cpus": 16, "num_gpus": 4}, {"num_cpus": 16, "num_gpus": 2}], run)
    return judge(rows, ["n_gpus_per_node", "2"], ["n_gpus_per_node=2"])


@case(54, "cluster", "local Ray cluster: one node {CPU 4, GPU 1}; cluster --verl 0.9.1 -- n_gpus_per_node=1 nnodes=1 transfer_queue.enable=True")
def c54():
    def run(c):
        return cluster_run(ray_py(), c.env, ["--address", c.address, "--verl", "0.9.1", "--collective", "none",
                                             "--stage", "host", "--timeout", "60", "--", "trainer.n_gpus_per_node=1",
                                             "trainer.nnodes=1", "transfer_queue.enable=True"])
    def run2(c):
        return cluster_run(ray_py(), c.env, ["--address", c.address, "--verl", "0.9.1", "--collective", "none",
                                             "--stage", "host", "--timeout", "60", "--", "trainer.n_gpus_per_node=1",
                                             "trainer.nnodes=1"])
    rc, rows = with_cluster([{"num_cpus": 4, "num_gpus": 1}], run)
    r = judge(rows, ["CPU", "4"], ["num_data_storage_units|more CPUs|num-cpus|--num-cpus"])
    rc, rows2 = with_cluster([{"num_cpus": 4, "num_gpus": 1}], run2)
    return control(r, rows2, ["reserves at least"], "without TransferQueue (1 + 3 CPUs)")


@case(55, "cluster", "local Ray cluster from the ray-cluster env (Ray 2.60, Python 3.11); launch env ray-py312 (Ray 2.60, Python 3.12: the Python half of the case's mismatch; no Ray 2.42 env on disk)")
def c55():
    from envs import real_env

    py312 = real_env("ray-py312", ["ray==2.60.0"], python_minor="3.12")

    def run(c):
        return cluster_run(py312, c.env, ["--address", c.address, "--collective", "none", "--timeout", "60", "--",
                                          "trainer.n_gpus_per_node=2"])
    rc, rows = with_cluster([{"num_cpus": 8, "num_gpus": 2}], run)
    return judge(rows, ["ray|Ray", "3.11|3.12|2.60"], ["Python 3.11|ray stop|RAY_ADDRESS|env that started"])


# ---- explain: each case's quoted error text -------------------------------------------------------

def explain_column(num, texts, expected):
    """'right' when ``explain -`` on one of the case's quoted error texts names a signature that
    matrices/signatures.toml files under this case; 'wrong: <ids>' otherwise; 'no text' when the case
    quotes none (tests/explain/test_explain.py extracts the texts the same way)."""
    if not texts:
        return "no text"
    got = []
    for t in texts:
        p = subprocess.run([sys.executable, "-m", "preflight", "explain", "-", "--json", "-", "-q"], input=t,
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=120)
        try:
            rows = json.loads(p.stdout).get("results", [])
        except ValueError:
            rows = []
        sig = next(((r.get("evidence") or {}).get("signature") for r in rows if r.get("id") == "explain.root"), None)
        if sig in expected:
            return "right"
        got.append(str(sig))
    return "wrong: " + ",".join(got)


def quoted_texts():
    """({case: [quoted texts]}, {case: {signature ids}}) as tests/explain/test_explain.py reads them."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "explain"))
    try:
        import test_explain as te
    except Exception:
        return {}, {}
    return te.quoted_cases(), te._expected(matrix())


# ---- main -----------------------------------------------------------------------------------------

def main():
    want = [a for a in sys.argv[1:] if not a.startswith("-")]
    texts, expected = quoted_texts()
    ex_tot = {"right": 0, "quoted": 0}
    totals = {}
    lines = []
    for num, kind, how, fn in CASES:
        if want and str(num) not in want:
            continue
        t0 = time.time()
        try:
            out = fn()
        except Exception as exc:  # a bench prints; one broken input does not stop the others
            out = (None, False, "bench error: %s: %s" % (type(exc).__name__, exc))
        row, right = out[0], out[1]
        note = out[2] if len(out) > 2 and out[2] else how
        nr = isinstance(row, str) and row.startswith("not reproducible here")
        caught = "n/a" if nr else ("yes" if row else "no")
        fix = "n/a" if nr else ("yes" if (row and right) else "no")
        rid = row if isinstance(row, str) else (row or {}).get("id", "-")
        ex = explain_column(num, texts.get(str(num), []), expected.get(str(num), set()))
        line = "%-3s %-10s caught %-3s right fix %-3s %-44s %5.1fs  explain %-8s %s" % (
            num, kind, caught, fix, rid[:44], time.time() - t0, ex.split(":")[0], note)
        print(line, flush=True)
        if ex != "no text":
            ex_tot["quoted"] += 1
            ex_tot["right"] += ex == "right"
        if VERBOSE and ex.startswith("wrong"):
            print("      explain: " + ex, flush=True)
        if VERBOSE and isinstance(row, dict):
            print("      %s: %s\n      fix: %s" % (row.get("status"), row.get("message", "")[:400],
                                                 (row.get("fix") or "")[:400]), flush=True)
        k = totals.setdefault(kind, [0, 0, 0, 0])
        k[0] += caught == "yes"
        k[1] += fix == "yes"
        k[2] += 1
        k[3] += nr
        lines.append(line)
    c = sum(v[0] for v in totals.values())
    f = sum(v[1] for v in totals.values())
    m = sum(v[2] for v in totals.values())
    n = sum(v[3] for v in totals.values())
    print("caught %d of %d, right fix %d of %d%s" % (c, m, f, m, " (%d not reproducible here)" % n if n else ""))
    for kind, (kc, kf, km, kn) in sorted(totals.items()):
        print("  %-10s caught %d of %d, right fix %d of %d%s" % (kind, kc, km, kf, km,
                                                               " (%d not reproducible here)" % kn if kn else ""))
    print("explain: the quoted error text classified right for %d of %d cases that quote one" % (
        ex_tot["right"], ex_tot["quoted"]))
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
