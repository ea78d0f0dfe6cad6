"""The report as JUnit XML, for CI systems (GitLab, Jenkins, GitHub test reporters).

One ``<testsuite>`` per stage, one ``<testcase>`` per row (``classname`` ``verl-preflight.<stage>``,
``name`` the row id). FAIL maps to ``<failure>``, ERROR (the check could not run) to ``<error>``,
SKIP to ``<skipped>``; PASS and WARN are passing test cases, a WARN carrying its message and fix
in ``<system-out>``. The fix is the text of every failure element. Counts and attributes follow
the common JUnit schema (the Jenkins/Ant ``junit-10.xsd`` family): ``tests``, ``failures``,
``errors``, ``skipped``, ``time`` in seconds, ``timestamp`` in ISO 8601.
"""

import json
import re
import time
import xml.etree.ElementTree as ET
from typing import Dict, List

from ..result import Result, Status
from . import Report
from .text import escape_controls

__all__ = ["render"]

# XML 1.0 forbids most control characters even when escaped.
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: object) -> str:
    """XML-safe text: the controls XML forbids as ``?``, every other control and bidi override
    written as a visible escape (report.text.escape_controls), as on the console."""
    return escape_controls(_BAD_XML.sub("?", "" if text is None else str(text)))


def _counts(rows: List[Result]) -> Dict[str, str]:
    return {"tests": str(len(rows)),
            "failures": str(sum(r.status == Status.FAIL for r in rows)),
            "errors": str(sum(r.status == Status.ERROR for r in rows)),
            "skipped": str(sum(r.status == Status.SKIP for r in rows)),
            "time": "%.3f" % sum(r.duration_s for r in rows)}


def _body(r: Result) -> str:
    parts = []
    if r.fix:
        parts.append("fix: %s" % r.fix)
    if r.caused_by:
        parts.append("caused by: %s" % ", ".join(r.caused_by))
    if r.evidence:
        parts.append("evidence: %s" % json.dumps(r.evidence, indent=1, sort_keys=True, default=str)[:8000])
    return _x("\n".join(parts))


def render(report: Report) -> str:
    """JUnit XML text (UTF-8, with declaration) of an already redacted ``report``."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(report.started_at))
    root = ET.Element("testsuites", dict(name="verl-preflight %s" % report.command, **_counts(report.results)))
    root.set("time", "%.3f" % report.duration_s)
    for stage, rows in report.by_stage().items():
        if not rows:
            continue
        suite = ET.SubElement(root, "testsuite", dict(name=_x(stage), timestamp=stamp, **_counts(rows)))
        props = ET.SubElement(suite, "properties")
        for name, value in (("tool_version", report.tool_version), ("matrix_version", report.matrix_version),
                            ("python", report.target.get("python")), ("verl", report.verl.get("version"))):
            if value:
                ET.SubElement(props, "property", name=name, value=_x(value))
        for r in rows:
            case = ET.SubElement(suite, "testcase", classname="verl-preflight.%s" % _x(r.stage), name=_x(r.id),
                                 time="%.3f" % r.duration_s)
            if r.status == Status.FAIL:
                el = ET.SubElement(case, "failure", message=_x(r.message), type="fail")
                el.text = _body(r)
            elif r.status == Status.ERROR:
                el = ET.SubElement(case, "error", message=_x(r.message), type="error")
                el.text = _body(r)
            elif r.status == Status.SKIP:
                ET.SubElement(case, "skipped", message=_x(r.message))
            elif r.status == Status.WARN:
                out = ET.SubElement(case, "system-out")
                out.text = _x("WARN: %s\n%s" % (r.message, _body(r)))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
