"""The entry point :func:`resolve`: parse the inputs, choose the stack, prove it, add the options."""

import re
from typing import Any, Dict, List, Optional, Tuple

from packaging.version import Version

from ..matrix import Matrix
from .candidates import backend_candidates, backend_spec, known_bad_rows, pick_python, pythons
from .core import resolve_core
from .evaluate import evaluate
from .model import Resolution, ResolveError, parse_cc, parse_driver, parse_python
from .options import add_options, attach_images, core_python_option
from .proof import backend_owns, prove
from .requirements import dedupe
from .run import RANK, Run, bname, cite
from .stack import fill


def resolve(mx: Matrix, verl: str, backend: Optional[str] = None, driver: Optional[str] = None,
            cc: Optional[str] = None, gpu: Optional[str] = None, python: Optional[str] = None,
            prefer_python: Optional[str] = None, _options: bool = True,
            backend_build: Optional[str] = None, arch: Optional[str] = None) -> Resolution:
    """The stack that runs verl ``verl`` with ``backend`` on the described machine.

    Args:
        mx: the loaded matrix.
        verl: a verl release in the matrix ("0.9.1").
        backend: "vllm", "sglang" or "none" (verl's core without a rollout engine, see
            :mod:`preflight.resolve.core`); default vLLM when the release has it.
        driver: NVIDIA driver version ("580.65.06"); None = unknown (not checked; the
            Resolution's ``min_driver`` says what the stack needs).
        cc: compute capability ("9.0"); gpu: a GPU name ("H100"), used when ``cc`` is None.
            Both None = unknown (arch coverage not checked).
        python: a CPython minor ("3.12") the stack must use; None = any.
        prefer_python: a minor to prefer when it fits (the calling interpreter's), not required.
        backend_build: another published build of the backend to use instead of its PyPI wheel
            (a vllm.toml ``other`` variant, e.g. "cu129"); None = the PyPI wheel.
        arch: the machine's architecture, "x86_64" or "aarch64" (Linux); None = the one the GPU
            implies (gpus.toml ``host_arch``: GH200, GB200 sit on Grace, aarch64), else x86_64.
    Returns:
        A :class:`Resolution`; ``ok`` False with ``problems`` and ``options`` when no stack works.
    Raises:
        ResolveError: unknown verl release or GPU name, malformed driver / cc / Python, unknown
            backend name.
    """
    if mx.verl(verl) is None:
        raise ResolveError(mx.unknown_verl(verl))
    row = mx.verl(verl)
    gpu_row, cc, driver, python, prefer, arch, arch_note = _machine(mx, gpu, cc, driver, python, prefer_python, arch)
    extras_map = row.get("backend_extras") or {}
    if backend == "none":
        default = resolve(mx, verl, None, driver, cc, gpu, python, prefer_python, _options=False, arch=arch)
        run = Run(mx, verl, default.backend, driver, cc, gpu, python, prefer, None, arch)
        res = resolve_core(run, default, arch_note)
        if res.requirements:
            prove(run, res)
        res.ok = not res.problems
        res.confidence = max([c["confidence"] for c in res.citations] or ["V"], key=lambda c: RANK.get(c, 2))
        if _options and res.proof.get("status") == "failed":
            core_python_option(run, res, resolve)
        return res
    if backend is None:
        backend = "vllm" if "vllm" in extras_map else sorted(extras_map)[0]
    if backend not in ("vllm", "sglang"):
        raise ResolveError("--backend %s: not a rollout backend; choose vllm, sglang or none" % backend)
    if backend_build is not None and not re.match(r"^cu\d{3}$", str(backend_build)):
        raise ResolveError("--backend-build %s: not a CUDA build name; pass e.g. cu129" % backend_build)
    failed: Dict[str, str] = {}  # backend release -> why its recorded platform resolve failed
    while True:
        res = Resolution(verl=verl, backend=backend, driver=driver, cc=cc, gpu=gpu, python_requested=python,
                         arch=arch)
        res.notes += arch_note
        cite({"citations": res.citations}, "verl", verl, "metadata/verl.json verl==%s" % verl,
              (row.get("_meta") or {}).get("source") or row["source"], "V")
        if gpu_row is not None:
            cite({"citations": res.citations}, "compute capability", cc, "gpus.toml %s" % gpu,
                  "developer.nvidia.com/cuda-gpus", "V")
        run = Run(mx, verl, backend, driver, cc, gpu, python, prefer, backend_build, arch)
        run.failed_proofs = failed
        if backend not in extras_map:
            res.problems.append("verl %s has no %s rollout (its backends: %s)" % (
                verl, backend, ", ".join(sorted(extras_map))))
            kinds = {"backend"}
        else:
            kinds = choose_stack(run, res)
        _tidy(res)
        if not res.problems and res.requirements:
            prove(run, res)
            bv = res.backend_version or ""
            if res.proof.get("status") == "failed" and bv and bv not in failed and len(failed) < 8 \
                    and backend_owns(run, bv, res.proof.get("no_wheel") or res.proof.get("source_builds") or [],
                                 str(res.proof.get("error") or "")):
                # pip cannot install this set because of a pin of this backend release: try the next one
                failed[bv] = res.problems[-1]
                continue
            if res.proof.get("status") == "failed":
                kinds = set(kinds) | {"proof"}
        break
    for bv, why in failed.items():
        if bv != res.backend_version:
            res.notes.append("%s %s was not chosen: %s" % (bname(run), bv, why))
    res.ok = not res.problems
    attach_images(run, res)
    res.confidence = max([c["confidence"] for c in res.citations] or ["V"], key=lambda c: RANK.get(c, 2))
    weak = ["%s [%s]" % (c["row"], c["confidence"]) for c in res.citations if c["confidence"] != "V"]
    if weak:
        res.warnings.append("this verdict rests on %s rows: %s" % (
            "unverified (U)" if res.confidence == "U" else "secondary (S)", "; ".join(dedupe(weak))))
    if _options:
        add_options(run, res, kinds, resolve)
    return res


