"""From an evaluated candidate to the answer's choices: works-with bounds and the requirement lines."""

from typing import Any, Dict, List

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix import AnySpec
from .flash_attn import choose_flash_attn
from .model import Resolution
from .requirements import exact_pin, joint, named_reqs, spec_text
from .run import Run, bname, cite, conf_flag


def stack_versions(run: Run, ev: Dict[str, Any]) -> Dict[str, str]:
    """The chosen versions a bound's or known-bad row's ``when`` is judged against."""
    out = {"verl": run.verl, run.backend: ev["bv"]}
    if ev.get("torch"):
        out["torch"] = ev["torch"]
    return out


def when_holds(when: Dict[str, Any], versions: Dict[str, str]) -> bool:
    """Every ``package -> specifier`` of ``when`` admits the stack's version (absent = False)."""
    for pkg, spec in (when or {}).items():
        have = versions.get(canonicalize_name(pkg))
        if have is None or Version(have) not in AnySpec(str(spec)):
            return False
    return True


def apply_bounds(run: Run, ev: Dict[str, Any], res: Resolution, both: List[Requirement]) -> None:
    """Add the works-with bounds (bounds.toml) that apply to the chosen stack to its specifiers;
    a bound no recorded release can meet together with the metadata is a conflict problem."""
    versions = stack_versions(run, ev)
    for b in run.mx.bounds():
        if not when_holds(b.get("when") or {}, versions):
            continue
        name = canonicalize_name(b["package"])
        res.bounds.append({"id": b["id"], "package": name, "spec": str(b["spec"]), "reason": b["reason"],
                           "source": b["source"], "confidence": b.get("confidence", "V")})
        cite({"citations": res.citations}, "%s bound" % name, str(b["spec"]), "bounds.toml %s" % b["id"],
              b["source"], b.get("confidence", "V"))
        if name in ("transformers", "tensordict", "ray"):
            reqs = named_reqs(both, name) + [Requirement(name + b2["spec"]) for b2 in res.bounds if b2["package"] == name]
            setattr(res, name, spec_text(reqs))
            if joint([r.specifier for r in reqs], run.mx.versions(name)) is None:
                res.problems.append("the works-with bound %s%s (%s) leaves no %s release that verl %s and %s %s "
                                    "admit (%s)" % (name, b["spec"], b["id"], name, run.verl, bname(run), ev["bv"],
                                                    spec_text(named_reqs(both, name))))
                ev["fail"] = True
                ev["kinds"].add("conflict")


def fill(run: Run, ev: Dict[str, Any], res: Resolution) -> None:
    """Copy an evaluated stack into ``res`` (choices, requirements, citations)."""
    mx = run.mx
    res.python, res.torch, res.backend_version = ev["python"], ev.get("torch"), ev["bv"]
    res.problems += ev["problems"]
    res.warnings += ev["warnings"]
    res.citations += ev["citations"]
    if "variant" not in ev:
        return
    var = ev["variant"]
    res.variant, res.cuda, res.index_url, res.torch_from_pypi = var["variant"], var["cuda"], var["index"], var["pypi"]
    res.backend_cuda = ev.get("bcuda")
    res.min_driver, res.min_driver_compat = ev.get("min_driver"), ev.get("min_driver_compat")
    b_reqs, v_reqs = ev.get("b_reqs", []), ev.get("v_reqs", [])
    both = list(b_reqs) + list(v_reqs)
    res.torchvision = exact_pin(both, "torchvision")
    res.torchaudio = exact_pin(both, "torchaudio")
    for name in ("transformers", "tensordict", "ray"):
        setattr(res, name, spec_text(named_reqs(both, name)))
    apply_bounds(run, ev, res, both)
    if ev["fail"]:
        return
    res.flash_attn = choose_flash_attn(run, ev)
    fa = res.flash_attn
    cite({"citations": res.citations}, "flash-attn", "%s (%s)" % (fa.get("version"), fa["status"]), "flash_attn.toml",
          fa["source"], fa["confidence"])
    if fa["status"] == "unsupported":
        res.warnings.append(fa["reason"])
    bf16 = run.mx.bf16()
    if run.cc and bf16.get("min_cc") and Version(run.cc) < Version(str(bf16["min_cc"])):
        res.warnings.append("bf16 needs compute capability >= %s; this GPU is %s, and verl's defaults use bf16 (rollout "
                            "dtype, FSDP mixed precision): launch with actor_rollout_ref.rollout.dtype=float16 and fp16 "
                            "FSDP mixed precision ('preflight config' names the keys of your launch) (%s)" % (
                                bf16["min_cc"], run.cc, bf16.get("source")))
    elif fa["status"] == "source build":
        res.notes.append("flash-attn: %s" % fa["reason"])
    # -- requirements
    local = "" if var["pypi"] else "+" + var["variant"]
    reqs = ["verl[%s]==%s" % (run.extra, run.verl) if run.extra else "verl==%s" % run.verl,
            "torch==%s%s" % (res.torch, local)]
    if res.torchvision:
        reqs.append("torchvision==%s%s" % (res.torchvision, local))
    if res.torchaudio:
        reqs.append("torchaudio==%s%s" % (res.torchaudio, local))
    extras = sorted({e for r in named_reqs(v_reqs, run.backend) for e in r.extras})
    reqs.append("%s%s==%s" % (run.backend, "[%s]" % ",".join(extras) if extras else "", res.backend_version))
    bounded = {b["package"] for b in res.bounds}
    for name in ("transformers", "tensordict", "ray"):
        rs = named_reqs(both, name)
        if (rs or name in bounded) and getattr(res, name):
            ex = sorted({e for r in rs for e in r.extras})
            reqs.append("%s%s%s" % (name, "[%s]" % ",".join(ex) if ex else "", getattr(res, name)))
    for name in sorted(bounded - {"transformers", "tensordict", "ray"}):
        spec = spec_text(named_reqs(both, name) + [Requirement(name + b["spec"]) for b in res.bounds if b["package"] == name])
        reqs.append("%s%s" % (name, spec))
    if fa["status"] == "wheel":
        reqs.append("flash-attn @ %s" % fa["url"])
    elif fa["status"] == "source build":
        reqs.append("flash-attn==%s" % fa["version"])
    res.requirements = reqs
    res.extra_index_urls = [] if var["pypi"] else [var["index"]]
    if ev.get("backend_where", "").startswith("https://wheels."):
        res.extra_index_urls.append(ev["backend_where"])
    res.backend_build = run.build
    # -- notes
    for n in mx.backend_notes(run.backend, res.backend_version):
        res.notes.append("%s%s (%s)" % (n["text"], conf_flag(n), n["source"]))
    plat = mx.backend_platform(run.backend, res.backend_version)
    if plat and run.arch == "x86_64":  # the tag recorded is the x86_64 wheel's; aarch64's is not recorded
        res.notes.append("%s %s's x86_64 wheel is %s: it needs glibc >= %s" % (
            bname(run), res.backend_version, plat["tag"], plat["glibc"]))
