"""Mechanism "prefixes and interpreters": nothing is run from a prefix another user controls
(install refuses it before anything runs), and a --python another user can change is a WARN in
the python stage. fault_cases_3 x06 and new members of its kind (the prefix a link of theirs,
their bin/python in a prefix of root's, a bin/ others can write, a folder others can write)."""

import os
import sys

import pytest

import seckit
from seckit import as_nobody, need_root, one_line_error, pf, shared_dir

EXEC = pytest.mark.fault("EXEC")
TINY_LOCK = ("six==1.17.0 \\\n    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n")
PY = "%d.%d" % sys.version_info[:2]


@pytest.fixture
def shared(tmp_path):
    need_root()
    seckit.reachable(str(tmp_path))
    return shared_dir(str(tmp_path / "shared"))


def _planted_python(path, ran_as):
    return "#!/bin/sh\nid -u >> %s\nexec %s \"$@\"\n" % (ran_as, sys.executable)


def _install(pyz, tmp_path, prefix):
    lock = tmp_path / "tiny.lock"
    lock.write_text(TINY_LOCK)
    return pf(pyz, "install", "--lock", str(lock), "--python", PY, "--prefix", prefix, "--no-check", timeout=300)


@EXEC
def test_x06_install_never_runs_a_planted_prefix(pyz, tmp_path, shared):
    ran = os.path.join(shared, "RAN_AS")
    as_nobody("sh", "-c", 'mkdir -p "$1/verl/bin" && touch "$1/verl/.verl-preflight-venv" '
              '"$1/verl/.verl-preflight-incomplete" && printf "%s" "$2" > "$1/verl/bin/python" && '
              'chmod 755 "$1/verl/bin/python"', "sh", shared, _planted_python(None, ran))
    p = _install(pyz, tmp_path, os.path.join(shared, "verl"))
    assert one_line_error(p) and "not this user's own" in p.stderr, p.stderr
    assert not os.path.exists(ran)


@EXEC
@pytest.mark.parametrize("shape", ["prefix-link", "their-python", "bin-writable", "folder-writable"])
def test_install_refuses_a_prefix_another_user_can_change(pyz, tmp_path, shared, shape):
    ran = os.path.join(shared, "RAN_AS")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "bin").mkdir()
    for m in (".verl-preflight-venv", ".verl-preflight-incomplete"):
        (mine / m).write_text("")
    py = mine / "bin" / "python"
    py.write_text(_planted_python(None, ran))
    os.chmod(str(py), 0o755)
    prefix = str(mine)
    if shape == "prefix-link":  # their link, in /tmp, to a prefix of root's
        as_nobody("ln", "-s", str(mine), os.path.join(shared, "verl"))
        prefix = os.path.join(shared, "verl")
    elif shape == "their-python":
        os.lchown(str(py), seckit.NOBODY, seckit.NOBODY)
    elif shape == "bin-writable":
        os.chmod(str(mine / "bin"), 0o777)
    elif shape == "folder-writable":
        os.chmod(str(tmp_path), 0o777)
    try:
        p = _install(pyz, tmp_path, prefix)
    finally:
        os.chmod(str(tmp_path), 0o755)
    assert one_line_error(p) and "not this user's own" in p.stderr, p.stderr
    assert not os.path.exists(ran)


@EXEC
def test_a_python_another_user_owns_is_not_run(pyz, tmp_path, shared):
    # root running their interpreter runs their code: it is judged as a file, never started
    theirs = os.path.join(shared, "py")
    as_nobody("sh", "-c", 'printf "#!/bin/sh\\nexec %s \\"\\$@\\"\\n" > "$1" && chmod 755 "$1"' % sys.executable,
              "sh", theirs)
    import json

    out = str(tmp_path / "r.json")
    p = pf(pyz, "check", "--stage", "python", "-q", "--python", theirs, "--json", out)
    rows = {r["id"]: r for r in json.load(open(out))["results"]}
    row = rows["python.interpreter"]
    assert row["status"] in ("fail", "error") and "not run:" in row["message"] and theirs in row["message"], row
    assert "uid 65534" in row["message"] and row["fix"] and p.returncode != 0, row
    mine = str(tmp_path / "mine-py")
    with open(mine, "w") as fh:
        fh.write("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)
    os.chmod(mine, 0o755)
    pf(pyz, "check", "--stage", "python", "-q", "--python", mine, "--json", out)
    assert {r["id"]: r for r in json.load(open(out))["results"]}["python.interpreter"]["status"] == "pass"


@EXEC
def test_a_prefix_made_by_another_user_after_the_check_is_not_run(tmp_path, shared, monkeypatch):
    # TOCTOU: the prefix is absent at the first check; another user makes it (with their
    # bin/python) before install creates it; even with --allow-shared-output it is never run
    from preflight import atomic
    from preflight.errors import UsageError
    from preflight.outputs import install as inst

    ran = os.path.join(shared, "RAN_AS")
    prefix = os.path.join(shared, "verl")
    lock = tmp_path / "tiny.lock"
    lock.write_text(TINY_LOCK)
    real = inst.check_prefix
    calls = []

    def racing(p, option="--prefix"):
        real(p, option)
        if not calls:
            as_nobody("sh", "-c", 'mkdir -p "$1/bin" && printf "%s" "$2" > "$1/bin/python" && chmod 755 '
                      '"$1/bin/python"', "sh", prefix, _planted_python(None, ran))
        calls.append(p)

    monkeypatch.setattr(inst, "check_prefix", racing)
    atomic.allow_shared_output(True)
    try:
        with pytest.raises(UsageError, match="not this user's own"):
            inst.install(str(lock), prefix, sys.executable, use_uv=False)
    finally:
        atomic.allow_shared_output(False)
    assert not os.path.exists(ran)