def _machine(mx: Matrix, gpu: Optional[str], cc: Optional[str], driver: Optional[str], python: Optional[str],
             prefer_python: Optional[str], arch: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str],
                                                                      Optional[str], Optional[str], Optional[str],
                                                                      str, List[str]]:
    """The machine as :func:`resolve` takes it, checked and normalised: (gpu row of gpus.toml or None,
    compute capability, driver, Python minor, preferred minor, "x86_64"/"aarch64", notes on the
    architecture). Raises ResolveError for an unknown GPU name or compute capability, a --gpu/--cc
    mismatch, a malformed driver/Python, an unsupported architecture."""
    gpu_row = None
    if gpu:
        gpu_row = mx.gpu(gpu)
        if gpu_row is None:
            raise ResolveError("--gpu %s: unknown GPU name; pass its compute capability instead, e.g. --cc 9.0 "
                               "(nvidia-smi --query-gpu=compute_cap --format=csv)" % gpu)
    typed, cc = cc, parse_cc(cc) if cc else None
    known = mx.compute_capabilities()
    if cc and known and cc not in known:  # a typo (99.9, 8.5) resolves nothing real
        raise ResolveError("--cc %s: no NVIDIA GPU has compute capability %s (those shipped: %s); pass the GPU's "
                           "own, e.g. 9.0 for H100/H200 (nvidia-smi --query-gpu=compute_cap --format=csv), or "
                           "--gpu NAME" % (typed, cc, ", ".join(known)))
    if gpu_row is not None:
        if cc and cc != str(gpu_row["cc"]):
            raise ResolveError("--gpu %s has compute capability %s but --cc %s was given; pass one of them"
                               % (gpu, gpu_row["cc"], cc))
        cc = str(gpu_row["cc"])
    driver = parse_driver(driver) if driver else None
    python = parse_python(python) if python else None
    prefer = parse_python(prefer_python) if prefer_python else None
    arch_note: List[str] = []
    implied = str((gpu_row or {}).get("host_arch") or "")
    if arch is None:
        arch = implied or "x86_64"
        if implied:
            arch_note.append("%s sits on an Arm host (gpus.toml host_arch): resolved for Linux %s" % (gpu, arch))
    arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(str(arch).lower(), str(arch).lower())
    if arch not in ("x86_64", "aarch64"):
        raise ResolveError("--arch %s: not a supported machine architecture; choose x86_64 or aarch64" % arch)
    if implied and arch != implied:
        arch_note.append("%s GPUs sit on %s hosts, but --arch %s was given" % (gpu, implied, arch))
    return gpu_row, cc, driver, python, prefer, arch, arch_note


def _tidy(res: Resolution) -> None:
    """Problems, warnings and citations once each; the notes on what the machine did not say
    (driver, GPU)."""
    res.problems, res.warnings = dedupe(res.problems), dedupe(res.warnings)
    seen, cites = set(), []
    for c in res.citations:
        if (c["choice"], c["row"]) not in seen:
            seen.add((c["choice"], c["row"]))
            cites.append(c)
    res.citations = cites
    if not res.driver and res.min_driver:
        res.notes.insert(0, "driver not given: this stack needs >= %s (>= %s through minor-version compatibility)"
                         % (res.min_driver, res.min_driver_compat))
    if not res.cc:
        res.notes.insert(0, "GPU not given: compute capability coverage was not checked")


