"""Fix lines name commands that act on the checked interpreter: ``pip install`` is spelled
``<target> -m pip install`` (quoted for the shell), and an environment without pip (a venv made
by uv) gets uv's pip check, which reports the same broken requirement as the row."""

import json
import os
import re
import subprocess
import sys

import pytest

from envs import _dist_info, _site, real_env


@pytest.mark.realenv
def test_consistency_fix_for_a_venv_without_pip(pyz, tmp_path):
    uv = os.path.join(os.path.dirname(real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])), "uv")
    venv = str(tmp_path / "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "alpha", "1.0", ["beta>=2"])
    _dist_info(site, "beta", "1.5")
    py = os.path.join(venv, "bin", "python")
    out = str(tmp_path / "r.json")
    subprocess.run([sys.executable, pyz, "check", "--stage", "python,packages", "--python", py, "--json", out],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    rows = {r["id"]: r for r in json.load(open(out))["results"]}
    r = rows["packages.consistency"]
    assert r["status"] == "warn" and "alpha 1.0 requires beta>=2, but 1.5 is installed" in r["message"], r
    assert r["fix"].startswith("uv pip check --python %s (it has no pip) lists them" % py), r["fix"]
    assert "has no pip" in rows["python.environment"]["message"]
    truth = subprocess.run([uv, "pip", "check", "--python", py], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120)
    assert truth.returncode != 0 and "alpha" in truth.stdout and "beta" in truth.stdout, truth.stdout


def test_pip_fixes_name_the_target_interpreter(pyz, tmp_path):
    """A --python path with a space: each pip command of a fix starts with the quoted interpreter,
    and that prefix, run by a shell, is the target's own pip."""
    venv = str(tmp_path / "sp ace" / "v")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    _dist_info(_site(venv), "verl", "0.9.1")  # verl without torch: the torch row's fix installs torch
    out = str(tmp_path / "r.json")
    subprocess.run([sys.executable, pyz, "check", "--stage", "python,packages", "--python", py, "--json", out],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    rows = {r["id"]: r for r in json.load(open(out))["results"]}
    fix = rows["packages.torch"]["fix"]
    quoted = "'%s'" % py
    assert fix.startswith(quoted + " -m pip install torch=="), fix  # shell.command quotes only what needs it
    fixes = " ".join(r["fix"] or "" for r in rows.values())
    assert not re.search(r"(?<![\w./-])(?<!-m )(?<!uv )pip install", fixes), fixes  # no bare pip left
    got = subprocess.run(quoted + " -m pip --version", shell=True, stdout=subprocess.PIPE, universal_newlines=True)
    assert got.returncode == 0 and os.path.join(venv, "lib") in got.stdout, got.stdout


def test_a_venv_without_pip_gets_uv_pip_fixes(pyz, tmp_path):
    venv = str(tmp_path / "no pip")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    _dist_info(_site(venv), "verl", "0.9.1")
    out = str(tmp_path / "r.json")
    subprocess.run([sys.executable, pyz, "check", "--stage", "python,packages", "--python", py, "--json", out],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    rows = {r["id"]: r for r in json.load(open(out))["results"]}
    assert rows["packages.torch"]["fix"].startswith("uv pip install --python '%s' torch==" % py), rows["packages.torch"]
    assert " -m pip " not in " ".join(r["fix"] or "" for r in rows.values() if r["id"] != "python.environment")


def test_the_tools_own_path_is_quoted(monkeypatch):
    import shlex

    from preflight.report.render import invocation

    monkeypatch.setattr(sys, "argv", ["/tmp/my dir/pre;flight.pyz"])
    how = invocation()
    assert shlex.split(how)[-1] == "/tmp/my dir/pre;flight.pyz" and len(shlex.split(how)) == 2
