"""The compatibility matrix: data files in ``matrices/``, read-only accessors here.

Two kinds of data (see matrices/README.md):

* generated, ``matrices/metadata/<package>.json``: each release's Requires-Python and
  Requires-Dist as the package index serves them (``preflight matrix refresh``);
* curated, ``matrices/*.toml``: facts no metadata carries (CUDA toolkit to driver, GPU compute
  capabilities, torch CUDA variants and arch lists, verl key classes and runtime gates,
  known-bad versions), each row with ``source`` and ``confidence`` (V primary, S secondary,
  U unverified).

No version literal lives in check code: checks ask this module.
"""

import functools
import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import UsageError

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - exercised on 3.8-3.10
    import tomli as _toml  # type: ignore[no-redef]

__all__ = ["Matrix", "MatrixError", "UnknownRelease", "AnySpec", "load", "parse_version", "read_file", "read_data"]

CURATED = ("meta", "host", "gpus", "cuda", "torch", "verl", "known_bad", "modules", "signatures", "env", "nccl", "vllm",
           "sglang", "flash_attn", "images", "wheels", "base_images", "bounds")
#: Rollout backends with a curated file of ranged rows (see :meth:`Matrix.ranged`).
BACKENDS = ("vllm", "sglang")
GENERATED = ("verl", "vllm", "torch", "torchvision", "torchaudio", "sglang", "tensordict")


class MatrixError(ValueError):
    """A matrix file is missing or malformed; the message names the file and what to do."""


class UnknownRelease(UsageError):
    """A verl release the user named (``--verl``) that the matrix has no row for; the message
    names the matrix version and the known releases (:meth:`Matrix.unknown_verl`)."""


def parse_version(text: Optional[str]) -> Optional[Version]:
    """``Version(text)`` or None when ``text`` is empty or not PEP 440."""
    if not text:
        return None
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


class AnySpec:
    """A specifier with alternatives: ``"==0.5.4 || >=0.7.0"`` admits a version that any
    ``||``-separated :class:`SpecifierSet` admits (prereleases included, as verl's gates do).

    Raises InvalidSpecifier for a malformed part.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = [SpecifierSet(p.strip(), prereleases=True) for p in text.split("||")]

    def __contains__(self, version: Any) -> bool:
        v = version if isinstance(version, Version) else Version(str(version))
        return any(v in p for p in self.parts)

    def __str__(self) -> str:
        return self.text


def _default_dirs() -> List[str]:
    # No abspath: zipimport on Python 3.8 only answers for paths spelled like its archive path.
    here = os.path.dirname(__file__)
    pkg = os.path.dirname(here)
    return [os.path.join(pkg, "_matrices"), os.path.join(os.path.dirname(pkg), "matrices")]


def read_file(rel: str, directory: Optional[str]) -> Optional[bytes]:
    """Bytes of ``rel`` under the matrix directory: a given directory, the copy inside the
    zipapp (``preflight/_matrices``), or the source checkout's ``matrices/``."""
    if directory:
        path = os.path.join(directory, rel)
        if not os.path.exists(path):
            return None
        with open(path, "rb") as fh:
            return fh.read()
    from .. import __loader__ as pkg_loader  # type: ignore[attr-defined]

    for d in _default_dirs():
        path = os.path.join(d, rel)
        try:
            return pkg_loader.get_data(path)  # works for zipimport and plain files alike
        except (OSError, AttributeError):
            try:
                with open(path, "rb") as fh:
                    return fh.read()
            except OSError:
                continue
    return None


def read_data(rel: str, directory: Optional[str] = None) -> Optional[bytes]:
    """Bytes of the matrix data file ``rel`` (a ``/``-separated path under ``matrices/``, e.g.
    ``verl_rules.toml`` or ``verl_config/0.9.1.json``), from ``directory`` when given, else the
    zipapp's copy or the checkout's; None when the file is absent. Raises OSError only for a
    ``directory`` file that exists but cannot be read."""
    return read_file(os.path.join(*rel.split("/")), directory)


