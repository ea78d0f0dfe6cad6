"""The machine-readable report: a versioned JSON document, written atomically.

Every document written goes through :func:`preflight.redact.redact`, the report's own fields and any
extra sections a command adds (``launch``, ``data``); :func:`write` is the one way to write it.
"""

import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, Optional

from ..errors import UsageError
from ..redact import is_secret_key, redact
from . import Report

__all__ = ["SCHEMA_VERSION", "Redacted", "to_dict", "document", "write"]

#: Bump when a field is removed or changes meaning (adding fields keeps the version).
SCHEMA_VERSION = 1


def to_dict(report: Report) -> Dict[str, Any]:
    """The report as the JSON document (schema version :data:`SCHEMA_VERSION`)."""
    return redact({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "verl-preflight", "version": report.tool_version},
        "matrix_version": report.matrix_version,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(report.started_at)),
        "duration_s": round(report.duration_s, 3),
        "target": report.target,
        "verl": report.verl,
        "machine": report.machine,
        "stages": report.stages,
        "results": [r.to_dict() for r in report.results],
        "summary": report.counts(),
        "ready": report.ready,
        "exit_code": report.exit_code,
    })


class Redacted:
    """A part of an extra section that its owner has already redacted, key by key, with knowledge
    :func:`redact` lacks: verl's own config keys such as ``data.prompt_key`` or
    ``ppo_max_token_len_per_gpu`` only look like secret names (see
    :func:`preflight.launch.compose.redact_config_value`). :func:`document` copies it as it is."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _holds_redacted(value: Any) -> bool:
    if isinstance(value, Redacted):
        return True
    if isinstance(value, dict):
        return any(_holds_redacted(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_redacted(v) for v in value)
    return False


def _redact_section(value: Any, key: str = "") -> Any:
    if isinstance(value, Redacted):
        return value.value
    if not _holds_redacted(value) or (key and is_secret_key(key)):
        return redact(value, key)
    if isinstance(value, dict):
        return {k: _redact_section(v, str(k)) for k, v in value.items()}
    return [_redact_section(v) for v in value]


def document(report: Report, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The report as the JSON document plus ``extra`` top-level sections, all redacted (a
    :class:`Redacted` part is kept as its owner redacted it)."""
    doc = to_dict(report)
    for name, section in (extra or {}).items():
        doc[name] = _redact_section(section, name)
    return doc


def write(report: Report, path: str, extra: Optional[Dict[str, Any]] = None, option: str = "--json") -> None:
    """Write :func:`document` to ``path`` ('-' is stdout) atomically (a temp file beside it, then
    rename).

    Raises UsageError naming ``option`` when the file cannot be written.
    """
    data = json.dumps(document(report, extra), indent=2, sort_keys=False, default=str) + "\n"
    if path == "-":
        sys.stdout.write(data)
        return
    try:
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".preflight-", suffix=".json", dir=d)
    except OSError as exc:
        raise UsageError("%s %s: cannot write the report: %s" % (option, path, exc.strerror or exc))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError("%s %s: cannot write the report: %s" % (option, path, exc.strerror or exc))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
