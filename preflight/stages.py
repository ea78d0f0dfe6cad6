"""The stages, in order, as data.

Each stage names the module holding its checks and the result ids it is gated on: when one of
those results is present and is not pass/warn, every check of the stage is skipped with that
id as the cause. A gate whose result was not produced (its stage was not selected) does not
block: the stage's checks read the facts they need themselves. A stage may also imply checks of
another stage (``implies``): those run first even when their stage was not selected (the target
interpreter's check, when the target cannot be read at all), and gate it.
"""

from dataclasses import dataclass
from typing import Any, Callable, Sequence, Tuple, Union

__all__ = ["Stage", "STAGES", "STAGE_NAMES", "stage"]

Needs = Union[Sequence[str], Callable[[Any], Sequence[str]]]


@dataclass(frozen=True)
class Stage:
    """One stage: ``name``, a ``title`` for reports, the ``module`` with its checks and the
    gate ``needs`` (result ids, or a function of the Context returning them)."""

    name: str
    title: str
    module: str
    needs: Needs = ()
    implies: Needs = ()

    def gate(self, ctx: Any) -> Sequence[str]:
        """The gate result ids for this run (the implied ones included)."""
        return tuple(self.needs(ctx)) if callable(self.needs) else tuple(self.needs)

    def implied(self, ctx: Any) -> Sequence[str]:
        """Checks of another stage this one cannot do without in this run: when such a result is
        absent (its stage was not selected), the runner runs that check first, in its own stage,
        and gates this stage on it too."""
        return tuple(self.implies(ctx)) if callable(self.implies) else tuple(self.implies)


def _nccl_needs(ctx: Any) -> Sequence[str]:
    if ctx.options.nccl.backend == "gloo":
        return ("imports.torch",)
    return ("gpu.nvml", "gpu.torch", "imports.torch")


def _vllm_needs(ctx: Any) -> Sequence[str]:
    return ("imports.sglang",) if ctx.backend()[0] == "sglang" else ("imports.vllm",)


def _target_unreadable(ctx: Any) -> Sequence[str]:
    """An interpreter that cannot be run (hangs, crashes, is not Python) makes every package look
    "not installed": with the python stage not selected, its interpreter check runs anyway."""
    return ("python.interpreter",) if ctx.target() is None else ()


#: packages and imports judge (and suggest installs into) the target interpreter: one that failed
#: python.version (too old or too new for the verl release) gets no pip command it cannot run. They
#: imply both checks, so a stage selection without the python stage cannot skip them.
_PYTHON_GATE = ("python.interpreter", "python.version")

STAGES: Tuple[Stage, ...] = (
    Stage("host", "Host: OS, CPU, memory, /dev/shm, disk, limits", "preflight.checks.host"),
    Stage("python", "Python interpreter", "preflight.checks.python"),
    Stage("packages", "Installed packages vs the compatibility matrix", "preflight.checks.packages",
          _PYTHON_GATE, _PYTHON_GATE),
    Stage("imports", "Imports: torch, verl and its key classes, rollout engine, extensions",
          "preflight.checks.imports", _PYTHON_GATE, _PYTHON_GATE),
    Stage("gpu", "GPUs: driver, NVML vs torch, compute capability", "preflight.checks.gpu"),
    Stage("nccl", "NCCL: init and all_reduce on localhost, one process per GPU", "preflight.checks.nccl",
          _nccl_needs, _target_unreadable),
    Stage("vllm", "vLLM: a small offline generation", "preflight.checks.vllm", _vllm_needs, _target_unreadable),
    Stage("config", "Launch config: composition, batch arithmetic, verl's rules, datasets", "preflight.checks.config"),
)

STAGE_NAMES = tuple(s.name for s in STAGES)


def stage(name: str) -> Stage:
    """The stage called ``name``; raises KeyError for an unknown name."""
    for s in STAGES:
        if s.name == name:
            return s
    raise KeyError(name)
