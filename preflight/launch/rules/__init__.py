"""verl's launch rules for a release, checked on a composed config before anything starts.

The rules themselves are code (:func:`evaluate`); what differs between releases (which check
exists, whether it stops the run or goes silent, where it lives) is data in
``matrices/verl_rules.toml``. Every :class:`Finding` names the verl check that would fail later
(paraphrased), shows the numbers, and gives the smallest change that fixes it.

Machine facts (GPUs, free GPU memory, host memory) come in as plain dicts, so the rules are
pure: ``machine = {"nvml": <nvml snapshot>, "host": <host facts>, "env": {...}}``.

Modules, one concept each: :mod:`.table` (the release's rule table), :mod:`.finding`,
:mod:`.values` (the config values read), :mod:`.arith`, :mod:`.context`, :mod:`.batch_rules`,
:mod:`.rollout`, :mod:`.machine` (GPUs, memory, the model) and :mod:`.evaluate` (all of them).
Fix texts are written by :mod:`preflight.launch.overrides` and re-checked by :mod:`preflight.launch.fixes`.
"""

from ..overrides import override_line
from .arith import divisors
from .evaluate import evaluate, mandatory_keys
from .finding import Finding
from .machine import visible_gpus
from .rollout import tp_fits_heads
from .table import entry_point, load_rules, ruleset
from .values import Values, ValueProblem, bad_sizes, values

__all__ = ["Finding", "Values", "ValueProblem", "load_rules", "ruleset", "values", "evaluate", "divisors",
           "visible_gpus", "mandatory_keys", "entry_point", "bad_sizes", "tp_fits_heads", "override_line"]
