"""What an interpreter runs before its first line, judged without running anything: the files the
kernel executes for ``--python`` (a bare name on PATH, each ``#!`` interpreter), the directories
its standard library is looked for in, what the dynamic loader maps, PYTHONPATH and where compiled
modules are read from. :func:`preflight.probes.process.tree_refusal` asks this first, then reads
the rest under ``-I -S`` (SECURITY.md, "The target interpreter's start-up").

Every path here is judged as the child will resolve it: a relative one against the directory the
child runs in (the job's, or the probe's own private one, where nothing but the probe's files is),
a directory that is not there yet by the directory it would be made in, a directory in which a
name is looked up (a PATH or library search, ``sys.path``) with no sticky-bit excuse
(``paths.code_problem(..., is_dir=True)``). A value the loader expands by itself (``$ORIGIN``) is
refused: what it names differs per binary."""

import glob
import os
import shutil
import tempfile
from typing import List, Mapping, Optional, Tuple

__all__ = ["exe_path", "exe_chain", "static_refusal"]

#: How many ``#!`` interpreters deep :func:`exe_chain` follows a script (the kernel allows 4).
_SHEBANG_DEPTH = 4
#: The probe's private directory in :func:`probe_path` (its real name is random).
_PRIVATE = "preflight-probe-(private)"

#: (label, path, is_dir): one thing to judge; is_dir means a directory in which names are looked up.
Item = Tuple[str, str, bool]


