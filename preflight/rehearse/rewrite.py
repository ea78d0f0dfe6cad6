"""The user's launch rewritten into the rehearsal's: the same overrides and variables, with two
training steps over the small model and the sliced data, and nothing written where the user's
run writes.

Every override of the launch is kept, in order, except those whose key the rehearsal sets
itself (:data:`SET_KEYS` and the ones given in ``extra``): those are replaced by the rehearsal's
value and listed in :attr:`Rewritten.replaced`. The rehearsal's own settings are appended with
Hydra's ``++`` (set, whether or not the key exists in the release's config), so the composition
is Hydra's: :func:`verify` composes the result with the vendored Hydra over the release's stored
config tree (``launch.compose.compose_stored``) and returns Hydra's refusal, if any.
"""

import os
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..launch.overrides import LaunchSpec, parse_override

__all__ = ["Rewritten", "rewrite", "verify", "as_spec", "SET_KEYS", "RESPONSE_TOKENS", "hydra_value"]

#: Response length of the rehearsal's rollout (tokens): enough to exercise generation, the reward
#: on real outputs and the log-prob passes, short enough that the rollout takes a second.
RESPONSE_TOKENS = 32

#: Keys the rehearsal always sets (beside the model and data paths and the Ray settings).
SET_KEYS = ("trainer.total_training_steps", "trainer.resume_mode", "trainer.default_local_dir")


@dataclass
class Rewritten:
    """The rehearsal's launch.

    Attributes:
        overrides: the Hydra override strings, in order (the user's kept ones, then the rehearsal's).
        settings: key -> value the rehearsal set (for the report).
        replaced: the user's overrides that a rehearsal setting replaced, as written.
        env: the launch's ``VAR=value`` assignments (kept as they are).
        notes: what was changed and why, one line each.
    """

    overrides: List[str]
    settings: Dict[str, Any] = field(default_factory=dict)
    replaced: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)


def hydra_value(v: Any) -> str:
    """``v`` as a Hydra override value: lists as ``[a,b]``, strings quoted when they hold Hydra's
    special characters, booleans as ``True``/``False``, None as ``null``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    s = str(v)
    if any(c in s for c in " ,[]{}()='\"\\:$*?") or not s:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return s


def rewrite(spec: LaunchSpec, model_dir: str, train_files: Sequence[str], val_files: Sequence[str], workdir: str,
            response_length: Optional[int] = None, user_response_length: Optional[int] = None,
            validate: bool = False, keep_loggers: bool = False, keep_checkpoints: bool = False,
            ray_address: Optional[str] = None, ray_temp_dir: Optional[str] = None,
            extra: Optional[Dict[str, Any]] = None, model_keys: Sequence[str] = ("actor_rollout_ref.model.path",)
            ) -> Rewritten:
    """Rewrite ``spec``'s overrides for the rehearsal.

    Args:
        spec: the parsed launch (:func:`launch.overrides.parse_launch`).
        model_dir: the small model's directory; set for every key in ``model_keys`` (the actor's,
            and the critic's when the launch trains one).
        train_files, val_files: the sliced copies (``data.train_files``/``data.val_files``).
        workdir: the rehearsal's private directory (checkpoints and Hydra's outputs go there).
        response_length: the rehearsal's ``data.max_response_length`` (default
            min(:data:`RESPONSE_TOKENS`, the user's)); ``user_response_length`` is the launch's.
        validate: keep ``val_before_train``/``test_freq`` as the launch has them.
        keep_loggers: keep ``trainer.logger`` (default: console only).
        keep_checkpoints: keep ``trainer.save_freq`` (default: no checkpoint is saved).
        ray_address: join that Ray cluster (``ray_kwargs.ray_init.address``); None starts a private
            local head in ``ray_temp_dir`` bound to 127.0.0.1 without a dashboard.
        extra: more key -> value settings (e.g. ``trainer.n_gpus_per_node`` from ``--gpus``).
    Returns: a :class:`Rewritten`.
    """
    settings: Dict[str, Any] = {}
    notes: List[str] = []
    settings["trainer.total_training_steps"] = 2
    notes.append("trainer.total_training_steps=2: the second step runs on the weights the first one synced")
    settings["trainer.resume_mode"] = "disable"
    settings["trainer.default_local_dir"] = os.path.join(workdir, "checkpoints")
    if not validate:
        settings["trainer.val_before_train"] = False
        settings["trainer.test_freq"] = -1
        notes.append("no validation (trainer.val_before_train=False, trainer.test_freq=-1); --validate keeps it")
    if not keep_checkpoints:
        settings["trainer.save_freq"] = -1
        notes.append("no checkpoint saved (trainer.save_freq=-1); --keep-checkpoints keeps it (under the "
                     "rehearsal's directory)")
    if not keep_loggers:
        settings["trainer.logger"] = ["console"]
        notes.append("trainer.logger=['console']; --keep-loggers keeps the launch's loggers")
    for key in model_keys:
        settings[key] = model_dir
    settings["data.train_files"] = list(train_files)
    settings["data.val_files"] = list(val_files)
    want = RESPONSE_TOKENS if response_length is None else int(response_length)
    if user_response_length is not None:
        want = min(want, int(user_response_length))
    settings["data.max_response_length"] = want
    notes.append("data.max_response_length=%d (was %s); data.max_prompt_length kept" % (
        want, user_response_length if user_response_length is not None else "the default"))
    if ray_address:
        settings["ray_kwargs.ray_init.address"] = ray_address
        notes.append("joins the Ray cluster at %s" % ray_address)
    else:
        settings["ray_kwargs.ray_init.include_dashboard"] = False
        settings["ray_kwargs.ray_init._node_ip_address"] = "127.0.0.1"
        if ray_temp_dir:
            settings["ray_kwargs.ray_init._temp_dir"] = ray_temp_dir
        notes.append("a private Ray head on 127.0.0.1 (no dashboard, its own temp dir); RAY_ADDRESS is unset")
    settings.update(extra or {})
    kept: List[str] = []
    replaced: List[str] = []
    for ov in spec.overrides:
        if ov.key in settings:
            replaced.append(ov.text)
        else:
            kept.append(ov.text)
    ours = ["++%s=%s" % (k, hydra_value(v)) for k, v in settings.items()]
    return Rewritten(kept + ours, settings, replaced, dict(spec.env), notes)


def as_spec(spec: LaunchSpec, rw: Rewritten) -> LaunchSpec:
    """``spec`` with the rewritten overrides (same entry point, config name and env)."""
    return replace(spec, overrides=[parse_override(t) for t in rw.overrides])


def verify(spec: LaunchSpec, rw: Rewritten, release: Optional[str]) -> Tuple[Any, Optional[str]]:
    """Compose the rewritten launch with the vendored Hydra over ``release``'s stored config tree.

    Returns (the :class:`launch.compose.Composed`, None) when Hydra composes it, or (that object
    or None, Hydra's refusal as one line). Raises nothing for a refusal; ComposeUnsupported
    propagates (no stored tree and no Hydra here).
    """
    from ..launch.compose import compose_stored

    comp = compose_stored(as_spec(spec, rw), release=release)
    if comp.error is not None:
        return comp, "%s (fix: %s)" % (comp.error.message, comp.error.fix)
    return comp, None
