"""Where verl's own start-up lives in each release: the data the dry start-up
(preflight/target/verl_startup.py) is driven by.

Source: each release's own ``verl/trainer/main_ppo.py`` and ``verl/trainer/ppo/ray_trainer.py``
(tags v0.3.0.post1, v0.4.1, v0.5.0, v0.6.1 and v0.7.0 of github.com/volcengine/verl; the 0.7.1,
0.8.0 and 0.9.1 wheels on PyPI), read for: the entry's ``@hydra.main`` ``main`` and the
``run_ppo`` it calls; the functions ``TaskRunner.run`` calls before any worker exists (the
tokenizer and processor, the reward manager, the RL datasets and sampler, ``validate_config`` or
the trainer's own ``_validate_config``); and the first worker call, which is the dry run's stop
point: ``init_workers`` begins with ``self.resource_pool_manager.create_resource_pool()`` in
every release from 0.3 to 0.9 (0.9's V1 trainer too: ``verl/trainer/ppo/v1/trainer_base.py``).

Each entry holds from its first release until the next entry's (the target picks the entry of the
installed verl's version). Fields:

* ``entry``: the module whose ``main`` is verl's start-up;
* ``hook_modules``: modules whose functions named in ``functions`` are timed as steps (their
  module attribute is replaced by a wrapper, so calls through ``from m import f`` done at call
  time, as verl's task runner does, go through it);
* ``methods``: ``module:Class.method`` timed as steps (the 0.3-0.5 trainer validates its config
  in its own ``_validate_config``; its constructor builds the dataloaders);
* ``stop``: ``module:Class.method`` that raises the stop marker (the first worker call);
* ``custom_reward``: ``module:function`` returning the user's reward function (or None);
* ``default_score``: ``module:function``, verl's built-in scorer by ``data_source``;
* ``inert``: ``module:function`` replaced by a no-op (0.9's TransferQueue start and stop);
* ``lookups``: verl's own functions that look a config value up after Ray starts, called on the
  composed config once the stop point is reached (``keys`` are its arguments, ``choices`` the
  registry it looks in, ``when`` where the job would stop): ``get_adv_estimator_fn`` (0.4 on:
  ``compute_advantage`` calls it for every estimator but GAE and GRPO, which it registers too),
  ``get_rollout_class`` (0.9's entry: the only way to a rollout there; 0.6.1 built an "hf" rollout
  beside its registry, and the 0.6 entry holds for 0.6 to 0.8).
"""

from typing import Any, Dict, Tuple

__all__ = ["RELEASES"]

_ADV = {"keys": ["algorithm.adv_estimator"], "call": "verl.trainer.ppo.core_algos:get_adv_estimator_fn",
        "choices": "verl.trainer.ppo.core_algos:ADV_ESTIMATOR_REGISTRY",
        "when": "compute_advantage, after the first rollout (ray_trainer.py)"}
_ROLLOUT = {"keys": ["actor_rollout_ref.rollout.name", "actor_rollout_ref.rollout.mode"],
            "call": "verl.workers.rollout.base:get_rollout_class", "choices": "verl.workers.rollout.base:_ROLLOUT_REGISTRY",
            "when": "get_rollout_class, when the rollout workers start"}

_FUNCTIONS = ["validate_config", "hf_tokenizer", "hf_processor", "load_reward_manager", "create_rl_dataset",
              "create_rl_sampler", "omega_conf_to_dataclass", "get_custom_reward_fn"]

#: (first release, spec), oldest first.
RELEASES: Tuple[Tuple[str, Dict[str, Any]], ...] = (
    ("0.3", {
        # main -> run_ppo(config) -> TaskRunner.run: hf_tokenizer/hf_processor, worker classes,
        # NaiveRewardManager(compute_score=get_custom_reward_fn(config)) built in main_ppo itself,
        # RayPPOTrainer(...) whose __init__ runs _validate_config and _create_dataloader (RLHFDataset)
        "entry": "verl.trainer.main_ppo",
        "hook_modules": ["verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer", "verl.utils"],
        "functions": _FUNCTIONS,
        "methods": ["verl.trainer.ppo.ray_trainer:RayPPOTrainer.__init__",
                    "verl.trainer.ppo.ray_trainer:RayPPOTrainer._validate_config",
                    "verl.trainer.ppo.ray_trainer:RayPPOTrainer._create_dataloader"],
        "stop": "verl.trainer.ppo.ray_trainer:ResourcePoolManager.create_resource_pool",
        "custom_reward": "verl.trainer.main_ppo:get_custom_reward_fn",
        "default_score": "verl.utils.reward_score:_default_compute_score",
        "inert": [],
        "lookups": [_ADV],
    }),
    ("0.4", {
        # TaskRunner.run: load_reward_manager (verl.trainer.ppo.reward), create_rl_dataset and
        # create_rl_sampler (main_ppo), RayPPOTrainer(...) (its __init__: _validate_config, dataloaders)
        "entry": "verl.trainer.main_ppo",
        "hook_modules": ["verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer", "verl.utils", "verl.utils.config",
                         "verl.trainer.ppo.reward"],
        "functions": _FUNCTIONS,
        "methods": ["verl.trainer.ppo.ray_trainer:RayPPOTrainer.__init__",
                    "verl.trainer.ppo.ray_trainer:RayPPOTrainer._validate_config"],
        "stop": "verl.trainer.ppo.ray_trainer:ResourcePoolManager.create_resource_pool",
        "custom_reward": "verl.trainer.ppo.reward:get_custom_reward_fn",
        "default_score": "verl.utils.reward_score:default_compute_score",
        "inert": [],
        "lookups": [_ADV],
    }),
    ("0.6", {
        # TaskRunner.run calls verl.utils.config.validate_config (the trainer's own check moved there)
        "entry": "verl.trainer.main_ppo",
        "hook_modules": ["verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.utils",
                         "verl.utils", "verl.utils.config", "verl.trainer.ppo.reward"],
        "functions": _FUNCTIONS,
        "methods": ["verl.trainer.ppo.ray_trainer:RayPPOTrainer.__init__"],
        "stop": "verl.trainer.ppo.ray_trainer:ResourcePoolManager.create_resource_pool",
        "custom_reward": "verl.trainer.ppo.reward:get_custom_reward_fn",
        "default_score": "verl.utils.reward_score:default_compute_score",
        "inert": [],
        "lookups": [_ADV],
    }),
    ("0.9", {
        # main() runs validate_config itself, then run_ppo(config, task_runner_class=TaskRunnerV1
        # or main_ppo_v0.TaskRunner); the V1 trainer starts TransferQueue (inert here)
        "entry": "verl.trainer.main_ppo",
        "hook_modules": ["verl.trainer.main_ppo", "verl.trainer.main_ppo_v0", "verl.trainer.ppo.ray_trainer",
                         "verl.trainer.ppo.utils", "verl.trainer.ppo.v1.trainer_base", "verl.utils",
                         "verl.utils.config", "verl.trainer.ppo.reward"],
        "functions": _FUNCTIONS,
        "methods": ["verl.trainer.ppo.ray_trainer:RayPPOTrainer.__init__"],
        "stop": "verl.trainer.ppo.ray_trainer:ResourcePoolManager.create_resource_pool",
        "custom_reward": "verl.trainer.ppo.reward:get_custom_reward_fn",
        "default_score": "verl.utils.reward_score:default_compute_score",
        "inert": ["transfer_queue:init", "transfer_queue:close"],
        "lookups": [_ADV, _ROLLOUT],
    }),
)

