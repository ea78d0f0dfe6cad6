"""Helpers of the fault suite (tests/faults/test_faults_*.py): misbehaving target interpreters made in
milliseconds, and a /proc scan for processes left running.

A target is a shell wrapper that runs this test interpreter with ``PYTHONPATH`` set to a private
directory (a ``sitecustomize.py`` there runs before every probe; fake packages there are
importable) and an environment variable ``PF_FAULT_TOKEN=<token>`` that every process it starts
inherits, so :func:`survivors` finds them all, however they detached (a double fork plus
``setsid()`` keeps the environment).
"""

import os
import subprocess
import sys
import time
import uuid
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: A sitecustomize that leaves a detached daemon (double fork, setsid, SIGTERM ignored) and goes on.
DAEMON = """
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
    os._exit(0)
"""

#: A sitecustomize that starts a plain child and a detached daemon, then hangs forever.
HANG_WITH_CHILDREN = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if os.fork() == 0:
    os.setsid()
    time.sleep(600)
    os._exit(0)
while True:
    time.sleep(1)
"""


def target(tmp_path, files: Dict[str, str], token: str = "") -> (str, str):
    """A wrapper interpreter under ``tmp_path`` whose private path holds ``files`` ({relative
    path: text}); returns (its path, its token)."""
    token = token or uuid.uuid4().hex
    site = os.path.join(str(tmp_path), "site-%s" % token[:8])
    for rel, text in files.items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    os.makedirs(site, exist_ok=True)
    wrapper = os.path.join(str(tmp_path), "py-%s" % token[:8])
    with open(wrapper, "w") as fh:
        fh.write("#!/bin/sh\nPYTHONPATH=%s\nPF_FAULT_TOKEN=%s\nexport PYTHONPATH PF_FAULT_TOKEN\nexec %s \"$@\"\n" % (
            site, token, sys.executable))
    os.chmod(wrapper, 0o755)
    return wrapper, token


def fake_dist(name: str, version: str, init: str) -> Dict[str, str]:
    """Files of an installed package ``name`` (its metadata and ``__init__.py``)."""
    return {"%s-%s.dist-info/METADATA" % (name, version): "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (
        name, version), "%s-%s.dist-info/RECORD" % (name, version): "", "%s/__init__.py" % name: init}


def survivors(token: str) -> List[int]:
    """Pids of live (not zombie) processes whose environment holds ``PF_FAULT_TOKEN=token``."""
    needle = ("PF_FAULT_TOKEN=%s" % token).encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as fh:
                env = fh.read()
            with open("/proc/%s/stat" % name) as fh:
                stat = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0") and stat[stat.rindex(")") + 2:].split()[0] != "Z":
            out.append(int(name))
    return out


def wait_gone(token: str, within: float = 5.0) -> List[int]:
    """Survivors after waiting up to ``within`` s for them to go."""
    deadline = time.monotonic() + within
    while True:
        left = survivors(token)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_running(token: str, n: int, within: float = 30.0) -> List[int]:
    """Wait until at least ``n`` processes carry ``token``; returns them."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = survivors(token)
        if len(found) >= n:
            return found
        time.sleep(0.1)
    return survivors(token)


def run_pyz(pyz: str, *args: str, timeout: float = 120, **kw) -> "subprocess.CompletedProcess[str]":
    """The zipapp under ``python -I -S`` with ``args``; captured text output."""
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, **kw)
