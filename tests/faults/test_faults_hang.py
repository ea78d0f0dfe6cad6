"""Fault suite, HANG: no exit, or processes left running (tests/../shared fault cases c16, sg03,
sg04 and their kind). Every exit path of the checker while probes with detached grandchildren
run: normal end, an exception, SIGTERM, SIGINT, SIGHUP, SIGKILL; each ends with no process of
the target left, checked in /proc."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from faultkit import DAEMON, HANG_WITH_CHILDREN, ROOT, fake_dist, run_pyz, survivors, target, wait_gone, wait_running

from preflight.probes.process import collect, run_argv, run_script, spawn_script

pytestmark = pytest.mark.fault("HANG")


def test_setsid_daemon_is_killed_and_the_probe_ends_on_time(tmp_path):
    """c16: a grandchild that setsid()s and ignores SIGTERM; the probe itself hangs. FAIL after
    about the timeout (not timeout + 10 s), nothing left."""
    py, token = target(tmp_path, {"sitecustomize.py": DAEMON + "\nimport time\ntime.sleep(600)\n"})
    t0 = time.monotonic()
    out = run_script(py, "info", timeout=3)
    took = time.monotonic() - t0
    assert out.timed_out and out.last("info") is None
    assert took < 6, took
    assert wait_gone(token, 3) == []


def test_daemon_of_a_probe_that_ends_is_killed(tmp_path):
    """The probe answers and exits; its setsid daemon is still killed (the subreaper adopts it)."""
    py, token = target(tmp_path, {"sitecustomize.py": DAEMON})
    out = run_script(py, "info", timeout=20)
    assert out.ok and out.last("info") is not None
    assert wait_gone(token, 3) == []


def test_deep_tree_of_daemons_is_killed(tmp_path):
    """Three levels of children, each in its own session, the middle ones exiting: all gone."""
    chain = ("import os, time\n"
             "def spawn(depth):\n"
             "    if depth == 0:\n"
             "        return\n"
             "    if os.fork() == 0:\n"
             "        os.setsid()\n"
             "        spawn(depth - 1)\n"
             "        time.sleep(600)\n"
             "        os._exit(0)\n"
             "spawn(3)\n")
    py, token = target(tmp_path, {"sitecustomize.py": chain})
    out = run_script(py, "info", timeout=20)
    assert out.ok
    assert wait_gone(token, 3) == []


def test_run_argv_command_leaving_a_daemon(tmp_path):
    """The same rules for plain commands (nvidia-smi and the NVML probe go through run_argv)."""
    token = "argv%d" % os.getpid()
    script = "(setsid sleep 600 &) ; echo started"
    t0 = time.monotonic()
    out = run_argv(["sh", "-c", script], timeout=10, env={"PF_FAULT_TOKEN": token})
    assert out.ok and "started" in out.stdout_tail
    assert time.monotonic() - t0 < 5
    assert wait_gone(token, 3) == []


def _hanging_target(tmp_path):
    files = {"sitecustomize.py": "import os\nif os.environ.get('PF_HANG_NOW'):\n" +
             "\n".join("    " + ln for ln in HANG_WITH_CHILDREN.strip().splitlines()) + "\n"}
    files.update(fake_dist("torch", "2.11.0", HANG_WITH_CHILDREN))
    return target(tmp_path, files)


@pytest.mark.parametrize("how", ["normal", "SIGTERM", "SIGINT", "SIGHUP", "SIGKILL"])
def test_every_exit_of_the_checker_leaves_nothing(pyz, tmp_path, how):
    """sg03, sg04: the checker runs the imports stage; `import torch` starts a child and a
    setsid daemon and hangs. However the checker ends, every process of the target is gone."""
    py, token = _hanging_target(tmp_path)
    argv = [sys.executable, "-I", "-S", pyz, "check", "--python", py, "--stage", "python,imports",
            "--json", str(tmp_path / "r.json"), "--timeout", "4" if how == "normal" else "120"]
    # a test run in the background inherits SIGINT ignored (the shell's rule for background jobs),
    # and Python keeps an ignored SIGINT ignored: give the checker the default, as a terminal would
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert len(wait_running(token, 3)) >= 3, "the probe and its children never started"
        if how != "normal":
            proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "normal":
        assert proc.returncode == 1
        rows = {r["id"]: r for r in json.load(open(str(tmp_path / "r.json")))["results"]}
        assert rows["imports.torch"]["status"] == "fail"
    elif how == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 2 and "interrupted" in err, err
    assert "Traceback" not in err
    assert wait_gone(token, 5) == [], "left running after %s" % how


DRIVER = """
import sys, time
sys.path.insert(0, %(root)r)
import preflight.runner as runner
from preflight import cli
from preflight.probes.process import spawn_script

