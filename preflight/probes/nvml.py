"""NVML snapshot: driver, GPUs, health and topology, read through pynvml (nvidia-ml-py).

:func:`collect` works on any *provider* with pynvml's API (the real ``pynvml`` module, or a
fake passed in by tests) and returns one JSON-ready dict; it never raises. NVML's own failures
become ``{"error": {"kind": ..., "message": ...}}`` with kind one of ``library_not_found``,
``driver_not_loaded``, ``no_permission``, ``gpu_lost``, ``unknown``.

:func:`snapshot` runs :func:`collect` in a subprocess of the checker's own interpreter (NVML
loads the driver's libnvidia-ml into the process; a broken driver must not take the checker down).
"""

import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional

from .process import EVENTS_ENV, MARKER, run_argv

__all__ = ["collect", "snapshot", "classify_error", "bus_key", "nvlink_between"]

# pynvml's NVML_ERROR_* codes (nvml.h); read from the provider when it defines them.
_CODES = {
    "library_not_found": ("NVML_ERROR_LIBRARY_NOT_FOUND", 12),
    "driver_not_loaded": ("NVML_ERROR_DRIVER_NOT_LOADED", 9),
    "no_permission": ("NVML_ERROR_NO_PERMISSION", 4),
    "gpu_lost": ("NVML_ERROR_GPU_IS_LOST", 15),
}

# Clock-throttle reason bits (nvml.h nvmlClocksEventReason*), name -> bit.
THROTTLE_BITS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100,
}
#: Throttle reasons that mean the GPU is being held back by heat or power (not idle/app clocks).
THROTTLE_BAD = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown")


def classify_error(nvml: Any, exc: BaseException) -> str:
    """Kind of an NVML exception (see module doc); ``unknown`` for anything else."""
    value = getattr(exc, "value", None)
    for kind, (attr, default) in _CODES.items():
        if value is not None and value == getattr(nvml, attr, default):
            return kind
    if isinstance(exc, OSError) or "libnvidia-ml" in str(exc):
        return "library_not_found"
    return "unknown"


