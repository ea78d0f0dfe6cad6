"""Mechanisms "resource limits" and "--status-dir verdicts": under a small ``ulimit -v``, ``-n`` or
``-u`` the tool gives its report or one line naming the limit; deep input is one line; a signal at
any moment after start leaves a verdict word in --status-dir. fault_cases_3 p01, c03 and new
members (ulimit -n, ulimit -u as a plain user, a deep --config of check, signals at 0-300 ms)."""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

import faultkit
import seckit
from seckit import need_root, one_line_error, pf

CRASH = pytest.mark.fault("CRASH")
WRONG = pytest.mark.fault("WRONG")


def _limited(pyz, limit, value, *args, user=None, python=None, timeout=180):
    def pre():
        resource.setrlimit(limit, (value, value))

    cmd = [python or sys.executable, "-I", "-S", pyz] + list(args)
    if user:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, preexec_fn=pre)


def _report_or_one_line(p, out, words):
    if p.returncode in (0, 1):
        doc = json.load(open(out))
        return doc["exit_code"] == p.returncode and doc["results"]
    return one_line_error(p) and any(w in p.stderr for w in words)


@CRASH
@pytest.mark.parametrize("kib", [400000, 250000])
def test_p01_small_address_space(pyz, tmp_path, kib):
    out = str(tmp_path / "r.json")
    p = _limited(pyz, resource.RLIMIT_AS, kib * 1024, "check", "--stage", "host,python,packages", "-q", "--json", out)
    assert _report_or_one_line(p, out, ["ulimit -v"]), (p.returncode, p.stderr[-1500:])


@CRASH
@pytest.mark.parametrize("n", [24, 12])
def test_few_open_files(pyz, tmp_path, n):
    out = str(tmp_path / "r.json")
    p = _limited(pyz, resource.RLIMIT_NOFILE, n, "check", "--stage", "host,python", "-q", "--json", out)
    assert _report_or_one_line(p, out, ["ulimit -n"]), (p.returncode, p.stderr[-1500:])


@CRASH
@pytest.mark.parametrize("extra", [1, 4, 12])
def test_few_processes_as_a_plain_user(pyz_file, tmp_path, extra):
    # RLIMIT_NPROC does not bind root: the run is uid 65534's, with room for `extra` more processes
    need_root()
    if not shutil.which("setpriv") or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs setpriv and /usr/bin/python3")
    seckit.reachable(str(tmp_path))
    shared = seckit.shared_dir(str(tmp_path / "shared"))
    pub = tmp_path / "shared" / "pub"
    seckit.as_nobody("mkdir", "-m", "755", str(pub))
    mine = str(tmp_path / "preflight.pyz")
    shutil.copy(pyz_file, mine)
    os.chmod(mine, 0o644)
    assert shared
    theirs = sum(1 for d in os.listdir("/proc") if d.isdigit() and _uid(d) == seckit.NOBODY)
    out = str(pub / "r.json")
    p = _limited(mine, resource.RLIMIT_NPROC, theirs + extra, "check", "--stage", "host,python", "-q", "--python",
                 "/usr/bin/python3", "--json", out, user=seckit.NOBODY, python="/usr/bin/python3")
    assert _report_or_one_line(p, out, ["ulimit -u"]), (p.returncode, p.stderr[-1500:])


def _uid(pid):
    try:
        with open("/proc/%s/status" % pid) as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return -1
    return -1


@CRASH
@pytest.mark.parametrize("how", [["config", "--verl", "0.9.1", "--file"], ["check", "--stage", "config", "--verl",
                                                                           "0.9.1", "--config"]])
def test_c03_deep_json_is_one_line(pyz, tmp_path, how):
    deep = tmp_path / "deep.json"
    n = 150000
    deep.write_text('{"a":' * n + "1" + "}" * n)
    p = pf(pyz, *(how + [str(deep)]))
    assert p.returncode in (1, 2) and "Traceback" not in p.stderr and "RecursionError" not in p.stderr + p.stdout, \
        p.stderr[-1500:]
    assert "too deep" in p.stderr + p.stdout


@WRONG
@pytest.mark.parametrize("ms", [0, 20, 50, 100, 300])
def test_status_dir_ends_with_a_verdict_whenever_the_signal_comes(pyz, tmp_path, ms):
    py, token = faultkit.target(tmp_path, {"sitecustomize.py": "import time\ntime.sleep(600)\n"})
    d = tmp_path / "status"
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz, "check", "--stage", "host,python", "-q", "--python", py,
                             "--status-dir", str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PF_FAULT_TOKEN=token))
    time.sleep(ms / 1000.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    verdict = d / "verdict"
    if proc.returncode == -signal.SIGTERM:
        # the signal came before the interpreter ran the zipapp's first line: nothing was touched
        assert not d.exists() or not os.listdir(str(d)), os.listdir(str(d))
    else:
        assert proc.returncode == 2 and verdict.read_text() in ("interrupted\n", "not_ready\n", "ready\n")
        for stage in ("host", "python"):
            assert (d / stage).read_text().strip() in ("ready", "failed", "skipped", "interrupted")
    assert faultkit.wait_gone(token, 10) == []
