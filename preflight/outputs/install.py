"""Install a requirements.lock into a new virtual environment, safely and idempotently.

The prefix carries markers: ``.verl-preflight-venv`` is written when the tool creates the prefix
(before the venv), and only a prefix with one of the tool's markers is ever changed: a venv the
user made, or any other non-empty directory, is refused (:func:`check_prefix`) and left as it
is. ``.verl-preflight-incomplete`` is written before anything is installed and removed only after
pip succeeded (an interrupted or failed install leaves it, ``check`` reports that prefix as
incomplete, and the next install resumes: a venv whose interpreter or pip does not run is made
again). ``.verl-preflight-installed`` records the sha256 of the lock that was installed, so a
second run with the same lock changes nothing. ``.verl-preflight-lock`` is locked (``fcntl``)
for the whole install, so two installs at one prefix run one after the other, never together.
The interpreter the tool was started from is never modified: a new venv is made with uv when
present, else with ``python -m venv``, and packages go into it with hashes required. Index
credentials reach pip through its environment (``PIP_EXTRA_INDEX_URL``), never its command line.
"""

import contextlib
import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from ..atomic import (absolute, make_dirs, open_lock, owner_problem, remove_file, run_problem, tree_problem, write_atomic,
                      write_new)
from ..errors import UsageError
from ..probes import child
from ..redact import redact_text
from ..shell import command

__all__ = ["InstallResult", "install", "check_prefix", "prefix_lock", "INCOMPLETE", "INSTALLED", "CREATED",
           "LOCKFILE", "lock_digest"]

INCOMPLETE = ".verl-preflight-incomplete"
INSTALLED = ".verl-preflight-installed"
CREATED = ".verl-preflight-venv"
LOCKFILE = ".verl-preflight-lock"
_MARKERS = (CREATED, INCOMPLETE, INSTALLED)


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


def _entries(prefix: str) -> List[str]:
    """What ``prefix`` holds, less the writer's temporary files (another install writing its first
    marker at this moment)."""
    return [e for e in os.listdir(prefix) if not (e.startswith("..verl-preflight-") and e.endswith(".tmp"))]


def check_prefix(prefix: str, option: str = "--prefix") -> None:
    """Raise UsageError unless ``prefix`` is absent, an empty directory, or a prefix this tool
    created (one of its markers is there), and unless it is this user's own: the prefix, its
    markers, ``bin``, ``bin/python*``, ``lib`` and ``pyvenv.cfg`` owned by the invoking user or
    root, no directory among them writable by other users, and the folder holding the prefix not
    writable by others without the sticky bit. install runs ``PREFIX/bin/python``: run as root
    from a prefix another user controls, it would run that user's code. Nothing is changed."""
    prefix = absolute(prefix)  # "..": the kernel's walk, never the text
    if os.path.lexists(prefix) and not os.path.isdir(prefix):
        raise UsageError("%s %s exists and is not a directory; choose a new or empty directory (nothing there was "
                         "changed)" % (option, prefix))
    bins = os.path.join(prefix, "bin")
    pythons = tuple("bin/" + n for n in (os.listdir(bins) if os.path.isdir(bins) and not os.path.islink(bins) else [])
                    if n.startswith("python"))
    why = tree_problem(prefix, _MARKERS + (LOCKFILE, "bin", "lib", "pyvenv.cfg") + pythons)
    if why is None and os.path.lexists(prefix):
        try:
            up = owner_problem(os.stat(os.path.dirname(prefix)), is_dir=True)
        except OSError:
            up = None
        why = up and "its folder %s is %s" % (os.path.dirname(prefix), up)
    if why:
        raise UsageError("%s %s is not this user's own (%s): install runs its bin/python, and never one another "
                         "user could have put there; choose a prefix only you can write, e.g. under your home "
                         "(nothing there was run or changed)" % (option, prefix, why))
    if not os.path.isdir(prefix) or not _entries(prefix):
        return
    if any(os.path.exists(os.path.join(prefix, m)) for m in _MARKERS):
        return
    what = "a venv made by someone else" if os.path.exists(os.path.join(prefix, "pyvenv.cfg")) else "other files"
    raise UsageError("%s %s is not a virtual environment verl-preflight created (it holds %s); choose a new or "
                     "empty directory: install never changes a prefix it did not make (nothing there was changed)"
                     % (option, prefix, what))


