"""Output paths are proven creatable before any work (preflight/paths.py, atomic.creation_problem):
the kernel is the truth, not ``os.access``, which says yes to root on /proc and /sys."""

import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE = ["--no-probe", "--verl", "0.9.1", "--cc", "9.0", "--driver", "580.65.06"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.mark.parametrize("args,where", [
    (["spec"] + MACHINE + ["-o", "/proc/verl-spec"], "/proc"),
    (["spec"] + MACHINE + ["-o", "/proc/a/b/verl-spec"], "/proc"),
    (["resolve"] + MACHINE + ["--json", "/sys/r.json"], "/sys"),
    (["resolve"] + MACHINE + ["--format", "markdown", "--output", "/sys/r.md"], "/sys"),
])
def test_a_place_the_kernel_refuses_is_a_usage_error_before_any_work(args, where):
    t0 = time.monotonic()
    p = cli(*args)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert ("cannot create anything in %s" % where) in lines[0] and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 60  # refused up front: spec never reached its lock


def test_a_creatable_place_is_left_as_it_was(tmp_path):
    p = cli("resolve", *MACHINE, "--json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["r.json"]  # the probe directory is gone
