"""pip and uv started by spec, wheelhouse (and install, matrix refresh) die with the checker
(preflight/probes/child.py): a checker killed with SIGKILL while pip runs leaves no process and
no temporary directory behind. pip is kept busy by a loopback index that accepts connections and
never answers."""

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from faultkit import survivors, wait_gone, wait_running

from preflight.probes import child

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HANG = pytest.mark.fault("HANG")


@pytest.fixture
def silent_index():
    """http://127.0.0.1:PORT/simple: accepts every connection and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held = []
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d/simple" % srv.getsockname()[1]
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    srv.close()


def _pip_running(token):
    """Pids carrying ``token`` whose command line runs pip."""
    out = []
    for pid in survivors(token):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                if b"pip" in fh.read().split(b"\0"):
                    out.append(pid)
        except OSError:
            pass
    return out


@HANG
@pytest.mark.parametrize("command", ["spec", "wheelhouse"])
def test_sigkill_mid_pip_leaves_nothing(pyz, tmp_path, silent_index, command):
    token = "childsup-%d-%s" % (os.getpid(), command)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PF_FAULT_TOKEN=token, TMPDIR=str(tmp), PIP_INDEX_URL=silent_index,
               PIP_CONFIG_FILE=os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "UV"):
        env.pop(var, None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not os.path.exists(os.path.join(p, "uv")))  # lock with pip
    if command == "spec":
        args = ["spec", "--verl", "0.9.1", "--backend", "none", "--torch", "2.13.0", "--torch-index", "none",
                "--python", "3.11", "--no-probe", "-o", str(tmp_path / "sp")]
    else:
        (tmp_path / "tiny.lock").write_text("six==1.17.0\n")
        args = ["wheelhouse", "--lock", str(tmp_path / "tiny.lock"), "--python", "3.11", "-o", str(tmp_path / "wh")]
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz] + args, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _pip_running(token) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert _pip_running(token), "pip never started: %s" % proc.stderr.read().decode()[-2000:]
        time.sleep(0.5)
        # mid-pip, as the test says: on a loaded machine the first pip may have ended in that half second
        # (a kill between two pip runs leaves the checker's scratch directory: no supervisor covers it yet)
        while not _pip_running(token) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        left = wait_gone(token, 10.0)
        assert left == [], "survivors: %s" % left
        assert os.listdir(str(tmp)) == [], "temporary files left: %s" % os.listdir(str(tmp))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in survivors(token):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.stderr.close()


@HANG
def test_timeout_kills_the_command_and_what_it_started(tmp_path):
    """run()'s timeout: the command and a detached grandchild (setsid) are gone when it raises."""
    token = "childsup-timeout-%d" % os.getpid()
    code = ("import os, subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(600)'])\n"
            "time.sleep(600)\n")
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        child.run([sys.executable, "-c", code], timeout=2, env=dict(os.environ, PF_FAULT_TOKEN=token),
                  workdir=str(tmp_path))
    assert time.monotonic() - t0 < 15
    assert wait_gone(token, 5.0) == []
    assert os.listdir(str(tmp_path)) == []


def test_run_is_a_drop_in_for_subprocess_run(tmp_path):
    """Exit codes, captured text, stderr folded into stdout, a missing program, a signal death:
    the same answers as subprocess.run gives for the same commands."""
    cases = [
        ([sys.executable, "-c", "import sys; print('out'); sys.stderr.write('err\\n'); sys.exit(3)"],
         dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)),
        (["sh", "-c", "echo a; echo b >&2"], dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)),
        (["sh", "-c", "kill -9 $$"], dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)),
        ([sys.executable, "-c", "print(1)"], dict(capture_output=True)),
    ]
    for cmd, kw in cases:
        want = subprocess.run(cmd, **kw)
        got = child.run(cmd, **kw)
        assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr), cmd
    with pytest.raises(FileNotFoundError):
        child.run([str(tmp_path / "no-such-program")])
    got = child.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"], stdout=subprocess.PIPE,
                    text=True, workdir=str(tmp_path))
    assert got.stdout.strip().startswith(str(tmp_path))  # pip's own temporary files go where they are removed
    assert os.listdir(str(tmp_path)) == []


@HANG
@pytest.mark.parametrize("how", ["SIGKILL", "exit"])
def test_a_scratch_directory_goes_when_the_checker_dies_between_children(tmp_path, how):
    """probes/child.scratch: the checker killed (or exiting without cleaning up) while it holds a
    scratch directory and no child runs: the watcher removes it; an orderly end leaves nothing
    either (the [wheelhouse] case above, where a kill between two pip runs left it)."""
    code = ("import os, sys, time\nsys.path.insert(0, %r)\nfrom preflight.probes import child\n"
            "cm = child.scratch('preflight-t-')\nd = cm.__enter__()\nopen(os.path.join(d, 'req.txt'), 'w').write('x')\n"
            "print(d, flush=True)\n" % ROOT) + ("time.sleep(60)\n" if how == "SIGKILL" else "os._exit(0)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, universal_newlines=True,
                            start_new_session=True)
    d = proc.stdout.readline().strip()
    assert d and os.path.isdir(d)
    if how == "SIGKILL":
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the watcher is in a session of its own
    proc.wait(30)
    deadline = time.monotonic() + 10
    while os.path.exists(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(d)


def test_a_scratch_directory_is_removed_at_the_end_of_its_block():
    with child.scratch("preflight-t-") as d:
        open(os.path.join(d, "f"), "w").write("x")
        assert os.path.isdir(d) and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert not os.path.exists(d)
