"""Mechanism "bootstrap.sh": its --log goes through the same rules as the tool's writer (no
foreign link, FIFO or file, no shared directory), every download is bounded (connect, total,
stall, size), signals reach the checker and are waited for, values are validated and stay one
word (paths with spaces work, nothing is globbed). fault_cases_3 b01, b03, b05, b06 and new
members of their kinds."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import faultkit
import seckit
from seckit import need_root, shared_dir, victim

ROOT = seckit.ROOT
LOSS = pytest.mark.fault("LOSS")
HANG = pytest.mark.fault("HANG")
WRONG = pytest.mark.fault("WRONG")


@pytest.fixture(scope="session")
def pyz(pyz_file):
    """bootstrap.sh takes the archive itself (it checks its hash and runs a private copy)."""
    return pyz_file



def bootstrap(*args, env=None, timeout=120, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(["sh", os.path.join(ROOT, "bootstrap.sh")] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, env=e, timeout=timeout, **kw)


@LOSS
@pytest.mark.parametrize("shape", ["link", "fifo", "other-owner", "world-writable-dir", "dir-link",
                                   "other-owner-dir"])  # bootstrap.sh does not judge groups
def test_b06_log_never_goes_where_another_user_points(pyz, tmp_path, shape):
    need_root()
    seckit.reachable(str(tmp_path))
    os.makedirs(str(tmp_path / "root-owned"))
    v = victim(str(tmp_path / "root-owned" / "rootfile"))
    out = str(tmp_path / "shared" / "out" / "bs.log")
    os.makedirs(str(tmp_path / "shared"))
    if shape not in ("dir-link", "other-owner-dir"):
        os.makedirs(os.path.dirname(out))
    path = seckit.plant(shape, out, v)
    before = seckit.snapshot(str(tmp_path))
    p = bootstrap("--pyz", pyz, "--check-only", "--python", sys.executable, "--log", path, "--", "--stage", "host",
                  "-q", timeout=60)
    assert p.returncode in (0, 1), p.stderr  # the verdict is the checker's, as for any bad --log
    assert p.stderr.count("cannot be written") == 1, p.stderr
    assert seckit.snapshot(str(tmp_path)) == before and open(v).read().startswith("root:")


@LOSS
def test_log_is_new_and_private_or_the_users_own(pyz, tmp_path):
    log = tmp_path / "dir with space" / "b s.log"
    log.parent.mkdir()
    p = bootstrap("--pyz", pyz, "--check-only", "--python", sys.executable, "--log", str(log), "--json",
                  str(log.parent / "r 1.json"), "--", "--stage", "host", "-q")
    assert p.returncode in (0, 1), p.stderr
    assert oct(os.stat(str(log)).st_mode & 0o777) == "0o600" and "bootstrap.sh: " in log.read_text()
    assert (log.parent / "r 1.json").exists()  # a path with spaces is one word all the way
    again = bootstrap("--pyz", pyz, "--check-only", "--python", sys.executable, "--log", str(log), "--",
                      "--stage", "host", "-q")
    assert again.returncode in (0, 1) and log.read_text().count("bootstrap.sh: using") == 2


class _Silent:
    """A TCP server on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        return "http://127.0.0.1:%d/preflight.pyz" % self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


@HANG
def test_b01_a_download_that_never_answers_ends(tmp_path):
    with _Silent() as url:
        t0 = time.monotonic()
        p = bootstrap("--pyz", url, "--sha256", "0" * 64, "--check-only", env={"VERL_PREFLIGHT_DOWNLOAD_TIMEOUT": "3"},
                      timeout=60)
        took = time.monotonic() - t0
    assert p.returncode == 4 and "within 3 s" in p.stderr, p.stderr
    assert took < 30, took


@HANG
def test_the_download_limits_are_checked_values(tmp_path):
    p = bootstrap("--pyz", "http://127.0.0.1:9/x.pyz", "--sha256", "0" * 64, env={"VERL_PREFLIGHT_DOWNLOAD_TIMEOUT": "3 -K x"})
    assert p.returncode == 2 and "whole numbers" in p.stderr


@HANG
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_b03_a_signal_reaches_the_checker(pyz, tmp_path, sig):
    py, token = faultkit.target(tmp_path, {"sitecustomize.py": "import time\ntime.sleep(600)\n"})
    proc = subprocess.Popen(["sh", os.path.join(ROOT, "bootstrap.sh"), "--pyz", pyz, "--check-only", "--python", py,
                             "--", "--stage", "python", "--timeout", "60"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True,
                            env=dict(os.environ, PF_FAULT_TOKEN=token))
    try:
        assert faultkit.wait_running(token, 3, within=30), "the probe never started"
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=90)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    # the signal, not the probe's 60 s deadline, ended it (on a loaded machine the stop can take tens of s)
    assert proc.returncode == 2 and took < 50, (took, err[-2000:])
    assert "stopped by SIG" in err
    assert faultkit.wait_gone(token, 10) == []


@WRONG
@pytest.mark.parametrize("verl", ["0.9.1 --system-site-packages", "--system-site-packages", "0.9.1;id", "$(id)", ""])
def test_b05_verl_is_a_version_or_an_error(pyz, verl):
    p = bootstrap("--pyz", pyz, "--dry-run", "--verl", verl)
    assert p.returncode == 2 and "not a version" in p.stderr, p.stderr


@WRONG
def test_values_stay_one_word_and_nothing_is_globbed(pyz, tmp_path):
    (tmp_path / "--system-site-packages").write_text("")
    p = bootstrap("--pyz", pyz, "--dry-run", "--verl", "0.9.1", "--prefix", str(tmp_path / "my prefix"),
                  "--install-args", "*", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "--system-site-packages" not in p.stderr and " * " in p.stderr + " ", p.stderr


def test_bootstrap_as_another_user_on_a_shared_tmp(pyz, tmp_path):
    # the private work directory and the checks work for a plain user too (TMPDIR a sticky /tmp)
    need_root()
    seckit.reachable(str(tmp_path))
    d = shared_dir(str(tmp_path / "pub"))
    mine = os.path.join(d, "preflight.pyz")
    with open(pyz, "rb") as src, open(mine, "wb") as dst:
        dst.write(src.read())
    os.chmod(mine, 0o644)
    import shutil

    shutil.copy(os.path.join(ROOT, "bootstrap.sh"), os.path.join(d, "bs.sh"))
    os.chmod(os.path.join(d, "bs.sh"), 0o755)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "TMPDIR=" + d,
                        "PATH=/usr/bin:/bin", "sh", os.path.join(d, "bs.sh"), "--pyz", mine, "--check-only",
                        "--python", "/usr/bin/python3", "--log", os.path.join(d, "nobody.log"), "--", "--stage",
                        "host", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert os.lstat(os.path.join(d, "nobody.log")).st_uid == seckit.NOBODY