@contextlib.contextmanager
def prefix_lock(prefix: str, say: Callable[[str], None] = lambda s: None, timeout: float = 3600.0):
    """Hold an exclusive ``fcntl`` lock on ``prefix``/.verl-preflight-lock (created with the
    prefix) while the block runs; a second install at the same prefix waits for the first (up to
    ``timeout`` seconds, then UsageError)."""
    make_dirs(prefix, "--prefix")
    path = os.path.join(prefix, LOCKFILE)
    fd = open_lock(path, "--prefix")
    try:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, as before
            fcntl = None
        if fcntl is not None:
            deadline = time.monotonic() + timeout
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if not told:
                        say("%s: another install is running there; waiting for it to finish" % prefix)
                        told = True
                    if time.monotonic() > deadline:
                        raise UsageError("--prefix %s: another install held it for %.0f s; wait for it or stop it, "
                                         "then run install again" % (prefix, timeout))
                    time.sleep(0.5)
        yield
    finally:
        os.close(fd)  # releases the lock


def _drop_interpreters(prefix: str) -> None:
    """Remove bin/python* of a venv (ours, left broken) so that making it again replaces them."""
    b = os.path.join(prefix, "bin")
    for name in os.listdir(b) if os.path.isdir(b) else []:
        if name.startswith("python"):
            p = os.path.join(b, name)
            remove_file(p, "--prefix", links=True) or remove_file(p, "--prefix")


def _works(cmd: List[str]) -> bool:
    try:
        return child.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_BASE_VENV_PTH = "_preflight_base_venv.pth"


