"""Whether a source distribution (sdist) is pure Python: built by pip with its build backend
alone, no compiler, so ``pip install`` of a stack needing it works where pip's binary-only
resolve refused it.

The sdist's bytes are read in memory, never extracted: the member list (tar or zip) and the
build files at its top (``pyproject.toml``, ``setup.py``). It is pure when

* no member is an extension source or a native build file (:data:`EXTENSION_SUFFIXES`,
  :data:`NATIVE_BUILD_FILES`: C, C++, CUDA, Cython, Fortran, Rust; Cargo.toml, CMakeLists.txt,
  meson.build);
* ``setup.py`` declares no extension (``ext_modules``, ``Extension(``, ``cffi_modules``,
  ``rust_extensions``);
* the build backend ``pyproject.toml`` names is one of :data:`PURE_BACKENDS` (setuptools,
  hatchling, flit_core, poetry-core, pdm-backend; no pyproject or no backend: pip's legacy
  setuptools backend), with no in-tree backend (``backend-path``) and no build requirement
  that exists to compile (:data:`COMPILING_REQUIRES`: Cython, pybind11, scikit-build, maturin...).

Anything else is "not pure". An archive that is not a plain tree of files and directories (a
link, a device, an absolute or ``..`` name, members outside one top directory), or that is over
the size bounds, is refused (:class:`SdistError`): nothing is decided from it. Stdlib only
(``tomllib``, else the vendored ``tomli``, for pyproject.toml).
"""

import bz2
import gzip
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["SdistError", "judge_sdist", "PURE_BACKENDS", "EXTENSION_SUFFIXES", "NATIVE_BUILD_FILES",
           "COMPILING_REQUIRES", "MAX_ARCHIVE", "MAX_UNPACKED", "MAX_MEMBERS", "PURE_BUILD_NEEDS"]

#: Build backends that build a wheel from Python files alone (PEP 517 names -> the project).
PURE_BACKENDS = {
    "setuptools.build_meta": "setuptools",
    "setuptools.build_meta:__legacy__": "setuptools",
    "hatchling.build": "hatchling",
    "flit_core.buildapi": "flit_core",
    "poetry.core.masonry.api": "poetry-core",
    "pdm.backend": "pdm-backend",
}
#: Member suffixes that are sources a compiler builds.
EXTENSION_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".cuh", ".pyx", ".f", ".f90", ".for", ".rs")
#: Member names that drive a native build.
NATIVE_BUILD_FILES = ("Cargo.toml", "CMakeLists.txt", "meson.build")
#: Build requirements that exist to compile (a pure backend with these builds an extension).
COMPILING_REQUIRES = ("cython", "pybind11", "nanobind", "scikit-build", "scikit-build-core", "maturin",
                      "setuptools-rust", "cffi", "meson-python", "meson", "cmake", "ninja", "numpy", "torch")
#: What building a pure-Python sdist needs, one line (the build need a proof records for it).
PURE_BUILD_NEEDS = "a pure-Python sdist: pip builds it with its build backend alone, no compiler"
#: Bytes of an sdist archive read (compressed), of its members unpacked in all, and members.
MAX_ARCHIVE = 32 << 20
MAX_UNPACKED = 256 << 20
MAX_MEMBERS = 20000
#: Bytes of one build file (pyproject.toml, setup.py) read.
MAX_BUILD_FILE = 1 << 20
_SETUP_EXT = re.compile(r"\bext_modules\b|\bExtension\s*\(|\bcffi_modules\b|\brust_extensions\b")


class SdistError(ValueError):
    """The archive cannot be judged: not an sdist archive, over a bound, or a member that is not
    a plain file or directory (the message says which, one line)."""


class _Capped(io.RawIOBase):
    """A read-only stream over ``inner`` that raises :class:`SdistError` past ``cap`` bytes."""

    def __init__(self, inner: Any, cap: int, what: str) -> None:
        super().__init__()
        self.inner, self.cap, self.what, self.seen = inner, cap, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.inner.read(len(b))
        self.seen += len(data)
        if self.seen > self.cap:
            raise SdistError("%s unpacks to more than %d bytes" % (self.what, self.cap))
        b[:len(data)] = data
        return len(data)


