"""The flash-attn choice: verl's pin or the newest release with a prebuilt wheel for the stack, else a source build."""

from typing import Any, Dict

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..hw import arch_covers, sm_list
from .requirements import exact_pin
from .run import RANK, Run


def choose_flash_attn(run: Run, ev: Dict[str, Any]) -> Dict[str, Any]:
    """The flash-attn choice for the evaluated stack (see the module doc, step 6)."""
    mx = run.mx
    fa = mx.flash_attn()
    t, variant = ev["torch"], ev["variant"]
    pin = None
    for line in run.meta.get("requires_dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "flash-attn":
            pin = exact_pin([req], "flash-attn") or pin
    if run.cc and Version(run.cc) < Version(str(fa["min_cc"])):
        return {"version": pin, "status": "unsupported", "wheel": None, "url": None,
                "reason": "FlashAttention 2 needs compute capability >= %s; this GPU is %s: leave flash-attn out and "
                          "use SDPA attention (verl's use_remove_padding needs flash-attn)" % (fa["min_cc"], run.cc),
                "source": fa["source"], "confidence": fa["confidence"]}
    releases = fa.get("release", [])
    versions = sorted({str(r["version"]) for r in releases}, key=Version, reverse=True)
    if pin:
        versions = [v for v in versions if Version(v) == Version(pin)] or [pin]
    abi_info = mx.torch_cxx11abi(t, variant["variant"])
    abi = abi_info[0] if abi_info else None
    tv = Version(t)
    mm = "%d.%d" % (tv.major, tv.minor)
    cu_major = variant["cuda"].split(".")[0]
    for ver in versions:
        for r in releases:
            if str(r["version"]) != ver or mm not in r["torch"] or ev["python"] not in r["python"]:
                continue
            if any(x.get("torch") == mm and x.get("python") == ev["python"] for x in r.get("exclude", [])):
                continue
            name = (r.get("cuda") or {}).get(cu_major)
            if not name or abi is None or abi not in r["cxx11abi"]:
                continue
            if run.cc and not arch_covers(run.cc, sm_list(r["arch"], False))[0]:
                continue
            if run.arch not in (r.get("platforms") or ["x86_64"]):
                continue
            wheel = fa["wheel"].format(version=ver, cuda=name, torch=mm, abi="TRUE" if abi else "FALSE",
                                       py=ev["python"].replace(".", ""), arch=run.arch)
            return {"version": ver, "status": "wheel", "wheel": wheel,
                    "url": fa["url"].format(version=ver, wheel=wheel),
                    "reason": "prebuilt for torch %s, CUDA %s, Python %s, cxx11abi %s, Linux %s" % (
                        mm, cu_major, ev["python"], abi, run.arch),
                    "source": r["source"] + "; " + abi_info[1]["source"],
                    "confidence": max(r["confidence"], abi_info[1]["confidence"], key=lambda c: RANK[c])}
    # a source build of verl's pin, else of the newest release whose wheels are known
    known = [v for v in versions if any(str(r["version"]) == v and r["torch"] for r in releases)]
    ver = pin or (known or versions)[0]
    return {"version": ver, "status": "source build", "wheel": None, "url": None,
            "reason": "no prebuilt flash-attn %s wheel is recorded for torch %s + CUDA %s + Python %s + cxx11abi %s on Linux %s%s: "
                      "pip builds it from source (needs nvcc for CUDA %s, hours; pip install flash-attn==%s "
                      "--no-build-isolation)" % (ver, mm, cu_major, ev["python"], abi, run.arch,
                                                 " on compute capability %s" % run.cc if run.cc else "", cu_major, ver),
            "source": fa["source"], "confidence": "V"}
