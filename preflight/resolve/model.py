"""The answer's shape (:class:`Resolution`), the input error and the parsers of the machine facts."""

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional



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
        arch: the machine architecture the stack is for ("x86_64" or "aarch64"; Linux).
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
    arch: str = "x86_64"

    @property
    def vllm(self) -> Optional[str]:
        """The vLLM version when the backend is vLLM."""
        return self.backend_version if self.backend == "vllm" else None

    @property
    def sglang(self) -> Optional[str]:
        """The SGLang version when the backend is SGLang."""
        return self.backend_version if self.backend == "sglang" else None

    @property
    def verdict(self) -> str:
        """One word for the answer: "works" (a stack fits and pip's resolver proved its install
        line), "unproven" (it fits by the matrix, but no proof of its install line exists),
        "does not install" (pip's resolver refused the install line) or "no stack"."""
        status = (self.proof or {}).get("status")
        if status == "failed":
            return "does not install"
        if not self.ok:
            return "no stack"
        return "works" if status == "proven" else "unproven"

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of every field (plus ``vllm``/``sglang`` and ``verdict``)."""
        d = asdict(self)
        d["vllm"], d["sglang"], d["verdict"] = self.vllm, self.sglang, self.verdict
        return d


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
        if re.match(r"^(?:python|py|cp)?[12]\.?\d{1,2}(\.\d+)?$", str(text).strip().lower()):
            raise ResolveError("--python %s: Python 2 runs no verl release (each needs Python 3); pass a 3.x "
                               "version, e.g. 3.12" % text)
        raise ResolveError("--python %s: not a CPython version; pass major.minor, e.g. 3.12" % text)
    return "%s.%s" % (m.group(1), int(m.group(2)))