def _check_name(name: str, what: str) -> str:
    if not name or name.startswith("/") or "\\" in name or any(p == ".." for p in name.split("/")) or \
            any(ord(c) < 32 for c in name):
        raise SdistError("%s has an odd member name %r" % (what, name[:120]))
    return name.rstrip("/")


#: Bytes an extended header (pax ``x``/``g``, GNU long name ``L``/``K``) may hold: tarfile parses
#: one into several copies of itself, so a 200 MiB pax comment cost 1.2 GB and 14 s.
MAX_EXT_HEADER = 1 << 20


class _TarInfo(tarfile.TarInfo):
    """tarfile's member with its extended headers bounded by :data:`MAX_EXT_HEADER`."""

    def _proc_pax(self, tarfile_: Any) -> Any:  # noqa: D102 - tarfile's own hook
        if self.size > MAX_EXT_HEADER:
            raise tarfile.HeaderError("a pax header of %d bytes (over %d)" % (self.size, MAX_EXT_HEADER))
        return super()._proc_pax(tarfile_)  # type: ignore[misc]

    def _proc_gnulong(self, tarfile_: Any) -> Any:  # noqa: D102 - tarfile's own hook
        if self.size > MAX_EXT_HEADER:
            raise tarfile.HeaderError("a GNU long-name header of %d bytes (over %d)" % (self.size, MAX_EXT_HEADER))
        return super()._proc_gnulong(tarfile_)  # type: ignore[misc]


def _tar_members(data: bytes, what: str) -> Tuple[List[str], Dict[str, bytes]]:
    if data[:2] == b"\x1f\x8b":
        raw: Any = gzip.GzipFile(fileobj=io.BytesIO(data))
    elif data[:3] == b"BZh":
        raw = bz2.BZ2File(io.BytesIO(data))
    elif data[:6] == b"\xfd7zXZ\x00":
        raw = lzma.LZMAFile(io.BytesIO(data))
    else:
        raw = io.BytesIO(data)
    names: List[str] = []
    files: Dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BufferedReader(_Capped(raw, MAX_UNPACKED, what)), mode="r|",
                          tarinfo=_TarInfo) as tf:
            for m in tf:
                if len(names) >= MAX_MEMBERS:
                    raise SdistError("%s has more than %d members" % (what, MAX_MEMBERS))
                name = _check_name(m.name, what)
                if m.issym() or m.islnk():
                    raise SdistError("%s has a link member %s -> %s: refused" % (what, name, m.linkname[:120]))
                if not (m.isfile() or m.isdir()):
                    raise SdistError("%s has a member that is not a file or directory: %s" % (what, name))
                names.append(name + ("/" if m.isdir() else ""))
                if m.isfile() and _is_build_file(name) and m.size <= MAX_BUILD_FILE:
                    fh = tf.extractfile(m)
                    files[name] = fh.read() if fh is not None else b""
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as exc:
        raise SdistError("%s is not a readable tar archive (%s)" % (what, exc))
    return names, files


def _zip_members(data: bytes, what: str) -> Tuple[List[str], Dict[str, bytes]]:
    names: List[str] = []
    files: Dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise SdistError("%s has more than %d members" % (what, MAX_MEMBERS))
            if sum(i.file_size for i in infos) > MAX_UNPACKED:
                raise SdistError("%s unpacks to more than %d bytes" % (what, MAX_UNPACKED))
            for i in infos:
                name = _check_name(i.filename, what)
                mode = (i.external_attr >> 16) & 0o170000
                if mode == 0o120000:
                    raise SdistError("%s has a link member %s: refused" % (what, name))
                if mode not in (0, 0o100000, 0o040000):
                    raise SdistError("%s has a member that is not a file or directory: %s" % (what, name))
                names.append(name + ("/" if i.is_dir() else ""))
                if not i.is_dir() and _is_build_file(name) and i.file_size <= MAX_BUILD_FILE:
                    files[name] = zf.read(i)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError, ValueError, zlib.error) as exc:
        raise SdistError("%s is not a readable zip archive (%s)" % (what, exc))
    return names, files


