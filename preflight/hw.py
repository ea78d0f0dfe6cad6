"""GPU and CUDA arithmetic shared by ``resolve`` and the checks (a leaf: it imports nothing of
the project's, so :mod:`preflight.resolve` and :mod:`preflight.checks` need not import each other).

Pure functions over version strings; the facts they apply (toolkit drivers, the first driver
branch of each GPU architecture) come from the matrix rows passed in.
"""

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["driver_tuple", "cuda_from_int", "arch_covers", "sm_list", "arch_driver_rule", "driver_supports_gpu",
           "visible_entries", "visible_devices"]


def driver_tuple(v: Optional[str]) -> Tuple[int, ...]:
    """``"580.159.04"`` -> (580, 159, 4); () when unreadable."""
    try:
        return tuple(int(x) for x in str(v).split("."))
    except (TypeError, ValueError):
        return ()


def cuda_from_int(n: Optional[int]) -> Optional[str]:
    """NVML's CUDA driver version integer (13000) -> ``"13.0"``."""
    if not n:
        return None
    return "%d.%d" % (n // 1000, (n % 1000) // 10)


def arch_covers(cc: str, arch_list: List[str]) -> Tuple[bool, str]:
    """Whether a torch arch list (``sm_90``, ``compute_120``...) runs compute capability ``cc``.

    SASS for X.Y runs on X.Z with Z >= Y (same major); PTX for any arch <= cc can be JIT-compiled.
    Returns (covered, how).
    """
    major, minor = (int(x) for x in cc.split("."))
    best = None
    for a in arch_list:
        m = re.match(r"(sm|compute)_(\d+)([af]?)$", a)
        if not m:
            continue
        num = int(m.group(2))
        amaj, amin = divmod(num, 10)
        if m.group(1) == "sm" and not m.group(3) and amaj == major and amin <= minor:
            if amin == minor:
                return True, "native %s" % a
            best = best or "%s (same major, runs on %s)" % (a, cc)
        if m.group(1) == "compute" and (amaj, amin) <= (major, minor):
            best = best or "PTX %s (JIT-compiled at first use)" % a
    return (best is not None), (best or "no sm_%d%d or compatible PTX" % (major, minor))


def sm_list(arch: Iterable[str], ptx: bool) -> List[str]:
    """``["8.0", "9.0"]``, ptx -> ``["sm_80", "sm_90", "compute_90"]`` (PTX of the newest arch)."""
    arch = list(arch)
    sms = ["sm_%s" % a.replace(".", "") for a in arch]
    if ptx and arch:
        sms.append("compute_%s" % arch[-1].replace(".", ""))
    return sms


def _cc(text: str) -> Tuple[int, int]:
    a, b = str(text).split(".")
    return int(a), int(b)


def arch_driver_rule(rows: Iterable[Dict[str, Any]], cc: str) -> Optional[Dict[str, Any]]:
    """The cuda.toml ``[[arch_driver]]`` row for compute capability ``cc``: the row with the highest
    ``min_cc`` <= cc (and ``max_cc`` >= cc when given), or None."""
    best = None
    for r in rows:
        lo = _cc(str(r["min_cc"]))
        hi = _cc(str(r["max_cc"])) if r.get("max_cc") else (99, 9)
        if lo <= _cc(cc) <= hi and (best is None or lo > _cc(str(best["min_cc"]))):
            best = r
    return best


def driver_supports_gpu(rows: Iterable[Dict[str, Any]], driver: str, cc: str) -> Tuple[bool, Optional[str], Optional[Dict[str, Any]]]:
    """Whether NVIDIA driver ``driver`` supports the silicon of compute capability ``cc`` at all,
    before any CUDA question (minor-version compatibility never adds hardware support).

    Returns (ok, why-not sentence or None, the arch_driver row applied or None). Unknown facts pass.
    """
    row = arch_driver_rule(rows, cc)
    have = driver_tuple(driver)
    if row is None or not have:
        return True, None, row
    if row.get("first_driver") and have < driver_tuple(str(row["first_driver"])):
        return False, ("driver %s predates %s support (compute capability %s): the first driver branch for %s is "
                       "R%s (>= %s); minor-version compatibility does not add new GPUs" % (
                           driver, row["arch"], cc, row["arch"], row["first_branch"], row["first_driver"])), row
    if row.get("last_branch") and have[0] > int(row["last_branch"]):
        return False, ("driver %s is newer than the last branch for %s GPUs (compute capability %s): R%s is the "
                       "last driver branch that supports them" % (driver, row["arch"], cc, row["last_branch"])), row
    return True, None, row


def visible_entries(cvd: str) -> List[str]:
    """The entries of a ``CUDA_VISIBLE_DEVICES`` value that CUDA takes, read without the devices:
    indices and ``GPU-``/``MIG-`` UUIDs (prefixes allowed), up to the first invalid entry (an
    empty one, ``-1``, anything else), each once (``"0,1,-1,3"`` -> ``["0", "1"]``; ``""`` -> []).

    Source: the CUDA C++ Programming Guide, "CUDA Environment Variables": only the devices
    before an invalid entry are visible."""
    seen: List[str] = []
    for tok in [t.strip() for t in cvd.split(",")]:
        if not tok or tok.startswith("-") or not (tok.isdigit() or tok.startswith(("GPU-", "MIG-"))):
            break
        if tok not in seen:
            seen.append(tok)
    return seen


def visible_devices(devices: Iterable[Dict[str, Any]], cvd: Optional[str]) -> List[Dict[str, Any]]:
    """The NVML ``devices`` (dicts with ``index`` and ``uuid``; ones with an ``error`` left out) a
    process sees under ``CUDA_VISIBLE_DEVICES=cvd``, in the order CUDA numbers them: every
    readable device when ``cvd`` is None; else the devices :func:`visible_entries` names (an
    index, or a prefix of the uuid), stopping at the first entry no device answers, each device
    once."""
    devs = [d for d in devices if not d.get("error")]
    if cvd is None:
        return devs
    picked: List[Dict[str, Any]] = []
    for tok in visible_entries(cvd):
        if tok.isdigit():
            match = [d for d in devs if d.get("index") == int(tok)]
        else:
            match = [d for d in devs if str(d.get("uuid") or "").startswith(tok)]
        if not match:
            break  # CUDA stops at the first entry it cannot resolve
        if match[0] not in picked:
            picked.append(match[0])
    return picked
