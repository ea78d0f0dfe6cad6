"""What an interpreter loads before its first line, planted by uid 65534 in kinds the first reviews
did not list (SECURITY.md, "Code another user can change"): the ``#!`` interpreter of a root-owned
launcher, a bare ``--python`` found through an empty PATH entry, a sticky directory on
PYTHONPATH, a bytecode cache that is not there yet, PYTHONHOME and the standard library's
directory, what the dynamic loader maps (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH) and a
bytecode-only reward module. Each planted program writes a witness when it runs; as root, the
checker must never make one, and must say ``not run:`` naming what it refused. The same shapes
owned by root still run.
"""

import json
import os
import subprocess
import sys

import pytest
from seckit import NOBODY, ROOT, need_root

EXEC = pytest.mark.fault("EXEC")

#: A "python" that writes its witness whenever it runs, then runs the real one.
WITNESS = """#!/bin/sh
: > %s/PWNED_$(basename "$0")_uid$(id -u)
exec %s "$@"
"""


def _pwn(tmp_path):
    d = tmp_path / "pwn"
    d.mkdir()
    os.chmod(str(d), 0o1777)
    return str(d)


def _theirs(path):
    for d, _dirs, files in os.walk(str(path)):
        for n in [d] + [os.path.join(d, f) for f in files]:
            os.lchown(n, NOBODY, NOBODY)


BOOT = "import runpy, sys; sys.path.insert(0, %r); runpy.run_module('preflight', run_name='__main__', alter_sys=True)"


def _check(python, out, env=None, cwd=ROOT):
    """The checker from the checkout, isolated (-I: the planted variables reach only its probes)."""
    return subprocess.run([sys.executable, "-I", "-c", BOOT % ROOT, "check", "--python", python, "--stage",
                           "python,packages", "--json", str(out)], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                          env=dict(env or os.environ, COLUMNS="400"))


def _interpreter_row(out):
    with open(str(out)) as fh:
        return {r["id"]: r for r in json.load(fh)["results"]}["python.interpreter"]


def _evil_python(tmp_path, pwn, name="python3"):
    d = tmp_path / "eve" / "bin"
    d.mkdir(parents=True)
    py = d / name
    py.write_text(WITNESS % (pwn, sys.executable))
    os.chmod(str(py), 0o755)
    _theirs(tmp_path / "eve")
    return str(py)


@EXEC
@pytest.mark.parametrize("shebang", ["absolute", "env on PATH", "root's"])
def test_the_interpreter_a_launcher_script_names_is_judged_before_it_runs(tmp_path, shebang):
    """B2: a root-owned launcher whose ``#!`` line names another user's program (directly, or
    through ``/usr/bin/env NAME`` and a PATH entry of theirs) is the same as running it."""
    need_root()
    pwn = _pwn(tmp_path)
    evil = _evil_python(tmp_path, pwn, "pyevil")
    launcher = tmp_path / "launch-python"
    env = dict(os.environ)
    if shebang == "absolute":
        launcher.write_text("#!%s\n" % evil)
    elif shebang == "env on PATH":
        launcher.write_text("#!/usr/bin/env pyevil\n")
        env["PATH"] = "%s:%s" % (os.path.dirname(evil), env["PATH"])
    else:  # a wrapper of root's that runs a python of root's
        mine = tmp_path / "mine"
        mine.mkdir()
        launcher.write_text("#!/bin/sh\nexec %s \"$@\"\n" % (mine / "pymine"))
        (mine / "pymine").write_text(WITNESS % (pwn, sys.executable))
        os.chmod(str(mine / "pymine"), 0o755)
    os.chmod(str(launcher), 0o755)
    out = tmp_path / "r.json"
    p = _check(str(launcher), out, env)
    row = _interpreter_row(out)
    if shebang == "root's":
        assert row["status"] == "pass" and "PWNED_pymine_uid0" in os.listdir(pwn), p.stdout[-3000:]
        return
    assert os.listdir(pwn) == [], p.stdout[-3000:]
    assert row["status"] == "fail" and "not run:" in row["message"] and evil in row["message"], row
    assert "uid 65534" in row["message"]


@EXEC
def test_a_bare_python_found_through_an_empty_path_entry_is_started_by_the_path_judged(tmp_path):
    """B1: ``--python python3`` with an empty PATH entry (the current directory) was judged as
    ./python3 and then started by name from the probe's own directory, where PATH's next entry (a
    directory of another user's) answered."""
    need_root()
    pwn = _pwn(tmp_path)
    evil = _evil_python(tmp_path, pwn, "python3")
    job = tmp_path / "job"
    job.mkdir()
    (job / "python3").write_text("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)
    os.chmod(str(job / "python3"), 0o755)
    env = dict(os.environ, PATH=":%s:%s" % (os.path.dirname(evil), os.environ["PATH"]))
    out = tmp_path / "r.json"
    p = _check("python3", out, env, cwd=str(job))
    row = _interpreter_row(out)
    assert os.listdir(pwn) == [], p.stdout[-3000:]
    assert row["status"] == "pass", row


@EXEC
@pytest.mark.parametrize("var", ["PYTHONPATH", "PYTHONPYCACHEPREFIX"])
def test_a_sticky_directory_code_is_looked_up_in_is_refused(tmp_path, var):
    """B3/B6: /tmp-like directories (mode 1777) stop others renaming what is there, not adding a
    name: a ``json.py`` or a cached ``.pyc`` another user adds there is imported by name."""
    need_root()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o1777)
    out = tmp_path / "r.json"
    p = _check(sys.executable, out, dict(os.environ, **{var: str(shared)}))
    row = _interpreter_row(out)
    assert row["status"] == "fail" and "not run:" in row["message"] and str(shared) in row["message"], p.stdout[-3000:]
    assert "writable by every user" in row["message"]


