"""The machine-readable report: a versioned JSON document, written atomically."""

import json
import os
import tempfile
import time
from typing import Any, Dict

from ..redact import redact
from . import Report

__all__ = ["SCHEMA_VERSION", "to_dict", "write"]

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


def write(report: Report, path: str) -> None:
    """Write the JSON report to ``path`` atomically (temp file beside it, then rename).

    Raises OSError when the directory is not writable.
    """
    data = json.dumps(to_dict(report), indent=2, sort_keys=False, default=str) + "\n"
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".preflight-", suffix=".json", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
