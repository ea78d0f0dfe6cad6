"""verl's dry start-up on real installs of the releases before and after 0.6.1/0.9.1 (issue 23):
0.3.0.post1, 0.4.1, 0.5.0, 0.7.1 and 0.8.0, each in a cached CPU venv (torch 2.13.0 CPU,
transformers 4.x: 0.4-0.6 import transformers.AutoModelForVision2Seq, which transformers 5 removed;
pyarrow 19, the newest built for numpy<2, which 0.5+ pin).

Each env is about 2 GB and took 4 to 10 minutes to build here, so this file is opt-in: set
VERL_PREFLIGHT_RELEASE_ENVS=1. Once built, one release costs one target process (verl imported
once, two launches: about 20 s here).

The truth is each release's own: its start-up accepts the launch and stops at the first worker
call, its filter drops the rows the fixture made too long (counted against the fixture), its
batch arithmetic (drop_last) gives the steps, the release table entry picked matches the installed
version, a misspelt "+" key is named with the real key, and a mini-batch larger than the batch is
refused by verl's own validation, quoting verl's message and a line inside verl.
"""

import os

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.startup import classify, run_startup_batch, where

pytestmark = pytest.mark.realenv

HEAVY = os.environ.get("VERL_PREFLIGHT_RELEASE_ENVS") == "1"
TF4 = ["torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"]
#: (env name, requirements, installed version, the startup_releases entry that holds for it, rollout)
RELEASES = [
    ("verl030-tf4", ["verl==0.3.0.post1"] + TF4, "0.3.0.post1", "0.3", "vllm"),
    # verl 0.4.1's own __init__ imports pkg_resources, which setuptools 81 removed (torch pulls the
    # newest); its TaskRunner.run imports vllm itself for rollout.name=vllm (verl/utils/vllm_utils.py:18),
    # so on this machine (no vLLM) the launch uses the HF rollout
    ("verl041-tf4", ["verl==0.4.1"] + TF4 + ["setuptools<81"], "0.4.1", "0.4", "hf"),
    ("verl050-tf4", ["verl==0.5.0"] + TF4, "0.5.0", "0.4", "vllm"),
    ("verl071-tf4", ["verl==0.7.1"] + TF4, "0.7.1", "0.6", "vllm"),
    # verl 0.8.0 imports cachetools, uvicorn and fastapi at start-up (verl/workers/rollout/
    # llm_server.py, utils.py) but its wheel does not require them: found by this dry start-up
    ("verl080-tf4", ["verl==0.8.0"] + TF4 + ["cachetools", "uvicorn", "fastapi"], "0.8.0", "0.6", "vllm"),
]
ROWS, LONG, BATCH, EPOCHS = 32, 4, 8, 2


def launch(i, **kw):
    ovs = {"data.train_files": i["train"], "data.val_files": i["test"], "actor_rollout_ref.model.path": i["model"],
           "data.train_batch_size": BATCH, "actor_rollout_ref.actor.ppo_mini_batch_size": 4,
           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2,
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 2,
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 2, "algorithm.adv_estimator": "grpo",
           "trainer.n_gpus_per_node": 1, "data.max_prompt_length": 64, "actor_rollout_ref.rollout.name": "vllm",
           "actor_rollout_ref.rollout.tensor_model_parallel_size": 1, "data.filter_overlong_prompts": True,
           "trainer.total_epochs": EPOCHS}
    ovs.update(kw)
    return ["%s=%s" % kv for kv in ovs.items()]


@pytest.mark.skipif(not HEAVY, reason="each release env is ~2 GB, 4-10 minutes to build: set "
                                      "VERL_PREFLIGHT_RELEASE_ENVS=1")
@pytest.mark.parametrize("name,reqs,version,spec_from,rollout", RELEASES, ids=[r[2] for r in RELEASES])
def test_release_startup(name, reqs, version, spec_from, rollout, tmp_path):
    py = real_env(name, reqs)
    i = tiny_inputs(py, str(tmp_path / "tiny"), ROWS, LONG)
    r = {"actor_rollout_ref.rollout.name": rollout}
    ok, bad = run_startup_batch(py, [launch(i, **r) + ["+data.max_prompt_lenght=64"],
                                     launch(i, **dict(r, **{"actor_rollout_ref.actor.ppo_mini_batch_size": 16}))],
                                timeout=600)
    assert ok.verl_version == version and ok.release_spec == spec_from
    assert ok.accepted, ok.error
    assert ok.stopped_at == "ResourcePoolManager.create_resource_pool"
    assert ok.where["function"] == "init_workers" and ok.where["file"] == "verl/trainer/ppo/ray_trainer.py"
    f = ok.facts
    assert f["train_file_rows"] == ROWS and f["train_rows_dropped"] == LONG
    assert f["train_batches"] == (ROWS - LONG) // BATCH
    assert f["total_training_steps"] == (ROWS - LONG) // BATCH * EPOCHS
    assert ok.reward["rows"] and all(r["ok"] for r in ok.reward["rows"])
    assert [k["override"] for k in ok.ignored["keys"]] == ["+data.max_prompt_lenght"]
    assert ok.ignored["keys"][0]["closest"] == "data.max_prompt_length"
    e = bad.error
    assert e is not None and not bad.accepted
    # 0.3-0.5: a bare assert in RayPPOTrainer._validate_config (its statement is the message)
    assert "ppo_mini_batch_size" in e["message"], e
    assert where(e).startswith("verl/"), where(e)
    assert classify(e)[0] == "validate_config", (e["step"], e.get("verl_frame"))
