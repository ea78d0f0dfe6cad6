"""Facts outside a launch's Hydra config, weighed against what is installed in the target.

* :mod:`.wrapper`: the launcher around the entry point (``ray job submit``, ``torchrun``, shell
  scripts passing ``"$@"``), read before the launch is composed.
* :mod:`.env`: the variables the job inherits (launch line, this shell, Ray runtime_env) against
  the installed vLLM's own tables (its attention backend enum, the variables its envs.py reads,
  its cumem allocator's refusal of expandable segments); RAY_ADDRESS.
* :mod:`.raytmp`: Ray's temp dir against the Unix socket path limit (the installed Ray's own).
* :mod:`.loggers`: trainer.logger back-ends and the credentials or directories each finds.
* :mod:`.parallel`: the model's layers against Megatron pipeline x virtual pipeline sizes, and
  features per release (LoRA with Megatron, multi-turn tool configs, SGLang TP across nodes).
* :mod:`.datafacts`: the reward scorer imports for each data_source in the data, and prompt
  lengths in tokens with the user's tokenizer against data.max_prompt_length.
* :mod:`.inputs`: the files the job opens (a tool config, an agent-loop config after Ray starts,
  looked for where verl's own resolve_config_path looks; the reward function's and a custom
  dataset class's file at start-up).
* :mod:`.probe`: the one target script run that reads the installed packages' tables.

Data: matrices/launch_facts.toml (limits and per-release features, with sources). Every fact
is a :class:`preflight.launch.rules.Finding` with a fix.
"""

from typing import Any, Dict, List, Optional

from .data import load_facts

__all__ = ["gather", "load_facts"]

def gather(python: str, get: Any, release: Optional[str], launch_env: Dict[str, str], wrapper: Any,
           model: Any, data_files: List[str], timeout: float = 60.0, verl_target: bool = True,
           overridden: Any = ()) -> List[Any]:
    """Every fact of this launch as Findings (pass, warn, fail or skip rows).

    ``get(key, default)`` reads the composed config; ``launch_env`` holds the VAR=value words of
    the launch line; ``wrapper`` is the :class:`.wrapper.Wrapper` read around it; ``model`` the
    :class:`preflight.launch.model.ModelFacts` (or None); ``data_files`` the local dataset files.
    The target ``python`` is run once (``preflight/target/launch_facts.py``) with ``timeout``;
    ``verl_target`` False (the target has no verl: the launch was composed from stored defaults)
    leaves out the rows that judge the target's packages (a logger package not installed);
    ``overridden``: the keys the launch sets (a logger the launch names is held to a FAIL).
    """
    from . import datafacts, env, inputs, launcher, loggers, parallel, probe, raytmp
    from ..rules.table import ruleset
    from .wrapper import job_cwd

    job_env = env.job_env(launch_env, wrapper)
    names = loggers.backends(get)
    facts = probe.read(python, get, names, data_files, model, timeout, job_env)
    out: List[Any] = launcher.check(wrapper, facts)
    out += env.check(get, job_env, wrapper, facts)
    out += raytmp.check(get, job_env, wrapper, facts)
    out += loggers.check(get, names, job_env, wrapper, facts if verl_target else {}, release,
                         explicit="trainer.logger" in set(overridden))
    out += parallel.check(get, model, release, wrapper, facts, bool(data_files))
    out += datafacts.check(get, facts, data_files, model)
    out += inputs.check(get, job_cwd(wrapper), facts,
                        ruleset(release)[0].get("custom_reward_key", "reward.custom_reward_function"))
    return out
