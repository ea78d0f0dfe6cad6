#!/usr/bin/env python3
"""Which build is PyPI's Linux aarch64 torch wheel, for each torch version the matrix's stacks use
(network: PyPI). For each version it lists the manylinux aarch64 wheels of pypi.org/simple/torch/
(PEP 691 JSON), reads the METADATA of the cp312 one (else the first) by HTTP range requests
(preflight.wheel_metadata: the zip directory and METADATA only), and prints its CUDA requirements:
every nvidia-* / cuda-* Requires-Dist line and whether its marker admits aarch64. A wheel with a
CUDA requirement that applies on aarch64 is a CUDA build ("cu130" from its nvidia-*-cu13 or
cuda-toolkit pins), one whose every such line says ``platform_machine == "x86_64"`` (or has none)
is the CPU build. Compare with matrices/torch.toml ``pypi_aarch64``.

Usage: python3 tools/aarch64_torch_builds.py [--versions 2.4.0,2.6.0,...] [--json]
"""

import argparse
import json
import os
import re
import sys
import urllib.request
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.matrix import load  # noqa: E402
from preflight.resolve import resolve  # noqa: E402
from preflight.wheel_metadata import wheel_metadata  # noqa: E402

PAGE = "https://pypi.org/simple/torch/"


def matrix_versions() -> List[str]:
    """The torch versions (local label dropped) every aarch64 grid cell's install line pins."""
    mx = load()
    got = set()
    for v in mx.verl_versions():
        for b in sorted((mx.verl(v) or {}).get("backend_extras") or {}) + ["none"]:
            for py in ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"):
                r = resolve(mx, v, b, python=py, arch="aarch64", _options=False)
                got.update(x.split("==", 1)[1].split("+")[0] for x in r.requirements if x.startswith("torch=="))
    return sorted(got, key=lambda s: tuple(int(x) for x in s.split(".")))


def cuda_lines(metadata: bytes) -> List[Dict[str, Any]]:
    """Each Requires-Dist of ``metadata`` naming nvidia-* or cuda-*: the line and whether its
    marker can hold on Linux aarch64 (packaging, as pip evaluates it)."""
    from packaging.requirements import Requirement

    env = {"platform_machine": "aarch64", "sys_platform": "linux", "platform_system": "Linux", "python_version": "3.12",
           "python_full_version": "3.12.0", "os_name": "posix", "platform_python_implementation": "CPython",
           "implementation_name": "cpython"}
    out = []
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        text = line.split(":", 1)[1].strip()
        req = Requirement(text)
        if not re.match(r"(nvidia|cuda)[-_]", req.name.lower()):
            continue
        on = req.marker.evaluate(dict(env, extra="")) if req.marker else True
        out.append({"line": text, "aarch64": bool(on)})
    return out


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default="", help="torch versions (default: the matrix's aarch64 stacks')")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    versions = a.versions.split(",") if a.versions else matrix_versions()
    req = urllib.request.Request(PAGE, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        files = json.load(resp)["files"]
    rows = []
    for ver in versions:
        wheels = [f for f in files if f["filename"].startswith("torch-%s-" % ver) and "aarch64" in f["filename"]
                  and "manylinux" in f["filename"]]
        if not wheels:
            rows.append({"torch": ver, "wheels": 0, "build": "no Linux aarch64 wheel on PyPI"})
            continue
        pick = ([f for f in wheels if "-cp312-" in f["filename"]] or wheels)[0]
        stats = {"requests": 0, "bytes": 0}
        meta = wheel_metadata(pick["url"], timeout=120, stats=stats)
        lines = cuda_lines(meta)
        on = [x["line"] for x in lines if x["aarch64"]]
        tag = sorted({m for x in on for m in re.findall(r"cu(\d\d)\b|==(\d+\.\d+)\.", x)})
        build = "CUDA (%d CUDA requirements apply on aarch64: %s)" % (len(on), "; ".join(on[:3])) if on else \
            "CPU (%d CUDA requirements, every one x86_64-only)" % len(lines)
        rows.append({"torch": ver, "wheels": len(wheels), "read": pick["filename"], "bytes_read": stats["bytes"],
                     "requests": stats["requests"], "cuda_lines": len(lines), "cuda_on_aarch64": on,
                     "build": build, "tags": tag})
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        print("torch %s: %s aarch64 wheels; %s: %s%s" % (
            r["torch"], r["wheels"], r.get("read", "-"), r["build"],
            " (read %d bytes in %d range requests)" % (r["bytes_read"], r["requests"]) if r.get("read") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
