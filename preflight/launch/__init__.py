"""Launch preflight: what a verl launch command will do with its config, before Ray starts.

* :mod:`.overrides` reads a launch command (``python3 -m verl.trainer.main_ppo k=v ...``) into
  Hydra overrides, ``--config-name``/``--config-path`` and leading environment assignments;
* :mod:`.compose` (a package) builds the effective config with Hydra's own compose API: the target's Hydra
  over the installed verl, else the zipapp's vendored Hydra over the release's stored config tree
  (``matrices/verl_config``), then the release's own config dataclasses (unknown keys fail);
* :mod:`.batch` is the batch arithmetic (pure functions);
* :mod:`.model` reads a model's ``config.json`` from a local path or the local Hugging Face cache;
* :mod:`.rules` (a package) checks verl's own rules of the release (``matrices/verl_rules.toml``) and the
  known silent failures;
* :mod:`.fixes` re-checks every suggested fix against all rules;
* :mod:`.dataset` checks RL parquet files with the target's pyarrow.

What needs the target's packages to judge (Megatron's modules) is a check: :mod:`preflight.checks.megatron`.
"""
