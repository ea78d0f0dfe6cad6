"""The driver and CUDA constraints: torch's CUDA variants, the backend wheel's CUDA, the GPU's architecture and driver branch."""

from typing import Any, Dict, List, Optional, Tuple

from packaging.version import Version

from ..hw import arch_covers, driver_supports_gpu, driver_tuple, sm_list
from ..matrix import Matrix
from .run import Run, add_problem, bname, cite, conf_flag


def driver_status(mx: Matrix, driver: Optional[str], cuda: str) -> Dict[str, Any]:
    """How ``driver`` runs CUDA ``cuda``: status native / compat / too_old / unknown, with the
    toolkit driver (native) and the major's minor-version-compatibility floor (compat)."""
    tk = mx.cuda_toolkit(cuda)
    major = int(cuda.split(".")[0])
    floor_row = mx.cuda_major(major)
    out = {"cuda": cuda, "native": tk and str(tk["driver"]), "compat": floor_row and str(floor_row["minor_compat_min"]),
           "tk_row": tk, "floor_row": floor_row, "status": "unknown"}
    if not driver:
        return out
    have = driver_tuple(driver)
    if out["native"] and have >= driver_tuple(out["native"]):
        out["status"] = "native"
    elif out["compat"] and have >= driver_tuple(out["compat"]):
        out["status"] = "compat"
    else:
        out["status"] = "too_old"
    return out


def pypi_build(series: Dict[str, Any], arch: str) -> Optional[str]:
    """The variant of torch's plain PyPI Linux wheel of ``series`` (a torch.toml release row) on
    ``arch``: ``pypi`` on x86_64, ``pypi_aarch64`` on aarch64 ("cpu" through 2.10; None when the
    aarch64 wheel's build is not recorded)."""
    if arch == "x86_64":
        return series.get("pypi")
    return series.get("pypi_%s" % arch)


def torch_variants(run: Run, t: str, b_major: Optional[int]) -> List[Dict[str, Any]]:
    """Every CUDA variant of torch ``t``, evaluated against the backend's CUDA major, the GPU and the
    driver; best first."""
    mx = run.mx
    series = mx.torch_series(t) or {}
    out = []
    for name in series.get("variants", []):
        vrow = mx.torch_variant(name) or {}
        cuda = str(vrow.get("cuda") or "")
        if not cuda:
            continue
        arch, ptx = mx.torch_arch(t, name) or ([], False)
        ev = {"variant": name, "cuda": cuda, "index": vrow.get("index"), "pypi": name == pypi_build(series, run.arch),
              "row": vrow, "arch": arch, "fails": [], "drv": driver_status(mx, run.driver, cuda)}
        if b_major is not None and int(cuda.split(".")[0]) != b_major:
            ev["fails"].append("major")
        if run.cc:
            covered, how = arch_covers(run.cc, sm_list(arch, ptx))
            ev["arch_how"] = how
            if not covered:
                ev["fails"].append("arch")
        if ev["drv"]["status"] == "too_old":
            ev["fails"].append("driver")
        out.append(ev)
    order = {"native": 0, "unknown": 0, "compat": 1, "too_old": 2}
    # a matching CUDA major first, then the fewest failures, a native driver, the PyPI build, the newest CUDA
    out.sort(key=lambda e: ("major" in e["fails"], len(e["fails"]), order[e["drv"]["status"]], not e["pypi"],
                            [-x for x in Version(e["cuda"]).release]))
    return out


def backend_wheel_cuda(run: Run, bv: str, t: str) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
    """(CUDA the backend's PyPI wheel is built with, its build row). "torch" rows resolve to the
    CUDA of the pinned torch's PyPI build."""
    row = run.mx.backend_build(run.backend, bv)
    if row is None:
        return None, None
    cuda = str(row["cuda"])
    if cuda == "torch":
        series = run.mx.torch_series(t) or {}
        cuda = str((run.mx.torch_variant(str(series.get("pypi", ""))) or {}).get("cuda") or "") or None
    return cuda, row


def gpu_checks(run: Run, bv: str, bcuda: Optional[str], ev: Dict[str, Any]) -> None:
    """Backend floor and the backend wheel's toolkit against the GPU's compute capability."""
    mx, cc = run.mx, run.cc
    if not cc:
        return
    floor = mx.backend_gpu_floor(run.backend, bv)
    highest = max([Version(str(r["min_cc"])) for r in mx.curated[run.backend].get("gpu_floor", [])] or [Version("0")])
    if floor and Version(cc) < highest:  # only then could another floor row change the verdict
        cite(ev, "%s GPU floor" % run.backend, ">= %s" % floor["min_cc"],
              "%s.toml gpu_floor %s" % (run.backend, floor["versions"]), floor["source"], floor["confidence"])
    if floor and Version(cc) < Version(str(floor["min_cc"])):
        add_problem(ev, "arch", "%s %s supports compute capability >= %s; this GPU is %s%s" % (
            bname(run), bv, floor["min_cc"], cc, conf_flag(floor)))
    if bcuda:
        need = mx.toolkit_arch(cc)
        if need and Version(bcuda) < Version(str(need["first_toolkit"])):
            cite(ev, "toolkit for compute capability %s" % cc, ">= CUDA %s" % need["first_toolkit"],
                  "wheels.toml toolkit_arch %s" % need["cc"], need["source"], need["confidence"])
            add_problem(ev, "arch", "%s %s's wheel is built with CUDA %s, which has no kernels for compute capability %s "
                                 "(first toolkit: CUDA %s)" % (bname(run), bv, bcuda, cc, need["first_toolkit"]))
        sup = mx.arch_support(int(bcuda.split(".")[0]))
        if sup and Version(cc) < Version(str(sup["min_cc"])):
            cite(ev, "CUDA %s architectures" % bcuda.split(".")[0], ">= %s" % sup["min_cc"],
                  "cuda.toml arch_support %s" % sup["major"], sup["source"], sup["confidence"])
            add_problem(ev, "arch", "%s %s's wheel is built with CUDA %s, which dropped compute capability %s "
                                 "(needs >= %s)" % (bname(run), bv, bcuda, cc, sup["min_cc"]))


