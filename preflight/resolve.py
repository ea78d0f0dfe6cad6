"""Resolve the stack that runs a verl release on a given machine, from the matrix alone.

:func:`resolve` is pure: the machine facts (NVIDIA driver, compute capability or GPU name,
Python minor) come in as arguments, and every choice comes from a matrix row, which the
:class:`Resolution` cites. ``preflight resolve`` fills the arguments from this machine;
``spec``, ``install`` and ``image`` build on the same API.

How a stack is chosen (all for CPython on Linux x86_64):

1. verl's metadata fixes the rollout backend's range (the backend extra's requirement, narrowed
   by the runtime gate in verl.toml); its candidates are the recorded releases in that range,
   newest first, with known-bad releases (known_bad.toml) last.
2. Each candidate's own metadata pins torch; verl's pin, when it has one, must agree, and every
   dependency both verl and the backend constrain (transformers, ray, numpy...) must admit a
   common version.
3. Python: the minors that verl, the backend, the backend's wheels and torch's wheels all
   admit; an explicit ``python`` must be among them.
4. The torch CUDA variant: one of the torch series' variants whose CUDA major equals the
   backend wheel's (libcudart.so.12 vs .so.13), whose arch list covers the GPU's compute
   capability, and whose CUDA the driver runs; natively preferred, then minor-version
   compatibility (a warning), the plain PyPI build preferred on a tie.
5. The backend's PyPI wheel: its CUDA must run on the driver and compile for the GPU, and the GPU
   must be at or above the backend's floor.
6. flash-attn: verl's pin or the newest release with a prebuilt wheel for (torch major.minor,
   CUDA major, Python, C++ ABI, GPU arch); otherwise a source build, with the reason.

The first candidate that passes is chosen; when none does, the newest candidate is reported
with its problems, and :attr:`Resolution.options` lists the nearest fixes (a driver upgrade, a
Python minor, another verl release or backend, another published build of the backend).
"""

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .hw import arch_covers, driver_supports_gpu, driver_tuple, sm_list
from .matrix import AnySpec, Matrix

__all__ = ["resolve", "Resolution", "ResolveError", "parse_driver", "parse_cc", "parse_python"]

_RANK = {"V": 0, "S": 1, "U": 2}
_WORD = {"V": "primary", "S": "secondary", "U": "unverified"}


class ResolveError(ValueError):
    """Bad input to :func:`resolve` (unknown verl release, malformed driver, compute capability or
    Python, unknown GPU name); the message is one line naming the input and the fix."""


