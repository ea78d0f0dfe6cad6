"""Run in a verl 0.9.1 environment (tests/rehearse/test_rehearse_classify.py): the planted failures of
issue 25 raised by verl's own code on CPU, each printed as the Ray actor that hit it prints it.

usage: python planted_verl.py FIXTURES_DIR OUT_JSON   (FIXTURES_DIR: bench/rehearse_fixtures.py's output)

Each case calls the code verl runs at that point of a real launch:

* ``reward_raises``: verl's get_custom_reward_fn loads the fixtures' reward_raises.py and verl's
  naive reward manager (the reward loop's, verl/experimental/reward_loop) scores a response without
  '####' with it (the untrained model's output), as RewardLoopWorker.compute_score does.
* ``reward_missing_import``: verl's get_custom_reward_fn on reward_missing_import.py, as
  RewardLoopWorker.__init__ does.
* ``runtime_setting``: verl's ppo_trainer config composed by Hydra with
  ``actor_rollout_ref.rollout.mode=sync`` (Hydra accepts it), built into RolloutConfig by verl's
  omega_conf_to_dataclass, as the rollout worker does.
* ``column_type``: verl's v1 trainer ``fit`` with the steps per epoch of an empty train dataset (its
  _init_dataloader formula): on the H200, RLHFDataset dropped every row of a ``prompt`` column
  holding strings and printed ``filter dataset len: 0`` (bench/RESULTS.md), as TaskRunner does.
* ``vocab``: the fixtures' prompt tokenized by its tokenizer, looked up in an embedding of the
  model_small_vocab config's vocab_size (the first layer of the actor and of the rollout).

The texts are Ray's own formatting (ray.exceptions.RayTaskError's __str__ of the real traceback),
followed by the log lines verl printed on the way (the dataset's per-row errors and its length).
"""

import json
import os
import sys
import tempfile
import traceback


def _ray_text(actor, method, exc, printed=""):
    from ray.exceptions import RayTaskError

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    err = RayTaskError(method, tb, exc, proctitle="ray::%s.%s" % (actor, method), pid=4242, ip="127.0.0.1")
    prefix = "(%s pid=4242) " % actor
    lines = [prefix + line for line in printed.splitlines()]
    lines.append("ray.exceptions.RayTaskError(%s): %s" % (type(exc).__name__, str(err)))
    return "\n".join(lines)


def _config(overrides):
    from hydra import compose, initialize_config_dir

    import verl.trainer.main_ppo as main_ppo

    cfg_dir = os.path.join(os.path.dirname(main_ppo.__file__), "config")
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def reward_raises(fx, cfg):
    import asyncio

    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(cfg)
    tok = AutoTokenizer.from_pretrained(os.path.join(fx, "model"))
    ids = tok("Tom has 3 apples", return_tensors="pt")["input_ids"][0]
    n = len(ids)
    data = DataProto.from_dict(
        tensors={"responses": ids.unsqueeze(0), "attention_mask": torch.ones(1, 2 * n, dtype=torch.long)},
        non_tensors={"data_source": np.array(["openai/gsm8k"], dtype=object),
                     "reward_model": np.array([{"ground_truth": "7"}], dtype=object),
                     "extra_info": np.array([{}], dtype=object)})

    async def run():
        manager = NaiveRewardManager(cfg, tok, fn)
        manager.loop = asyncio.get_running_loop()
        return await manager.run_single(data)

    asyncio.run(run())


def column_type(cfg):
    from verl.trainer.ppo.v1 import trainer_base

    cls = type("Trainer", (trainer_base.PPOTrainer,), {m: (lambda self, *a, **k: None)
                                                        for m in trainer_base.PPOTrainer.__abstractmethods__})
    trainer = cls.__new__(cls)
    trainer.config = cfg
    trainer.global_steps = 0
    trainer.total_training_steps = 2
    # verl's _init_dataloader: len(train_dataset) // train_batch_size; on the H200 (transformers 5.9.0)
    # RLHFDataset dropped every row of the string column (bench/RESULTS.md), so the dataset had 0 rows
    trainer.steps_per_epoch = 0 // cfg.data.train_batch_size
    try:
        trainer.fit(None)
    except Exception as exc:
        return exc
    return None


def vocab(fx):
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.join(fx, "model_small_vocab"))
    with open(os.path.join(fx, "model_small_vocab", "config.json")) as fh:
        size = json.load(fh)["vocab_size"]
    ids = tok("Tom has 3 apples and buys 4 more. How many apples does he have?", return_tensors="pt")["input_ids"]
    torch.nn.Embedding(size, 8)(ids)


def main(fx, out_path):
    work = tempfile.mkdtemp(prefix="planted-")
    base = ["data.train_files=%s" % os.path.join(fx, "data", "bad_type.parquet"), "data.train_batch_size=8",
            "data.max_prompt_length=256", "+data.cache_dir=%s" % work, "data.filter_overlong_prompts_workers=1",
            "trainer.logger=[console]", "trainer.val_before_train=False"]
    out = {}
    cfg = _config(base + ["reward.custom_reward_function.path=%s" % os.path.join(fx, "reward_raises.py"),
                          "reward.custom_reward_function.name=compute_score"])
    try:
        reward_raises(fx, cfg)
    except Exception as exc:
        out["reward_raises"] = _ray_text("RewardLoopWorker", "compute_score", exc)
    cfg = _config(base + ["reward.custom_reward_function.path=%s" % os.path.join(fx, "reward_missing_import.py"),
                          "reward.custom_reward_function.name=compute_score"])
    from verl.trainer.ppo.reward import get_custom_reward_fn

    try:
        get_custom_reward_fn(cfg)
    except Exception as exc:
        out["reward_missing_import"] = _ray_text("RewardLoopWorker", "__init__", exc)
    cfg = _config(base + ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=sync"])
    from verl.utils.config import omega_conf_to_dataclass

    try:
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except Exception as exc:
        out["runtime_setting"] = _ray_text("WorkerDict", "init_model", exc)
    exc = column_type(_config(base))
    if exc is not None:
        out["column_type"] = _ray_text("TaskRunnerV1", "run", exc, "filter dataset len: 0")
    try:
        vocab(fx)
    except Exception as exc:
        out["vocab"] = _ray_text("WorkerDict", "compute_log_prob", exc)
    import ray
    import torch
    import transformers

    import verl

    doc = {"source": "tests/rehearse/planted_verl.py on CPU: verl %s, ray %s, torch %s, transformers %s" % (
        verl.__version__, ray.__version__, torch.__version__, transformers.__version__), "texts": out}
    with open(out_path, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
