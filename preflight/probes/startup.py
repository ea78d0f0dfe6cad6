"""What an interpreter runs before its first line, judged without running anything: the files the
kernel executes for ``--python`` (a bare name on PATH, each ``#!`` interpreter), the standard
library's directories it reads, what the dynamic loader maps and where compiled modules are read
from. :func:`preflight.probes.process.tree_refusal` asks this first, then reads the rest under
``-I -S`` (SECURITY.md, "The target interpreter's start-up")."""

import os
import shutil
from typing import List, Mapping, Optional, Tuple

__all__ = ["exe_path", "exe_chain", "static_refusal"]

#: How many ``#!`` interpreters deep :func:`exe_chain` follows a script (the kernel allows 4).
_SHEBANG_DEPTH = 4


def exe_path(python: str, env: Mapping[str, str]) -> Optional[str]:
    """The absolute path the kernel would run for ``python``: itself when it holds a ``/`` (made
    absolute), else the first match on ``env['PATH']`` (an empty entry means the current
    directory, as for ``execvp``); None when there is none."""
    found = python if os.sep in python else shutil.which(python, path=env.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


def _shebang(path: str, env: Mapping[str, str]) -> List[str]:
    """What the kernel runs for the ``#!`` script at ``path``, absolute: its interpreter, and for
    ``env NAME`` also NAME found on the child's PATH; [] for a binary, an unreadable file or no such
    line (nothing is run)."""
    try:
        if not os.path.isfile(path):
            return []
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return []
    words = os.fsdecode(head[2:].split(b"\n", 1)[0]).split() if head.startswith(b"#!") else []
    if not words:
        return []
    out = [os.path.abspath(words[0])]
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = exe_path(names[0], env) if names else None
        out += [found] if found else []
    return out


def exe_chain(python: str, env: Mapping[str, str]) -> List[str]:
    """What the kernel runs for ``python`` under ``env``: its absolute path, then each ``#!``
    interpreter in turn (``#!/usr/bin/env NAME`` adds env and NAME found on PATH), at most
    :data:`_SHEBANG_DEPTH` deep; [] when it is not found. Read without running anything."""
    first = exe_path(python, env)
    chain = [first] if first else []
    for _ in range(_SHEBANG_DEPTH):
        nxt = [p for p in _shebang(chain[-1], env) if p not in chain] if chain else []
        if not nxt:
            break
        chain += nxt
    return chain


def _prefix_dirs(exe: str, env: Mapping[str, str]) -> List[Tuple[str, bool]]:
    """(path, is_dir) of what the interpreter binary ``exe`` reads its standard library from
    before any ``-I -S`` script runs: its installation's lib directory (PYTHONPLATLIBDIR's name when
    set) and the ``python3*`` directories in it with their lib-dynload, each PYTHONHOME prefix
    likewise, and a venv's pyvenv.cfg with its ``home``."""
    lib = env.get("PYTHONPLATLIBDIR") or "lib"
    if os.sep in lib or lib in ("", ".", ".."):
        lib = "lib"
    prefixes = [os.path.dirname(os.path.dirname(os.path.realpath(exe)))]
    prefixes += [h for h in env.get("PYTHONHOME", "").split(os.pathsep) if h]
    out: List[Tuple[str, bool]] = []
    for d in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
        cfg = os.path.join(d, "pyvenv.cfg")
        if os.path.isfile(cfg):
            out.append((cfg, False))
            try:
                with open(cfg, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        key, _, value = line.partition("=")
                        if key.strip().lower() == "home" and os.path.isabs(value.strip()):
                            prefixes.append(os.path.dirname(value.strip()))
            except OSError:
                pass
            break
    for prefix in prefixes:
        base = os.path.join(os.path.abspath(prefix), lib)
        out += [(os.path.abspath(prefix), True), (base, True)]
        try:
            names = sorted(n for n in os.listdir(base) if n.startswith("python3"))
        except OSError:
            names = []
        for n in names:
            out += [(os.path.join(base, n), True), (os.path.join(base, n, "lib-dynload"), True)]
    return [(p, d) for p, d in out if os.path.exists(p)]


def _loader_paths(env: Mapping[str, str]) -> List[Tuple[str, str, bool]]:
    """(variable, path, is_dir) of what the dynamic loader maps into every process started with
    ``env`` before its own code: LD_PRELOAD's and LD_AUDIT's absolute files, LD_LIBRARY_PATH's
    directories (libraries are found there by name)."""
    out: List[Tuple[str, str, bool]] = []
    for var in ("LD_PRELOAD", "LD_AUDIT"):
        for item in env.get(var, "").replace(" ", ":").split(":"):
            if item.startswith("/") and os.path.exists(item):
                out.append((var, item, False))
    for item in env.get("LD_LIBRARY_PATH", "").split(":"):
        if item.startswith("/") and os.path.isdir(item):
            out.append(("LD_LIBRARY_PATH", item, True))
    return out


def static_refusal(chain: List[str], merged: Mapping[str, str]) -> Optional[str]:
    """The ``not run: ...`` message (:func:`preflight.paths.not_run`) when anything an interpreter
    started as ``chain`` (:func:`exe_chain`) under the environment ``merged`` runs before its first
    line is code another user can change: the files in ``chain``, its standard library's
    directories (:func:`_prefix_dirs`), LD_PRELOAD/LD_AUDIT/LD_LIBRARY_PATH (:func:`_loader_paths`),
    the PYTHONPYCACHEPREFIX directory (or, not made yet, the one it would be made in); else None."""
    from ..paths import code_problem, not_run

    # without running it: a binary another user can change may answer -I -S with silence or
    # a made-up tree and do anything without them
    for exe in chain:
        problem = code_problem(exe) if os.path.exists(exe) else None
        if problem:
            what = "the interpreter (%s)" % exe if exe == chain[0] else "the #! interpreter of %s (%s)" % (chain[0], exe)
            return not_run(what, problem)
    for path, is_dir in [pd for exe in chain for pd in _prefix_dirs(exe, merged)]:
        problem = code_problem(path, is_dir=is_dir)
        if problem:
            return not_run("the standard library %s runs at start-up (%s)" % (chain[0], path), problem)
    for var, path, is_dir in _loader_paths(merged):
        problem = code_problem(path, is_dir=is_dir)
        if problem:
            return not_run("what the dynamic loader maps into it (%s=%s)" % (var, path), problem)
    cache = value = merged.get("PYTHONPYCACHEPREFIX")
    while cache and not os.path.lexists(cache) and os.path.dirname(cache) != cache:
        cache = os.path.dirname(cache)  # not there yet: whoever can make it there decides what is read
    if cache:
        problem = code_problem(cache, is_dir=True)
        if problem:
            return not_run("the bytecode read in place of the sources (PYTHONPYCACHEPREFIX=%s: unset it, or point it "
                           "at a directory of your own)" % value, problem)
    return None
