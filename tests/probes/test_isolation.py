"""Crash isolation: a segfault, a hang or malformed metadata in the target gives a row, never a
traceback or a hung checker. Runs the built zipapp under ``python3 -I -S``."""

import json
import os
import subprocess
import sys
import time

import pytest
from envs import _site, fixture_env

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
    # refused at the start-up read (-I -S), which it cannot parse either: the script never starts
    assert out.last("info") is None and out.returncode is None and out.launch_error
    assert "not Python 3.6 or newer" in out.launch_error and "SyntaxError" in out.launch_error


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


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_interrupting_the_checker_kills_its_probes(pyz, envs, sig):
    """A scheduler's SIGTERM (or Ctrl-C) stops the checker and every probe it started."""
    import signal

    venv = os.path.dirname(os.path.dirname(envs["hang"]))
    marks = os.path.join(_site(venv), "verl")
    before = set(os.listdir(marks))
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz, "check", "--python", envs["hang"], "--stage", "imports",
                             "--timeout", "120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # not inherited ignored
    deadline = time.time() + 100  # on a loaded machine the checker may take long to reach its probes
    # the hanging import marks itself with its pid: wait for that, not for a command line
    new = set()
    while time.time() < deadline and not new and proc.poll() is None:
        time.sleep(0.2)
        new = {m for m in os.listdir(marks) if m.startswith("started-")} - before
    if not new:
        proc.kill()
        out, err = proc.communicate(timeout=30)
        raise AssertionError("the hanging import never started (checker exit %s)\nstdout: %s\nstderr: %s"
                             % (proc.returncode, out[-3000:], err[-3000:]))
    probe = int(new.pop().split("-", 1)[1])
    time.sleep(1.0)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "interrupted" in err
    time.sleep(0.5)
    assert _procs_running(venv) == [] and not _alive(probe)


def test_an_interpreter_silent_under_I_S_is_never_run_without_it(tmp_path):
    """The start-up read (``-I -S``) shares the probe's deadline; when it does not answer, the probe
    is a timeout and the interpreter is not started again without ``-I -S`` (where its site code
    would run unread), however fast it answers that way."""
    ran = tmp_path / "ran-without-I-S"
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nif [ "$1" = "-I" ]; then sleep 1000; fi\ntouch %s\nexec %s "$@"\n' % (ran, sys.executable))
    fake.chmod(0o755)
    t0 = time.monotonic()
    out = run_script(str(fake), "info", timeout=2)
    assert out.timed_out and "no answer within 2 s" in out.describe() and time.monotonic() - t0 < 10
    assert not ran.exists()
    again = run_script(str(fake), "info", timeout=2)  # not cached as clean
    assert again.timed_out and not ran.exists()
