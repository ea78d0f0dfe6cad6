#!/usr/bin/env python3
"""The proof table: for every verl release x backend (none included) x CPython minor x platform,
what ``resolve`` answers offline from the recorded proofs (matrices/proofs.json): proven (pip's
resolver installed exactly that install line), does not install (pip refused it: why), unproven
(why: no proof recorded, a timeout, the PyTorch index) or no stack (resolve's own reason).

Offline: it reads only the matrix and the recorded proofs (nothing is run or fetched).

Usage: python3 tools/proof_table.py [--format grid|cells|json] [--arch x86_64,aarch64]

``grid`` (default): counts, then one Markdown row per (release, backend, platform) with one cell
per Python (P proven, X does not install, ? unproven, - no stack) and the reasons, numbered, below;
``cells``: one line per cell; ``json``: a list of cells.
"""

import argparse
import collections
import json
import os
import re
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.matrix import load  # noqa: E402
from preflight.resolve import resolve  # noqa: E402

PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
MARK = {"proven": "P", "does not install": "X", "unproven": "?", "no stack": "-"}


def _why_failed(p: Dict[str, Any]) -> str:
    """pip's refusal, short: its kind and the package it names (and which of them the index
    serves as an sdist only, which a binary-only install cannot take)."""
    why = _refusal(p)
    sdist = p.get("source_builds") or []
    needs = p.get("build_needs") or {}
    return why + ("; only an sdist on the index: %s" % "; ".join(
        "%s (%s)" % (n, _short_need(needs.get(n, ""))) if needs.get(n) else n for n in sdist) if sdist else "")


def _short_need(need: str) -> str:
    """What building an sdist needs, without the "an sdist only" lead (the reason says it)."""
    return re.sub(r"^an sdist only(?: on PyPI)?[:,]?\s*", "", need)[:200]


def _why_proven(p: Dict[str, Any]) -> str:
    """"" for a proof of wheels only; for one that builds sdists, which and what building them needs."""
    sdist = p.get("source_builds") or []
    needs = p.get("build_needs") or {}
    if not sdist:
        return ""
    return "builds %s from its sdist (%s; pip's resolver run natively with --no-binary %s)" % (
        ", ".join(sdist), "; ".join(sorted({needs.get(n, "") for n in sdist})), ",".join(sdist))


def _refusal(p: Dict[str, Any]) -> str:
    err = p.get("error") or ""
    kind = p.get("refusal") or ("ResolutionImpossible" if "ResolutionImpossible" in err or "conflict" in err
                                else "no matching distribution")
    names = p.get("no_wheel") or []
    m = re.search(r"No matching distribution found for (\S+)(?: \(from ([^)]+)\))?", err)
    if m:
        return "%s: %s%s" % (kind, m.group(1).rstrip(";"), " (from %s)" % m.group(2) if m.group(2) else "")
    if names:
        return "%s: %s" % (kind, ", ".join(names[:3]))
    m = re.search(r"Cannot install (.+?) because", err)
    return "%s%s" % (kind, ": conflict among %s" % m.group(1)[:120] if m else "")


def _why_unproven(p: Dict[str, Any]) -> str:
    reason = p.get("reason") or "no proof"
    if "PyTorch index" in reason:
        return "needs download.pytorch.org (a +cuXYZ torch), not reachable where proofs are recorded"
    if reason.startswith("timed out") or "did not finish within" in reason:
        m = re.search(r"(\d+) s", reason)
        return "timed out after %s s%s" % (m.group(1) if m else "?", re.sub(r"^.*?(?=\(still)", " ", reason)
                                           if "(still" in reason else "")
    if reason.startswith("no recorded proof"):
        return "not recorded yet"
    return reason[:260]


