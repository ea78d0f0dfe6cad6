"""Crash isolation: a segfault, a hang or malformed metadata in the target gives a row, never a
traceback or a hung checker. Runs the built zipapp under ``python3 -I -S``."""

import json
import os
import subprocess
import sys
import time

import pytest
from envs import fixture_env

from preflight.probes.process import run_script


def run_pyz(pyz, *args, timeout=120):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("fixture-envs"))
    return {k: fixture_env(base, k) for k in ("segfault", "hang", "malformed", "ok")}


def report(pyz, python, tmp_path, *extra):
    out = str(tmp_path / "r.json")
    proc, dt = run_pyz(pyz, "check", "--python", python, "--stage", "python,imports", "--json", out, *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    with open(out) as fh:
        data = json.load(fh)
    return proc, {r["id"]: r for r in data["results"]}, dt


def test_segfault_in_import_is_a_fail_row(pyz, envs, tmp_path):
    proc, rows, _ = report(pyz, envs["segfault"], tmp_path)
    assert proc.returncode == 1
    r = rows["imports.torch"]
    assert r["status"] == "fail" and "SIGSEGV" in r["message"]
    # the run went on: verl was imported in a fresh process after the crash
    assert rows["imports.verl"]["status"] == "pass"


def test_hanging_import_is_killed_within_timeout(pyz, envs, tmp_path):
    proc, rows, dt = report(pyz, envs["hang"], tmp_path, "--timeout", "5")
    r = rows["imports.verl"]
    assert r["status"] == "fail" and "hung" in r["message"]
    assert rows["imports.torch"]["status"] == "pass"
    assert dt < 60, dt


def test_malformed_metadata_is_named(pyz, envs, tmp_path):
    proc, rows, _ = report(pyz, envs["malformed"], tmp_path)
    r = rows["python.environment"]
    assert r["status"] == "fail" and "unreadable metadata" in r["message"]
    locs = json.dumps(r["evidence"]["broken_metadata"])
    assert "broken_meta-1.0.dist-info" in locs


def test_healthy_fixture_passes_imports(pyz, envs, tmp_path):
    proc, rows, _ = report(pyz, envs["ok"], tmp_path)
    assert rows["imports.torch"]["status"] == "pass"
    assert rows["python.interpreter"]["status"] == "pass"


def test_timeout_kills_the_whole_process_group(tmp_path):
    """A probe that starts a grandchild and hangs: both are gone after the deadline."""
    pidfile = tmp_path / "grandchild.pid"
    script = tmp_path / "spawn.py"
    script.write_text("import subprocess, sys, time\n"
                      "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                      "open(%r, 'w').write(str(p.pid))\n"
                      "time.sleep(300)\n" % str(pidfile))
    from preflight.probes.process import run_argv

    out = run_argv([sys.executable, str(script)], timeout=3)
    assert out.timed_out and out.duration_s < 20
    pid = int(pidfile.read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
        # a zombie still answers kill(0); check its state
        with open("/proc/%d/stat" % pid) as fh:
            if fh.read().split()[2] == "Z":
                raise ProcessLookupError


def test_target_that_is_not_python3(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'SyntaxError: invalid syntax' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = run_script(str(fake), "info", timeout=10)
    assert out.last("info") is None and out.returncode == 1 and "SyntaxError" in out.stderr_tail


def _procs_running(marker, exclude=()):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % pid) as fh:
                state = fh.read().split()[2]
        except OSError:
            continue
        if marker in cmd and state != "Z" and int(pid) not in exclude:
            out.append(pid)
    return out


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_interrupting_the_checker_kills_its_probes(pyz, envs, sig):
    """A scheduler's SIGTERM (or Ctrl-C) stops the checker and every probe it started."""
    import signal

    venv = os.path.dirname(os.path.dirname(envs["hang"]))
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz, "check", "--python", envs["hang"], "--stage", "imports",
                             "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # not inherited ignored
    deadline = time.time() + 90  # on a loaded machine the checker may take long to reach its probes
    # the checker's own command line names the venv too: wait for a probe, not for the checker
    while time.time() < deadline and not _procs_running(venv, exclude=(proc.pid,)):
        time.sleep(0.2)
    assert _procs_running(venv, exclude=(proc.pid,)), "the probe never started"
    time.sleep(1.0)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "interrupted" in err
    time.sleep(0.5)
    assert _procs_running(venv) == []
