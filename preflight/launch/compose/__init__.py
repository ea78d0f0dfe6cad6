"""The effective verl config of a launch: defaults, then the user's file, then the overrides,
composed by Hydra's own code (hydra-core's compose API), never by a copy of its rules.

Two ways, the first preferred:

* **hydra**: the target interpreter has verl and hydra-core. The target script ``verl_compose``
  composes from verl's packaged config directory with the target's own Hydra, so precedence,
  group selection, the override grammar and interpolation are verl's own.
* **stored**: no verl in the target. The same script runs under the checker's own interpreter with
  the hydra-core/omegaconf vendored in the zipapp, over the release's config tree stored in
  ``matrices/verl_config/<version>/`` (the wheel's ``verl/trainer/config/**.yaml`` byte for byte,
  tools/gen_verl_config.py), copied to a temporary directory for Hydra's file search path.

Either way Hydra reports the unresolved config after each step (defaults, file, overrides) and
the resolved one, and the result is a :class:`Composed`, whose :attr:`Composed.provenance` says
for every leaf whether it came from the defaults, the file or an override. Hydra's refusals
become a :class:`ConfigError` quoting Hydra's message, with a fix. Then the release's own code is
applied: a key that verl's config dataclass for that node lacks (``+key`` passes Hydra, verl's
``omega_conf_to_dataclass`` stops with TypeError) fails, and the fix names the key that
replaced it (``matrices/verl_config/renames.json``) or says to delete it.

Modules, one concept each: :mod:`.tree` (dotted paths), :mod:`.stored` (stored release trees),
:mod:`.fields` (dataclass fields, renamed keys), :mod:`.provenance`, :mod:`.secrets` (redaction),
:mod:`.result` (:class:`Composed`), :mod:`.files` (the user's file), :mod:`.inprocess` (target
scripts in this process), :mod:`.run` (composition itself).
"""

from .errors import ComposeUnsupported, FileUnreadable
from .fields import key_fix, unknown_fields
from .files import MAX_CONFIG_BYTES
from .inprocess import run_here
from .provenance import effective_source, provenance, references
from .result import Composed
from .run import compose, compose_stored
from .secrets import redact_config_value
from .stored import hydra_path, release_doc, stored_index, stored_release, stored_tree
from .tree import HYDRA_KEYS, MISSING, flatten, get_path

__all__ = ["Composed", "ComposeUnsupported", "compose", "compose_stored", "stored_index", "stored_release",
           "release_doc", "stored_tree", "flatten", "provenance", "get_path", "MISSING", "redact_config_value",
           "FileUnreadable", "unknown_fields", "key_fix", "HYDRA_KEYS", "run_here", "hydra_path", "references",
           "effective_source", "MAX_CONFIG_BYTES"]
