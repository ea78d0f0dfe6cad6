"""``--dry-run`` on spec, image and install: the stack and its top-level pins, in seconds, with
nothing written, downloaded or installed; the pins are the resolver's own."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MACHINE = ["--verl", "0.9.1", "--gpu", "H200", "--driver", "580.95.05", "--python", "3.12"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.mark.parametrize("command,where", [("spec", "-o"), ("image", "-o"), ("install", "--prefix")])
def test_dry_run_writes_nothing(command, where, tmp_path):
    from preflight import matrix
    from preflight.outputs.spec import SpecOptions, top_level
    from preflight.resolve import resolve

    target = tmp_path / "out"
    p = cli(command, *MACHINE, where, str(target), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert not target.exists() and not (tmp_path / "out.spec").exists()
    mx = matrix.load()
    res = resolve(mx, "0.9.1", gpu="H200", driver="580.95.05", python="3.12")
    reqs, _, _ = top_level(mx, res, SpecOptions())
    assert "top-level pins: %s" % " ".join(reqs) in p.stdout  # the plan is the output: > plan.txt keeps it
    assert "nothing was written" in p.stdout


def test_backend_none_is_one_spelling(tmp_path):
    """spec/install/image take --backend none like check does (the old --no-backend still works)."""
    a = cli("spec", *MACHINE, "--backend", "none", "-o", str(tmp_path / "a"), "--dry-run")
    b = cli("spec", *MACHINE, "--no-backend", "-o", str(tmp_path / "b"), "--dry-run")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    pins = [l for l in a.stdout.splitlines() if l.startswith("top-level pins:")]
    assert pins and "vllm" not in pins[0] and "verl[" in pins[0]
    assert pins == [l for l in b.stdout.splitlines() if l.startswith("top-level pins:")]


def test_satisfied_prefix_answers_without_pip(tmp_path):
    """install on a prefix that holds the lock of the same stack resolves in seconds (no pip):
    the lock's header pins and indexes match the resolution and the marker records its sha256."""
    import argparse
    import json

    from preflight import matrix
    from preflight.commands import install, stack
    from preflight.outputs.install import INSTALLED, lock_digest
    from preflight.outputs.spec import SpecOptions, top_level
    from preflight.resolve import resolve

    mx = matrix.load()
    res = resolve(mx, "0.9.1", gpu="H200", driver="580.95.05", python="3.12")
    reqs, extra, _ = top_level(mx, res, SpecOptions())
    prefix, spec_dir = tmp_path / "env", tmp_path / "env.spec"
    prefix.mkdir()
    spec_dir.mkdir()
    lock = "# top-level pins: %s\n%s\nverl==0.9.1 \\\n    --hash=sha256:%s\n" % (
        " ".join(reqs), "".join("--extra-index-url %s\n" % u for u in extra), "0" * 64)
    (spec_dir / "requirements.lock").write_text(lock)
    (prefix / INSTALLED).write_text(json.dumps({"lock_sha256": lock_digest(lock)}))
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    p = argparse.ArgumentParser()
    stack.add_stack_options(p)
    args = p.parse_args(MACHINE)
    assert install.satisfied_lock(args, str(prefix), str(spec_dir)) == str(spec_dir / "requirements.lock")
    other = p.parse_args(MACHINE[:-2] + ["--python", "3.11"])  # another stack: resolve and lock again
    assert install.satisfied_lock(other, str(prefix), str(spec_dir)) is None
    (prefix / INSTALLED).write_text(json.dumps({"lock_sha256": "x"}))  # installed something else
    assert install.satisfied_lock(args, str(prefix), str(spec_dir)) is None
