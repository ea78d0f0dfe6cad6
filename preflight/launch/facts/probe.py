"""The one run of ``preflight/target/launch_facts.py`` in the target: the installed vLLM's and
Ray's own tables, which logger packages import, the reward scorers' imports and prompt lengths."""

import os
from typing import Any, Dict, List, Optional

__all__ = ["read"]

#: rows of the datasets tokenized for the prompt-length fact (the first ones)
PROMPT_ROWS = 2000


#: the allocator settings the installed torch parses (its libc10 says which it reads)
ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def _trust(model: Any, trust: Any) -> bool:
    """``trust_remote_code`` for the tokenizer: off when the model's code is another user's
    (``model.remote_code_problem``; config.verl.startup says "not run")."""
    from ..model import remote_code_problem

    return bool(trust) and not remote_code_problem(model, trust)


def read(python: str, get: Any, loggers: List[str], data_files: List[str], model: Any,
         timeout: float, job_env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """{event name: fields} from the target (``vllm``, ``ray``, ``loggers``, ``reward``,
    ``prompts``, ``data``, ``vllm_env``, ``alloc``), plus ``_probe``: how the run went. Never raises.

    ``job_env``: the job's environment; its VLLM_* variables go through the installed vLLM's own
    getters, its allocator settings through the installed torch's parser (torch is imported only
    when one is set)."""
    from ...probes.process import run_script

    prompts = None
    if model is not None and data_files and get("data.max_prompt_length", None):
        prompts = {"files": [os.path.abspath(f) for f in data_files if f.endswith(".parquet")],
                   "prompt_key": str(get("data.prompt_key", "prompt") or "prompt"),
                   "model": os.path.abspath(model.directory),
                   "trust_remote_code": _trust(model, get("data.trust_remote_code", False) or
                                               get("actor_rollout_ref.model.trust_remote_code", False)),
                   "max_rows": PROMPT_ROWS, "limit": int(get("data.max_prompt_length"))}
        if not prompts["files"]:
            prompts = None
    custom = get("reward.custom_reward_function.path", None) or get("custom_reward_function.path", None)
    types = [t for t in ((model.model_type, model.text_model_type) if model is not None else ()) if t]
    args = {"model_types": sorted(set(types)), "vllm": True, "ray": True, "loggers": loggers,
            "data": {"files": [os.path.abspath(f) for f in data_files if f.endswith(".parquet")],
                     "source_key": str(get("data.reward_fn_key", "data_source") or "data_source")}
            if data_files else None,
            "reward": not custom, "reward_budget_s": 5.0, "prompts": prompts, "verl_root": True,
            "vllm_env": {k: v for k, v in (job_env or {}).items() if k.startswith("VLLM_")},
            "alloc": {k: v for k, v in (job_env or {}).items() if k in ALLOC_VARS}}
    out = run_script(python, "launch_facts", args, timeout=timeout)
    got: Dict[str, Any] = {}
    for e in out.events:
        got[e.get("event")] = e
    got["_probe"] = {"ok": out.returncode == 0 and not out.timed_out, "describe": out.describe()}
    return got
