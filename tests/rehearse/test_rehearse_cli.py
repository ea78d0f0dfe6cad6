"""The rehearse command line: bad input is one line and exit 2, before anything runs."""

import subprocess
import sys

ROOT = __file__.rsplit("/tests/", 1)[0]


def _run(*argv):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(argv), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


def test_rehearse_needs_a_launch():
    p = _run("rehearse")
    assert p.returncode == 2 and p.stderr.strip().startswith("error: give the launch after --")
    assert len(p.stderr.strip().splitlines()) == 1


def test_check_rehearse_needs_launch():
    p = _run("check", "--stage", "host", "--rehearse")
    assert p.returncode == 2 and "--rehearse needs --launch" in p.stderr


def test_rehearse_refuses_a_launch_that_does_not_compose():
    p = _run("rehearse", "--verl", "0.9.1", "--", "python3 -m verl.trainer.main_ppo trainer.no_such_key=1")
    assert p.returncode == 2 and "does not compose" in p.stderr and "no_such_key" in p.stderr