def driver_text(d: Dict[str, Any]) -> str:
    if d["compat"] and d["compat"] != d["native"]:
        return "CUDA %s needs driver >= %s (>= %s through minor-version compatibility)" % (
            d["cuda"], d["native"] or "?", d["compat"])
    return "CUDA %s needs driver >= %s" % (d["cuda"], d["native"] or d["compat"] or "?")


def variant_problems(run: Run, t: str, bv: str, bcuda: Optional[str], variants: List[Dict[str, Any]],
                      ev: Dict[str, Any]) -> None:
    """Why no CUDA variant of torch ``t`` fits: the GPU's arch, the backend wheel's CUDA major, or
    the driver (in that order of precedence)."""
    arch_ok = [v for v in variants if "arch" not in v["fails"]]
    if not arch_ok:
        add_problem(ev, "arch", "no CUDA variant of torch %s has kernels for compute capability %s (%s)" % (
            t, run.cc, "; ".join("%s: %s" % (v["variant"], ", ".join(v["arch"])) for v in variants)))
        return
    same = [v for v in arch_ok if "major" not in v["fails"]]
    if same:
        add_problem(ev, "driver", "driver %s is too old for torch %s %s: %s" % (
            run.driver, t, same[0]["variant"], driver_text(same[0]["drv"])))
        return
    majors = sorted({v["cuda"].split(".")[0] for v in arch_ok})
    add_problem(ev, "major", "%s %s's PyPI wheel is built with CUDA %s, but the torch %s builds that %s are "
                          "CUDA %s (%s)" % (
        bname(run), bv, bcuda, t, "cover compute capability %s" % run.cc if run.cc else "this driver runs",
        "/".join(majors), ", ".join(v["variant"] for v in arch_ok)))
    for v in variants:
        if "arch" in v["fails"] and "major" not in v["fails"]:
            add_problem(ev, "arch", "torch %s %s has no kernels for compute capability %s (built for %s)" % (
                t, v["variant"], run.cc, ", ".join(v["arch"])))


def driver_checks(run: Run, bv: str, bcuda: Optional[str], best: Dict[str, Any], ev: Dict[str, Any]) -> None:
    """The driver against the torch variant's and the backend wheel's CUDA: problems, warnings
    (minor-version compatibility), citations and the minimum drivers of the stack."""
    mx = run.mx
    rows = [best["drv"]]
    if bcuda:
        bd = driver_status(mx, run.driver, bcuda)
        rows.append(bd)
        if bd["status"] == "too_old" and not ("driver" in ev["kinds"] and bcuda == best["cuda"]):
            add_problem(ev, "driver", "driver %s is too old for %s %s's wheel: %s" % (
                run.driver, bname(run), bv, driver_text(bd)))
    for d in rows:
        if d["tk_row"]:
            tk = d["tk_row"]
            cite(ev, "driver for CUDA %s" % d["cuda"], ">= %s" % d["native"], "cuda.toml toolkit %s" % tk["version"],
                  tk["source"], tk.get("confidence", "V"))
        if d["floor_row"] and d["status"] == "compat":
            fr = d["floor_row"]
            cite(ev, "CUDA %s minor-version compatibility" % fr["major"], ">= %s" % d["compat"],
                  "cuda.toml major %s" % fr["major"], fr["source"], fr.get("confidence", "V"))
    natives = [d["native"] or d["compat"] for d in rows if d["native"] or d["compat"]]
    compats = [d["compat"] or d["native"] for d in rows if d["native"] or d["compat"]]
    # the GPU architecture's own driver rule (first/last branch), before any CUDA arithmetic
    if run.cc:
        ok, why, arow = driver_supports_gpu(mx.arch_driver(), run.driver or "", run.cc)
        binding = arow is not None and arow.get("first_driver") and (not ok or not compats or driver_tuple(
            str(arow["first_driver"])) > driver_tuple(min(compats, key=driver_tuple)))
        if binding:
            natives.append(str(arow["first_driver"]))
            compats.append(str(arow["first_driver"]))
            cite(ev, "driver for %s GPUs" % arow["arch"], ">= %s (R%s)" % (arow["first_driver"], arow["first_branch"]),
                  "cuda.toml arch_driver %s" % arow["arch"], arow["source"], arow.get("confidence", "V"))
        if arow is not None and arow.get("last_branch"):
            ev["max_branch"] = int(arow["last_branch"])
        if not ok:
            add_problem(ev, "gpu-driver", why)
    ev["min_driver"] = max(natives, key=driver_tuple) if natives else None
    ev["min_driver_compat"] = max(compats, key=driver_tuple) if compats else None
    if ev.get("fail"):
        return
    for d in rows:
        if d["status"] == "compat":
            ev["warnings"].append("driver %s runs CUDA %s only through minor-version compatibility (>= %s): kernels "
                                  "compiled at run time (Triton, the rollout engine) may fail with 'unsupported "
                                  "toolchain'; upgrade to >= %s to run it natively" % (
                                      run.driver, d["cuda"], d["compat"], d["native"]))
            ev["kinds"].add("compat")