class Matrix:
    """All matrix data, loaded once. Construct with :func:`load`.

    Attributes:
        version: the matrix version string (matrices/meta.toml).
        curated: file stem -> parsed TOML dict.
        metadata: package -> version -> {"requires_python", "requires_dist", "source"}.
    """

    def __init__(self, curated: Dict[str, Dict[str, Any]], metadata: Dict[str, Dict[str, Dict[str, Any]]]):
        self.curated = curated
        self.metadata = metadata
        self.version = str(curated["meta"].get("version", "unknown"))

    # ---- generic -------------------------------------------------------------------------
    def meta(self, package: str, version: str) -> Optional[Dict[str, Any]]:
        """Generated metadata row of ``package==version``, or None when not recorded."""
        rel = self.metadata.get(canonicalize_name(package), {})
        if version in rel:
            return rel[version]
        pv = parse_version(version)
        if pv is None:
            return None
        for v, row in rel.items():
            if parse_version(v) == pv or (pv.local and parse_version(v) == Version(pv.public)):
                return row
        return None

    def versions(self, package: str) -> List[str]:
        """Recorded releases of ``package`` (generated metadata), oldest first."""
        vs = list(self.metadata.get(canonicalize_name(package), {}))
        return sorted(vs, key=lambda v: parse_version(v) or Version("0"))

    def requirements(self, package: str, version: str, extras: Sequence[str] = ()) -> List[Requirement]:
        """Requirements of ``package==version`` that apply with ``extras`` (markers other than
        ``extra`` are kept on the Requirement for the caller to evaluate against the target)."""
        row = self.meta(package, version)
        if not row:
            return []
        return requirements_for_extras(row.get("requires_dist") or [], extras)

    # ---- verl ----------------------------------------------------------------------------
    def verl_versions(self) -> List[str]:
        """Every verl release with a curated row, oldest first."""
        vs = [str(r["version"]) for r in self.curated["verl"].get("release", [])]
        return sorted(vs, key=Version)

    def unknown_verl(self, version: str, option: str = "--verl") -> str:
        """The one message for a verl release the matrix does not hold, given as ``option``."""
        return "%s %s: not a verl release in the matrix (%s); known: %s; pass one of them" % (
            option, version, self.version, ", ".join(self.verl_versions()))

    def require_verl(self, version: str, option: str = "--verl") -> Dict[str, Any]:
        """:meth:`verl`'s row of ``version``; raises :class:`UnknownRelease` (a UsageError) when
        the matrix has none."""
        row = self.verl(version)
        if row is None:
            raise UnknownRelease(self.unknown_verl(version, option))
        return row

    def verl(self, version: str) -> Optional[Dict[str, Any]]:
        """Curated row of verl ``version`` (merged with its metadata as ``_meta``), or None."""
        pv = parse_version(version)
        for r in self.curated["verl"].get("release", []):
            if pv is not None and Version(str(r["version"])) == Version(pv.public):
                row = dict(r)
                row["_meta"] = self.meta("verl", str(r["version"])) or {}
                return row
        return None

    def nearest_verl(self, version: str) -> Optional[str]:
        """The newest known verl release at or below ``version`` (or the oldest known)."""
        pv = parse_version(version)
        known = self.verl_versions()
        if pv is None or not known:
            return None
        below = [v for v in known if Version(v) <= Version(pv.base_version)]
        return below[-1] if below else known[0]

    # ---- torch ---------------------------------------------------------------------------
    def torch_series(self, version: str) -> Optional[Dict[str, Any]]:
        """Curated row of the torch minor series ``version`` belongs to (e.g. "2.11")."""
        pv = parse_version(version)
        if pv is None:
            return None
        key = "%d.%d" % (pv.major, pv.minor)
        for r in self.curated["torch"].get("release", []):
            if str(r["series"]) == key:
                return r
        return None

    def torch_variant(self, name: str) -> Optional[Dict[str, Any]]:
        """Curated row of a CUDA variant (``cu126``, ``cpu``...)."""
        return self.curated["torch"].get("variants", {}).get(name)

    def torch_build(self, version: str) -> Tuple[Optional[str], str]:
        """(variant, how) of a torch version string: the local tag (``2.9.1+cu128`` ->
        ``cu128``) or, for a plain version, the variant of the PyPI Linux wheel of that series."""
        pv = parse_version(version)
        if pv is None:
            return None, "unparseable version"
        if pv.local:
            local = str(pv.local)
            m = re.match(r"(cu\d+|cpu|rocm[\d.]+)", local)
            return (m.group(1) if m else local), "local version tag +%s" % local
        series = self.torch_series(version)
        if series:
            return str(series["pypi"]), "plain PyPI wheel of torch %s.x is built as %s" % (
                str(series["series"]), series["pypi"])
        return None, "torch series not in the matrix"

    def torch_arch(self, version: str, variant: str) -> Optional[Tuple[List[str], bool]]:
        """(arch list, ships PTX) of the official ``variant`` build of torch ``version``."""
        series = self.torch_series(version) or {}
        override = (series.get("arch_override") or {}).get(variant)
        row = self.torch_variant(variant)
        if row is None:
            return None
        return list(override if override is not None else row.get("arch", [])), bool(row.get("ptx"))

    def paired(self, package: str, torch_version: str) -> List[str]:
        """Releases of ``package`` (torchvision, torchaudio) whose metadata pins ``torch==torch_version``."""
        pv = parse_version(torch_version)
        out: List[str] = []
        if pv is None:
            return out
        for v in self.versions(package):
            for req in requirements_for_extras(self.meta(package, v)["requires_dist"] or []):
                if req.name == "torch" and any(s.operator == "==" for s in req.specifier):
                    if Version(pv.public) in req.specifier:
                        out.append(v)
        return out

    # ---- CUDA / driver / GPU -------------------------------------------------------------
    def cuda_toolkit(self, cuda: str) -> Optional[Dict[str, Any]]:
        """Curated toolkit row for CUDA ``X.Y`` (driver it ships with), or None."""
        pv = parse_version(cuda)
        for r in self.curated["cuda"].get("toolkit", []):
            rv = Version(str(r["version"]))
            if pv is not None and (rv.major, rv.minor) == (pv.major, pv.minor):
                return r
        return None

    def cuda_major(self, major: int) -> Optional[Dict[str, Any]]:
        """Curated minor-version-compatibility row of a CUDA major."""
        for r in self.curated["cuda"].get("major", []):
            if int(r["major"]) == int(major):
                return r
        return None

    def driver_branch(self, driver: str) -> Optional[Dict[str, Any]]:
        """Curated row of the driver branch ``driver`` belongs to (by its major number)."""
        try:
            major = int(str(driver).split(".")[0])
        except ValueError:
            return None
        for r in self.curated["cuda"].get("branch", []):
            if int(r["branch"]) == major:
                return r
        return None

    def min_driver_for_cuda_major(self, major: int) -> Optional[str]:
        """Lowest driver that runs binaries of CUDA ``major`` (minor-version compatibility)."""
        row = self.cuda_major(major)
        return str(row["minor_compat_min"]) if row else None

    def bf16(self) -> Dict[str, Any]:
        """The bf16 row of gpus.toml: ``min_cc`` (compute capability, "8.0") and its ``source``."""
        return dict(self.curated["gpus"].get("bf16") or {})

    def compute_capabilities(self) -> List[str]:
        """Every compute capability NVIDIA has shipped ("3.5" ... "12.1"), oldest first
        (gpus.toml ``[compute_capabilities]``, with its source)."""
        return [str(c) for c in (self.curated["gpus"].get("compute_capabilities") or {}).get("known", [])]

    def gpu(self, name: str) -> Optional[Dict[str, Any]]:
        """Curated GPU row whose names match ``name`` as a whole word (longest match wins)."""
        best, best_len = None, 0
        upper = " %s " % re.sub(r"[-_]", " ", name.upper())
        for r in self.curated["gpus"].get("gpu", []):
            for n in r.get("names", []):
                pat = r"(?<![A-Z0-9])%s(?![A-Z0-9])" % re.escape(n.upper())
                if re.search(pat, upper) and len(n) > best_len:
                    best, best_len = r, len(n)
        return best

    # ---- backends: vllm.toml, sglang.toml ------------------------------------------------
    def ranged(self, stem: str, table: str, version: str) -> List[Dict[str, Any]]:
        """Rows of ``[[table]]`` in ``<stem>.toml`` whose ``versions`` specifier admits ``version``
        (e.g. ``ranged("vllm", "build", "0.24.0")``); [] for an unparseable version."""
        pv = parse_version(version)
        if pv is None:
            return []
        v = Version(pv.public)
        return [r for r in self.curated.get(stem, {}).get(table, [])
                if v in SpecifierSet(str(r["versions"]), prereleases=True)]

    def _one(self, stem: str, table: str, version: str) -> Optional[Dict[str, Any]]:
        rows = self.ranged(stem, table, version)
        return rows[0] if rows else None

    def backend_build(self, backend: str, version: str) -> Optional[Dict[str, Any]]:
        """``[[build]]`` row of vLLM/SGLang ``version``: ``cuda`` its PyPI wheel is built with
        ("torch" = the pinned torch's PyPI CUDA) and ``other`` published builds; None if not recorded."""
        return self._one(backend, "build", version)

    def backend_gpu_floor(self, backend: str, version: str) -> Optional[Dict[str, Any]]:
        """``[[gpu_floor]]`` row (``min_cc``) of vLLM/SGLang ``version``, or None when not recorded."""
        return self._one(backend, "gpu_floor", version)

    def backend_python_tags(self, backend: str, version: str) -> Optional[Dict[str, Any]]:
        """``[[python_tags]]`` row (``python``: CPython minors with wheels) of ``version``, or None
        when its wheels are abi3/pure and Requires-Python alone decides."""
        return self._one(backend, "python_tags", version)

    def backend_platform(self, backend: str, version: str) -> Optional[Dict[str, Any]]:
        """``[[platform]]`` row (``glibc``, ``tag``) of the x86_64 wheel of ``version``, or None."""
        return self._one(backend, "platform", version)

    def backend_notes(self, backend: str, version: str) -> List[Dict[str, Any]]:
        """``[[note]]`` rows (documented problems) that apply to ``backend==version``."""
        return self.ranged(backend, "note", version)

    # ---- flash-attn, wheels, images ----------------------------------------------------
    def flash_attn(self) -> Dict[str, Any]:
        """flash_attn.toml: ``wheel``/``url`` name templates, ``min_cc``, ``release`` rows (one per
        set of prebuilt wheels) and ``torch_abi`` rows."""
        return self.curated["flash_attn"]

    def torch_cxx11abi(self, torch_version: str, variant: Optional[str]) -> Optional[Tuple[bool, Dict[str, Any]]]:
        """(C++11 ABI of the official ``variant`` build of torch ``torch_version``, its row), or None."""
        pv = parse_version(torch_version)
        if pv is None:
            return None
        for r in self.curated["flash_attn"].get("torch_abi", []):
            if Version(pv.public) in SpecifierSet(str(r["torch"])):
                return (variant in (r.get("cxx11abi_variants") or [])) or bool(r["cxx11abi"]), r
        return None

    def torch_python(self, version: str) -> Optional[Dict[str, Any]]:
        """wheels.toml ``[[torch_python]]`` row (``python``: CPython minors with wheels) of the
        torch series ``version`` belongs to, or None."""
        pv = parse_version(version)
        if pv is None:
            return None
        key = "%d.%d" % (pv.major, pv.minor)
        for r in self.curated["wheels"].get("torch_python", []):
            if str(r["series"]) == key:
                return r
        return None

    def toolkit_arch(self, cc: str) -> Optional[Dict[str, Any]]:
        """wheels.toml ``[[toolkit_arch]]`` row giving the first CUDA toolkit that compiles for the
        family of compute capability ``cc`` (the nearest recorded X.Y <= cc of the same major), or
        None when any toolkit in the matrix does."""
        pv = parse_version(cc)
        if pv is None:
            return None
        best = None
        for r in self.curated["wheels"].get("toolkit_arch", []):
            rv = Version(str(r["cc"]))
            if rv.major == pv.major and rv <= pv and (best is None or rv > Version(str(best["cc"]))):
                best = r
        return best

    def arch_support(self, cuda_major: int) -> Optional[Dict[str, Any]]:
        """cuda.toml ``[[arch_support]]`` row (``min_cc``) of a CUDA major, or None."""
        for r in self.curated["cuda"].get("arch_support", []):
            if int(r["major"]) == int(cuda_major):
                return r
        return None

    def images(self, verl: str, backend: Optional[str] = None) -> List[Dict[str, Any]]:
        """images.toml rows documented for verl ``verl`` (and carrying ``backend`` when given)."""
        pv = parse_version(verl)
        out = []
        for r in self.curated["images"].get("image", []):
            if pv is None or not any(parse_version(str(v)) == Version(pv.public) for v in r.get("verl", [])):
                continue
            if backend and backend not in r.get("backend", []):
                continue
            out.append(r)
        return out

    def arch_driver(self) -> List[Dict[str, Any]]:
        """cuda.toml ``[[arch_driver]]`` rows: the driver branches that support each GPU architecture."""
        return list(self.curated["cuda"].get("arch_driver", []))

    def bounds(self) -> List[Dict[str, Any]]:
        """bounds.toml rows: works-with bounds the resolver adds where metadata leaves a dependency open."""
        return list(self.curated["bounds"].get("bound", []))

    # ---- misc ----------------------------------------------------------------------------
    def known_bad(self) -> List[Dict[str, Any]]:
        """Curated known-bad rows (matrices/known_bad.toml)."""
        return list(self.curated["known_bad"].get("bad", []))

    def host(self) -> Dict[str, Any]:
        """Host thresholds (matrices/host.toml)."""
        return self.curated["host"]

    def module_dist(self, module: str) -> str:
        """Distribution that provides top-level import ``module`` (mapping, else the name)."""
        top = module.split(".")[0]
        return str(self.curated["modules"].get("modules", {}).get(top, top.replace("_", "-")))


