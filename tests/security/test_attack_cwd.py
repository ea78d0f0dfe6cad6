"""A child's working directory (rev-attack, new kind): ``python -m venv``, ``-m pip``, ``-m compileall``
and ``-c CODE`` put their working directory first on ``sys.path``, before the standard library. Root
running ``install`` from ``/tmp`` (a cloud-init ``cd /tmp && ...``) ran a ``venv.py`` that uid 65534
had left there, as root. Mechanism (``probes/child.py _default_cwd``): a child started without a
named directory keeps the invoker's only when nobody else can put a file in it or swap a directory
above it; otherwise it starts in a new empty private directory."""

import os
import subprocess
import sys

import pytest

import seckit
from seckit import as_nobody, need_root, pf, shared_dir

EXEC = pytest.mark.fault("EXEC")
WRONG = pytest.mark.fault("WRONG")
TINY_LOCK = ("six==1.17.0 \\\n    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n")
PY = "%d.%d" % sys.version_info[:2]
SHADOWS = ("venv", "pip", "compileall", "json", "site", "planted")


def _plant(d, ran):
    """Modules of uid 65534 in ``d`` that append the uid they ran as to ``ran``."""
    for name in SHADOWS:
        as_nobody("sh", "-c", 'printf "%s" "$2" > "$1"', "sh", os.path.join(d, name + ".py"),
                  "import os\nopen(%r, 'a').write('%%d\\n' %% os.getuid())\n" % ran)


def _cwd(tmp_path, shape):
    """A working directory another user can put files in, of ``shape``."""
    seckit.reachable(str(tmp_path))
    d = str(tmp_path / "cwd")
    if shape == "sticky":  # /tmp itself
        shared_dir(d)
    elif shape == "world-writable":
        os.makedirs(d)
        os.chmod(d, 0o777)
    elif shape == "theirs":  # a directory of uid 65534 (their checkout, their /scratch)
        d = os.path.join(shared_dir(str(tmp_path / "s")), "cwd")
        as_nobody("mkdir", "-m", "755", d)
    elif shape == "under-theirs":  # root's directory inside theirs: they can swap it for another
        parent = os.path.join(shared_dir(str(tmp_path / "s")), "p")
        as_nobody("mkdir", "-m", "755", parent)
        d = os.path.join(parent, "cwd")
        as_nobody("mkdir", "-m", "777", d)
        os.chown(d, 0, 0)
        os.chmod(d, 0o755)
        return d, parent
    return d, d


@EXEC
@pytest.mark.parametrize("shape", ["sticky", "world-writable", "theirs"])
def test_a_child_never_imports_from_a_cwd_others_can_plant(tmp_path, shape):
    need_root()
    sys.path.insert(0, seckit.ROOT)
    from preflight.probes import child

    d, plant_in = _cwd(tmp_path, shape)
    seckit.shared_dir(str(tmp_path / "r"))
    ran = os.path.join(str(tmp_path / "r"), "RAN_AS")
    _plant(plant_in, ran)
    here = os.getcwd()
    os.chdir(d)
    try:
        out = child.run([sys.executable, "-c", "import os, planted, json; print(os.getcwd())"],
                        capture_output=True, text=True, timeout=60)
        child.run([sys.executable, "-m", "json", "--help"], capture_output=True, timeout=60)
    finally:
        os.chdir(here)
    assert not os.path.exists(ran), open(ran).read()
    assert out.stdout.strip() != d  # it ran in a private directory (and found no ``planted``)
    assert "ModuleNotFoundError" in out.stderr


@EXEC
def test_a_root_dir_under_another_users_dir_is_not_trusted(tmp_path):
    need_root()
    sys.path.insert(0, seckit.ROOT)
    from preflight.probes import child

    d, parent = _cwd(tmp_path, "under-theirs")
    here = os.getcwd()
    os.chdir(d)
    try:
        out = child.run([sys.executable, "-c", "import os; print(os.getcwd())"], capture_output=True, text=True,
                        timeout=60)
    finally:
        os.chdir(here)
    assert out.stdout.strip() != d


