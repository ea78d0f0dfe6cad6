"""Resolve the stack that runs a verl release on a given machine, from the matrix alone.

:func:`resolve` is pure: the machine facts (NVIDIA driver, compute capability or GPU name,
Python minor) come in as arguments, and every choice comes from a matrix row, which the
:class:`Resolution` cites. ``preflight resolve`` fills the arguments from this machine;
``spec``, ``install`` and ``image`` build on the same API.

How a stack is chosen (all for CPython on Linux x86_64):

1. verl's metadata fixes the rollout backend's range (the backend extra's requirement, narrowed
   by the runtime gate in verl.toml); its candidates are the recorded releases in that range,
   newest first, with known-bad releases (known_bad.toml) last.
2. Each candidate's own metadata pins torch; verl's pin, when it has one, must agree, and every
   dependency both verl and the backend constrain (transformers, ray, numpy...) must admit a
   common version.
3. Python: the minors that verl, the backend, the backend's wheels and torch's wheels all
   admit; an explicit ``python`` must be among them.
4. The torch CUDA variant: one of the torch series' variants whose CUDA major equals the
   backend wheel's (libcudart.so.12 vs .so.13), whose arch list covers the GPU's compute
   capability, and whose CUDA the driver runs; natively preferred, then minor-version
   compatibility (a warning), the plain PyPI build preferred on a tie.
5. The backend's PyPI wheel: its CUDA must run on the driver and compile for the GPU, and the GPU
   must be at or above the backend's floor.
6. flash-attn: verl's pin or the newest release with a prebuilt wheel for (torch major.minor,
   CUDA major, Python, C++ ABI, GPU arch); otherwise a source build, with the reason.

The first candidate that passes is chosen; when none does, the newest candidate is reported
with its problems, and :attr:`Resolution.options` lists the nearest fixes (a driver upgrade, a
Python minor, another verl release or backend, another published build of the backend).

The package, one concept a module: :mod:`.model` (the answer and input parsing),
:mod:`.requirements` (metadata requirements), :mod:`.run` (one resolution's state),
:mod:`.candidates` (backend releases, torch pins, Pythons), :mod:`.cuda` (driver, CUDA and GPU
constraints), :mod:`.evaluate` (one candidate), :mod:`.flash_attn`, :mod:`.stack` (bounds and the
install line), :mod:`.proof` (pip's resolve of the install line), :mod:`.options` (nearest options),
:mod:`.answer` (:func:`resolve`).
"""

from .answer import resolve
from .model import Resolution, ResolveError, parse_cc, parse_driver, parse_python

__all__ = ["resolve", "Resolution", "ResolveError", "parse_driver", "parse_cc", "parse_python"]