def broken(ctx, stages, progress=None):
    spawn_script(%(py)r, "info")  # a probe left running when the checker fails
    time.sleep(%(wait)s)
    raise RuntimeError("injected failure of the checker")

runner.run = broken
if %(uncaught)r:
    spawn_script(%(py)r, "info")
    time.sleep(%(wait)s)
    raise RuntimeError("uncaught")
sys.exit(cli.main(["check", "--stage", "python"]))
"""


@pytest.mark.parametrize("uncaught", [False, True], ids=["checker-error", "uncaught-exception"])
def test_exception_in_the_checker_leaves_nothing(tmp_path, uncaught):
    """The checker's own failure (caught by cli.main, or not caught at all): probes gone."""
    py, token = target(tmp_path, {"sitecustomize.py": HANG_WITH_CHILDREN})
    code = DRIVER % {"root": ROOT, "py": py, "wait": 3, "uncaught": uncaught}
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    if uncaught:
        assert proc.returncode == 1 and "uncaught" in proc.stderr
    else:
        assert proc.returncode == 2 and "injected failure" in proc.stderr
    assert wait_gone(token, 5) == []


def test_collect_on_a_live_rank_returns_at_once(tmp_path):
    """The nccl stage polls its ranks and collects the live ones with a short deadline: the
    collect honours it even when a grandchild holds the pipes."""
    py, token = target(tmp_path, {"sitecustomize.py": HANG_WITH_CHILDREN})
    proc = spawn_script(py, "info")
    wait_running(token, 3)
    t0 = time.monotonic()
    out = collect(proc, 0.5, ["rank 0"])
    assert out.timed_out and time.monotonic() - t0 < 4
    assert wait_gone(token, 3) == []


@pytest.mark.parametrize("keys,limit_hit", [(45000, False), (400000, True)])
def test_large_config_file_stays_within_timeout(pyz, tmp_path, keys, limit_hit):
    """f05: a large config for `config --file`: under the size limit (1 MiB) the run ends within
    about --timeout; over it, it is refused at once, never minutes past the deadline."""
    big = tmp_path / "big.json"
    tree = {"data": {"train_batch_size": 60}, "trainer": {"extra": {"k%d" % i: "v%d" % i for i in range(keys)}}}
    big.write_text(json.dumps(tree))
    assert (big.stat().st_size > 1 << 20) == limit_hit
    t0 = time.monotonic()
    proc = run_pyz(pyz, "config", "--verl", "0.9.1", "--file", str(big), "--timeout", "5", "--json",
                   str(tmp_path / "f.json"), timeout=120)
    took = time.monotonic() - t0
    assert "Traceback" not in proc.stderr and "please report" not in proc.stderr, proc.stderr
    if limit_hit:
        assert proc.returncode == 2 and "MiB" in proc.stderr and took < 15
    else:
        assert proc.returncode in (0, 1) and took < 5 + 25, took


HUGE = {  # 100 KB values of shapes that make a backtracking pattern quadratic
    "NCCL_BIG_WORD": "a" * 100000,
    "NCCL_BIG_ASSIGN": "a=" * 50000,
    "NCCL_BIG_COLON": "KEY: " * 20000,
    "NCCL_BIG_URL": "https://" + "a" * 100000,
    "NCCL_BIG_DOTS": "a." * 50000,
    "HF_BIG_QUOTE": "'" + "\\'" * 50000,
    "RAY_BIG_TOKEN": "hf_" + "A" * 100000,
}


def test_redaction_of_huge_variables_stays_within_timeout(pyz, tmp_path):
    """e12, e12b: the gpu stage captures and redacts NCCL_/HF_/RAY_ variables; 100 KB values of
    every shape finish within the stage's time, not minutes later."""
    env = dict(os.environ, **HUGE)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--stage", "gpu", "--timeout", "5", "--json",
                           str(tmp_path / "r.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          universal_newlines=True, timeout=120)
    took = time.monotonic() - t0
    assert "Traceback" not in proc.stderr
    assert took < 5 + 25, took
    assert json.load(open(str(tmp_path / "r.json")))["results"]


@pytest.mark.parametrize("name", sorted(HUGE))
def test_redact_is_fast_on_each_shape(name):
    """The mechanism itself, one shape at a time (and twice the size: linear, not quadratic)."""
    from preflight.redact import redact

    times = []
    for n in (1, 2):
        value = HUGE[name] * n
        t0 = time.perf_counter()
        redact({"variables": {name: value}, "text": "%s=%s" % (name, value)})
        times.append(time.perf_counter() - t0)
    assert times[0] < 2.0 and times[1] < 4.0, times