def _see_base_venv(base_python: str, prefix: str, say: Callable[[str], None]) -> None:
    """Make ``--system-site-packages`` see a base interpreter that is itself a venv.

    A venv made with ``--system-site-packages`` sees the site-packages of the *base* installation
    (``sys.base_prefix``), not those of a venv its creating Python belongs to; on a GPU node whose
    ``python3`` is ``/opt/torch/.venv/bin/python3`` (torch installed there), the new venv then has
    no torch (seen on the H200 nodes, bench/RESULTS.md). When ``base_python`` runs in a venv,
    its site-packages directories are appended through a .pth file in the new venv (after the
    venv's own, so what the lock installs wins). No-op when the base is not a venv.
    """
    code = ("import json, site, sys; print(json.dumps([sys.prefix != getattr(sys, 'base_prefix', sys.prefix), "
            "site.getsitepackages() if hasattr(site, 'getsitepackages') else []]))")
    try:
        out = child.run([base_python, "-c", code], capture_output=True, text=True, timeout=60)
        in_venv, dirs = json.loads(out.stdout.strip().splitlines()[-1])
        mine = child.run([os.path.join(prefix, "bin", "python"), "-c",
                               "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return
    if not in_venv or not dirs or not mine or not os.path.isdir(mine):
        return
    write_atomic(os.path.join(mine, _BASE_VENV_PTH), "".join(d + "\n" for d in dirs if os.path.isdir(d)), "--prefix")
    say("%s runs in a venv: its site-packages (%s) are visible in %s too" % (base_python, ", ".join(dirs), prefix))


def _compile_prefix(py: str, prefix: str, log: List[str], say: Callable[[str], None], timeout: float) -> None:
    """Byte-compile what the venv ``prefix`` holds (``compileall`` skips modules whose bytecode is
    current). Exit status 1 only means some module does not compile for this Python (torch ships
    py312-only test files): it is reported, never a failure."""
    rc = _run([py, "-m", "compileall", "-q", "-j", "0", os.path.join(prefix, "lib")], log, say, timeout,
              live=False, tolerate=(1,))
    if rc:
        say("some modules do not compile for this Python (exit %d); the rest were compiled" % rc)


def _run(cmd: List[str], log: List[str], say: Callable[[str], None], timeout: float,
         env: Optional[Dict[str, str]] = None, live: Optional[bool] = None, tolerate: Sequence[int] = ()) -> int:
    """Run one install step and return its exit status. On a terminal (``live``, default: stderr
    is a terminal) the installer's own output and progress bars are shown as they come (``--quiet``
    dropped), so a multi-gigabyte download is never a silent wait, each line redacted on the way
    (:func:`preflight.probes.child.run_live`: a hook printing a token shows ``***``); elsewhere (CI logs) it is
    captured and only the last line is quoted on failure. A status other than 0 and those in
    ``tolerate`` raises UsageError, as does the timeout."""
    import sys

    if live is None:
        live = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if live:
        cmd = [c for c in cmd if c != "--quiet"]
    shown = redact_text(command(cmd))
    log.append(shown)
    say("$ " + shown)
    try:
        if live:
            proc = child.run_live(cmd, sys.stderr, timeout=timeout, env=env)
        else:
            proc = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                  timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise UsageError("'%s' did not finish within %.0f s; the prefix stays marked incomplete" % (cmd[0], timeout))
    except OSError as exc:  # e.g. a venv step that exited 0 without making bin/python
        raise UsageError("install step could not start %s: %s; the prefix stays marked incomplete, fix the cause and "
                         "run install again" % (cmd[0], redact_text(exc.strerror or str(exc))))
    if proc.returncode != 0 and proc.returncode not in tolerate:
        tail = ([l for l in (proc.stdout or "").strip().splitlines() if l.strip()][-1:] if not live else
                ["its output is above"]) or ["exit %d" % proc.returncode]
        raise UsageError("install step failed (%s): %s; the prefix stays marked incomplete, fix the cause and run "
                         "install again" % (os.path.basename(cmd[0]), redact_text(tail[0][:300])))
    return proc.returncode


#: The first releases that install from a PEP 751 pylock.toml: uv 0.6.15 (``uv pip install -r``),
#: pip 26.1 (``pip install -r``, experimental); from their release notes.
UV_PYLOCK, PIP_PYLOCK = (0, 6, 15), (26, 1)


def _version_of(cmd: List[str]) -> tuple:
    """The first dotted number in ``cmd``'s output as a tuple of ints (() when it cannot run)."""
    import re

    try:
        out = child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
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

    from .lockcheck import check_pylock

    cand = os.path.join(os.path.dirname(os.path.abspath(lock_path)), "pylock.toml")
    if not os.path.isfile(cand) or run_problem(cand):  # one another user can change is never used
        return None
    try:
        try:
            import tomllib as toml
        except ImportError:  # pragma: no cover - 3.8-3.10
            import tomli as toml  # type: ignore[no-redef]
        with open(cand, "rb") as fh:
            data = toml.load(fh)
        if check_pylock(data):  # a local path, directory, VCS checkout or a file without a hash: not used
            return None
        pinned = {canonicalize_name(r["name"]): str(r.get("version")) for r in data.get("packages", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    want = {canonicalize_name(k): v for k, v in parse_lock(lock_text).items()}
    return cand if pinned == want else None


def install(lock_path: str, prefix: str, base_python: str, say: Callable[[str], None] = lambda s: None,
            timeout: float = 3600.0, use_uv: Optional[bool] = None, pip_args: Sequence[str] = (),
            system_site_packages: bool = False, index_urls: Sequence[str] = ()) -> InstallResult:
    """Create (or reuse, or repair) the venv ``prefix`` with ``base_python`` and install
    ``lock_path`` into it, holding the prefix's lock (:func:`prefix_lock`).

    ``pip_args`` go to the install command (a wheelhouse's ``--no-index --find-links ...``; with
    uv, ``--offline`` is added when ``--no-index`` is among them). ``system_site_packages``: the
    venv sees the base interpreter's packages (e.g. a GPU node's preinstalled torch); without
    ensurepip (Debian/Ubuntu python3 without python3-venv) the venv is made ``--without-pip`` and
    uses the base's pip. ``index_urls``: extra index URLs with credentials (kept out of the
    lock); pip and uv get them through their environment. Installed modules are byte-compiled (pip
    does so by default; uv is given ``--compile-bytecode``), so the first import of the stack on a
    cold node does not compile thousands of modules, and the checker's probes, which write no
    bytecode, do not compile them again on every run.

    Raises UsageError when the lock is missing, the prefix is something other than a prefix this
    tool made (never changed), or a step fails (the prefix is left marked incomplete, and the
    next run resumes).
    """
    try:
        with open(lock_path, encoding="utf-8") as fh:
            lock_text = fh.read()
    except OSError as exc:
        raise UsageError("lock file %s: %s; run 'preflight spec' first" % (lock_path, exc.strerror or exc))
    from .lockcheck import check_lock

    check_lock(lock_text, lock_path)  # pip reads no option, path or URL of the lock's choosing
    prefix = absolute(prefix)  # "..": the kernel's walk, never the text
    # pip/uv may start in a private directory (probes.child: a cwd others can plant is never used)
    lock_path = os.path.abspath(lock_path)
    check_prefix(prefix)
    fresh = not os.path.isdir(prefix) or not _entries(prefix)
    if fresh:
        make_dirs(prefix, "--prefix")
        write_atomic(os.path.join(prefix, CREATED),
                     "made by verl-preflight: 'preflight install' changes only prefixes with this file\n", "--prefix")
    with prefix_lock(prefix, say, timeout):
        check_prefix(prefix)  # again, now that it exists: another user may have made it since the first check
        # pip and uv read the very text that was checked, from a private copy: never the file again
        with child.scratch("preflight-lock-") as tmp:
            checked = os.path.join(tmp, "requirements.lock")
            write_new(checked, lock_text)
            return _install_locked(lock_text, lock_path, checked, prefix, base_python, say, timeout, use_uv,
                                   pip_args, system_site_packages, index_urls)


def _install_locked(lock_text: str, lock_path: str, checked: str, prefix: str, base_python: str, say: Callable[[str], None],
                    timeout: float, use_uv: Optional[bool], pip_args: Sequence[str], system_site_packages: bool,
                    index_urls: Sequence[str]) -> InstallResult:
    digest = lock_digest(lock_text)
    py = os.path.join(prefix, "bin", "python")
    marker_ok = os.path.join(prefix, INSTALLED)
    marker_bad = os.path.join(prefix, INCOMPLETE)
    if os.path.exists(marker_ok) and not os.path.exists(marker_bad):
        try:
            with open(marker_ok, encoding="utf-8") as fh:
                done = json.load(fh)
        except (OSError, ValueError):
            done = {}
        if done.get("lock_sha256") == digest and os.path.exists(py):
            say("%s already has this lock installed (sha256 %s): nothing to do" % (prefix, digest[:12]))
            return InstallResult(py, False, done.get("tool", "?"), [])
    resuming = os.path.exists(marker_bad)
    write_atomic(marker_bad, json.dumps({"lock_sha256": digest, "lock": os.path.abspath(lock_path)}), "--prefix")
    remove_file(marker_ok, "--prefix")
    from .lock import find_uv

    uv = find_uv() if use_uv is not False else None
    if use_uv and not uv:
        raise UsageError("--uv given but uv is neither in $UV nor on PATH; install uv or leave --uv out")
    env = dict(os.environ)
    if index_urls:
        extra_urls = " ".join(list(index_urls) + [u for u in env.get("PIP_EXTRA_INDEX_URL", "").split() if u])
        env["PIP_EXTRA_INDEX_URL"] = extra_urls
        env["UV_EXTRA_INDEX_URL"] = extra_urls
    log: List[str] = []
    ssp = ["--system-site-packages"] if system_site_packages else []
    if uv:
        if not _works([py, "-c", "pass"]):
            if resuming and os.path.exists(py):
                say("%s: the interrupted install left a venv that does not run; making it again" % prefix)
            _drop_interpreters(prefix)
            _run([uv, "venv", "--python", base_python, "--allow-existing"] + ssp + [prefix], log, say, 600)
            if ssp:
                _see_base_venv(base_python, prefix, say)
        extra = list(pip_args) + (["--offline"] if "--no-index" in pip_args else [])
        pylock = pylock_beside(lock_path, lock_text)
        if pylock and _version_of([uv, "--version"]) >= UV_PYLOCK:  # the PEP 751 lock: its hashes are verified
            _run([uv, "pip", "install", "--python", py, "--no-deps", "--compile-bytecode"] + extra + ["-r", pylock],
                 log, say, timeout, env)
        else:
            _run([uv, "pip", "install", "--python", py, "--require-hashes", "--no-deps", "--compile-bytecode"] + extra
                 + ["-r", checked], log, say, timeout, env)
        if resuming:  # uv skips what the interrupted run installed, and with it the bytecode it never wrote
            _compile_prefix(py, prefix, log, say, timeout)
        tool = "uv"
    else:
        if not _works([py, "-m", "pip", "--version"]):
            if resuming and os.path.exists(py):
                say("%s: the interrupted install left a venv without a working pip; making it again" % prefix)
            if not _works([py, "-c", "pass"]):
                _drop_interpreters(prefix)
            try:
                _run([base_python, "-m", "venv"] + ssp + [prefix], log, say, 600)
            except UsageError:
                if not ssp:
                    raise
                # no ensurepip: the venv takes pip from the base's site-packages it can see
                _run([base_python, "-m", "venv", "--without-pip"] + ssp + [prefix], log, say, 600)
            if ssp:
                _see_base_venv(base_python, prefix, say)
        pylock = pylock_beside(lock_path, lock_text)
        source = checked
        if pylock and _version_of([py, "-m", "pip", "--version"]) >= PIP_PYLOCK:
            source = pylock  # pip >= 26.1 reads PEP 751 locks (experimental), hashes included
        _run([py, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "--no-deps"]
             + ([] if source == pylock else ["--require-hashes"]) + list(pip_args) + ["-r", source], log, say, timeout, env)
        if resuming:  # pip too skips what is installed, bytecode or not
            _compile_prefix(py, prefix, log, say, timeout)
        tool = "pip"
    write_atomic(marker_ok, json.dumps({"lock_sha256": digest, "lock": os.path.abspath(lock_path), "tool": tool},
                                       sort_keys=True), "--prefix")
    remove_file(marker_bad, "--prefix")
    return InstallResult(py, True, tool, log)