def _s(x: Any) -> Any:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else x


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _device(nvml: Any, i: int) -> Dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    d: Dict[str, Any] = {"index": i}
    d["name"] = _s(_try(lambda: nvml.nvmlDeviceGetName(h)))
    d["uuid"] = _s(_try(lambda: nvml.nvmlDeviceGetUUID(h)))
    pci = _try(lambda: nvml.nvmlDeviceGetPciInfo(h))
    d["pci_bus_id"] = _s(getattr(pci, "busId", None)) if pci is not None else None
    mem = _try(lambda: nvml.nvmlDeviceGetMemoryInfo(h))
    if mem is not None:
        d["memory_total_mib"] = int(mem.total) // (1 << 20)
        d["memory_used_mib"] = int(mem.used) // (1 << 20)
    cc = _try(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h))
    d["capability"] = "%d.%d" % tuple(cc) if cc else None
    ecc = _try(lambda: nvml.nvmlDeviceGetEccMode(h))
    d["ecc_enabled"] = bool(ecc[0]) if ecc else None
    d["ecc_uncorrected_volatile"] = _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(
        h, getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), getattr(nvml, "NVML_VOLATILE_ECC", 0)))
    d["retired_pages_pending"] = _try(lambda: bool(nvml.nvmlDeviceGetRetiredPagesPendingStatus(h)))
    rr = _try(lambda: nvml.nvmlDeviceGetRemappedRows(h))  # (corr, uncorr, pending, failure)
    if rr:
        d["remapped_rows"] = {"correctable": rr[0], "uncorrectable": rr[1], "pending": bool(rr[2]),
                              "failure": bool(rr[3])}
    reasons = _try(lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
    if reasons is not None:
        d["throttle_reasons"] = sorted(k for k, bit in THROTTLE_BITS.items() if int(reasons) & bit)
    d["persistence_mode"] = _try(lambda: bool(nvml.nvmlDeviceGetPersistenceMode(h)))
    mig = _try(lambda: nvml.nvmlDeviceGetMigMode(h))
    d["mig_enabled"] = bool(mig[0]) if mig else False
    d["compute_mode"] = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}.get(
        _try(lambda: nvml.nvmlDeviceGetComputeMode(h)), None)
    d["pcie"] = {
        "gen": _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "gen_max": _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "width": _try(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "width_max": _try(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
    }
    links = 0
    # where each active link goes (nvidia-smi topo -m's NV<n>): an NVSwitch, or another GPU (by its
    # PCI bus id); NVML_NVLINK_DEVICE_TYPE_GPU = 0, _IBMNPU = 1, _SWITCH = 2
    remote: Dict[str, Any] = {"switch": 0, "gpu": {}, "unknown": 0}
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        st = _try(lambda: nvml.nvmlDeviceGetNvLinkState(h, link))
        if st is None:
            break
        if not st:
            continue
        links += 1
        kind = _try(lambda: nvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link))
        if kind == getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2):
            remote["switch"] += 1
            continue
        rpci = _try(lambda: nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link)) if kind is not None else None
        bus = bus_key(_s(getattr(rpci, "busId", None))) if rpci is not None else None
        if bus:
            remote["gpu"][bus] = remote["gpu"].get(bus, 0) + 1
        else:
            remote["unknown"] += 1
    d["nvlinks_active"] = links
    d["nvlink_remote"] = remote if links else None
    procs = _try(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
    d["processes"] = [{"pid": getattr(p, "pid", None),
                       "used_mib": (int(getattr(p, "usedGpuMemory", 0) or 0) // (1 << 20))} for p in procs]
    return d


def bus_key(bus: Optional[str]) -> Optional[str]:
    """A PCI bus id without its domain, lower case (``00000000:18:00.0`` -> ``18:00.0``), so ids
    from nvmlDeviceGetPciInfo and nvmlDeviceGetNvLinkRemotePciInfo compare equal."""
    if not bus:
        return None
    parts = str(bus).strip().lower().split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else parts[0]


def nvlink_between(a: Dict[str, Any], b: Dict[str, Any]) -> Optional[str]:
    """How two devices of a snapshot are joined by NVLink: ``"switch"`` (both reach NVSwitches:
    every pair of such GPUs talks over NVLink, e.g. HGX 8-GPU boards), ``"direct:N"`` (N links
    from ``a`` end at ``b``), ``None`` (no NVLink between them), or ``"unknown"`` (links are up
    but NVML does not say where they go)."""
    ra, rb = a.get("nvlink_remote"), b.get("nvlink_remote")
    if not a.get("nvlinks_active") or not b.get("nvlinks_active"):
        return None
    if not ra or not rb:
        return "unknown"
    if ra.get("switch") and rb.get("switch"):
        return "switch"
    n = (ra.get("gpu") or {}).get(bus_key(b.get("pci_bus_id")) or "", 0)
    if n:
        return "direct:%d" % n
    if ra.get("unknown") or rb.get("unknown"):
        return "unknown"
    return None


def _pairs(nvml: Any, n: int) -> List[Dict[str, Any]]:
    out = []
    topo_names = {0: "internal", 10: "single_switch", 20: "multiple_switches", 30: "host_bridge",
                  40: "numa_node", 50: "system"}
    p2p_ok = getattr(nvml, "NVML_P2P_STATUS_OK", 0)
    read_idx = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
    for i in range(n):
        for j in range(i + 1, n):
            try:
                hi = nvml.nvmlDeviceGetHandleByIndex(i)
                hj = nvml.nvmlDeviceGetHandleByIndex(j)
            except Exception:
                continue  # a lost GPU is reported per device
            topo = _try(lambda: nvml.nvmlDeviceGetTopologyCommonAncestor(hi, hj))
            p2p = _try(lambda: nvml.nvmlDeviceGetP2PStatus(hi, hj, read_idx))
            out.append({"a": i, "b": j, "path": topo_names.get(topo, topo),
                        "p2p_read": None if p2p is None else p2p == p2p_ok})
    return out


def collect(nvml: Any) -> Dict[str, Any]:
    """Snapshot through ``nvml`` (a pynvml-like provider). Never raises.

    Returns ``{"driver": str, "cuda_driver": int (e.g. 13000), "devices": [...], "pairs": [...]}``
    or ``{"error": {"kind", "message"}}``; per-device keys are documented in :func:`_device`'s body
    (memory in MiB, capability "X.Y", throttle reasons by name).
    """
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return {"error": {"kind": classify_error(nvml, exc), "message": "%s: %s" % (type(exc).__name__, exc)}}
    try:
        out: Dict[str, Any] = {}
        out["driver"] = _s(_try(nvml.nvmlSystemGetDriverVersion))
        out["cuda_driver"] = _try(nvml.nvmlSystemGetCudaDriverVersion)
        n = nvml.nvmlDeviceGetCount()
        out["device_count"] = n
        devs = []
        for i in range(n):
            try:
                devs.append(_device(nvml, i))
            except Exception as exc:
                devs.append({"index": i, "error": {"kind": classify_error(nvml, exc),
                                                   "message": "%s: %s" % (type(exc).__name__, exc)}})
        out["devices"] = devs
        out["pairs"] = _pairs(nvml, n) if n > 1 else []
        by_index = {d.get("index"): d for d in devs if not d.get("error")}
        for p in out["pairs"]:
            if p["a"] in by_index and p["b"] in by_index:
                p["nvlink"] = nvlink_between(by_index[p["a"]], by_index[p["b"]])
        return out
    except Exception as exc:
        return {"error": {"kind": classify_error(nvml, exc), "message": "%s: %s" % (type(exc).__name__, exc)}}
    finally:
        _try(nvml.nvmlShutdown)


def _package_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))  # .../preflight/probes
    return os.path.dirname(os.path.dirname(here))


def self_argv(module: str, func: str = "_main") -> List[str]:
    """Command line that runs ``module.func()`` under the checker's own interpreter and flags
    (the zipapp or the source tree on sys.path)."""
    flags = []
    if sys.flags.isolated:
        flags.append("-I")
    if sys.flags.no_site:
        flags.append("-S")
    code = "import sys; sys.path.insert(0, %r); from %s import %s; %s()" % (_package_root(), module, func, func)
    return [sys.executable] + flags + ["-c", code]


def snapshot(timeout: float = 30.0) -> Dict[str, Any]:
    """:func:`collect` with the real pynvml, in a subprocess with a deadline. Never raises."""
    out = run_argv(self_argv("preflight.probes.nvml"), timeout=timeout)
    ev = out.last("nvml")
    if ev is not None:
        ev = dict(ev)
        ev.pop("event", None)
        return ev
    return {"error": {"kind": "probe_failed", "message": "NVML probe %s" % out.describe(),
                      "stderr_tail": out.stderr_tail[-1000:]}}


def _main() -> None:
    try:
        import pynvml  # vendored (nvidia-ml-py)
    except Exception as exc:  # pragma: no cover - the zipapp always carries it
        data: Dict[str, Any] = {"error": {"kind": "unknown", "message": "pynvml unavailable: %s" % exc}}
    else:
        data = collect(pynvml)
    data["event"] = "nvml"
    line = MARKER + json.dumps(data, default=str) + "\n"
    path = os.environ.get(EVENTS_ENV)
    if path:  # the probe's private events file (see probes/process.py)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
        return
    sys.stdout.write(line)
    sys.stdout.flush()
