"""A launch's relative data paths are resolved where the job's driver runs (issue h1, kind 2).

Truth: verl 0.9.1's own start-up (create_rl_dataset opens data.train_files relative to the process's
working directory). A plain launch runs in the directory it is started from; a ``ray job submit``
job runs in its uploaded --working-dir. Before the fix the dry start-up ran in the probe's private
directory and failed both with FileNotFoundError (a false positive).
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.startup import run_startup

pytestmark = pytest.mark.realenv
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def env091():
    return real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])


@pytest.fixture(scope="module")
def project(env091, tmp_path_factory):
    """A project directory holding data/train.parquet (relative paths) and the model."""
    root = tmp_path_factory.mktemp("proj")
    i = tiny_inputs(env091, str(root / "in"), 16, 0)
    os.makedirs(str(root / "data"))
    shutil.copy(i["train"], str(root / "data" / "train.parquet"))
    return str(root), i["model"]


def _ovs(model, data="data/train.parquet"):
    return ["data.train_files=" + data, "data.val_files=" + data, "actor_rollout_ref.model.path=" + model,
            "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "algorithm.adv_estimator=grpo",
            "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.name=vllm", "trainer.logger=[console]"]


def test_startup_runs_in_the_jobs_directory(env091, project):
    root, model = project
    st = run_startup(env091, _ovs(model), timeout=300, cwd=root)
    assert st.error is None, st.error
    # verl's own answer for a directory without the file: FileNotFoundError at create_rl_dataset
    st = run_startup(env091, _ovs(model), timeout=300, cwd=os.path.join(root, "in"))
    assert st.error is not None and st.error["kind"] == "FileNotFoundError", st.error


def _config(env091, cwd, words):
    out = os.path.join(cwd, "..", "r-%d.json" % len(words))
    proc = subprocess.run([sys.executable, "-m", "preflight", "config", "--python", env091, "--json", out, "--"]
                          + words, cwd=cwd, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    with open(out) as fh:
        return proc, {r["id"]: r for r in json.load(fh)["results"]}


def test_config_takes_relative_paths_from_the_launch_directory_and_the_ray_working_dir(env091, project):
    root, model = project
    entry = ["python3", "-m", "verl.trainer.main_ppo"]
    _proc, rows = _config(env091, root, entry + _ovs(model))
    assert rows["config.verl.startup"]["status"] == "pass", rows["config.verl.startup"]
    assert rows["config.data"]["status"] != "warn" if "config.data" in rows else True
    assert not any(k.startswith("config.data.absent") for k in rows)
    # ray job submit --working-dir ROOT, submitted from another directory: the job runs in ROOT
    _proc, rows = _config(env091, os.path.join(root, "in"), ["ray", "job", "submit", "--working-dir", root, "--"]
                          + entry + _ovs(model))
    assert rows["config.verl.startup"]["status"] == "pass", rows["config.verl.startup"]
    assert not any(k.startswith("config.data.absent") for k in rows)