@EXEC
@pytest.mark.parametrize("parent", ["sticky", "mine"])
def test_a_bytecode_cache_not_made_yet_is_judged_by_who_can_make_it(tmp_path, parent):
    """B4: PYTHONPYCACHEPREFIX=/tmp/pyc that does not exist yet: whoever can make it there decides
    what the target reads (another user can, under a sticky /tmp); under a directory of this
    user's, nobody else can."""
    need_root()
    base = tmp_path / "base"
    base.mkdir()
    if parent == "sticky":
        os.chmod(str(base), 0o1777)
    out = tmp_path / "r.json"
    p = _check(sys.executable, out, dict(os.environ, PYTHONPYCACHEPREFIX=str(base / "pyc")))
    row = _interpreter_row(out)
    if parent == "mine":
        assert row["status"] == "pass", row
    else:
        assert row["status"] == "fail" and "PYTHONPYCACHEPREFIX=%s" % (base / "pyc") in row["message"], p.stdout[-3000:]


def _refusal(python, env):
    from preflight.probes import process

    process._TREES.clear()
    return process.tree_refusal(python, env, timeout=60)


@EXEC
@pytest.mark.parametrize("var", ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PYTHONHOME", "none"])
def test_what_the_launch_adds_to_the_environment_is_judged(tmp_path, var):
    """B7/B8: variables a launch adds (``VAR=... python3 -m verl...``) and that load code before the
    interpreter's first line: the dynamic loader's (LD_PRELOAD, LD_AUDIT files; LD_LIBRARY_PATH
    directories, searched by name) and PYTHONHOME (the standard library read from there)."""
    need_root()
    eve = tmp_path / "eve"
    (eve / "lib").mkdir(parents=True)
    (eve / "lib" / "libevil.so").write_bytes(b"\x7fELF")
    _theirs(eve)
    value = {"LD_PRELOAD": str(eve / "lib" / "libevil.so"), "LD_AUDIT": str(eve / "lib" / "libevil.so"),
             "LD_LIBRARY_PATH": str(eve / "lib"), "PYTHONHOME": str(eve), "none": ""}[var]
    why = _refusal(sys.executable, {var: value} if var != "none" else {})
    if var == "none":
        assert why is None
    else:
        assert why and why.startswith("not run:") and "uid 65534" in why and str(eve) in why, why


@EXEC
def test_a_standard_library_linked_to_another_users_directory_is_refused_before_it_runs(tmp_path):
    """B9: the ``-I -S`` read itself runs the installation's standard library; an installation whose
    lib (or lib/python3.X) is a link to another user's directory is refused before that read."""
    need_root()
    pwn = _pwn(tmp_path)
    eve = tmp_path / "eve"
    (eve / "python3.12").mkdir(parents=True)
    _theirs(eve)
    prefix = tmp_path / "opt"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3").write_text(WITNESS % (pwn, sys.executable))
    os.chmod(str(prefix / "bin" / "python3"), 0o755)
    os.symlink(str(eve), str(prefix / "lib"))
    why = _refusal(str(prefix / "bin" / "python3"), {})
    assert why and "standard library" in why and "uid 65534" in why, why
    assert os.listdir(pwn) == []
    os.remove(str(prefix / "lib"))
    (prefix / "lib").mkdir()
    assert _refusal(str(prefix / "bin" / "python3"), {}) is None


@EXEC
@pytest.mark.parametrize("suffix", [".pyc", ".py", ".so"])
def test_a_reward_module_of_another_user_is_refused_whatever_its_ending(tmp_path, suffix):
    """B11: verl's ``load_extern_object`` loads a ``.pyc`` (bytecode, no source needed) or an
    extension module as readily as a ``.py``: each is code the launch hands to the target."""
    need_root()
    from preflight.launch.code import launch_code_refusal
    from preflight.launch.compose.run import compose_stored
    from preflight.launch.overrides import parse_launch

    eve = tmp_path / "eve"
    eve.mkdir()
    reward = eve / ("reward" + suffix)
    reward.write_bytes(b"\0")
    comp = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo",
                                        "custom_reward_function.path=%s" % reward]), release="0.9.1", env={})
    assert comp.error is None
    assert launch_code_refusal(comp, str(tmp_path)) is None  # root's own: judged and allowed
    _theirs(eve)
    why = launch_code_refusal(comp, str(tmp_path))
    assert why and str(reward) in why and "uid 65534" in why, why