def exe_path(python: str, env: Mapping[str, str]) -> Optional[str]:
    """The absolute path the kernel would run for ``python``: itself when it holds a ``/`` (made
    absolute), else the first match on ``env['PATH']`` (an empty entry means the current
    directory, as for ``execvp``); None when there is none."""
    found = python if os.sep in python else shutil.which(python, path=env.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


def probe_path(value: str, cwd: Optional[str]) -> Optional[str]:
    """Where a path the child resolves against its working directory leads: an absolute one as
    is; a relative one from ``cwd`` (the job's directory) or, without one, from the probe's private
    directory, where it is None while it stays inside (nothing there but the probe's own files)."""
    if os.path.isabs(value):
        return os.path.normpath(value)
    base = cwd or os.path.join(tempfile.gettempdir(), _PRIVATE, "cwd")
    out = os.path.normpath(os.path.join(base, value))
    return None if not cwd and _PRIVATE in out.split(os.sep) else out


def _existing(path: str) -> str:
    """``path``, or the nearest directory above it that exists (whoever can write there decides
    what appears at ``path``)."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _env_target(words: List[str], env: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """(NAME, PATH) of a ``#!/usr/bin/env ...`` line's words after env: its options read as GNU env
    reads them (``-i`` empties the environment, ``-u NAME`` and ``-C DIR`` take a value, ``-S``
    splits, ``VAR=value`` sets, ``PATH=`` included)."""
    path = env.get("PATH", os.defpath)
    it = iter(words)
    for w in it:
        if w in ("-u", "--unset", "-C", "--chdir"):
            next(it, None)
        elif w in ("-i", "--ignore-environment", "-"):
            path = os.defpath
        elif w.startswith("-"):
            continue
        elif "=" in w:
            key, _, value = w.partition("=")
            if key == "PATH":
                path = value
        else:
            return w, path
    return None, path


def _search_dirs(name: str, path: str, cwd: Optional[str]) -> List[Item]:
    """The directories a PATH search for ``name`` reads, up to and including the one holding it
    (another user able to add a name to one of them would answer first)."""
    out: List[Item] = []
    for entry in path.split(os.pathsep):
        d = probe_path(entry or ".", cwd)
        if d is None:
            continue
        out.append(("the PATH searched for %s" % name, _existing(d), True))
        if os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name), os.X_OK):
            break
    return out


def _shebang(path: str, env: Mapping[str, str], cwd: Optional[str]) -> Tuple[List[str], List[Item]]:
    """(what the kernel runs for the ``#!`` script at ``path``, absolute: its interpreter, and for
    ``env NAME`` also NAME found on the PATH env will search; the directories that search reads).
    ([], []) for a binary, an unreadable file or no such line (nothing is run)."""
    try:
        if not os.path.isfile(path):
            return [], []
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return [], []
    words = os.fsdecode(head[2:].split(b"\n", 1)[0]).split() if head.startswith(b"#!") else []
    if not words:
        return [], []
    out, searched = [os.path.abspath(words[0])], []
    if os.path.basename(words[0]) == "env":
        name, path_var = _env_target(words[1:], env)
        if name:
            found = exe_path(name, {"PATH": path_var})
            out += [found] if found else []
            searched = _search_dirs(name, path_var, cwd) if os.sep not in name else []
    return out, searched


def exe_chain(python: str, env: Mapping[str, str], cwd: Optional[str] = None) -> Tuple[List[str], List[Item]]:
    """(what the kernel runs for ``python`` under ``env``: its absolute path, then each ``#!``
    interpreter in turn, at most :data:`_SHEBANG_DEPTH` deep ([] when it is not found); the PATH
    directories env's searches read). Read without running anything."""
    first = exe_path(python, env)
    chain = [first] if first else []
    searched: List[Item] = []
    for _ in range(_SHEBANG_DEPTH):
        nxt, dirs = _shebang(chain[-1], env, cwd) if chain else ([], [])
        searched += dirs
        nxt = [p for p in nxt if p not in chain]
        if not nxt:
            break
        chain += nxt
    return chain, searched


def _libs(prefix: str, lib: str) -> List[Item]:
    """The standard library's directories under ``prefix``: ``prefix/lib`` (or PYTHONPLATLIBDIR's
    value, which may itself be a path) and the ``python3*`` directories in it with lib-dynload."""
    base = os.path.normpath(os.path.join(prefix, lib))
    out: List[Item] = [("the standard library's directory", _existing(base), True)]
    for d in sorted(glob.glob(os.path.join(glob.escape(base), "python3*"))):
        out += [("the standard library", d, True), ("the standard library", os.path.join(d, "lib-dynload"), True)]
    return out


def _stdlib(exe: str, env: Mapping[str, str], cwd: Optional[str]) -> List[Item]:
    """What the interpreter binary ``exe`` reads its standard library from before any script: the
    directories CPython's start-up walks up from the executable's real directory looking for
    ``lib/python3.X/os.py`` (each one up to where it is found: another user adding ``lib`` to one
    would answer first), PYTHONHOME's prefixes, PYTHONPLATLIBDIR, a venv's pyvenv.cfg and its
    ``home`` (a relative one from the working directory, as CPython reads it)."""
    libs = [env["PYTHONPLATLIBDIR"]] if env.get("PYTHONPLATLIBDIR") else []
    libs += ["lib"]
    out: List[Item] = []
    prefixes: List[str] = []
    for h in env.get("PYTHONHOME", "").split(os.pathsep):
        p = probe_path(h, cwd) if h else None
        if p:
            prefixes.append(p)
    for d in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
        cfg = os.path.join(d, "pyvenv.cfg")
        if os.path.isfile(cfg):
            out.append(("the venv's pyvenv.cfg", cfg, False))
            try:
                with open(cfg, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        key, _, value = line.partition("=")
                        home = probe_path(value.strip(), cwd) if key.strip().lower() == "home" and value.strip() else None
                        if home:
                            out.append(("the venv's home", _existing(home), True))
                            prefixes.append(os.path.dirname(home))
            except OSError:
                pass
            break
    d = os.path.dirname(os.path.realpath(exe))
    while True:
        out.append(("a directory the standard library is looked for in", d, True))
        hit = [lib for lib in libs if glob.glob(os.path.join(glob.escape(os.path.normpath(os.path.join(d, lib))),
                                                             "python3*", "os.py"))]
        if hit or os.path.dirname(d) == d:
            prefixes.append(d)
            break
        d = os.path.dirname(d)
    for prefix in prefixes:
        out.append(("the interpreter's prefix", _existing(prefix), True))
        for lib in libs:
            out += _libs(prefix, lib)
    return out


def _loader(env: Mapping[str, str], cwd: Optional[str]) -> Tuple[List[Item], Optional[str]]:
    """(what the dynamic loader maps into every process started with ``env`` before its own code:
    LD_PRELOAD's and LD_AUDIT's files with a ``/`` (a bare name is searched for in LD_LIBRARY_PATH
    and the system's directories), LD_LIBRARY_PATH's directories; the variable and value the loader
    would expand by itself (``$ORIGIN``, ``$LIB``), which is refused, or None)."""
    out: List[Item] = []
    for var in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"):
        seps = ":; " if var == "LD_PRELOAD" else ":;" if var == "LD_LIBRARY_PATH" else ":"
        value = env.get(var, "")
        if not value:
            continue
        if "$" in value:
            return out, "%s=%s" % (var, value)
        items = [value]
        for sep in seps:
            items = [part for item in items for part in item.split(sep)]
        for item in items:
            if var != "LD_LIBRARY_PATH" and (not item or os.sep not in item):
                continue
            p = probe_path(item or ".", cwd)
            if p is not None:
                out.append(("what the dynamic loader maps (%s=%s)" % (var, item), _existing(p), var == "LD_LIBRARY_PATH"))
    return out, None


def _python_path(env: Mapping[str, str], cwd: Optional[str]) -> List[Item]:
    """PYTHONPATH's directories (a name is looked up in each) and PYTHONPYCACHEPREFIX's (compiled
    modules are read from there in place of the judged sources), each as the child resolves it."""
    out: List[Item] = []
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        p = probe_path(entry, cwd) if entry else None
        if p:
            out.append(("PYTHONPATH's %s" % entry, _existing(p), True))
    cache = env.get("PYTHONPYCACHEPREFIX")
    p = probe_path(cache, cwd) if cache else None
    if p:
        out.append(("the bytecode read in place of the sources (PYTHONPYCACHEPREFIX=%s: unset it, or point it at a "
                    "directory of your own)" % cache, _existing(p), True))
    return out


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def static_refusal(python: str, merged: Mapping[str, str], cwd: Optional[str] = None) -> Tuple[List[str], Optional[str]]:
    """(:func:`exe_chain` of ``python``; the ``not run: ...`` message (:func:`preflight.paths.not_run`)
    when anything it runs before its first line, started under the environment ``merged`` in
    ``cwd`` (None: the probe's private directory), is code another user can change, or None).

    Judged: the files of the chain and the PATH directories env searches, the standard library's
    directories (:func:`_stdlib`, for the chain's binaries), LD_PRELOAD/LD_AUDIT/LD_LIBRARY_PATH
    (:func:`_loader`), PYTHONPATH and PYTHONPYCACHEPREFIX (:func:`_python_path`)."""
    from ..paths import code_problem, not_run

    chain, searched = exe_chain(python, merged, cwd)
    items: List[Item] = [("the interpreter (%s)" % exe if exe == chain[0] else
                          "the #! interpreter of %s (%s)" % (chain[0], exe), exe, False) for exe in chain]
    items += searched
    for exe in chain:
        if not _is_script(exe):
            items += [(what + " of %s (%s)" % (chain[0], p), p, d) for what, p, d in _stdlib(exe, merged, cwd)]
    loaded, expands = _loader(merged, cwd)
    if expands:
        return chain, ("not run: %s: the dynamic loader expands it by itself for each binary, so what it loads could "
                       "not be judged; give absolute paths" % expands)
    items += loaded + _python_path(merged, cwd)
    seen = set()
    for what, path, is_dir in items:
        if (path, is_dir) in seen or not os.path.lexists(path):
            continue
        seen.add((path, is_dir))
        problem = code_problem(path, is_dir=is_dir and os.path.isdir(path))
        if problem:
            return chain, not_run(what, problem)
    return chain, None
