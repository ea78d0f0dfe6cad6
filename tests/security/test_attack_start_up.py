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
    lib is a link to another user's directory is refused before that read. (The binary is a copy of
    /bin/true: nothing of it is ever run here.)"""
    need_root()
    eve = tmp_path / "eve"
    (eve / "python3.12").mkdir(parents=True)
    (eve / "python3.12" / "os.py").write_text("")
    _theirs(eve)
    prefix = tmp_path / "opt"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3").write_bytes(open("/bin/true", "rb").read())
    os.chmod(str(prefix / "bin" / "python3"), 0o755)
    os.symlink(str(eve), str(prefix / "lib"))
    why = _refusal(str(prefix / "bin" / "python3"), {})
    assert why and "standard library" in why and "uid 65534" in why, why
    os.remove(str(prefix / "lib"))
    (prefix / "lib" / "python3.12").mkdir(parents=True)
    (prefix / "lib" / "python3.12" / "os.py").write_text("")
    why = _refusal(str(prefix / "bin" / "python3"), {})
    assert why is None or "standard library" not in why, why  # judged clean (true then gives no read)


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


# the second threat review (after the first mends): paths as the child resolves them, searches
# that read more directories than the one that answered, and what site imports by name


def _nob(tmp_path):
    d = tmp_path / "nob"
    d.mkdir()
    _theirs(d)
    return d


@EXEC
@pytest.mark.parametrize("var,value", [
    ("LD_PRELOAD", "REL/nob/evil.so"), ("LD_PRELOAD", "$ORIGIN/../nob/evil.so"),
    ("LD_LIBRARY_PATH", "REL/nob"), ("LD_AUDIT", "REL/nob/evil.so"),
    ("PYTHONPYCACHEPREFIX", "REL/nob/pc"), ("PYTHONPATH", "REL/nob"), ("PYTHONPLATLIBDIR", "ABS/nob/pl"),
    ("PYTHONHOME", "REL/nob")])
def test_a_relative_or_expanded_path_is_judged_where_the_child_resolves_it(tmp_path, var, value):
    """A relative value is resolved by the child from its own directory (the probe's private one:
    ``../../`` leaves it); ``$ORIGIN`` is expanded by the loader per binary. Each reached uid
    65534's directory and was let through."""
    import tempfile

    need_root()
    nob = _nob(tmp_path)
    (nob / "evil.so").write_bytes(b"\x7fELF")
    os.lchown(str(nob / "evil.so"), NOBODY, NOBODY)
    private = os.path.join(tempfile.gettempdir(), "preflight-probe-x", "cwd")
    rel = os.path.relpath(str(tmp_path), private)
    why = _refusal(sys.executable, {var: value.replace("REL", rel).replace("ABS", str(tmp_path))})
    assert why and why.startswith("not run:"), why
    assert "uid 65534" in why or "expands it by itself" in why, why


@EXEC
def test_the_path_env_searches_is_judged_up_to_the_match(tmp_path):
    """``#!/usr/bin/env bash`` with a directory of uid 65534's before the real bash on PATH: empty
    when judged, it can gain a ``bash`` before env looks (a race the first mends lost)."""
    need_root()
    nob = _nob(tmp_path)
    shim = tmp_path / "shim"
    shim.write_text("#!/usr/bin/env bash\nexec %s \"$@\"\n" % sys.executable)
    os.chmod(str(shim), 0o755)
    why = _refusal(str(shim), {"PATH": "%s:/usr/bin:/bin" % nob})
    assert why and "the PATH searched for bash" in why and str(nob) in why, why
    assert _refusal(str(shim), {"PATH": "/usr/bin:/bin:%s" % nob}) is None  # after the match: never read


