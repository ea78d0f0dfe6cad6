"""The machine-readable report: one versioned JSON envelope for every command.

The shape is published as a JSON Schema, ``preflight/schema/report-1.json`` (shipped in the
zipapp and the package; every document carries its id in ``$schema``). Documents are built from a
report that :func:`preflight.report.render.redact_report` has already redacted: the one
redaction pass is at that boundary, not here.
"""

import json
import pkgutil
import time
from typing import Any, Dict

from . import Report

__all__ = ["SCHEMA_VERSION", "SCHEMA_ID", "SCHEMA_RESOURCE", "Redacted", "to_dict", "dumps", "load_schema"]

#: Bump when a field is removed or changes meaning (adding fields keeps the version).
SCHEMA_VERSION = 1
#: The schema's ``$id`` (a URN: the schema is a file of this package, not a web page); every document
#: names it in ``$schema``.
SCHEMA_ID = "urn:verl-preflight:schema:report-%d" % SCHEMA_VERSION
#: Where the schema file lives inside the package (``preflight/schema/report-1.json``).
SCHEMA_RESOURCE = "schema/report-%d.json" % SCHEMA_VERSION


class Redacted:
    """A part of an extra section that its owner has already redacted, key by key, with knowledge
    :func:`preflight.redact.redact` lacks: verl's own config keys such as ``data.prompt_key`` or
    ``ppo_max_token_len_per_gpu`` only look like secret names (see
    :func:`preflight.launch.compose.redact_config_value`). The boundary copies it as it is."""

    def __init__(self, value: Any) -> None:
        self.value = value


def to_dict(report: Report) -> Dict[str, Any]:
    """The (already redacted) report as the JSON document of schema :data:`SCHEMA_VERSION`.

    Sections are added at the top level by name; a :class:`Redacted` part is unwrapped.
    """
    doc: Dict[str, Any] = {
        "$schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "verl-preflight", "version": report.tool_version},
        "matrix_version": report.matrix_version,
        "command": report.command,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(report.started_at)),
        "duration_s": round(report.duration_s, 3),
        "target": report.target,
        "verl": report.verl,
        "machine": report.machine,
        "stages": report.stages,
        "stage_timings": report.stage_timings,
        "results": [r.to_dict() for r in report.results],
        "summary": report.counts(),
        "verdict": report.verdict,
        "ready": report.ready,
        "exit_code": report.exit_code,
        "next_steps": [s.to_dict() for s in report.next_steps()],
    }
    for name, section in report.sections.items():
        if name not in doc:
            doc[name] = _unwrap(section)
    return doc


def _unwrap(value: Any) -> Any:
    if isinstance(value, Redacted):
        return value.value
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unwrap(v) for v in value]
    return value


def dumps(report: Report) -> str:
    """The JSON text of an already redacted report (2-space indent, one trailing newline)."""
    return json.dumps(to_dict(report), indent=2, sort_keys=False, default=str) + "\n"


def load_schema() -> Dict[str, Any]:
    """The published JSON Schema of the report (read from the package, zip-safe)."""

    data = pkgutil.get_data("preflight", SCHEMA_RESOURCE)
    if data is None:  # pragma: no cover - a broken install
        raise FileNotFoundError(SCHEMA_RESOURCE)
    return json.loads(data.decode("utf-8"))