@dataclass
class Resolution:
    """The stack that runs ``verl`` with ``backend`` on the given machine, or why none does.

    Versions are strings; ``None`` means not chosen (or not applicable). Every list of strings
    holds one-line sentences.

    Attributes:
        verl, backend: the release and rollout backend ("vllm" or "sglang") asked for.
        ok: True when a stack works (warnings allowed), False when none does.
        python: the chosen CPython minor ("3.12"); python_requested: the minor asked for, if any.
        torch: exact torch version; variant: its CUDA variant ("cu130"); cuda: that variant's CUDA;
            index_url: the download.pytorch.org index serving that variant; torch_from_pypi: the
            plain PyPI wheel is that variant (no extra index needed).
        backend_version: exact vLLM or SGLang version; backend_cuda: CUDA its PyPI wheel is built
            with; torchvision, torchaudio: the versions pinned alongside torch.
        flash_attn: {"version", "status": "wheel" | "source build" | "unsupported", "wheel", "url",
            "reason", "source", "confidence"}.
        transformers, tensordict, ray: combined specifiers from verl's and the backend's metadata.
        requirements: pip requirement strings (top-level pins) in install order.
        index_urls: pip --index-url values ([] = the configured default, PyPI);
            extra_index_urls: pip --extra-index-url values.
        driver, cc, gpu: the machine facts used (None = unknown, not checked).
        min_driver: the lowest driver that runs the whole stack natively; min_driver_compat: the
            lowest that runs it through CUDA minor-version compatibility.
        citations: [{"choice", "value", "row", "source", "confidence"}] for each choice and check.
        confidence: the lowest confidence (V, S, U) among the cited rows the verdict rests on.
        problems: why no stack works; warnings: what works but is risky; options: nearest fixes;
            notes: documented pitfalls of the chosen releases.
        images: official verl images for this release and backend (images.toml), each with
            whether the driver runs its CUDA.
        bounds: works-with bounds (bounds.toml) added to the requirements: {"id", "package",
            "spec", "reason", "source", "confidence"}.
        proof: how the stack was proven to install (see :mod:`preflight.proofs`): {"status":
            "proven" | "failed" | "unproven" | "not recorded", "resolver", "python", "platform_tags",
            "glibc", "date", "file", "reason"}.
        commands: for each entry of ``options``, the exact ``preflight resolve`` command that selects it.
    """

    verl: str
    backend: str
    ok: bool = False
    python: Optional[str] = None
    python_requested: Optional[str] = None
    torch: Optional[str] = None
    variant: Optional[str] = None
    cuda: Optional[str] = None
    index_url: Optional[str] = None
    torch_from_pypi: bool = False
    backend_version: Optional[str] = None
    backend_cuda: Optional[str] = None
    torchvision: Optional[str] = None
    torchaudio: Optional[str] = None
    flash_attn: Dict[str, Any] = field(default_factory=dict)
    transformers: Optional[str] = None
    tensordict: Optional[str] = None
    ray: Optional[str] = None
    requirements: List[str] = field(default_factory=list)
    index_urls: List[str] = field(default_factory=list)
    extra_index_urls: List[str] = field(default_factory=list)
    driver: Optional[str] = None
    cc: Optional[str] = None
    gpu: Optional[str] = None
    min_driver: Optional[str] = None
    min_driver_compat: Optional[str] = None
    citations: List[Dict[str, str]] = field(default_factory=list)
    confidence: str = "V"
    problems: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    options: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    images: List[Dict[str, Any]] = field(default_factory=list)
    bounds: List[Dict[str, Any]] = field(default_factory=list)
    backend_build: Optional[str] = None
    proof: Dict[str, Any] = field(default_factory=dict)
    commands: List[str] = field(default_factory=list)

    @property
    def vllm(self) -> Optional[str]:
        """The vLLM version when the backend is vLLM."""
        return self.backend_version if self.backend == "vllm" else None

    @property
    def sglang(self) -> Optional[str]:
        """The SGLang version when the backend is SGLang."""
        return self.backend_version if self.backend == "sglang" else None

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of every field (plus ``vllm``/``sglang``)."""
        d = asdict(self)
        d["vllm"], d["sglang"] = self.vllm, self.sglang
        return d


# ---- input parsing --------------------------------------------------------------------------
def parse_driver(text: str) -> str:
    """``"580.65.06"`` (or ``"580.65"``) -> the same string; raises ResolveError otherwise, a bare
    branch (``"580"``) included: branches span minimums (580.65.06 runs CUDA 13.0, 580.28 did not)."""
    t = str(text).strip()
    if not re.match(r"^\d{3}(\.\d{1,3}){1,2}$", t):
        raise ResolveError("--driver %s: not a full NVIDIA driver version; pass it as nvidia-smi prints it, "
                           "e.g. 580.65.06 (nvidia-smi --query-gpu=driver_version --format=csv)" % text)
    return t


def parse_cc(text: str) -> str:
    """``"9.0"`` / ``"sm_90"`` / ``"12.0"`` -> ``"X.Y"``; raises ResolveError otherwise."""
    t = str(text).strip().lower()
    m = re.match(r"^(?:sm_?)?(\d{1,2})(\d)$", t) if "." not in t else re.match(r"^(\d{1,2})\.(\d)$", t)
    if not m:
        raise ResolveError("--cc %s: not a compute capability; pass major.minor, e.g. 9.0 "
                           "(nvidia-smi --query-gpu=compute_cap --format=csv)" % text)
    return "%d.%d" % (int(m.group(1)), int(m.group(2)))


def parse_python(text: str) -> str:
    """``"3.12"`` / ``"3.12.4"`` / ``"python3.12"`` -> ``"3.12"``; raises ResolveError otherwise."""
    m = re.match(r"^(?:python|py|cp)?(3)\.?(\d{1,2})(\.\d+)?$", str(text).strip().lower())
    if not m:
        raise ResolveError("--python %s: not a CPython version; pass major.minor, e.g. 3.12" % text)
    return "%s.%s" % (m.group(1), int(m.group(2)))


# ---- requirement handling -------------------------------------------------------------------
_ENV = {"implementation_name": "cpython", "os_name": "posix", "platform_machine": "x86_64",
        "platform_system": "Linux", "sys_platform": "linux", "platform_python_implementation": "CPython",
        "platform_release": "", "platform_version": ""}
_REQ_CACHE: Dict[Tuple[int, str, str, Tuple[str, ...], str], List[Requirement]] = {}


def _env(py: str, extra: str = "") -> Dict[str, str]:
    env = dict(_ENV)
    env.update(python_version=py, python_full_version=py + ".0", implementation_version=py + ".0", extra=extra)
    return env


def _applies(req: Requirement, extras: Iterable[str], py: str) -> bool:
    if req.marker is None:
        return True
    try:
        if "extra" not in str(req.marker):
            return req.marker.evaluate(_env(py))
        return any(req.marker.evaluate(_env(py, e)) for e in extras)
    except (InvalidMarker, ValueError, TypeError):
        return False


def _reqs(mx: Matrix, pkg: str, version: str, extras: Sequence[str], py: str) -> List[Requirement]:
    """Requirements of ``pkg==version`` with ``extras`` (self-referencing extras expanded) that
    apply on CPython ``py``, Linux x86_64. [] when the release has no recorded metadata."""
    key = (id(mx), canonicalize_name(pkg), version, tuple(sorted(extras)), py)
    if key in _REQ_CACHE:
        return _REQ_CACHE[key]
    row = mx.meta(pkg, version) or {}
    parsed = []
    for line in row.get("requires_dist") or []:
        try:
            parsed.append(Requirement(line))
        except InvalidRequirement:
            continue
    me = canonicalize_name(pkg)
    wanted = {canonicalize_name(e) for e in extras if e}
    while True:
        more = set()
        for r in parsed:
            if canonicalize_name(r.name) == me and _applies(r, wanted, py):
                more |= {canonicalize_name(x) for x in r.extras}
        if more <= wanted:
            break
        wanted |= more
    out = [r for r in parsed if canonicalize_name(r.name) != me and _applies(r, wanted, py)]
    _REQ_CACHE[key] = out
    return out


def _named(reqs: Iterable[Requirement], name: str) -> List[Requirement]:
    n = canonicalize_name(name)
    return [r for r in reqs if canonicalize_name(r.name) == n]


def _exact(reqs: Iterable[Requirement], name: str) -> Optional[str]:
    """The version an ``==`` pin among ``reqs`` on ``name`` fixes, else None."""
    for r in _named(reqs, name):
        for s in r.specifier:
            if s.operator in ("==", "===") and "*" not in s.version:
                return s.version
    return None


def _joint(specs: Sequence[SpecifierSet], known: Sequence[str] = ()) -> Optional[str]:
    """A version every one of ``specs`` admits (tried: ``known`` versions and each bound and just
    above it), or None when they cannot all hold."""
    points = list(known) + ["0.0.1", "99999"]
    for spec in specs:
        for s in spec:
            v = s.version.replace(".*", "")
            points += [v, v + ".0.1", v + ".1"]
    for p in points:
        try:
            pv = Version(p)
        except InvalidVersion:
            continue
        if all(spec.contains(pv, prereleases=True) for spec in specs):
            return str(pv)
    return None


def _spec_text(reqs: Iterable[Requirement]) -> Optional[str]:
    """Readable combined specifier of several requirements on one package (an ``==`` wins)."""
    specs = []
    for r in reqs:
        for s in r.specifier:
            if s.operator == "==" and "*" not in s.version:
                return "==" + s.version
            if str(s) not in specs:
                specs.append(str(s))
    return ",".join(sorted(specs, key=lambda x: (x.lstrip("<>=!~"), x))) if specs else ""


def _py_ok(spec: Optional[str], minor: str) -> bool:
    if not spec:
        return True
    try:
        s = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    return Version(minor + ".0") in s or Version(minor + ".99") in s


# ---- the resolver ---------------------------------------------------------------------------
class _Run:
    """State of one resolution: the inputs, the verl row, and the chosen/observed facts."""

    def __init__(self, mx: Matrix, verl: str, backend: str, driver: Optional[str], cc: Optional[str],
                 gpu: Optional[str], python: Optional[str], prefer: Optional[str], build: Optional[str] = None):
        self.mx, self.verl, self.backend, self.build = mx, verl, backend, build
        self.driver, self.cc, self.gpu, self.python, self.prefer = driver, cc, gpu, python, prefer
        self.row = mx.verl(verl) or {}
        self.meta = self.row.get("_meta") or {}
        self.extra = (self.row.get("backend_extras") or {}).get(backend)
        self.minors = sorted({m for r in mx.curated["wheels"].get("torch_python", []) for m in r["python"]},
                             key=Version)


def _cite(ev: Dict[str, Any], choice: str, value: Any, row: str, source: str, conf: str) -> None:
    ev["citations"].append({"choice": choice, "value": str(value), "row": row, "source": source,
                            "confidence": conf or "V"})


def _verl_reqs(run: _Run, py: str) -> List[Requirement]:
    return _reqs(run.mx, "verl", run.verl, [run.extra] if run.extra else [], py)


def _backend_spec(run: _Run) -> Tuple[Optional[SpecifierSet], Optional[AnySpec], List[str]]:
    """(specifier from verl's requirement, runtime gate, extras verl asks of the backend)."""
    py = run.minors[-1]
    reqs = _named(_verl_reqs(run, py), run.backend)
    spec = SpecifierSet(",".join(str(r.specifier) for r in reqs if str(r.specifier))) if reqs else None
    extras = sorted({e for r in reqs for e in r.extras})
    gate = None
    if run.backend == "vllm" and run.row.get("vllm_runtime"):
        gate = AnySpec(str(run.row["vllm_runtime"]))
    return spec, gate, extras


def _candidates(run: _Run) -> Tuple[List[str], List[str]]:
    """(candidate backend versions, newest first and known-bad ones last; extras verl asks of the backend)."""
    spec, gate, extras = _backend_spec(run)
    good, bad, unproven = [], [], []
    failed = getattr(run, "failed_proofs", {}) or {}
    for v in reversed(run.mx.versions(run.backend)):
        pv = Version(v)
        if spec is not None and not spec.contains(pv, prereleases=True):
            continue
        if gate is not None and pv not in gate:
            continue
        (unproven if v in failed else bad if _known_bad(run, v) else good).append(v)
    return good + bad + unproven, extras


def _known_bad(run: _Run, version: str) -> List[Dict[str, Any]]:
    out = []
    for r in run.mx.known_bad():
        if canonicalize_name(r["package"]) != run.backend or r.get("prerelease_only") or r.get("env"):
            continue  # env rows judge a run-time setting, not the stack
        if not SpecifierSet(str(r["versions"])).contains(Version(version), prereleases=True):
            continue
        when = r.get("when") or {}
        if "verl" in when and not SpecifierSet(str(when["verl"])).contains(Version(run.verl), prereleases=True):
            continue
        out.append(r)
    return out


def _torch_pin(run: _Run, bv: str, extras: List[str], py: str) -> Tuple[Optional[str], Optional[str], List[str]]:
    """(torch version, where it comes from, conflicts) for backend ``bv`` on Python ``py``."""
    b_reqs = _reqs(run.mx, run.backend, bv, extras, py)
    v_reqs = _verl_reqs(run, py)
    bt, vt = _exact(b_reqs, "torch"), _exact(v_reqs, "torch")
    if bt and vt and Version(bt) != Version(vt):
        return None, None, ["%s %s pins torch==%s but verl %s pins torch==%s" % (_bname(run), bv, bt, run.verl, vt)]
    if bt:
        return bt, "%s==%s" % (run.backend, bv), []
    if vt:
        return vt, "verl==%s" % run.verl, []
    return None, None, ["neither %s %s nor verl %s pins torch" % (_bname(run), bv, run.verl)]


def _bname(run: _Run) -> str:
    return {"vllm": "vLLM", "sglang": "SGLang"}.get(run.backend, run.backend)


def _pythons(run: _Run, bv: str, extras: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """(CPython minors every part admits, oldest first; minor -> why it was dropped)."""
    mx = run.mx
    verl_rp = run.meta.get("requires_python")
    b_rp = (mx.meta(run.backend, bv) or {}).get("requires_python")
    tags = mx.backend_python_tags(run.backend, bv)
    ok: List[str] = []
    why: Dict[str, str] = {}
    for m in run.minors:
        if not _py_ok(verl_rp, m):
            why[m] = "verl %s needs Python %s" % (run.verl, verl_rp)
            continue
        if not _py_ok(b_rp, m):
            why[m] = "%s %s needs Python %s" % (_bname(run), bv, b_rp)
            continue
        if tags and m not in tags["python"]:
            why[m] = "%s %s has wheels for Python %s only%s" % (_bname(run), bv, ", ".join(tags["python"]), _flag(tags))
            continue
        t, _, _ = _torch_pin(run, bv, extras, m)
        if t is None:
            why[m] = "no torch pin"
            continue
        trow = mx.torch_python(t)
        if not _py_ok((mx.meta("torch", t) or {}).get("requires_python"), m) or (trow and m not in trow["python"]):
            why[m] = "torch %s has wheels for Python %s only" % (t, ", ".join(trow["python"]) if trow else "?")
            continue
        ok.append(m)
    return ok, why


def _pick_python(run: _Run, pys: List[str]) -> Tuple[str, str]:
    """(minor, why) among admissible ``pys``: the one asked for, else this interpreter's, else the
    release's image Python, else the newest."""
    if run.python in pys:
        return run.python, "asked for"
    if run.prefer in pys:
        return run.prefer, "this interpreter's minor"
    img = str(run.row.get("image_python") or "")
    if img in pys:
        return img, "the Python of verl %s's official image (verl.toml image_python)" % run.verl
    docs = str(run.row.get("docs_python") or "")
    if docs in pys:
        return docs, "the Python of verl's install docs (verl.toml docs_python%s)" % (
            ", [%s]" % run.row["docs_python_confidence"] if run.row.get("docs_python_confidence") else "")
    return pys[-1], "the newest minor every part supports"


def _driver_status(mx: Matrix, driver: Optional[str], cuda: str) -> Dict[str, Any]:
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


_sm_list = sm_list


def _variants(run: _Run, t: str, b_major: Optional[int]) -> List[Dict[str, Any]]:
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
        ev = {"variant": name, "cuda": cuda, "index": vrow.get("index"), "pypi": name == series.get("pypi"),
              "row": vrow, "arch": arch, "fails": [], "drv": _driver_status(mx, run.driver, cuda)}
        if b_major is not None and int(cuda.split(".")[0]) != b_major:
            ev["fails"].append("major")
        if run.cc:
            covered, how = arch_covers(run.cc, _sm_list(arch, ptx))
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


def _backend_cuda(run: _Run, bv: str, t: str) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
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


def _gpu_checks(run: _Run, bv: str, bcuda: Optional[str], ev: Dict[str, Any]) -> None:
    """Backend floor and the backend wheel's toolkit against the GPU's compute capability."""
    mx, cc = run.mx, run.cc
    if not cc:
        return
    floor = mx.backend_gpu_floor(run.backend, bv)
    highest = max([Version(str(r["min_cc"])) for r in mx.curated[run.backend].get("gpu_floor", [])] or [Version("0")])
    if floor and Version(cc) < highest:  # only then could another floor row change the verdict
        _cite(ev, "%s GPU floor" % run.backend, ">= %s" % floor["min_cc"],
              "%s.toml gpu_floor %s" % (run.backend, floor["versions"]), floor["source"], floor["confidence"])
    if floor and Version(cc) < Version(str(floor["min_cc"])):
        _problem(ev, "arch", "%s %s supports compute capability >= %s; this GPU is %s%s" % (
            _bname(run), bv, floor["min_cc"], cc, _flag(floor)))
    if bcuda:
        need = mx.toolkit_arch(cc)
        if need and Version(bcuda) < Version(str(need["first_toolkit"])):
            _cite(ev, "toolkit for compute capability %s" % cc, ">= CUDA %s" % need["first_toolkit"],
                  "wheels.toml toolkit_arch %s" % need["cc"], need["source"], need["confidence"])
            _problem(ev, "arch", "%s %s's wheel is built with CUDA %s, which has no kernels for compute capability %s "
                                 "(first toolkit: CUDA %s)" % (_bname(run), bv, bcuda, cc, need["first_toolkit"]))
        sup = mx.arch_support(int(bcuda.split(".")[0]))
        if sup and Version(cc) < Version(str(sup["min_cc"])):
            _cite(ev, "CUDA %s architectures" % bcuda.split(".")[0], ">= %s" % sup["min_cc"],
                  "cuda.toml arch_support %s" % sup["major"], sup["source"], sup["confidence"])
            _problem(ev, "arch", "%s %s's wheel is built with CUDA %s, which dropped compute capability %s "
                                 "(needs >= %s)" % (_bname(run), bv, bcuda, cc, sup["min_cc"]))


def _flag(row: Optional[Dict[str, Any]]) -> str:
    conf = (row or {}).get("confidence", "V")
    return "" if conf == "V" else " [%s: %s row]" % (conf, _WORD[conf])


def _driver_text(d: Dict[str, Any]) -> str:
    if d["compat"] and d["compat"] != d["native"]:
        return "CUDA %s needs driver >= %s (>= %s through minor-version compatibility)" % (
            d["cuda"], d["native"] or "?", d["compat"])
    return "CUDA %s needs driver >= %s" % (d["cuda"], d["native"] or d["compat"] or "?")


def _problem(ev: Dict[str, Any], kind: str, text: str) -> None:
    ev["problems"].append(text)
    ev["kinds"].add(kind)
    ev["fail"] = True


def _conflicts(run: _Run, bv: str, v_reqs: List[Requirement], b_reqs: List[Requirement], ev: Dict[str, Any]) -> None:
    """Dependencies verl and the backend both constrain must admit a common version."""
    names = {canonicalize_name(r.name) for r in v_reqs} & {canonicalize_name(r.name) for r in b_reqs}
    for name in sorted(names - {"torch"}):
        specs = [r.specifier for r in _named(v_reqs, name) + _named(b_reqs, name)]
        if _joint(specs, run.mx.versions(name)) is None:
            vs, bs = _spec_text(_named(v_reqs, name)), _spec_text(_named(b_reqs, name))
            _problem(ev, "conflict", "verl %s requires %s%s but %s %s requires %s%s" % (
                run.verl, name, vs, _bname(run), bv, name, bs))


def _variant_problems(run: _Run, t: str, bv: str, bcuda: Optional[str], variants: List[Dict[str, Any]],
                      ev: Dict[str, Any]) -> None:
    """Why no CUDA variant of torch ``t`` fits: the GPU's arch, the backend wheel's CUDA major, or
    the driver (in that order of precedence)."""
    arch_ok = [v for v in variants if "arch" not in v["fails"]]
    if not arch_ok:
        _problem(ev, "arch", "no CUDA variant of torch %s has kernels for compute capability %s (%s)" % (
            t, run.cc, "; ".join("%s: %s" % (v["variant"], ", ".join(v["arch"])) for v in variants)))
        return
    same = [v for v in arch_ok if "major" not in v["fails"]]
    if same:
        _problem(ev, "driver", "driver %s is too old for torch %s %s: %s" % (
            run.driver, t, same[0]["variant"], _driver_text(same[0]["drv"])))
        return
    majors = sorted({v["cuda"].split(".")[0] for v in arch_ok})
    _problem(ev, "major", "%s %s's PyPI wheel is built with CUDA %s, but the torch %s builds that %s are "
                          "CUDA %s (%s)" % (
        _bname(run), bv, bcuda, t, "cover compute capability %s" % run.cc if run.cc else "this driver runs",
        "/".join(majors), ", ".join(v["variant"] for v in arch_ok)))
    for v in variants:
        if "arch" in v["fails"] and "major" not in v["fails"]:
            _problem(ev, "arch", "torch %s %s has no kernels for compute capability %s (built for %s)" % (
                t, v["variant"], run.cc, ", ".join(v["arch"])))


def _driver_checks(run: _Run, bv: str, bcuda: Optional[str], best: Dict[str, Any], ev: Dict[str, Any]) -> None:
    """The driver against the torch variant's and the backend wheel's CUDA: problems, warnings
    (minor-version compatibility), citations and the minimum drivers of the stack."""
    mx = run.mx
    rows = [best["drv"]]
    if bcuda:
        bd = _driver_status(mx, run.driver, bcuda)
        rows.append(bd)
        if bd["status"] == "too_old" and not ("driver" in ev["kinds"] and bcuda == best["cuda"]):
            _problem(ev, "driver", "driver %s is too old for %s %s's wheel: %s" % (
                run.driver, _bname(run), bv, _driver_text(bd)))
    for d in rows:
        if d["tk_row"]:
            tk = d["tk_row"]
            _cite(ev, "driver for CUDA %s" % d["cuda"], ">= %s" % d["native"], "cuda.toml toolkit %s" % tk["version"],
                  tk["source"], tk.get("confidence", "V"))
        if d["floor_row"] and d["status"] == "compat":
            fr = d["floor_row"]
            _cite(ev, "CUDA %s minor-version compatibility" % fr["major"], ">= %s" % d["compat"],
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
            _cite(ev, "driver for %s GPUs" % arow["arch"], ">= %s (R%s)" % (arow["first_driver"], arow["first_branch"]),
                  "cuda.toml arch_driver %s" % arow["arch"], arow["source"], arow.get("confidence", "V"))
        if arow is not None and arow.get("last_branch"):
            ev["max_branch"] = int(arow["last_branch"])
        if not ok:
            _problem(ev, "gpu-driver", why)
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


def _evaluate(run: _Run, bv: str, extras: List[str], py: str,
              bcuda_override: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Evaluate the stack with backend ``bv`` on Python ``py`` (module doc, steps 2, 4 and 5).

    ``bcuda_override``: another published build of the backend (a vllm.toml ``other`` entry) to
    judge instead of the PyPI wheel. Returns a dict: ``fail`` (bool), ``problems``, ``warnings``,
    ``kinds`` (problem kinds: conflict, arch, major, driver, compat, data), ``citations``, and the
    choices (``torch``, ``variant``, ``bcuda``, ``min_driver``...).
    """
    mx = run.mx
    ev: Dict[str, Any] = {"bv": bv, "python": py, "problems": [], "warnings": [], "citations": [], "kinds": set(),
                          "fail": False}
    v_reqs = _verl_reqs(run, py)
    b_reqs = _reqs(mx, run.backend, bv, extras, py)
    ev["b_reqs"], ev["v_reqs"] = b_reqs, v_reqs
    t, t_from, conflicts = _torch_pin(run, bv, extras, py)
    for c in conflicts:
        _problem(ev, "conflict", c)
    _conflicts(run, bv, v_reqs, b_reqs, ev)
    if ev["fail"]:
        return ev
    ev["torch"] = t
    pkg = t_from.split("==")[0]
    _cite(ev, "torch", t, "metadata/%s.json %s requires torch==%s" % (pkg, t_from, t),
          (mx.meta(pkg, t_from.split("==")[1]) or {}).get("source", ""), "V")
    # the backend wheel's CUDA (a build chosen with --backend-build replaces the PyPI wheel)
    if run.build and not bcuda_override:
        row = mx.backend_build(run.backend, bv) or {}
        pypi_variant = "cu%s" % str(row.get("cuda", "")).replace(".", "")
        if run.build != pypi_variant:
            found = [o for o in row.get("other") or [] if o.get("variant") == run.build]
            if not found:
                _problem(ev, "build", "%s %s has no recorded %s build (recorded: %s)" % (
                    _bname(run), bv, run.build, ", ".join([pypi_variant + " (PyPI)"] + [
                        str(o["variant"]) for o in row.get("other") or []])))
                return ev
            bcuda_override = dict(found[0], source=row["source"], versions=row["versions"],
                                  confidence=max(found[0].get("confidence", "S"), row.get("confidence", "V"),
                                                 key=lambda c: _RANK[c]))
            ev["backend_where"] = str(found[0]["where"]).format(version=bv)
    if bcuda_override:
        bcuda, brow = str(bcuda_override["cuda"]), bcuda_override
        label = "%s.toml build %s (%s)" % (run.backend, brow.get("versions", ""), brow.get("variant"))
    else:
        bcuda, brow = _backend_cuda(run, bv, t)
        label = "%s.toml build %s" % (run.backend, (brow or {}).get("versions", ""))
    ev["bcuda"] = bcuda
    if brow is not None:
        _cite(ev, "%s wheel CUDA" % run.backend, bcuda, label, brow["source"], brow.get("confidence", "S"))
    # the torch variant
    variants = _variants(run, t, int(bcuda.split(".")[0]) if bcuda else None)
    if not variants:
        _problem(ev, "data", "torch %s's series has no CUDA variant in the matrix" % t)
        return ev
    best = ev["variant"] = variants[0]
    vrow = best["row"]
    _cite(ev, "torch variant", best["variant"], "torch.toml variants.%s" % best["variant"], vrow.get("source", ""),
          vrow.get("confidence", "V"))
    if best["fails"]:
        _variant_problems(run, t, bv, bcuda, variants, ev)
    elif run.cc:
        _cite(ev, "torch arch list", best["arch_how"], "torch.toml variants.%s arch" % best["variant"],
              vrow.get("source", ""), vrow.get("confidence", "V"))
    # the backend wheel on this driver and GPU
    _gpu_checks(run, bv, bcuda, ev)
    _driver_checks(run, bv, bcuda, best, ev)
    return ev


def _flash_attn(run: _Run, ev: Dict[str, Any]) -> Dict[str, Any]:
    """The flash-attn choice for the evaluated stack (see the module doc, step 6)."""
    mx = run.mx
    fa = mx.flash_attn()
    t, variant = ev["torch"], ev["variant"]
    pin = None
    for line in run.meta.get("requires_dist") or []:
        try:
            r = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(r.name) == "flash-attn":
            pin = _exact([r], "flash-attn") or pin
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
            if run.cc and not arch_covers(run.cc, _sm_list(r["arch"], False))[0]:
                continue
            wheel = fa["wheel"].format(version=ver, cuda=name, torch=mm, abi="TRUE" if abi else "FALSE",
                                       py=ev["python"].replace(".", ""))
            return {"version": ver, "status": "wheel", "wheel": wheel,
                    "url": fa["url"].format(version=ver, wheel=wheel),
                    "reason": "prebuilt for torch %s, CUDA %s, Python %s, cxx11abi %s" % (
                        mm, cu_major, ev["python"], abi),
                    "source": r["source"] + "; " + abi_info[1]["source"],
                    "confidence": max(r["confidence"], abi_info[1]["confidence"], key=lambda c: _RANK[c])}
    # a source build of verl's pin, else of the newest release whose wheels are known
    known = [v for v in versions if any(str(r["version"]) == v and r["torch"] for r in releases)]
    ver = pin or (known or versions)[0]
    return {"version": ver, "status": "source build", "wheel": None, "url": None,
            "reason": "no prebuilt flash-attn %s wheel is recorded for torch %s + CUDA %s + Python %s + cxx11abi %s%s: "
                      "pip builds it from source (needs nvcc for CUDA %s, hours; pip install flash-attn==%s "
                      "--no-build-isolation)" % (ver, mm, cu_major, ev["python"], abi,
                                                 " on compute capability %s" % run.cc if run.cc else "", cu_major, ver),
            "source": fa["source"], "confidence": "V"}


def _stack_versions(run: _Run, ev: Dict[str, Any]) -> Dict[str, str]:
    """The chosen versions a bound's or known-bad row's ``when`` is judged against."""
    out = {"verl": run.verl, run.backend: ev["bv"]}
    if ev.get("torch"):
        out["torch"] = ev["torch"]
    return out


def _when_holds(when: Dict[str, Any], versions: Dict[str, str]) -> bool:
    """Every ``package -> specifier`` of ``when`` admits the stack's version (absent = False)."""
    for pkg, spec in (when or {}).items():
        have = versions.get(canonicalize_name(pkg))
        if have is None or Version(have) not in AnySpec(str(spec)):
            return False
    return True


def _apply_bounds(run: _Run, ev: Dict[str, Any], res: Resolution, both: List[Requirement]) -> None:
    """Add the works-with bounds (bounds.toml) that apply to the chosen stack to its specifiers;
    a bound no recorded release can meet together with the metadata is a conflict problem."""
    versions = _stack_versions(run, ev)
    for b in run.mx.bounds():
        if not _when_holds(b.get("when") or {}, versions):
            continue
        name = canonicalize_name(b["package"])
        res.bounds.append({"id": b["id"], "package": name, "spec": str(b["spec"]), "reason": b["reason"],
                           "source": b["source"], "confidence": b.get("confidence", "V")})
        _cite({"citations": res.citations}, "%s bound" % name, str(b["spec"]), "bounds.toml %s" % b["id"],
              b["source"], b.get("confidence", "V"))
        if name in ("transformers", "tensordict", "ray"):
            reqs = _named(both, name) + [Requirement(name + b2["spec"]) for b2 in res.bounds if b2["package"] == name]
            setattr(res, name, _spec_text(reqs))
            if _joint([r.specifier for r in reqs], run.mx.versions(name)) is None:
                res.problems.append("the works-with bound %s%s (%s) leaves no %s release that verl %s and %s %s "
                                    "admit (%s)" % (name, b["spec"], b["id"], name, run.verl, _bname(run), ev["bv"],
                                                    _spec_text(_named(both, name))))
                ev["fail"] = True
                ev["kinds"].add("conflict")


def _fill(run: _Run, ev: Dict[str, Any], res: Resolution) -> None:
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
    res.torchvision = _exact(both, "torchvision")
    res.torchaudio = _exact(both, "torchaudio")
    for name in ("transformers", "tensordict", "ray"):
        setattr(res, name, _spec_text(_named(both, name)))
    _apply_bounds(run, ev, res, both)
    if ev["fail"]:
        return
    res.flash_attn = _flash_attn(run, ev)
    fa = res.flash_attn
    _cite({"citations": res.citations}, "flash-attn", "%s (%s)" % (fa.get("version"), fa["status"]), "flash_attn.toml",
          fa["source"], fa["confidence"])
    if fa["status"] == "unsupported":
        res.warnings.append(fa["reason"])
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
    extras = sorted({e for r in _named(v_reqs, run.backend) for e in r.extras})
    reqs.append("%s%s==%s" % (run.backend, "[%s]" % ",".join(extras) if extras else "", res.backend_version))
    bounded = {b["package"] for b in res.bounds}
    for name in ("transformers", "tensordict", "ray"):
        rs = _named(both, name)
        if (rs or name in bounded) and getattr(res, name):
            ex = sorted({e for r in rs for e in r.extras})
            reqs.append("%s%s%s" % (name, "[%s]" % ",".join(ex) if ex else "", getattr(res, name)))
    for name in sorted(bounded - {"transformers", "tensordict", "ray"}):
        spec = _spec_text(_named(both, name) + [Requirement(name + b["spec"]) for b in res.bounds if b["package"] == name])
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
        res.notes.append("%s%s (%s)" % (n["text"], _flag(n), n["source"]))
    plat = mx.backend_platform(run.backend, res.backend_version)
    if plat:
        res.notes.append("%s %s's x86_64 wheel is %s: it needs glibc >= %s" % (
            _bname(run), res.backend_version, plat["tag"], plat["glibc"]))


def resolve(mx: Matrix, verl: str, backend: Optional[str] = None, driver: Optional[str] = None,
            cc: Optional[str] = None, gpu: Optional[str] = None, python: Optional[str] = None,
            prefer_python: Optional[str] = None, _options: bool = True,
            backend_build: Optional[str] = None) -> Resolution:
    """The stack that runs verl ``verl`` with ``backend`` on the described machine.

    Args:
        mx: the loaded matrix.
        verl: a verl release in the matrix ("0.9.1").
        backend: "vllm" or "sglang"; default vLLM when the release has it.
        driver: NVIDIA driver version ("580.65.06"); None = unknown (not checked; the
            Resolution's ``min_driver`` says what the stack needs).
        cc: compute capability ("9.0"); gpu: a GPU name ("H100"), used when ``cc`` is None.
            Both None = unknown (arch coverage not checked).
        python: a CPython minor ("3.12") the stack must use; None = any.
        prefer_python: a minor to prefer when it fits (the calling interpreter's), not required.
        backend_build: another published build of the backend to use instead of its PyPI wheel
            (a vllm.toml ``other`` variant, e.g. "cu129"); None = the PyPI wheel.
    Returns:
        A :class:`Resolution`; ``ok`` False with ``problems`` and ``options`` when no stack works.
    Raises:
        ResolveError: unknown verl release or GPU name, malformed driver / cc / Python, unknown
            backend name.
    """
    if mx.verl(verl) is None:
        raise ResolveError(mx.unknown_verl(verl))
    row = mx.verl(verl)
    gpu_row = None
    if gpu:
        gpu_row = mx.gpu(gpu)
        if gpu_row is None:
            raise ResolveError("--gpu %s: unknown GPU name; pass its compute capability instead, e.g. --cc 9.0 "
                               "(nvidia-smi --query-gpu=compute_cap --format=csv)" % gpu)
    cc = parse_cc(cc) if cc else None
    if gpu_row is not None:
        if cc and cc != str(gpu_row["cc"]):
            raise ResolveError("--gpu %s has compute capability %s but --cc %s was given; pass one of them"
                               % (gpu, gpu_row["cc"], cc))
        cc = str(gpu_row["cc"])
    driver = parse_driver(driver) if driver else None
    python = parse_python(python) if python else None
    prefer = parse_python(prefer_python) if prefer_python else None
    extras_map = row.get("backend_extras") or {}
    if backend is None:
        backend = "vllm" if "vllm" in extras_map else sorted(extras_map)[0]
    if backend not in ("vllm", "sglang"):
        raise ResolveError("--backend %s: not a rollout backend; choose vllm or sglang" % backend)
    if backend_build is not None and not re.match(r"^cu\d{3}$", str(backend_build)):
        raise ResolveError("--backend-build %s: not a CUDA build name; pass e.g. cu129" % backend_build)
    failed: Dict[str, str] = {}  # backend release -> why its recorded platform resolve failed
    while True:
        res = Resolution(verl=verl, backend=backend, driver=driver, cc=cc, gpu=gpu, python_requested=python)
        _cite({"citations": res.citations}, "verl", verl, "metadata/verl.json verl==%s" % verl,
              (row.get("_meta") or {}).get("source") or row["source"], "V")
        if gpu_row is not None:
            _cite({"citations": res.citations}, "compute capability", cc, "gpus.toml %s" % gpu,
                  "developer.nvidia.com/cuda-gpus", "V")
        run = _Run(mx, verl, backend, driver, cc, gpu, python, prefer, backend_build)
        run.failed_proofs = failed
        if backend not in extras_map:
            res.problems.append("verl %s has no %s rollout (its backends: %s)" % (
                verl, backend, ", ".join(sorted(extras_map))))
            kinds = {"backend"}
        else:
            kinds = _choose(run, res)
        res.problems, res.warnings = _dedupe(res.problems), _dedupe(res.warnings)
        seen, cites = set(), []
        for c in res.citations:
            if (c["choice"], c["row"]) not in seen:
                seen.add((c["choice"], c["row"]))
                cites.append(c)
        res.citations = cites
        if not driver and res.min_driver:
            res.notes.insert(0, "driver not given: this stack needs >= %s (>= %s through minor-version compatibility)"
                             % (res.min_driver, res.min_driver_compat))
        if not cc:
            res.notes.insert(0, "GPU not given: compute capability coverage was not checked")
        if not res.problems and res.requirements:
            _prove(run, res)
            bv = res.backend_version or ""
            if res.proof.get("status") == "failed" and bv and bv not in failed and len(failed) < 8 \
                    and _backend_owns(run, bv, res.proof.get("no_wheel") or res.proof.get("source_builds") or []):
                # pip cannot install this set because of a pin of this backend release: try the next one
                failed[bv] = res.problems[-1]
                continue
            if res.proof.get("status") == "failed":
                kinds = set(kinds) | {"proof"}
        break
    for bv, why in failed.items():
        if bv != res.backend_version:
            res.notes.append("%s %s was not chosen: %s" % (_bname(run), bv, why))
    res.ok = not res.problems
    _images(run, res)
    res.confidence = max([c["confidence"] for c in res.citations] or ["V"], key=lambda c: _RANK.get(c, 2))
    weak = ["%s [%s]" % (c["row"], c["confidence"]) for c in res.citations if c["confidence"] != "V"]
    if weak:
        res.warnings.append("this verdict rests on %s rows: %s" % (
            "unverified (U)" if res.confidence == "U" else "secondary (S)", "; ".join(_dedupe(weak))))
    if _options:
        _add_options(run, res, kinds)
    return res


def _dedupe(items: Iterable[str]) -> List[str]:
    out: List[str] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def _choose(run: _Run, res: Resolution) -> set:
    """Pick the backend release and Python (module doc, steps 1-6); return the problem kinds."""
    mx = run.mx
    cands, extras = _candidates(run)
    if not cands:
        spec, gate, _ = _backend_spec(run)
        res.problems.append("no recorded %s release satisfies verl %s's requirement %s%s" % (
            _bname(run), run.verl, spec or "", " and runtime gate %s" % gate if gate else ""))
        return {"data"}
    first_fail: Optional[Dict[str, Any]] = None
    py_blocked: List[Tuple[str, str]] = []  # (backend version, why no Python fits)
    chosen = None
    for bv in cands:
        pys, why = _pythons(run, bv, extras)
        if run.python and run.python not in pys:
            py_blocked.append((bv, why.get(run.python) or "no recorded release fits it"))
            continue
        if not pys:
            py_blocked.append((bv, "; ".join(_dedupe(why.values()))))
            continue
        py, _ = _pick_python(run, pys)
        ev = _evaluate(run, bv, extras, py)
        ev["pys"] = pys
        if not ev["fail"]:
            chosen = ev
            break
        if first_fail is None or (first_fail["kinds"] & {"conflict"} and not ev["kinds"] & {"conflict"}):
            first_fail = ev
    kinds: set = set()
    if chosen is None and first_fail is None and run.python and py_blocked:
        # the asked-for Python is the obstacle: show what a fitting Python gets, and say why not
        alt = _Run(mx, run.verl, run.backend, run.driver, run.cc, run.gpu, None, None)
        fits: List[str] = []
        for bv in cands:
            pys, _ = _pythons(alt, bv, extras)
            if not pys:
                continue
            fits = fits or pys
            ev = _evaluate(alt, bv, extras, _pick_python(alt, pys)[0])
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
                run.verl, _bname(run), py_blocked[0][0], py_blocked[0][1]))
            return kinds | {"python"}
        _fill(run, ev, res)
        return kinds | set(ev["kinds"])
    _fill(run, chosen, res)
    bv = chosen["bv"]
    spec, gate, _ = _backend_spec(run)
    meta_src = run.meta.get("source", "")
    if spec is not None:
        _cite({"citations": res.citations}, run.backend, bv, "metadata/verl.json verl==%s [%s] requires %s%s" % (
            run.verl, run.extra or "base", run.backend, spec), meta_src, "V")
    if gate is not None:
        _cite({"citations": res.citations}, run.backend, bv, "verl.toml release %s vllm_runtime %s" % (run.verl, gate),
              run.row["source"], run.row.get("confidence", "V"))
    if len(cands) > 1 and bv != cands[0]:
        res.notes.append("%s %s is the newest release in range that fits; newer ones in range do not (%s)" % (
            _bname(run), bv, ", ".join(c for c in cands[:cands.index(bv)])))
    for r in _known_bad(run, bv):
        res.warnings.append("%s (%s)" % (r["reason"], r["source"]))
    skipped = [c for c in cands if c != bv and _known_bad(run, c) and Version(c) > Version(bv)]
    if skipped:
        rows = _dedupe("%s: %s (%s)" % (r["id"], r["reason"], r["source"]) for c in skipped for r in _known_bad(run, c))
        res.notes.append("%s %s is in verl %s's range but known-bad, so it was not chosen: %s" % (
            _bname(run), ", ".join(skipped), run.verl, "; ".join(rows)))
    parts = ["verl %s" % run.meta["requires_python"]] if run.meta.get("requires_python") else []
    parts.append("%s %s" % (_bname(run), (mx.meta(run.backend, bv) or {}).get("requires_python") or "any"))
    parts.append("torch wheels %s" % ", ".join((mx.torch_python(chosen["torch"]) or {}).get("python", [])))
    py_src = "; ".join(parts)
    _cite({"citations": res.citations}, "python", chosen["python"], "fits %s; chosen as %s" % (
        py_src, _pick_python(run, chosen["pys"])[1]), "metadata/*.json Requires-Python; wheels.toml torch_python", "V")
    return kinds | set(chosen["kinds"])


def _backend_owns(run: _Run, bv: str, no_wheel: List[str]) -> bool:
    """Whether every package pip found no wheel for is pinned (with a specifier) by backend
    release ``bv`` itself, so that another release of the backend may avoid it; False when one
    comes from verl, a bound or elsewhere (then the Python or platform is the obstacle)."""
    if not no_wheel:
        return True  # a conflict without a named package: another release may resolve
    reqs = {canonicalize_name(r.name) for r in _reqs(run.mx, run.backend, bv, [], run.minors[-1]) if r.specifier}
    return all(canonicalize_name(re.split(r"[<>=!~ \[]", n)[0]) in reqs for n in no_wheel)


def _prove(run: _Run, res: Resolution) -> None:
    """Attach the recorded platform resolve of the chosen set (preflight.proofs) and check the
    resolved set against the matrix rules: works-with bounds and known-bad rows. A failed proof or
    a violated rule is a problem; a missing proof is a warning (the stack is unproven)."""
    from . import proofs

    p = proofs.lookup(res.requirements, res.python or "", res.extra_index_urls)
    res.proof = {k: v for k, v in p.items() if k != "installed"}
    if p["status"] == "failed":
        builds = p.get("no_wheel") or p.get("source_builds") or []
        res.problems.append("pip cannot install this set for CPython %s on %s with binary wheels only%s: %s (%s)" % (
            res.python, "manylinux (glibc %s)" % p.get("glibc"),
            "; no wheel for this platform: %s" % ", ".join(builds) if builds else "", (p.get("error") or "")[-600:],
            p.get("file")))
        return
    if p["status"] != "proven":
        res.warnings.append("not proven to install: %s" % p.get("reason"))
        return
    have = {canonicalize_name(k): v for k, v in p["installed"].items()}
    res.proof["packages"] = len(have)
    if p.get("source_builds"):
        res.warnings.append("pip builds %s from source (no wheel for this platform, only an sdist): %s" % (
            ", ".join(p["source_builds"]), p.get("reason") or p.get("resolver")))
    for b in run.mx.bounds():
        name = canonicalize_name(b["package"])
        if name in have and _when_holds(b.get("when") or {}, have) and Version(have[name]) not in AnySpec(str(b["spec"])):
            res.problems.append("the recorded resolve installs %s %s, outside the works-with bound %s%s (%s; %s)" % (
                name, have[name], name, b["spec"], b["reason"], b["source"]))
    for r in run.mx.known_bad():
        name = canonicalize_name(r["package"])
        if name not in have or r.get("env") or r.get("prerelease_only"):
            continue
        if Version(have[name]) in AnySpec(str(r["versions"])) and _when_holds(r.get("when") or {}, dict(have, verl=run.verl)):
            (res.problems if r.get("severity") == "fail" else res.warnings).append(
                "the recorded resolve installs %s %s: %s (%s)" % (name, have[name], r["reason"], r["source"]))


def _images(run: _Run, res: Resolution) -> None:
    for img in run.mx.images(run.verl, run.backend):
        st = _driver_status(run.mx, run.driver, str(img["cuda"])) if img.get("cuda") else {"status": "unknown"}
        res.images.append({"image": img["image"], "base": img.get("base"), "cuda": img.get("cuda"),
                           "python": img.get("python"), "torch": img.get("torch"),
                           "backend_version": img.get(run.backend) or "", "driver": st["status"],
                           "source": img["source"], "confidence": img["confidence"]})


def _summary(r: Resolution) -> str:
    return "%s %s with torch %s (%s), Python %s" % (
        {"vllm": "vLLM", "sglang": "SGLang"}[r.backend], r.backend_version, r.torch, r.variant, r.python)


def _cmd(run: _Run, **change: Any) -> str:
    """The ``preflight resolve`` command line for this machine with ``change`` applied (keys:
    verl, backend, driver, python, build); a value of None drops the flag."""
    import shlex

    v = {"verl": run.verl, "backend": run.backend, "driver": run.driver, "python": run.python, "build": run.build}
    v.update(change)
    parts = ["preflight", "resolve", "--verl", v["verl"]]
    if v["backend"] and v["backend"] != "vllm":
        parts += ["--backend", v["backend"]]
    if run.gpu:
        parts += ["--gpu", run.gpu]
    elif run.cc:
        parts += ["--cc", run.cc]
    if v["driver"]:
        parts += ["--driver", v["driver"]]
    if v["python"]:
        parts += ["--python", v["python"]]
    if v["build"]:
        parts += ["--backend-build", v["build"]]
    return " ".join(shlex.quote(str(p)) for p in parts)


def _opt(opts: List[Tuple[str, str]], text: str, cmd: str) -> None:
    if all(o[0] != text for o in opts):
        opts.append((text, cmd))


def _add_options(run: _Run, res: Resolution, kinds: set) -> None:
    """Nearest fixes (module doc): Python, driver, other builds of the backend, other verl releases,
    the other backend. Each is a resolution that works, re-run with one input changed; each option
    ends with the exact command that selects it (also in ``res.commands``)."""
    mx = run.mx
    opts: List[Tuple[str, str]] = []
    if "python" in kinds and res.python:
        _opt(opts, "use Python %s (e.g. uv venv -p %s): %s" % (res.python, res.python, _summary(res)),
             _cmd(run, python=res.python))
    if "proof" in kinds:
        for m in reversed(run.minors):
            if m == res.python:
                continue
            r = resolve(mx, run.verl, run.backend, run.driver, run.cc, None, m, None, _options=False,
                        backend_build=run.build)
            if r.ok and r.proof.get("status") == "proven":
                _opt(opts, "use Python %s, for which pip resolves the set with wheels: %s" % (m, _summary(r)),
                     _cmd(run, python=m))
                break
    if not (res.ok and not (kinds & {"compat"})):
        if run.driver and kinds & {"driver", "compat", "gpu-driver"}:
            r = resolve(mx, run.verl, run.backend, None, run.cc, None, run.python, run.prefer, _options=False,
                        backend_build=run.build)
            if r.ok and r.min_driver and driver_tuple(r.min_driver) > driver_tuple(run.driver):
                branch = mx.driver_branch(r.min_driver) or {}
                _opt(opts, "upgrade the NVIDIA driver to >= %s%s: %s" % (
                    r.min_driver, " (R%s branch or newer)" % branch["branch"] if branch else "", _summary(r)),
                    _cmd(run, driver=r.min_driver))
            elif r.ok and r.min_driver and "gpu-driver" in kinds:
                # the driver is past the GPU's last branch: the newest driver of that branch
                arow = [c for c in r.citations if c["row"].startswith("cuda.toml arch_driver")]
                _opt(opts, "install a driver of the last branch that supports this GPU (%s): %s" % (
                    "; ".join(p for p in res.problems if "last driver branch" in p)[:200] or "see problems",
                    _summary(r)), _cmd(run, driver=None))
                del arow
        if not res.ok and res.backend_version and kinds & {"driver", "major", "arch"} and not run.build:
            for text, build in _other_builds(run, res):
                _opt(opts, text, _cmd(run, build=build))
        if not res.ok:
            for text, v in _other_releases(run, res):
                _opt(opts, text, _cmd(run, verl=v, build=None))
            for other in sorted((run.row.get("backend_extras") or {})):
                if other == run.backend:
                    continue
                r = resolve(mx, run.verl, other, run.driver, run.cc, None, run.python, run.prefer, _options=False)
                if r.ok:
                    _opt(opts, "use --backend %s: %s%s" % (other, _summary(r), _caveat(r)),
                         _cmd(run, backend=other, build=None))
    res.options = ["%s; select it with: %s" % (t, c) for t, c in opts]
    res.commands = [c for _, c in opts]


def _caveat(r: Resolution) -> str:
    bits = []
    if any("minor-version compatibility" in w for w in r.warnings):
        bits.append("through minor-version compatibility")
    if r.confidence != "V":
        bits.append("rests on %s rows" % _WORD[r.confidence])
    if r.proof and r.proof.get("status") != "proven":
        bits.append("not proven to install: %s" % r.proof.get("status"))
    return " (%s)" % ", ".join(bits) if bits else ""


def _other_builds(run: _Run, res: Resolution) -> List[Tuple[str, str]]:
    """Other published builds of the chosen backend release (vllm.toml ``other``) that would run."""
    mx = run.mx
    row = mx.backend_build(run.backend, res.backend_version or "")
    out = []
    if not row:
        return out
    _, _, extras = _backend_spec(run)
    for other in row.get("other") or []:
        o = dict(other, source=row["source"], versions=row["versions"],
                 confidence=max(other.get("confidence", "S"), row.get("confidence", "V"), key=lambda c: _RANK[c]))
        ev = _evaluate(run, res.backend_version or "", extras, res.python or run.minors[-1], bcuda_override=o)
        if ev["fail"]:
            continue
        where = str(other["where"]).format(version=res.backend_version)
        if o["confidence"] != "V":
            where += "; [%s] published for some releases, not verified for this one" % o["confidence"]
        out.append(("use %s %s's %s build (%s) with torch %s from the %s index (%s)%s" % (
            _bname(run), res.backend_version, other["variant"], where, ev["torch"], ev["variant"]["variant"],
            ev["variant"]["index"],
            "; the driver runs it through minor-version compatibility" if ev["warnings"] else ""), str(other["variant"])))
    return out


def _other_releases(run: _Run, res: Resolution) -> List[Tuple[str, str]]:
    """The nearest other verl releases that work on this machine (a second one when the nearest
    needs minor-version compatibility or rests on S/U rows)."""
    mx = run.mx
    known = mx.verl_versions()
    here = known.index(run.verl)
    order = sorted((i for i in range(len(known)) if i != here), key=lambda i: (abs(i - here), i < here))
    out, clean = [], False
    for i in order:
        v = known[i]
        if run.backend not in (mx.verl(v) or {}).get("backend_extras", {}):
            continue
        r = resolve(mx, v, run.backend, run.driver, run.cc, None, run.python, run.prefer, _options=False)
        if not r.ok:
            continue
        cav = _caveat(r)
        if not out or (not clean and not cav):
            out.append(("use verl %s: %s%s" % (v, _summary(r), cav), v))
            clean = clean or not cav
        if clean or len(out) >= 2:
            break
    return out
