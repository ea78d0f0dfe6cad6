"""The command line and the zipapp: exit codes, one-line errors, reproducible builds, old Pythons."""

import glob
import hashlib
import json
import os
import subprocess
import sys
import zipfile

import pytest

from envs import find_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pyz_run(pyz, *args, python=sys.executable, env=None):
    return subprocess.run([python, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300, env=env)


def test_version(pyz, matrix):
    p = pyz_run(pyz, "--version")
    assert p.returncode == 0
    assert p.stdout.strip() == "verl-preflight 0.1.0 (matrix %s)" % matrix.version


@pytest.mark.parametrize("args,words", [
    (["check", "--python", "/no/such/python"], "--python /no/such/python: no such file"),
    (["check", "--stage", "bogus"], "unknown stage bogus"),
    (["check", "--verl", "0.99"], "--verl 0.99: not a verl release"),
    (["rehearse", "--verl", "0.99", "--", "python3", "-m", "verl.trainer.main_ppo", "trainer.total_epochs=1"],
     "--verl 0.99: not a verl release in the matrix"),
    (["check", "--timeout", "-3"], "must be > 0"),
    (["check", "--stage", "host", "--json", "/no/such/dir/r.json"], "--json /no/such/dir/r.json: directory /no/such/dir does not exist"),
    (["matrix"], "choose 'show' or 'refresh'"),
    (["frobnicate"], "unknown command 'frobnicate' (commands: check,"),
])
def test_usage_errors_are_one_line_exit_2(pyz, args, words):
    p = pyz_run(pyz, *args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_help_has_examples(pyz):
    p = pyz_run(pyz, "check", "--help")
    assert p.returncode == 0 and "examples:" in p.stdout and "--json" in p.stdout


def test_host_stage_json_and_exit_code(pyz, tmp_path):
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "check", "--stage", "host", "--json", str(out))
    data = json.loads(out.read_text())
    assert data["stages"] == ["host"] and data["exit_code"] == p.returncode
    assert set(data["summary"]) == {"pass", "warn", "fail", "skip", "error"}
    assert {r["id"] for r in data["results"]} >= {"host.os", "host.shm", "host.disk", "host.limits"}
    assert data["machine"]["host"]["cpu"]["usable"] >= 1
    assert p.returncode == (1 if any(r["status"] in ("fail", "error") for r in data["results"]) else 0)


def test_json_to_stdout_keeps_stdout_clean(pyz):
    p = pyz_run(pyz, "check", "--stage", "host", "--json", "-")
    data = json.loads(p.stdout)
    assert data["schema_version"] == 1 and "host" in p.stderr


def test_no_secret_in_reports(pyz, tmp_path):
    env = dict(os.environ, HF_TOKEN="hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", NCCL_SOCKET_IFNAME="eth0",
               WANDB_API_KEY="0123456789abcdef0123456789abcdef01234567", HF_HOME=str(tmp_path / "hf"))
    out = tmp_path / "r.json"
    p = pyz_run(pyz, "check", "--stage", "host,gpu", "--json", str(out), "-v", env=env)
    text = out.read_text() + p.stdout + p.stderr
    assert "hf_ABCDEFGHIJ" not in text and "0123456789abcdef0123" not in text
    assert "eth0" in out.read_text()  # harmless variables are kept


def test_build_is_reproducible(tmp_path):
    outs = []
    for i in range(2):
        out = str(tmp_path / ("p%d.pyz" % i))
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_pyz.py"), "-o", out], check=True,
                       stdout=subprocess.PIPE)
        with open(out, "rb") as fh:
            outs.append(hashlib.sha256(fh.read()).hexdigest())
    assert outs[0] == outs[1]


def test_pyz_contents(pyz_file):
    with zipfile.ZipFile(pyz_file) as z:
        names = z.namelist()
    assert names == sorted(names)
    assert "__main__.py" in names and "preflight/_matrices/verl.toml" in names
    assert "preflight/target/info.py" in names and "preflight/_vendor/pynvml.py" in names
    assert [n for n in names if not n.startswith("preflight/")] == ["__main__.py"]  # vendored libraries namespaced
    assert not [n for n in names if "__pycache__" in n or n.endswith((".so", ".pyc"))]


