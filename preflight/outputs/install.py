"""Install a requirements.lock into a new virtual environment, safely and idempotently.

The prefix carries two markers: ``.verl-preflight-incomplete`` is written before anything is
installed and removed only after pip succeeded (an interrupted or failed install leaves it, and
``check`` reports that prefix as incomplete); ``.verl-preflight-installed`` records the sha256 of
the lock that was installed, so a second run with the same lock changes nothing. The interpreter
the tool was started from is never modified: a new venv is made with uv when present, else with
``python -m venv``, and packages go into it with hashes required.
"""

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from ..errors import UsageError

__all__ = ["InstallResult", "install", "INCOMPLETE", "INSTALLED", "lock_digest"]

INCOMPLETE = ".verl-preflight-incomplete"
INSTALLED = ".verl-preflight-installed"


@dataclass
class InstallResult:
    """``python``: the prefix's interpreter; ``changed``: False when the lock was already
    installed; ``tool``: "uv" or "pip"; ``log``: the install commands run."""

    python: str
    changed: bool
    tool: str
    log: List[str]


def lock_digest(text: str) -> str:
    """sha256 hex of a lock's text (what the installed marker records)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_venv(prefix: str) -> bool:
    return os.path.exists(os.path.join(prefix, "pyvenv.cfg"))


def _run(cmd: List[str], log: List[str], say: Callable[[str], None], timeout: float,
         live: Optional[bool] = None) -> None:
    """Run one install step. On a terminal (``live``, default: stderr is a terminal) the
    installer's own output and progress bars go straight to it (``--quiet`` dropped), so a
    multi-gigabyte download is never a silent wait; elsewhere (CI logs) it is captured and only
    the last line is quoted on failure."""
    import sys

    if live is None:
        live = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if live:
        cmd = [c for c in cmd if c != "--quiet"]
    log.append(" ".join(cmd))
    say("$ " + " ".join(cmd))
    try:
        if live:
            proc = subprocess.run(cmd, stdout=sys.stderr, timeout=timeout)
        else:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UsageError("'%s' did not finish within %.0f s; the prefix stays marked incomplete" % (cmd[0], timeout))
    if proc.returncode != 0:
        tail = ([l for l in (proc.stdout or "").strip().splitlines() if l.strip()][-1:] if not live else
                ["its output is above"]) or ["exit %d" % proc.returncode]
        raise UsageError("install step failed (%s): %s; the prefix stays marked incomplete, fix the cause and run "
                         "install again" % (os.path.basename(cmd[0]), tail[0][:300]))


#: The first releases that install from a PEP 751 pylock.toml: uv 0.6.15 (``uv pip install -r``),
#: pip 26.1 (``pip install -r``, experimental); from their release notes.
UV_PYLOCK, PIP_PYLOCK = (0, 6, 15), (26, 1)


def _version_of(cmd: List[str]) -> tuple:
    """The first dotted number in ``cmd``'s output as a tuple of ints (() when it cannot run)."""
    import re

    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    m = re.search(r"(\d+(?:\.\d+)+)", out or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def pylock_beside(lock_path: str, lock_text: str) -> Optional[str]:
    """The pylock.toml next to ``lock_path`` when it pins exactly the set of ``lock_text`` (as
    ``spec`` writes them), else None (no file, unreadable, or another set)."""
    from packaging.utils import canonicalize_name

    from .lock import parse_lock

    cand = os.path.join(os.path.dirname(os.path.abspath(lock_path)), "pylock.toml")
    if not os.path.isfile(cand):
        return None
    try:
        try:
            import tomllib as toml
        except ImportError:  # pragma: no cover - 3.8-3.10
            import tomli as toml  # type: ignore[no-redef]
        with open(cand, "rb") as fh:
            rows = toml.load(fh).get("packages", [])
        pinned = {canonicalize_name(r["name"]): str(r.get("version")) for r in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    want = {canonicalize_name(k): v for k, v in parse_lock(lock_text).items()}
    return cand if pinned == want else None


def install(lock_path: str, prefix: str, base_python: str, say: Callable[[str], None] = lambda s: None,
            timeout: float = 3600.0, use_uv: Optional[bool] = None, pip_args: Sequence[str] = (),
            system_site_packages: bool = False) -> InstallResult:
    """Create (or reuse) the venv ``prefix`` with ``base_python`` and install ``lock_path`` into it.

    ``pip_args`` go to the install command (a wheelhouse's ``--no-index --find-links ...``; with
    uv, ``--offline`` is added when ``--no-index`` is among them). ``system_site_packages``: the
    venv sees the base interpreter's packages (e.g. a GPU node's preinstalled torch); without
    ensurepip (Debian/Ubuntu python3 without python3-venv) the venv is made ``--without-pip`` and
    uses the base's pip.

    Raises UsageError when the lock is missing, the prefix is something other than a venv this
    tool made (never overwritten), or a step fails (the prefix is left marked incomplete).
    """
    try:
        with open(lock_path, encoding="utf-8") as fh:
            lock_text = fh.read()
    except OSError as exc:
        raise UsageError("lock file %s: %s; run 'preflight spec' first" % (lock_path, exc.strerror or exc))
    digest = lock_digest(lock_text)
    prefix = os.path.abspath(os.path.expanduser(prefix))
    py = os.path.join(prefix, "bin", "python")
    marker_ok = os.path.join(prefix, INSTALLED)
    marker_bad = os.path.join(prefix, INCOMPLETE)
    if os.path.exists(prefix) and os.listdir(prefix) and not _is_venv(prefix) and not os.path.exists(marker_bad):
        raise UsageError("--prefix %s exists and is not a virtual environment; choose a new or empty directory "
                         "(nothing there was changed)" % prefix)
    if os.path.exists(marker_ok) and not os.path.exists(marker_bad):
        try:
            with open(marker_ok, encoding="utf-8") as fh:
                done = json.load(fh)
        except (OSError, ValueError):
            done = {}
        if done.get("lock_sha256") == digest and os.path.exists(py):
            say("%s already has this lock installed (sha256 %s): nothing to do" % (prefix, digest[:12]))
            return InstallResult(py, False, done.get("tool", "?"), [])
    os.makedirs(prefix, exist_ok=True)
    with open(marker_bad, "w", encoding="utf-8") as fh:
        json.dump({"lock_sha256": digest, "lock": os.path.abspath(lock_path)}, fh)
    if os.path.exists(marker_ok):
        os.remove(marker_ok)
    uv = shutil.which("uv") if use_uv is not False else None
    if use_uv and not uv:
        raise UsageError("--uv given but uv is not on PATH; install uv or leave --uv out")
    log: List[str] = []
    ssp = ["--system-site-packages"] if system_site_packages else []
    if uv:
        if not os.path.exists(py):
            _run([uv, "venv", "--python", base_python, "--allow-existing"] + ssp + [prefix], log, say, 600)
        extra = list(pip_args) + (["--offline"] if "--no-index" in pip_args else [])
        pylock = pylock_beside(lock_path, lock_text)
        if pylock and _version_of([uv, "--version"]) >= UV_PYLOCK:  # the PEP 751 lock: its hashes are verified
            _run([uv, "pip", "install", "--python", py, "--no-deps"] + extra + ["-r", pylock], log, say, timeout)
        else:
            _run([uv, "pip", "install", "--python", py, "--require-hashes", "--no-deps"] + extra + ["-r", lock_path],
                 log, say, timeout)
        tool = "uv"
    else:
        if not os.path.exists(py):
            try:
                _run([base_python, "-m", "venv"] + ssp + [prefix], log, say, 600)
            except UsageError:
                if not ssp:
                    raise
                # no ensurepip: the venv takes pip from the base's site-packages it can see
                _run([base_python, "-m", "venv", "--without-pip"] + ssp + [prefix], log, say, 600)
        pylock = pylock_beside(lock_path, lock_text)
        source = lock_path
        if pylock and _version_of([py, "-m", "pip", "--version"]) >= PIP_PYLOCK:
            source = pylock  # pip >= 26.1 reads PEP 751 locks (experimental), hashes included
        _run([py, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-deps"]
             + ([] if source == pylock else ["--require-hashes"]) + list(pip_args) + ["-r", source], log, say, timeout)
        tool = "pip"
    with open(marker_ok, "w", encoding="utf-8") as fh:
        json.dump({"lock_sha256": digest, "lock": os.path.abspath(lock_path), "tool": tool}, fh, sort_keys=True)
    os.remove(marker_bad)
    return InstallResult(py, True, tool, log)