def choose_stack(run: Run, res: Resolution) -> set:
    """Pick the backend release and Python (module doc, steps 1-6); return the problem kinds."""
    mx = run.mx
    cands, extras = backend_candidates(run)
    if not cands:
        spec, gate, _ = backend_spec(run)
        res.problems.append("no recorded %s release satisfies verl %s's requirement %s%s" % (
            bname(run), run.verl, spec or "", " and runtime gate %s" % gate if gate else ""))
        return {"data"}
    first_fail: Optional[Dict[str, Any]] = None
    py_blocked: List[Tuple[str, str]] = []  # (backend version, why no Python fits)
    chosen = None
    for bv in cands:
        pys, why = pythons(run, bv, extras)
        if run.python and run.python not in pys:
            py_blocked.append((bv, why.get(run.python) or "no recorded release fits it"))
            continue
        if not pys:
            py_blocked.append((bv, "; ".join(dedupe(why.values()))))
            continue
        py, _ = pick_python(run, pys)
        ev = evaluate(run, bv, extras, py)
        ev["pys"] = pys
        if not ev["fail"]:
            chosen = ev
            break
        if first_fail is None or (first_fail["kinds"] & {"conflict"} and not ev["kinds"] & {"conflict"}):
            first_fail = ev
    kinds: set = set()
    if chosen is None and first_fail is None and run.python and py_blocked:
        # the asked-for Python is the obstacle: show what a fitting Python gets, and say why not
        alt = Run(mx, run.verl, run.backend, run.driver, run.cc, run.gpu, None, None, run.build, run.arch)
        fits: List[str] = []
        for bv in cands:
            pys, _ = pythons(alt, bv, extras)
            if not pys:
                continue
            fits = fits or pys
            ev = evaluate(alt, bv, extras, pick_python(alt, pys)[0])
            ev["pys"] = pys
            if not ev["fail"]:
                chosen = ev
                fits = pys
                break
            first_fail = first_fail or ev
        if fits:
            res.problems.append("Python %s does not fit: %s; Python %s do%s" % (
                run.python, py_blocked[0][1], ", ".join(fits), "es" if len(fits) == 1 else ""))
            kinds.add("python")
    if chosen is None:
        ev = first_fail
        if ev is None:
            res.problems.append("no Python minor fits verl %s with %s %s: %s" % (
                run.verl, bname(run), py_blocked[0][0], py_blocked[0][1]))
            return kinds | {"python"}
        fill(run, ev, res)
        return kinds | set(ev["kinds"])
    fill(run, chosen, res)
    bv = chosen["bv"]
    spec, gate, _ = backend_spec(run)
    meta_src = run.meta.get("source", "")
    if spec is not None:
        cite({"citations": res.citations}, run.backend, bv, "metadata/verl.json verl==%s [%s] requires %s%s" % (
            run.verl, run.extra or "base", run.backend, spec), meta_src, "V")
    if gate is not None:
        cite({"citations": res.citations}, run.backend, bv, "verl.toml release %s vllm_runtime %s" % (run.verl, gate),
              run.row["source"], run.row.get("confidence", "V"))
    if len(cands) > 1 and bv != cands[0]:
        res.notes.append("%s %s is the newest release in range that fits; newer ones in range do not (%s)" % (
            bname(run), bv, ", ".join(c for c in cands[:cands.index(bv)])))
    for r in known_bad_rows(run, bv):
        res.warnings.append("%s (%s)" % (r["reason"], r["source"]))
    skipped = [c for c in cands if c != bv and known_bad_rows(run, c) and Version(c) > Version(bv)]
    if skipped:
        rows = dedupe("%s: %s (%s)" % (r["id"], r["reason"], r["source"]) for c in skipped for r in known_bad_rows(run, c))
        res.notes.append("%s %s is in verl %s's range but known-bad, so it was not chosen: %s" % (
            bname(run), ", ".join(skipped), run.verl, "; ".join(rows)))
    parts = ["verl %s" % run.meta["requires_python"]] if run.meta.get("requires_python") else []
    parts.append("%s %s" % (bname(run), (mx.meta(run.backend, bv) or {}).get("requires_python") or "any"))
    parts.append("torch wheels %s" % ", ".join((mx.torch_python(chosen["torch"]) or {}).get("python", [])))
    py_src = "; ".join(parts)
    cite({"citations": res.citations}, "python", chosen["python"], "fits %s; chosen as %s" % (
        py_src, pick_python(run, chosen["pys"])[1]), "metadata/*.json Requires-Python; wheels.toml torch_python", "V")
    return kinds | set(chosen["kinds"])