@functools.lru_cache(maxsize=1 << 16)
def parse_requirement(line: str) -> Requirement:
    """``Requirement(line)``, parsed once per run: several checks read the same Requires-Dist lines
    (packaging's parser is most of the packages stage's time). The object is shared: never change
    it. Raises InvalidRequirement (not cached)."""
    return Requirement(line)


def requirements_for_extras(requires_dist: Iterable[str], extras: Sequence[str] = ()) -> List[Requirement]:
    """Parse Requires-Dist lines and keep those that apply with ``extras`` selected.

    A line applies when its marker has no ``extra`` clause (base requirement) or evaluates true
    for one of ``extras``. Other marker variables are evaluated with the checker's defaults only
    to decide extras; the caller re-evaluates them against the target. Malformed lines are
    skipped (recorded metadata is machine-written; a bad line is not the user's problem).
    """
    out = []
    for line in requires_dist:
        try:
            req = parse_requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or "extra" not in str(req.marker):
            out.append(req)
            continue
        for extra in extras:
            try:
                if _marker_mentions_extra(str(req.marker), extra):
                    out.append(req)
                    break
            except InvalidMarker:
                continue
    return out


def _marker_mentions_extra(marker: str, extra: str) -> bool:
    names = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
    return canonicalize_name(extra) in {canonicalize_name(n) for n in names}


