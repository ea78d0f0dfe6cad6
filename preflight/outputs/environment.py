"""environment.json: the machine facts and matrix rows a spec was made from.

Only stable facts go in (OS, arch, glibc, CPU count, RAM rounded to GiB, GPU names, compute
capabilities, memory, driver), never free space or timestamps, and keys are sorted, so the same
machine and inputs give the same bytes.
"""

import json
from typing import Any, Dict, List, Optional

__all__ = ["machine_facts", "render_environment"]


def machine_facts(host: Dict[str, Any], nvml: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Stable facts from host and NVML snapshots (see probes.host.read_host, probes.nvml.collect)."""
    mem = (host.get("memory") or {}).get("total")
    out: Dict[str, Any] = {
        "os": (host.get("os") or {}).get("name"),
        "arch": host.get("arch"),
        "glibc": host.get("glibc"),
        "cpus": (host.get("cpu") or {}).get("usable"),
        "ram_gib": round(mem / (1 << 30)) if mem else None,
        "container": host.get("container"),
    }
    if nvml and not nvml.get("error"):
        out["driver"] = nvml.get("driver")
        out["gpus"] = [{"name": d.get("name"), "capability": d.get("capability"),
                        "memory_mib": d.get("memory_total_mib")} for d in nvml.get("devices", [])]
    else:
        out["driver"] = None
        out["gpus"] = []
    return out


def render_environment(tool_version: str, matrix_version: str, inputs: Dict[str, Any], machine: Dict[str, Any],
                       stack: Dict[str, Any], citations: List[Any], lock_sha256: str,
                       checks: Optional[Dict[str, str]] = None) -> str:
    """The environment.json text. ``checks`` maps result id -> status of the checks run when the
    spec was made (optional)."""
    doc = {
        "schema_version": 1,
        "tool": {"name": "verl-preflight", "version": tool_version},
        "matrix_version": matrix_version,
        "inputs": inputs,
        "machine": machine,
        "stack": stack,
        "matrix_rows": citations,
        "lock_sha256": lock_sha256,
        "checks": checks or {},
    }
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"
