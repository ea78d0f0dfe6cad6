"""The packages/imports stages are gated on python.version, and a probe's result does not depend
on the checker's current directory."""

import json
import os
import subprocess
import sys
import venv

import pytest
from helpers import rows

from preflight.result import Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("version", ["3.7.9", "3.6.15"])
def test_python_version_fail_skips_packages_and_imports(ctx_factory, version):
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0")], python_version=version)
    got = rows(ctx, ["python", "packages", "imports"])
    assert got["python.version"].status == Status.FAIL
    later = [r for r in got.values() if r.stage in ("packages", "imports")]
    assert later, got
    for r in later:
        assert r.status == Status.SKIP and r.caused_by == ["python.version"], r
        assert "python.version failed" in r.message
        assert not r.fix  # no pip command for an interpreter that cannot take it


@pytest.mark.fault("WRONG")
def test_python_version_pass_or_warn_lets_packages_run(ctx_factory):
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0")], python_version="3.11.7")
    got = rows(ctx, ["python", "packages"])
    assert got["python.version"].status in (Status.PASS, Status.WARN)
    assert any(r.stage == "packages" and r.status != Status.SKIP for r in got.values())


def _fake_metadata(where):
    """A checkout after ``pip install .``: an egg-info and a dist-info naming a requirement no venv has."""
    egg = os.path.join(where, "fake_cwd_pkg.egg-info")
    os.mkdir(egg)
    with open(os.path.join(egg, "PKG-INFO"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: fake-cwd-pkg\nVersion: 0.1.0\n")
    with open(os.path.join(egg, "requires.txt"), "w") as fh:
        fh.write("no-such-dependency-x5>=1\n")
    dist = os.path.join(where, "other_cwd_pkg-1.0.dist-info")
    os.mkdir(dist)
    with open(os.path.join(dist, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: other-cwd-pkg\nVersion: 1.0\nRequires-Dist: no-such-dependency-y5\n")


def _packages(cwd, python, out):
    env = dict(os.environ, PYTHONPATH=ROOT)
    subprocess.run([sys.executable, "-m", "preflight", "check", "--python", python, "--stage", "packages",
                    "--json", out], cwd=str(cwd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=300, universal_newlines=True)
    with open(out) as fh:
        data = json.load(fh)
    return {r["id"]: (r["status"], r["message"]) for r in data["results"]}


@pytest.mark.fault("WRONG")
def test_cwd_metadata_does_not_reach_the_target(tmp_path):
    clean = tmp_path / "venv"
    venv.create(str(clean), with_pip=False)
    python = str(clean / "bin" / "python")
    dirty = tmp_path / "checkout"
    dirty.mkdir()
    _fake_metadata(str(dirty))
    neutral = tmp_path / "elsewhere"
    neutral.mkdir()
    # the target really sees its cwd on sys.path when run there by hand
    seen = subprocess.run([python, "-c", "import sys; print(sys.path[0] == '')"], cwd=str(dirty),
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    assert seen == "True"
    a = _packages(dirty, python, str(tmp_path / "a.json"))
    b = _packages(neutral, python, str(tmp_path / "b.json"))
    assert a == b
    text = json.dumps(a)
    assert "no-such-dependency" not in text and "cwd-pkg" not in text


@pytest.mark.fault("WRONG")
def test_probe_runs_outside_the_callers_directory(tmp_path, monkeypatch):
    from preflight.probes.process import run_argv

    os.symlink(sys.executable, str(tmp_path / "py"))
    monkeypatch.chdir(str(tmp_path))
    # a relative interpreter path still means the caller's directory
    out = run_argv(["./py", "-c", "import os, sys; print(os.getcwd()); print(sys.path[0] == '')"], timeout=60)
    assert out.ok, out.describe()
    cwd, first_is_cwd = out.stdout_tail.split()
    assert os.path.realpath(cwd) != os.path.realpath(str(tmp_path)) and first_is_cwd == "True"
    assert os.listdir(cwd) == [] if os.path.isdir(cwd) else True  # private and empty (removed afterwards)


@pytest.mark.fault("WRONG")
def test_path_arguments_reach_the_probe_absolute(tmp_path, monkeypatch):
    # a relative model path (actor_rollout_ref.model.path=./m) means the caller's directory, and
    # the probe no longer runs there: it must get the path absolute
    import dataclasses

    from preflight.launch import model_rules
    from preflight.launch.model import ModelFacts
    from preflight.probes import process

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    monkeypatch.chdir(str(tmp_path))
    seen = {}

    def fake_run_script(python, name, args=None, **kw):
        seen.update(args)
        return process.ProbeOutput(argv=[python], returncode=1)

    monkeypatch.setattr(process, "run_script", fake_run_script)
    fields = {f.name: None for f in dataclasses.fields(ModelFacts) if f.default is dataclasses.MISSING
              and f.default_factory is dataclasses.MISSING}
    fields["path"] = os.path.join("m", "config.json")
    model_rules.meta_module_names(sys.executable, ModelFacts(**fields))
    assert os.path.isabs(seen["path"]) and os.path.samefile(seen["path"], str(tmp_path / "m"))
