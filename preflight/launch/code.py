"""Code a launch hands to the target that another user can change (``paths.code_problem``): the
module files it names (``*.py``, ``*.pyc``, ``*.so``: :data:`CODE_SUFFIXES`; in
``custom_reward_function.path``, ``reward.custom_reward_function.path``, ``data.custom_cls.path``,
a reward manager's ``module.path``...) and model directories whose
``auto_map`` code transformers imports with ``trust_remote_code=True``. verl's dry start-up
(``checks/verl_startup.py``) and the rehearsal refuse to run such a launch."""

import os
from typing import Any, Optional

__all__ = ["CODE_SUFFIXES", "MODELS", "launch_code_refusal"]

#: What ``importlib.util.spec_from_file_location`` (verl's ``load_extern_object``) loads as a module
#: by the name's ending: source, bytecode (``.pyc`` runs without any source beside it) and extension
#: modules (``.so``, ``.cpython-312-x86_64-linux-gnu.so`` included).
CODE_SUFFIXES = (".py", ".pyw", ".pyc", ".pyo", ".so")

#: Model directories verl loads, each with the key of its trust_remote_code.
MODELS = (("actor_rollout_ref.model.path", "actor_rollout_ref.model.trust_remote_code"),
          ("critic.model.path", "critic.model.trust_remote_code"),
          ("critic.model.tokenizer_path", "critic.model.trust_remote_code"),
          ("reward_model.model.path", "reward_model.model.trust_remote_code"))


def launch_code_refusal(comp: Any, cwd: Optional[str] = None) -> Optional[str]:
    """``not run: ...`` (``paths.not_run``) for the first code of the composed launch ``comp`` that
    another user can change, or None. ``cwd``: where the job resolves relative paths."""
    from ..paths import code_problem, not_run
    from .compose import flatten
    from .model import read_model, remote_code_problem

    cwd = cwd or os.getcwd()
    for key, value in sorted(flatten(comp.resolved).items()):
        if not isinstance(value, str) or not value.endswith(CODE_SUFFIXES):
            continue
        file = value[len("file://"):] if value.startswith("file://") else value
        # as written (verl opens it as given: a ~ stays a directory named ~ in the job's directory)
        # and as a shell would have expanded it
        for path in dict.fromkeys([os.path.join(cwd, file), os.path.join(cwd, os.path.expanduser(file))]):
            why = code_problem(path) if os.path.isfile(path) else None
            if why:
                return not_run("%s=%s" % (key, value), why)
    for key, trust_key in MODELS:
        where = comp.get(key, None)
        trust = comp.get(trust_key, False) or comp.get("data.trust_remote_code", False)
        if not isinstance(where, str) or not where or str(trust).lower() != "true":
            continue
        why = remote_code_problem(read_model(where)[0], trust)
        if why:
            return not_run("%s=%s (its auto_map code, with trust_remote_code=True)" % (key, where), why)
    return None
