"""The PEP 508 marker environment of a target interpreter: what pip evaluates requirement markers
(``numba==0.61.2; python_version > "3.9"``, ``nvidia-nccl-cu12; platform_machine == "x86_64"``) in
when it runs under that interpreter, built here for one that is not this machine's (CPython 3.14,
Linux aarch64) so pip's resolver can be given it (``preflight/target/pip_markers.py``).

Source: the environment markers of PEP 508 (packaging.python.org "Dependency specifiers",
"Environment Markers"): the eleven names and the Python expression each one stands for, which
``packaging.markers.default_environment`` returns for the running interpreter.
"""

import platform
from typing import Dict, Optional

__all__ = ["KEYS", "target_environment", "describe", "given_to"]

#: The marker variables of PEP 508 (``extra`` aside, which pip sets per requirement).
KEYS = ("implementation_name", "implementation_version", "os_name", "platform_machine", "platform_release",
        "platform_system", "platform_version", "python_full_version", "platform_python_implementation",
        "python_version", "sys_platform")

#: The phrase a recorded ``markers`` field carries when the environment was given to pip.
GIVEN = "marker environment given to pip"


def target_environment(python: str, arch: str, full_version: Optional[str] = None) -> Dict[str, str]:
    """The marker environment of CPython ``python`` ("3.14") on Linux ``arch`` ("aarch64",
    "x86_64"), as ``packaging.markers.default_environment()`` would return it there: a dict of
    the eleven :data:`KEYS`.

    ``full_version`` ("3.9.18"): ``python_full_version`` and ``implementation_version``; default
    ``python`` + ".0", the first release of the minor (a marker on the micro, rare, is judged for
    it). ``platform_release``/``platform_version`` (the kernel's ``uname -r``/``-v``, which no
    marker in the matrix's stacks names) are this machine's when it runs Linux, else "".
    Raises ValueError for a ``python`` that is not "X.Y" or a ``full_version`` not of that minor."""
    parts = python.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError("python %r is not a CPython minor like 3.12" % python)
    full = full_version or python + ".0"
    if full.split(".")[:2] != parts:
        raise ValueError("full_version %r is not a release of Python %s" % (full, python))
    linux = platform.system() == "Linux"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": arch,
        "platform_release": platform.release() if linux else "",
        "platform_system": "Linux",
        "platform_version": platform.version() if linux else "",
        "python_full_version": full,
        "platform_python_implementation": "CPython",
        "python_version": python,
        "sys_platform": "linux",
    }


def describe(env: Dict[str, str], pip_version: str) -> str:
    """The ``markers`` field of a proof whose pip was given ``env``: "cpython 3.14.0 aarch64
    (marker environment given to pip 26.1.2)" (the first three words as for a native run:
    implementation, full version, machine)."""
    return "%s %s %s (%s %s)" % (env["implementation_name"], env["python_full_version"], env["platform_machine"],
                                 GIVEN, pip_version)


def given_to(markers: str) -> Optional[str]:
    """The pip version of a ``markers`` field made by :func:`describe`, else None (a native run)."""
    if GIVEN not in markers:
        return None
    return markers.rsplit(GIVEN, 1)[1].strip(" )") or None
