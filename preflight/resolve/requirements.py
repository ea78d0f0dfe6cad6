"""Requirement handling: the metadata's requirements for a Python on Linux, exact pins, joint specifiers."""

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..matrix import Matrix


_ENV = {"implementation_name": "cpython", "os_name": "posix", "platform_machine": "x86_64",
        "platform_system": "Linux", "sys_platform": "linux", "platform_python_implementation": "CPython",
        "platform_release": "", "platform_version": ""}


_REQ_CACHE: Dict[Tuple[int, str, str, Tuple[str, ...], str, str], List[Requirement]] = {}


def marker_env(py: str, extra: str = "", arch: str = "x86_64") -> Dict[str, str]:
    """PEP 508 marker variables of CPython ``py`` on Linux ``arch`` (x86_64, aarch64), with ``extra``."""
    env = dict(_ENV, platform_machine=arch)
    env.update(python_version=py, python_full_version=py + ".0", implementation_version=py + ".0", extra=extra)
    return env


def applies(req: Requirement, extras: Iterable[str], py: str, arch: str = "x86_64") -> bool:
    """Whether ``req``'s marker holds on CPython ``py``, Linux ``arch``, for one of ``extras``."""
    if req.marker is None:
        return True
    try:
        if "extra" not in str(req.marker):
            return req.marker.evaluate(marker_env(py, "", arch))
        return any(req.marker.evaluate(marker_env(py, e, arch)) for e in extras)
    except (InvalidMarker, ValueError, TypeError):
        return False


def requirements_of(mx: Matrix, pkg: str, version: str, extras: Sequence[str], py: str,
                    arch: str = "x86_64") -> List[Requirement]:
    """Requirements of ``pkg==version`` with ``extras`` (self-referencing extras expanded) that
    apply on CPython ``py``, Linux ``arch``. [] when the release has no recorded metadata."""
    key = (id(mx), canonicalize_name(pkg), version, tuple(sorted(extras)), py, arch)
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
            if canonicalize_name(r.name) == me and applies(r, wanted, py, arch):
                more |= {canonicalize_name(x) for x in r.extras}
        if more <= wanted:
            break
        wanted |= more
    out = [r for r in parsed if canonicalize_name(r.name) != me and applies(r, wanted, py, arch)]
    _REQ_CACHE[key] = out
    return out


def named_reqs(reqs: Iterable[Requirement], name: str) -> List[Requirement]:
    n = canonicalize_name(name)
    return [r for r in reqs if canonicalize_name(r.name) == n]


def exact_pin(reqs: Iterable[Requirement], name: str) -> Optional[str]:
    """The version an ``==`` pin among ``reqs`` on ``name`` fixes, else None."""
    for r in named_reqs(reqs, name):
        for s in r.specifier:
            if s.operator in ("==", "===") and "*" not in s.version:
                return s.version
    return None


def joint(specs: Sequence[SpecifierSet], known: Sequence[str] = ()) -> Optional[str]:
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


def spec_text(reqs: Iterable[Requirement]) -> Optional[str]:
    """Readable combined specifier of several requirements on one package (an ``==`` wins)."""
    specs = []
    for r in reqs:
        for s in r.specifier:
            if s.operator == "==" and "*" not in s.version:
                return "==" + s.version
            if str(s) not in specs:
                specs.append(str(s))
    return ",".join(sorted(specs, key=lambda x: (x.lstrip("<>=!~"), x))) if specs else ""


def py_ok(spec: Optional[str], minor: str) -> bool:
    if not spec:
        return True
    try:
        s = SpecifierSet(spec)
    except InvalidSpecifier:
        return True
    return Version(minor + ".0") in s or Version(minor + ".99") in s


def dedupe(items: Iterable[str]) -> List[str]:
    out: List[str] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out