def cells(mx: Any, arches: List[str], releases: Optional[Sequence[str]] = None,
          pythons: Sequence[str] = PYTHONS) -> Iterator[Dict[str, Any]]:
    """One dict per grid cell: verl, backend, python, arch, verdict (proven / does not install /
    unproven / no stack), why (one line; empty for proven), proof (the proof id, where any),
    markers (for pip's verdicts: the environment pip evaluated markers in, native or given).
    ``releases``: only these verl releases (default: every one the matrix knows)."""
    for arch in arches:
        for v in mx.verl_versions():
            if releases is not None and v not in releases:
                continue
            for b in sorted((mx.verl(v) or {}).get("backend_extras") or {}) + ["none"]:
                for py in pythons:
                    r = resolve(mx, v, b, python=py, arch=arch, _options=False)
                    verdict = {"works": "proven"}.get(r.verdict, r.verdict)
                    p = r.proof or {}
                    if verdict == "proven":
                        why = _why_proven(p)
                    elif verdict == "does not install":
                        why = _why_failed(p)
                    elif verdict == "unproven":
                        why = _why_unproven(p)
                    else:
                        why = (r.problems or ["no stack"])[0]
                        why = re.sub(r"\s+", " ", why)[:160]
                    yield {"verl": v, "backend": b, "python": py, "arch": arch, "verdict": verdict, "why": why,
                           "proof": p.get("id") if r.requirements else None,
                           "markers": (p.get("markers") or "cpython 3.11.7 x86_64 (recorded before rows named it)")
                           if verdict in ("proven", "does not install") else None}


def grid(rows: List[Dict[str, Any]]) -> str:
    """The Markdown view of ``rows`` (see the module doc)."""
    out: List[str] = []
    counts = collections.Counter(r["verdict"] for r in rows)
    out.append("%d cells: %s" % (len(rows), ", ".join("%d %s" % (counts[k], k) for k in MARK)))
    for arch in sorted({r["arch"] for r in rows}, key=lambda a: a != "x86_64"):
        c = collections.Counter(r["verdict"] for r in rows if r["arch"] == arch)
        out.append("  %s: %s" % (arch, ", ".join("%d %s" % (c[k], k) for k in MARK)))
    how = collections.Counter("given" if "given to pip" in str(r.get("markers")) else "native" for r in rows
                              if r.get("markers"))
    if how:
        out.append("  pip's verdicts: %d with markers of the target's own interpreter, %d with the target's marker "
                   "environment given to pip" % (how["native"], how["given"]))
    out.append("")
    out.append("P proven, X does not install, ? unproven, - no stack; [n]: the reason below")
    out.append("")
    out.append("| release | backend | platform | " + " | ".join("py" + p for p in PYTHONS) + " |")
    out.append("|---|---|---|" + "---|" * len(PYTHONS))
    reasons: Dict[str, int] = {}
    by = collections.OrderedDict()  # type: Dict[tuple, Dict[str, Dict[str, Any]]]
    for r in rows:
        by.setdefault((r["verl"], r["backend"], r["arch"]), {})[r["python"]] = r
    for (v, b, arch), pys in by.items():
        cols = []
        for py in PYTHONS:
            r = pys.get(py)
            if r is None:
                cols.append(" ")
                continue
            mark = MARK[r["verdict"]]
            if r["why"] and r["verdict"] != "no stack":  # a proven cell's: the sdists it builds
                n = reasons.setdefault("%s: %s" % (r["verdict"], r["why"]), len(reasons) + 1)
                mark += "[%d]" % n
            cols.append(mark)
        out.append("| %s | %s | %s | %s |" % (v, b, arch, " | ".join(cols)))
    out.append("")
    for text, n in sorted(reasons.items(), key=lambda kv: kv[1]):
        out.append("[%d] %s" % (n, text))
    nostack = collections.Counter(re.sub(r"\d+(\.\d+)+", "N", r["why"])[:90] for r in rows
                                  if r["verdict"] == "no stack")
    out.append("")
    out.append("no stack, by reason (versions as N):")
    for text, n in nostack.most_common(8):
        out.append("  %3d  %s" % (n, text))
    return "\n".join(out)


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", choices=("grid", "cells", "json"), default="grid")
    ap.add_argument("--arch", default="x86_64,aarch64", help="platforms, comma-separated")
    a = ap.parse_args(argv)
    rows = list(cells(load(), a.arch.split(",")))
    if a.format == "json":
        print(json.dumps(rows, indent=1))
    elif a.format == "cells":
        for r in rows:
            print("%s %s py%s %s: %s%s" % (r["verl"], r["backend"], r["python"], r["arch"], r["verdict"],
                                           " (%s)" % r["why"] if r["why"] else ""))
    else:
        print(grid(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