@pytest.mark.parametrize("minor", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"])
def test_runs_on_every_python(pyz_file, minor, tmp_path):
    try:
        py = find_python(minor)
    except LookupError:
        pytest.skip("no Python %s on this machine" % minor)
    p = pyz_run(pyz_file, "check", "--stage", "host,python", "--json", str(tmp_path / "r.json"), python=py)
    assert p.returncode in (0, 1), p.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    r = {x["id"]: x for x in data["results"]}["python.interpreter"]
    assert r["status"] == "pass" and minor in r["message"]


@pytest.mark.parametrize("minor", ["3.6", "3.7"])
def test_old_python_gets_a_clear_message(pyz_file, minor):
    try:
        py = find_python(minor)
    except LookupError:
        pytest.skip("no Python %s on this machine" % minor)
    p = pyz_run(pyz_file, "--version", python=py)
    assert p.returncode == 2 and "needs Python 3.8 or newer" in p.stderr


def test_checks_an_old_target_interpreter(pyz, tmp_path):
    """The checker runs on a new Python and checks a Python 3.9 target: the python stage fails
    against verl 0.9.1's Requires-Python, with the fix."""
    try:
        py39 = find_python("3.9")
    except LookupError:
        pytest.skip("no Python 3.9")
    out = tmp_path / "r.json"
    pyz_run(pyz, "check", "--python", py39, "--verl", "0.9.1", "--stage", "python", "--json", str(out))
    r = {x["id"]: x for x in json.loads(out.read_text())["results"]}["python.version"]
    assert r["status"] == "fail" and "3.9" in r["message"] and ">=3.10" in r["message"]


@pytest.mark.parametrize("args", [
    ["check", "--python", "/no/such\npython"],
    ["check", "--verl", "0.9\n.1"],
    ["check", "--stage", "host", "--json", "/no/such\ndir/r.json"],
    ["explain", "/no/such\u2028log"],
    ["resolve", "--driver", "550.54\n535"],
    ["spec", "--verl", "0.9.1", "-o", "{file}"],
    ["config", "--config", "{file}"],
])
def test_an_input_holding_line_breaks_still_gives_one_line(pyz, tmp_path, args):
    """Whatever the input holds (a newline or U+2028 in a path, a version, a GPU name), the error
    is one line: the break is written as a visible escape, never a second line on stderr."""
    f = tmp_path / "out\nput"
    f.write_text("a: [\n")
    p = pyz_run(pyz, *[a.replace("{file}", str(f)) for a in args])
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in p.stderr, p.stderr
    assert "\\n" in lines[0] or "\\u2028" in lines[0], lines[0]


@pytest.mark.parametrize("args,words", [
    (["spec", "--verl", "0.9.1", "-o", "/etc/hostname"], "-o /etc/hostname exists and is not a directory"),
    (["install", "--verl", "0.9.1", "--prefix", "/etc/hostname"], "--prefix /etc/hostname exists and is not a directory"),
    (["config", "--json", "/no/such/dir/c.json", "--", "data.train_batch_size=8"], "directory /no/such/dir does not exist"),
])
def test_output_paths_checked_before_work(pyz, args, words):
    import time

    t0 = time.monotonic()
    p = pyz_run(pyz, *args)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 10  # no pip resolution, no checks ran first


@pytest.mark.parametrize("command", ["image", "spec"])
def test_no_stack_lists_resolves_options_for_the_machine_given(pyz, tmp_path, command):
    """image/spec for a machine no stack fits print every problem and every option resolve gives
    for the same inputs (new-user review B4: image printed one line and no option, and said 'here'
    for a machine described by --gpu/--driver)."""
    machine = ["--verl", "0.9.1", "--gpu", "H100", "--driver", "570.124.06", "--python", "3.12"]
    r = pyz_run(pyz, "resolve", *machine, "--json", "-")
    truth = json.loads(r.stdout)["resolution"]["options"]
    p = pyz_run(pyz, command, *machine, "-o", str(tmp_path / "out"))
    text = p.stdout + p.stderr
    assert p.returncode == 1 and "on the machine given (--gpu H100, --driver 570.124.06)" in text, text
    got = [l.split("option: ", 1)[1] for l in text.splitlines() if "option: " in l]
    assert len(got) == len(truth) >= 2
    assert [g.split("select it with:")[0] for g in got] == [t.split("select it with:")[0] for t in truth]