_CACHE: Dict[str, Matrix] = {}


def load(directory: Optional[str] = None) -> Matrix:
    """Load and validate the matrix (cached per directory).

    Args:
        directory: a matrices/ directory to read; default the copy inside the zipapp or the
            source checkout's ``matrices/``.
    Raises:
        MatrixError: a file is missing, is not valid TOML/JSON, or has a malformed specifier;
            the message names the file.
    """
    key = directory or ""
    if key in _CACHE:
        return _CACHE[key]
    curated: Dict[str, Dict[str, Any]] = {}
    for stem in CURATED:
        raw = read_file(stem + ".toml", directory)
        if raw is None:
            raise MatrixError("matrix file %s.toml not found (in %s); rebuild the zipapp or restore "
                              "matrices/ from the repository" % (stem, directory or "the package"))
        try:
            curated[stem] = _toml.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise MatrixError("matrix file %s.toml is not valid TOML: %s; fix the file or restore it "
                              "from the repository" % (stem, exc))
    metadata: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for pkg in GENERATED:
        raw = read_file(os.path.join("metadata", pkg + ".json"), directory)
        if raw is None:
            metadata[pkg] = {}
            continue
        try:
            metadata[pkg] = json.loads(raw.decode("utf-8")).get("releases", {})
        except (ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise MatrixError("matrix file metadata/%s.json is not valid JSON: %s; run 'preflight matrix "
                              "refresh' or restore it from the repository" % (pkg, exc))
    m = Matrix(curated, metadata)
    _validate(m)
    _CACHE[key] = m
    return m


def _validate(m: Matrix) -> None:
    for r in m.curated["verl"].get("release", []):
        where = "verl.toml release %s" % r.get("version")
        try:
            Version(str(r["version"]))
            if r.get("vllm_runtime"):
                AnySpec(str(r["vllm_runtime"]))
        except (KeyError, InvalidVersion, InvalidSpecifier) as exc:
            raise MatrixError("matrix file %s: %s; fix the row" % (where, exc))
        if not r.get("source"):
            raise MatrixError("matrix file %s has no source; every row needs one" % where)
    _validate_ranged(m)
    for r in m.curated["known_bad"].get("bad", []):
        try:
            SpecifierSet(str(r["versions"]))
            for spec in (r.get("when") or {}).values():
                SpecifierSet(str(spec))
        except (KeyError, InvalidSpecifier) as exc:
            raise MatrixError("matrix file known_bad.toml row %s: %s; fix the row" % (r.get("id"), exc))


_CONFIDENCE = ("V", "S", "U")


def _validate_ranged(m: Matrix) -> None:
    """Rows of vllm.toml, sglang.toml, flash_attn.toml, images.toml and wheels.toml: specifiers and
    versions parse, every row has a source and a confidence of V, S or U."""
    checks = [(stem, table) for stem in BACKENDS for table in ("build", "gpu_floor", "python_tags", "platform", "note")]
    checks += [("flash_attn", "release"), ("flash_attn", "torch_abi"), ("images", "image"),
               ("wheels", "torch_python"), ("wheels", "toolkit_arch")]
    for stem, table in checks:
        for i, r in enumerate(m.curated[stem].get(table, [])):
            where = "%s.toml [[%s]] row %d" % (stem, table, i + 1)
            try:
                if "versions" in r:
                    SpecifierSet(str(r["versions"]))
                if "torch" in r and table == "torch_abi":
                    SpecifierSet(str(r["torch"]))
                for key in ("version", "cc", "first_toolkit", "min_cc"):
                    if key in r:
                        Version(str(r[key]))
                if table == "build" and str(r.get("cuda")) != "torch":
                    Version(str(r["cuda"]))
            except (KeyError, InvalidVersion, InvalidSpecifier) as exc:
                raise MatrixError("matrix file %s: %s; fix the row" % (where, exc))
            if not r.get("source") or r.get("confidence") not in _CONFIDENCE:
                raise MatrixError("matrix file %s needs a source and a confidence of V, S or U" % where)