def _is_build_file(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[1] in ("pyproject.toml", "setup.py")


def _toml(text: str) -> Dict[str, Any]:
    try:
        import tomllib as toml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python < 3.11: the vendored tomli
        import tomli as toml  # type: ignore[no-redef,import-not-found,unused-ignore]
    return toml.loads(text)


def _req_name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~\[;@(]", req.strip(), maxsplit=1)[0]).lower()


def judge_sdist(data: bytes, filename: str = "sdist") -> Dict[str, Any]:
    """Judge the sdist archive ``data`` (bytes of a .tar.gz/.tar.bz2/.tar.xz/.tar or .zip;
    ``filename`` names it in messages). Returns ``{"pure": bool, "why": one line, "backend":
    the build backend (PEP 517 name; "setuptools.build_meta:__legacy__" without pyproject),
    "members": member count, "found": the offending members or lines (at most 5)}``. Raises
    :class:`SdistError` for an archive it refuses (see the module doc)."""
    what = "the sdist %s" % filename
    if len(data) > MAX_ARCHIVE:
        raise SdistError("%s is %d bytes, over the %d read" % (what, len(data), MAX_ARCHIVE))
    names, files = (_zip_members if data[:4] == b"PK\x03\x04" else _tar_members)(data, what)
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) != 1 or not any("/" in n.rstrip("/") for n in names):
        raise SdistError("%s is not one top directory of files (tops: %s)" % (what, ", ".join(sorted(tops)[:3])))
    top = tops.pop()
    out: Dict[str, Any] = {"pure": False, "members": len(names), "backend": "", "found": []}
    native = [n for n in names if n.lower().endswith(EXTENSION_SUFFIXES) or n.rsplit("/", 1)[-1] in NATIVE_BUILD_FILES]
    if native:
        out.update(found=native[:5], why="has native sources or build files (%s%s): a compiler builds it" % (
            ", ".join(n.split("/", 1)[-1] for n in native[:5]), ", ..." if len(native) > 5 else ""))
        return out
    backend: Optional[str] = None
    requires: List[str] = []
    pyproject = files.get(top + "/pyproject.toml")
    if pyproject is not None:
        try:
            bs = _toml(pyproject.decode("utf-8")).get("build-system") or {}
        except (ValueError, UnicodeDecodeError) as exc:
            out.update(why="its pyproject.toml does not parse (%s): not judged pure" % str(exc)[:120])
            return out
        if bs.get("backend-path"):
            out.update(backend=str(bs.get("build-backend")), why="an in-tree build backend (backend-path %s): not a "
                       "known pure-Python backend" % bs.get("backend-path"))
            return out
        backend = bs.get("build-backend")
        requires = [str(r) for r in bs.get("requires") or []]
    backend = backend or "setuptools.build_meta:__legacy__"  # pip's default without a declared backend (PEP 517)
    out["backend"] = backend
    if backend not in PURE_BACKENDS:
        out.update(why="its build backend %s is not a pure-Python one (%s)" % (
            backend, ", ".join(sorted(set(PURE_BACKENDS.values())))))
        return out
    compiling = [r for r in requires if _req_name(r) in COMPILING_REQUIRES]
    if compiling:
        out.update(found=compiling[:5], why="its build requires %s, which exist to compile" % ", ".join(compiling[:5]))
        return out
    setup = files.get(top + "/setup.py")
    if setup is not None:
        hits = sorted({m.group(0).strip() for m in _SETUP_EXT.finditer(setup.decode("utf-8", "replace"))})
        if hits:
            out.update(found=hits[:5], why="its setup.py declares an extension (%s)" % ", ".join(hits[:5]))
            return out
    out.update(pure=True, why="pure Python: %s backend (%s), %d members, no extension sources, no native build files"
               % (PURE_BACKENDS[backend], backend, len(names)))
    return out
