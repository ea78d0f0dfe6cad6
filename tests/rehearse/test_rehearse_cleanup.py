"""Every process of a rehearsal is gone at the end: after its deadline, when the launch exits
(failing or not) with its workers still up, and after SIGINT, SIGTERM or SIGHUP to the checker, with a fake long-running launch that leaves a child in its own process
group and a double-forked setsid() daemon (what Ray's raylet and vLLM's engine look like to the
supervisor). The truth is the kernel's: the pids the fake wrote down no longer exist."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from preflight.rehearse import phases, supervise

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE = textwrap.dedent('''
    import os, subprocess, sys, time
    pids = os.environ["FAKE_PIDS"]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    if os.fork() == 0:  # a daemon: double fork + setsid, as a detached server does
        os.setsid()
        if os.fork() == 0:
            with open(pids, "a") as fh:
                fh.write("%d\\n" % os.getpid())
            time.sleep(600)
        os._exit(0)
    with open(pids, "a") as fh:
        fh.write("%d\\n%d\\n" % (os.getpid(), child.pid))
    print("ray init kwargs: {}", flush=True)
    print("(TaskRunnerV1 pid=%d) INFO:2026-12-01 15:00:00,000:worker group kwargs: {}" % os.getpid(), flush=True)
    if os.environ.get("FAKE_DEAD_ACTOR"):  # Ray's ActorDiedError text, as the plant-2 run on the H200 printed it
        print("(RewardLoopWorker pid=%d) Exception raised in creation task: The actor died because of an error raised "
              "in its creation task, ray::reward_loop_worker_1:RewardLoopWorker.__init__() (pid=%d, ip=127.0.0.1)"
              % (child.pid, child.pid), flush=True)
        if os.environ.get("FAKE_PROGRESS"):  # ...and verl still moving on after it
            time.sleep(0.5)
            print("(TaskRunnerV1 pid=%d) INFO:2026-12-01 15:00:09,000:all initialize finished, ready to fit"
                  % os.getpid(), flush=True)
    if os.environ.get("FAKE_EXIT"):  # verl failing (or finishing) with its workers still up
        sys.exit(int(os.environ["FAKE_EXIT"]))
    time.sleep(600)
''')


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pids(path, want=3, wait=30.0):
    end = time.time() + wait
    while time.time() < end:
        if os.path.exists(path):
            got = [int(x) for x in open(path).read().split()]
            if len(got) >= want:
                return got
        time.sleep(0.1)
    raise AssertionError("the fake launch did not start")


@pytest.fixture()
def fake(tmp_path):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "fake_verl.py").write_text(FAKE)
    work = tmp_path / "work"
    work.mkdir()
    return {"PYTHONPATH": str(mod), "FAKE_PIDS": str(tmp_path / "pids")}, str(work)


def test_deadline_ends_everything(fake):
    env, work = fake
    out = supervise.run(sys.executable, ["a=1"], work, timeout=20.0, env=env, module="fake_verl")
    pids = _pids(env["FAKE_PIDS"], wait=1)
    assert out.timed_out
    assert not [p for p in pids if _alive(p)]
    assert out.leftovers == []
    assert [t for t, line in out.lines if "worker group kwargs" in line]  # the log was kept to the end
    assert {"ray_init", "worker_group"} <= set(phases.markers(out.lines))


@pytest.mark.parametrize("status", [3, 0])
def test_exit_with_workers_still_up_ends_everything(fake, status):
    """verl exiting on its own (a failure, or success) while a child and a detached daemon it
    started still run: they are ended at once, not at the deadline."""
    env, work = fake
    env = dict(env, FAKE_EXIT=str(status))
    out = supervise.run(sys.executable, [], work, timeout=120.0, env=env, module="fake_verl")
    pids = _pids(env["FAKE_PIDS"], wait=1)
    assert out.returncode == status and not out.timed_out
    assert out.seconds < 60
    assert not [p for p in pids if _alive(p)]
    assert pids[0] not in [p["pid"] for p in out.leftovers]  # the launch itself had exited


@pytest.mark.parametrize("progress", [False, True])
def test_run_that_keeps_waiting_for_a_dead_actor_is_stopped(fake, progress):
    """verl keeps waiting after a Ray actor died in its creation task (the H200's plant 2 ran to its
    deadline): the run is stopped stall_s after that line, or after the last progress line that
    followed it, and everything it started is gone."""
    env, work = fake
    env = dict(env, FAKE_DEAD_ACTOR="1", **({"FAKE_PROGRESS": "1"} if progress else {}))
    out = supervise.run(sys.executable, [], work, timeout=120.0, env=env, module="fake_verl", stall_s=3.0)
    pids = _pids(env["FAKE_PIDS"], wait=1)
    assert out.stalled is not None and "died because of an error raised in its creation task" in out.stalled[1]
    assert not out.timed_out and not out.ok and out.seconds < 60
    assert not [p for p in pids if _alive(p)]
    dead = [t for t, line in out.lines if "creation task" in line][0]
    assert abs(out.stalled[0] - dead) < 0.5
    moved = [t for t, line in out.lines if "all initialize finished" in line]
    assert bool(moved) == progress
    # stopped stall_s after the clock's last start: the dead actor's line, or the progress line after it
    assert out.seconds >= (moved[0] if progress else dead) + 3.0


DRIVER = textwrap.dedent('''
    import signal, sys
    sys.path.insert(0, %(root)r)
    from preflight.probes.process import kill_all
    from preflight.rehearse import supervise

    def on_term(signum, frame):  # what preflight/cli.py does with SIGTERM and SIGHUP
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    try:
        supervise.run(sys.executable, [], %(work)r, timeout=300.0, env=%(env)r, module="fake_verl")
    except KeyboardInterrupt:
        kill_all()
        sys.exit(130)
''')


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_to_the_checker_ends_everything(fake, sig):
    env, work = fake
    drv = subprocess.Popen([sys.executable, "-c", DRIVER % {"root": ROOT, "work": work, "env": env}])
    try:
        pids = _pids(env["FAKE_PIDS"])
        assert all(_alive(p) for p in pids)
        drv.send_signal(sig)
        assert drv.wait(30) == 130
        end = time.time() + 15
        while time.time() < end and [p for p in pids if _alive(p)]:
            time.sleep(0.1)
        assert not [p for p in pids if _alive(p)]
    finally:
        if drv.poll() is None:
            drv.kill()
