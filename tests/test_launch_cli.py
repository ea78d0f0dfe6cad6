"""`preflight config` and the config stage of `check`, through the built zipapp (matrices and
target scripts packed), on the oldest supported Python and with a real verl install."""

import json
import os
import subprocess
import sys

import pytest

from envs import find_python, real_env

VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]
SEED = ["python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo",
        "data.train_batch_size=60", "actor_rollout_ref.rollout.n=12", "trainer.n_gpus_per_node=6",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=30",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16"]


def pyz_run(pyz, *args, python=sys.executable, env=None):
    return subprocess.run([python, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, env=env)


@pytest.fixture
def bare_python(tmp_path):
    """A venv with nothing installed (no verl, no YAML reader): the stored-defaults path."""
    d = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    return str(d / "bin" / "python")


def test_config_seed_example_with_stored_defaults(pyz, tmp_path, bare_python):
    out = tmp_path / "launch.json"
    env = dict(os.environ, COLUMNS="80")
    p = pyz_run(pyz, "config", "--python", bare_python, "--verl", "0.9.1", "--json", str(out), "--", *SEED, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "60 x 12 = 720" in p.stdout and "20 prompts, 240 sequences" in p.stdout
    assert "10 prompts, 120 sequences" in p.stdout and "OK: 0 failed" in p.stdout
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    doc = json.loads(out.read_text())
    assert doc["launch"]["config"]["method"] == "stored" and doc["launch"]["config"]["verl_version"] == "0.9.1"
    assert doc["launch"]["batch"]["sequences_per_step"] == 720 and doc["launch"]["batch"]["rollout_groups"] == 3
    vals = doc["launch"]["config"]["values"]
    assert vals["data.train_batch_size"] == {"value": 60, "source": "override"}
    assert vals["actor_rollout_ref.rollout.n_gpus_per_node"] == {"value": 6,
                                                                 "source": "override via trainer.n_gpus_per_node"}
    assert {r["id"] for r in doc["results"]} >= {"config.compose", "config.batch", "config.rules.train_batch_divisible",
                                                  "config.rules.rollout_tp_world", "config.data"}


def test_config_gpus_shorthand_and_failure_exit(pyz, bare_python, tmp_path):
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "config", "--python", bare_python, "--gpus", "16", "--nnodes", "2", "--json", str(out), "--",
                *SEED)
    assert p.returncode == 1
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    f = res["config.rules.train_batch_divisible"]
    assert f["status"] == "fail" and "60 x 12 = 720 is not divisible by the world size 32" in f["message"]
    assert f["fix"] == "set data.train_batch_size to 56 or 64"
    assert f["evidence"]["verl_where"].startswith("verl/utils/config.py validate_config")
    assert json.loads(out.read_text())["launch"]["config"]["values"]["trainer.nnodes"]["source"] == "--nnodes"


def test_rules_of_the_asked_release_with_nearest_stored_defaults(pyz, bare_python, tmp_path):
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "config", "--python", bare_python, "--verl", "0.7.0", "--json", str(out), "--", *SEED)
    assert "no stored defaults for verl 0.7.0; using those of 0.9.1" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["verl"]["version"] == "0.7.0" and doc["launch"]["rules"].startswith("rules of verl 0.6.x-0.9.0")
    assert doc["launch"]["config"]["verl_version"] == "0.9.1"


def test_config_print_all_and_hydra_refusal(pyz, bare_python):
    p = pyz_run(pyz, "config", "--python", bare_python, "--print", "--", "trainer.nnodes=2")
    assert "global_profiler" in p.stdout and "ray_kwargs" in p.stdout
    p = pyz_run(pyz, "config", "--python", bare_python, "--", "actor_rollout_ref.actor.megatron.tensor_model_"
                "parallel_size=2")
    assert p.returncode == 1 and "--config-name=ppo_megatron_trainer" in p.stdout
    p = pyz_run(pyz, "config", "--python", bare_python, "--", "data.train_batch_size=1,2")
    assert p.returncode == 1 and "ambiguous value" in p.stdout


@pytest.mark.parametrize("args,words", [
    (["config", "--file", "/no/such.yaml"], "--file /no/such.yaml: no such file"),
    (["config", "--gpus", "0"], "must be > 0"),
    (["config", "--verl", "0.99"], "--verl 0.99: not a verl release"),
    (["check", "--config", "/no/cfg.yaml"], "--config /no/cfg.yaml: no such file"),
    (["data", "/no/x.parquet"], "no such file"),
])
def test_usage_errors(pyz, args, words):
    p = pyz_run(pyz, *args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr


def test_yaml_without_reader(pyz, bare_python, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  train_batch_size: 64\n")
    p = pyz_run(pyz, "config", "--python", bare_python, "--file", str(f))
    assert p.returncode == 2 and "pass the config as JSON or point --python at the verl environment" in p.stderr
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"data": {"train_batch_size": 64}}))
    p = pyz_run(pyz, "config", "--python", bare_python, "--file", str(j), "--", *SEED[:-1])
    assert "file" in p.stdout and "Traceback" not in p.stderr


def test_check_stage_skips_without_a_launch(pyz, tmp_path, bare_python):
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "check", "--python", bare_python, "--stage", "config", "--json", str(out))
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert res["config.compose"]["status"] == "skip" and "no launch command or config given" in \
        res["config.compose"]["message"]
    assert res["config.rules"]["status"] == "skip" and res["config.rules"]["caused_by"] == ["config.compose"]
    assert p.returncode == 0


def test_check_stage_with_a_broken_launch_quote(pyz, tmp_path, bare_python):
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "check", "--python", bare_python, "--stage", "config", "--launch", "python3 -m x 'a=1",
                "--json", str(out))
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert res["config.compose"]["status"] == "fail" and "quot" in res["config.compose"]["message"]
    assert p.returncode == 1 and "Traceback" not in p.stderr


def test_config_runs_on_python_38(pyz, bare_python):
    try:
        py38 = find_python("3.8")
    except LookupError:
        pytest.skip("no Python 3.8 here")
    p = pyz_run(pyz, "config", "--python", bare_python, "--", *SEED, python=py38)
    assert p.returncode == 0 and "60 x 12 = 720" in p.stdout, p.stderr


@pytest.mark.realenv
def test_config_with_hydra_in_a_real_verl(pyz, tmp_path):
    py = real_env("verl091-core", VERL_CORE)
    cfg = tmp_path / "saved.yaml"
    cfg.write_text("data:\n  train_batch_size: 120\n")
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "config", "--python", py, "--file", str(cfg), "--json", str(out), "--", *SEED[:5] + SEED[6:])
    doc = json.loads(out.read_text())
    assert doc["launch"]["config"]["method"] == "hydra", p.stdout + p.stderr
    assert doc["launch"]["config"]["values"]["data.train_batch_size"] == {"value": 120, "source": "file"}
    assert doc["launch"]["batch"]["sequences_per_step"] == 1440
    assert "installed, Hydra in the target" in p.stdout


def test_check_stage_yaml_without_reader_is_an_error_row(pyz, bare_python, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  train_batch_size: 64\n")
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "check", "--python", bare_python, "--stage", "config", "--config", str(f), "--json", str(out))
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert res["config.compose"]["status"] == "error" and "neither omegaconf nor PyYAML" in \
        res["config.compose"]["message"]
    assert p.returncode == 1 and "Traceback" not in p.stderr
