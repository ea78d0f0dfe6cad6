"""The launch rewriting, composed by Hydra (the vendored hydra-core over each release's stored
config tree, matrices/verl_config/<release>/) for every stored release (the default suite takes
tests/sweep.py's fixed sample, the oldest and the newest included; PREFLIGHT_FULL_SWEEP=1 every one)."""

import json
import os

import pytest

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.rehearse.rewrite import rewrite, verify
from sweep import sample

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RELEASES = sorted(json.load(open(os.path.join(ROOT, "matrices", "verl_config", "index.json")))["versions"])

LAUNCH = ("VLLM_USE_V1=1 python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "data.train_files=/data/train.parquet data.val_files=/data/test.parquet data.train_batch_size=16 "
          "data.max_prompt_length=512 data.max_response_length=1024 actor_rollout_ref.model.path=Qwen/Qwen2.5-3B "
          "actor_rollout_ref.rollout.n=5 trainer.logger=['console','wandb'] trainer.save_freq=20 "
          "trainer.total_epochs=15 trainer.n_gpus_per_node=2")


@pytest.mark.parametrize("release", sample(RELEASES, 6))
def test_rewritten_launch_composes(release, tmp_path):
    spec = parse_launch(LAUNCH)
    w = str(tmp_path)
    rw = rewrite(spec, w + "/model", [w + "/data/train-0.parquet"], [w + "/data/val-0.parquet"], w,
                 user_response_length=1024, ray_temp_dir="/tmp/pfr-x", extra={"trainer.n_gpus_per_node": 1})
    comp, refusal = verify(spec, rw, release)
    if compose_stored(spec, release=release).error is not None:  # the launch itself does not fit this release
        assert refusal is not None  # (0.1 has no actor_rollout_ref.rollout.n): the rewrite hides nothing
        return
    assert refusal is None, refusal
    g = comp.get
    assert g("trainer.total_training_steps") == 2
    assert g("actor_rollout_ref.model.path") == w + "/model"
    assert list(g("data.train_files")) == [w + "/data/train-0.parquet"]
    assert g("data.max_response_length") == 32 and g("data.max_prompt_length") == 512
    assert list(g("trainer.logger")) == ["console"] and g("trainer.save_freq") == -1
    assert g("trainer.val_before_train") is False and g("trainer.n_gpus_per_node") == 1
    assert g("ray_kwargs.ray_init._temp_dir") == "/tmp/pfr-x"
    assert g("actor_rollout_ref.rollout.n") == 5 and g("trainer.total_epochs") == 15  # the user's, kept
    assert rw.env == {"VLLM_USE_V1": "1"}
    assert "trainer.save_freq=20" in rw.replaced and "trainer.logger=[console,wandb]" in rw.replaced  # shell quotes removed, as bash does


def test_flags_keep_the_launch_settings(tmp_path):
    spec = parse_launch(LAUNCH)
    rw = rewrite(spec, "/m", ["/t"], ["/v"], str(tmp_path), keep_loggers=True, keep_checkpoints=True, validate=True,
                 ray_address="10.0.0.1:6379")
    comp, refusal = verify(spec, rw, "0.9.1")
    assert refusal is None
    assert list(comp.get("trainer.logger")) == ["console", "wandb"] and comp.get("trainer.save_freq") == 20
    assert comp.get("ray_kwargs.ray_init.address") == "10.0.0.1:6379"
    assert comp.get("ray_kwargs.ray_init._temp_dir") is None
