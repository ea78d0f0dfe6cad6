"""A probe that kills its own supervisor (rev-attack A3, a new member of the "nothing outlives the
run" kind): the target starts a daemon in a session of its own and SIGKILLs the supervisor above it.
The supervisor's subreaper cleanup never runs, so before the fix the daemon was re-parented to init
and kept running after the checker exited. Mechanism (``probes/orphans.py``): the command line is a
child subreaper too, and ends whatever is still its child when the run ends."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from helpers import plant_start_hook

HANG = pytest.mark.fault("HANG")

_SITE = '''import os, signal
if os.environ.get("PREFLIGHT_SCRIPT"):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "%s"])
        os._exit(0)
    os.waitpid(pid, 0)
    os.kill(os.getppid(), signal.SIGKILL)
'''


def _sleepers(token):
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as fh:
                    if fh.read().split(b"\0")[:2] == [b"sleep", token.encode()]:
                        pids.append(int(name))
            except OSError:
                pass
    return pids


@HANG
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreapers are Linux's")
def test_a_daemon_of_a_probe_that_kills_its_supervisor_ends_with_the_run(pyz, tmp_path):
    token = "4242.%d" % random.randrange(10 ** 6)
    venv = str(tmp_path / "kv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    plant_start_hook(site, _SITE % token)
    try:
        p = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", os.path.join(venv, "bin", "python"),
                            "--stage", "python", "--timeout", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        assert "Traceback" not in p.stderr, p.stderr
        assert p.returncode == 1, (p.returncode, p.stdout[-1500:], p.stderr)  # the interpreter's probe died: FAIL
        time.sleep(0.5)
        assert _sleepers(token) == [], "the probe's daemon outlived the run"
    finally:
        for pid in _sleepers(token):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreapers are Linux's")
def test_a_child_the_process_had_before_is_left_alone(pyz, tmp_path):
    """`monitor & exec preflight` in a job script (re-attack O1): the background job is the user's,
    a child of the process before it became the checker; it must survive the run."""
    token = "4343.%d" % random.randrange(10 ** 6)
    try:
        subprocess.run(["bash", "-c", "sleep %s & exec %s -I -S %s --version" % (token, sys.executable, pyz)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=True)
        time.sleep(0.3)
        assert _sleepers(token), "the user's background job was killed"
    finally:
        for pid in _sleepers(token):
            os.kill(pid, signal.SIGKILL)
