"""Re-proving the recorded proofs (``matrix refresh --proofs``, tools/record_proofs.py): each row of
proofs.json proven again live by :func:`preflight.proofs.prove_live`, and what changed."""

import json
import os
from typing import Any, Dict, List

from . import proofs

__all__ = ["changes", "reprove"]


def changes(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """One line per proof id whose status or resolved set differs between two proof indexes
    (``{"id": row}``): ``ID py3.12 x86_64: proven -> failed`` or ``ID: -old==1 +new==2``."""
    out = []
    for pid in sorted(set(old) | set(new)):
        a, b = old.get(pid) or {}, new.get(pid) or {}
        if a.get("status") != b.get("status"):
            out.append("%s py%s %s: %s -> %s" % (pid, b.get("python") or a.get("python"), b.get("arch") or a.get(
                "arch") or "x86_64", a.get("status", "absent"), b.get("status", "absent")))
        elif a.get("installed") != b.get("installed"):
            sa, sb = set(a.get("installed") or []), set(b.get("installed") or [])
            out.append("%s: -%s +%s" % (pid, " ".join(sorted(sa - sb)[:6]), " ".join(sorted(sb - sa)[:6])))
    return out


def reprove(directory: str, write: bool = True, timeout: float = 600.0, log: Any = None) -> List[str]:
    """Re-prove every proof recorded in ``directory``/proofs.json live (:func:`preflight.proofs.prove_live`, one
    at a time) and return :func:`changes` between the recorded and the new answers; ``write``
    replaces the index (proofs the index could not answer now are kept as they were). ``log``: a
    callable given one line per proof."""
    from .errors import UsageError
    from .paths import loads_json, read_regular

    path = os.path.join(directory, "proofs.json")
    try:  # a regular file, no stranger's link to what they could not read, no FIFO (never blocks)
        idx = loads_json(read_regular(path, 64 << 20), path)
    except (OSError, ValueError) as exc:
        raise UsageError("%s: %s; pass a directory holding the proofs.json that tools/record_proofs.py wrote" % (
            path, getattr(exc, "strerror", None) or exc))
    if not isinstance(idx, dict) or not isinstance(idx.get("proofs") or {}, dict):
        raise UsageError("%s: not a proofs index (a JSON object with a \"proofs\" object); pass the proofs.json "
                         "that tools/record_proofs.py wrote" % path)
    old = idx.get("proofs") or {}
    new = dict(old)
    for pid, row in sorted(old.items()):
        if not isinstance(row, dict) or not isinstance(row.get("requirements"), list) or \
                not isinstance(row.get("python"), str):
            raise UsageError("%s: proof %s has no requirements list and python; pass the proofs.json that "
                             "tools/record_proofs.py wrote" % (path, pid))
        p = proofs.prove_live(row["requirements"], row["python"], row.get("arch", "x86_64"), timeout=timeout)
        if log:
            log("%s %s" % (pid, p["status"] if p["status"] != "unproven" else "unproven: %s" % p.get("reason")))
        if p["status"] == "unproven":
            continue
        keep = {k: p.get(k) for k in ("requirements", "python", "arch", "status", "pip", "index", "resolver", "glibc",
                                      "platform_tags", "date", "error", "no_wheel", "source_builds", "build_needs", "refusal",
                                      "metadata", "markers", "native", "sdist_purity") if p.get(k) is not None}
        keep["installed"] = sorted("%s==%s" % kv for kv in (p.get("installed") or {}).items())
        keep["file"] = row.get("file")
        new[pid] = keep
    out = changes(old, new)
    if write and out:
        from .atomic import write_atomic

        idx["proofs"] = new
        write_atomic(path, json.dumps(idx, indent=1, sort_keys=True) + "\n")
    return out
