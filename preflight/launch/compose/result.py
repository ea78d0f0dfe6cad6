"""The effective config of one launch (:class:`Composed`)."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ...redact import MASK as SECRET_MASK
from ...redact import redact
from ..overrides import ConfigError, Override
from .provenance import effective_source
from .secrets import redact_config_value
from .tree import has_path, key_parts, flatten, get_path


@dataclass
class Composed:
    """The effective config of one launch.

    Attributes:
        method: ``hydra`` (composed in the target by Hydra) or ``stored`` (matrices/verl_config).
        verl_version: release whose defaults were used.
        config_name: the trainer config (``ppo_trainer``).
        defaults, after_file, raw: unresolved trees after each step.
        resolved: the final tree with interpolations resolved.
        provenance: see :func:`provenance`.
        source: where the defaults came from (a directory or the stored file and its source note).
        notes: remarks for the user (nearest stored release, ignored words...).
        error: a :class:`ConfigError` when the composition itself fails as verl's would.
        resolve_errors: dotted path -> why its interpolation could not be resolved.
        env: environment assignments of the launch command.
        probe: how the composing process in the target ended (:meth:`ProbeOutput.evidence`), kept
            when it failed: with ``error`` kind ``compose_probe`` (Hydra never finished) or with
            ``method`` stored (the target could not compose at all, the stored defaults were used).
    """

    method: str
    verl_version: Optional[str]
    config_name: str
    defaults: Dict[str, Any] = field(default_factory=dict)
    after_file: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict)
    resolved: Dict[str, Any] = field(default_factory=dict)
    provenance: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    notes: List[str] = field(default_factory=list)
    error: Optional[ConfigError] = None
    resolve_errors: Dict[str, str] = field(default_factory=dict)
    env: Dict[str, str] = field(default_factory=dict)
    probe: Dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """Resolved value at dotted ``key`` (``default`` when absent)."""
        return get_path(self.resolved, key, default)

    def has(self, key: str) -> bool:
        """True when the resolved config has ``key``."""
        return has_path(self.resolved, key_parts(key))

    def source_of(self, key: str) -> str:
        """Display source of ``key`` (see :func:`effective_source`)."""
        return effective_source(self.provenance, key)

    def schema(self) -> set:
        """Dotted keys of the release's defaults (verl's own config keys)."""
        return set(flatten(self.defaults))

    def shown_values(self, keys: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Resolved values by dotted key (every leaf, or ``keys``), redacted for printing and
        writing (see :func:`redact_config_value`)."""
        schema = self.schema()
        leaves = flatten(self.resolved)
        keys = list(leaves) if keys is None else keys
        return {k: redact_config_value(k, leaves[k] if k in leaves else self.get(k), schema) for k in keys}

    def shown_overrides(self, overrides: Sequence[Override]) -> List[str]:
        """The override texts, with the value of a secret key masked (as :meth:`shown_values`)."""
        schema = self.schema()
        out = []
        for ov in overrides:
            if not ov.has_value:
                out.append(ov.text)
                continue
            head, _eq, val = ov.text.partition("=")
            shown = redact_config_value(ov.key, ov.value, schema)
            out.append("%s=%s" % (head, SECRET_MASK if shown == SECRET_MASK else redact(val)))
        return out

    def to_dict(self, full: bool = False) -> Dict[str, Any]:
        """JSON-ready summary; ``full`` adds every resolved leaf with its provenance. Every field is
        redacted: values key by key (:meth:`shown_values`), texts with :func:`redact`."""
        err = None if self.error is None else {"kind": self.error.kind, "message": redact(self.error.message),
                                               "fix": redact(self.error.fix)}
        d: Dict[str, Any] = {"method": self.method, "verl_version": self.verl_version,
                             "config_name": self.config_name, "source": redact(self.source),
                             "notes": [redact(n) for n in self.notes], "error": err,
                             "resolve_errors": {k: redact(v) for k, v in self.resolve_errors.items()}}
        if full:
            d["values"] = {k: {"value": v, "source": self.source_of(k)} for k, v in self.shown_values().items()}
        return d