@WRONG
def test_a_cwd_only_the_invoker_can_write_is_kept(tmp_path):
    """Behaviour kept: relative paths in a child's command still work from the user's own directory."""
    sys.path.insert(0, seckit.ROOT)
    from preflight.probes import child

    d = tmp_path / "mine"
    d.mkdir(mode=0o755)
    os.chmod(str(d), 0o755)
    (d / "x.txt").write_text("hello")
    here = os.getcwd()
    os.chdir(str(d))
    try:
        out = child.run([sys.executable, "-c", "print(open('x.txt').read())"], capture_output=True, text=True,
                        timeout=60)
    finally:
        os.chdir(here)
    assert out.stdout.strip() == "hello", out.stderr


@EXEC
def test_install_from_tmp_never_runs_a_planted_venv_or_pip(pyz, tmp_path):
    """The reproduction: root in a sticky shared directory holding uid 65534's venv.py, pip.py,
    compileall.py; ``install`` with a relative ``--lock``."""
    need_root()
    d, _ = _cwd(tmp_path, "sticky")
    seckit.shared_dir(str(tmp_path / "r"))
    ran = os.path.join(str(tmp_path / "r"), "RAN_AS")
    _plant(d, ran)
    lock = os.path.join(d, "tiny.lock")
    with open(lock, "w") as fh:  # root's own file in the shared directory
        fh.write(TINY_LOCK)
    p = pf(pyz, "install", "--lock", "tiny.lock", "--python", PY, "--prefix", str(tmp_path / "pfx"), "--no-check",
           timeout=300, cwd=d)
    assert not os.path.exists(ran), open(ran).read()
    assert p.returncode == 0, p.stderr[-2000:]
    ok = subprocess.run([str(tmp_path / "pfx" / "bin" / "python"), "-c", "import six; print(six.__version__)"],
                        stdout=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path))
    assert ok.stdout.strip() == "1.17.0"


CRASH = pytest.mark.fault("CRASH")


@CRASH
def test_an_install_step_that_cannot_start_is_one_line(tmp_path):
    """Seen with the planted venv.py (it exited 0, made no bin/python): 'verl-preflight failed:
    FileNotFoundError ... please report it'. Any step whose program is missing is one line now."""
    sys.path.insert(0, seckit.ROOT)
    from preflight.errors import UsageError
    from preflight.outputs import install

    with pytest.raises(UsageError) as err:
        install._run([str(tmp_path / "pfx" / "bin" / "python"), "-m", "pip", "--version"], [], lambda s: None, 30)
    assert "could not start" in str(err.value) and "\n" not in str(err.value)


@EXEC
def test_proofs_probes_never_import_from_a_planted_cwd(tmp_path):
    """rev-attack finding: ``resolve --prove`` from a sticky shared directory ran uid 65534's
    ``platform.py`` and ``pip/__init__.py`` as root through the proofs' own interpreter probes
    (``-c`` markers, ``-m pip --version``), which started children without the supervised
    primitive. Each probe is run here from such a directory (no network: the index is not asked)."""
    need_root()
    d, _ = _cwd(tmp_path, "sticky")
    seckit.shared_dir(str(tmp_path / "r"))
    ran = os.path.join(str(tmp_path / "r"), "RAN_AS")
    _plant(d, ran)
    code = "import os\nopen(%r, 'a').write('%%d\\n' %% os.getuid())\n" % ran
    as_nobody("sh", "-c", 'printf "%s" "$2" > "$1"', "sh", os.path.join(d, "platform.py"), code)
    as_nobody("mkdir", os.path.join(d, "pip"))
    for name in ("__init__.py", "__main__.py"):
        as_nobody("sh", "-c", 'printf "%s" "$2" > "$1"', "sh", os.path.join(d, "pip", name), code)
    probe = ("import sys; sys.path.insert(0, %r)\nfrom preflight import proofs\n"
             "print(proofs._markers_of(sys.executable, 30))\nprint(proofs._pip_version(sys.executable, 60))\n"
             "print(proofs.native_interpreter(sys.executable, %r, 'x86_64'))\n" % (seckit.ROOT, PY))
    p = subprocess.run([sys.executable, "-I", "-c", probe], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not os.path.exists(ran), open(ran).read()
    assert "pip " in p.stdout and "cpython" in p.stdout  # the real pip and the real interpreter answered