@EXEC
@pytest.mark.parametrize("line", ["#!/usr/bin/env -S -u PYTHONWARNINGS bash", "#!/usr/bin/env -S PATH=NOB bash"])
def test_env_options_in_a_shebang_are_read_as_env_reads_them(tmp_path, line):
    need_root()
    nob = _nob(tmp_path)
    (nob / "bash").write_text("#!/bin/sh\n: > %s/PWNED\n" % tmp_path)
    os.chmod(str(nob / "bash"), 0o755)
    os.lchown(str(nob / "bash"), NOBODY, NOBODY)
    shim = tmp_path / "shim"
    shim.write_text(line.replace("NOB", str(nob)) + "\n")
    os.chmod(str(shim), 0o755)
    path = "%s:/usr/bin:/bin" % nob if "-u" in line else "/usr/bin:/bin"
    why = _refusal(str(shim), {"PATH": path})
    assert why and str(nob) in why and "uid 65534" in why, why
    assert not (tmp_path / "PWNED").exists()


@EXEC
def test_the_standard_library_search_past_a_sticky_directory_is_refused_before_it_runs(tmp_path):
    """CPython looks for lib/python3.X/os.py in every directory above its executable: a copy of an
    interpreter under a sticky directory (/tmp/x/bin/python) reads a lib/ another user may add."""
    need_root()
    sticky = tmp_path / "sticky"
    (sticky / "a" / "bin").mkdir(parents=True)
    os.chmod(str(sticky), 0o1777)
    exe = sticky / "a" / "bin" / "python3.11"
    exe.write_bytes(open("/bin/true", "rb").read())
    os.chmod(str(exe), 0o755)
    why = _refusal(str(exe), {})
    assert why and str(sticky) in why and "writable by every user" in why, why


@EXEC
def test_a_relative_venv_home_is_judged_before_the_read(tmp_path):
    need_root()
    pwn = _pwn(tmp_path)
    nob = _nob(tmp_path)
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True)
    cfg = (v / "pyvenv.cfg").read_text()
    import tempfile

    private = os.path.join(tempfile.gettempdir(), "preflight-probe-x", "cwd")
    (v / "pyvenv.cfg").write_text(cfg + "home = %s\n" % os.path.relpath(str(nob / "bin"), private))
    why = _refusal(str(v / "bin" / "python"), {})
    assert why and "uid 65534" in why and str(nob) in why, why
    assert os.listdir(pwn) == []


@EXEC
@pytest.mark.parametrize("shape", ["package", "pth dir"])
def test_what_site_imports_by_name_is_judged(tmp_path, shape):
    """A package directory of uid 65534's inside root's site-packages, and a directory a root .pth
    line adds: each is imported by name (``import torch``) as root."""
    need_root()
    pwn = _pwn(tmp_path)
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True)
    sp = subprocess.run([str(v / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                        check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    code = "open(%r + '/PWNED_torch', 'w').close()\n" % pwn
    if shape == "package":
        (tmp_path / "x").mkdir()
        os.makedirs(os.path.join(sp, "torch"))
        with open(os.path.join(sp, "torch", "__init__.py"), "w") as fh:
            fh.write(code)
        _theirs(os.path.join(sp, "torch"))
        planted = os.path.join(sp, "torch")
    else:
        nob = _nob(tmp_path)
        (nob / "torch").mkdir()
        (nob / "torch" / "__init__.py").write_text(code)
        _theirs(nob)
        with open(os.path.join(sp, "__editable__.torch.pth"), "w") as fh:
            fh.write("%s\n" % nob)
        planted = str(nob)
    out = tmp_path / "r.json"
    p = _check(str(v / "bin" / "python"), out)
    row = _interpreter_row(out)
    assert row["status"] == "fail" and "not run:" in row["message"] and planted in row["message"], p.stdout[-3000:]
    assert os.listdir(pwn) == []


@EXEC
def test_a_wrapper_script_in_a_sticky_directory_is_not_taken_for_an_installation(tmp_path):
    """The first mends judged a wrapper's grandparent as its prefix: root's own wrapper directly in
    /tmp was refused for /tmp. The standard library is looked for from binaries only."""
    need_root()
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(str(sticky), 0o1777)
    (sticky / "bin").mkdir()
    wrapper = sticky / "bin" / "py"  # its grandparent, taken for a prefix before, is the sticky directory
    wrapper.write_text("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)
    os.chmod(str(wrapper), 0o755)
    assert _refusal(str(wrapper), {}) is None
