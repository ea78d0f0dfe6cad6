"""Mechanism "'..' resolved by the kernel's walk" (F9): the writer never applies
``os.path.abspath``/``normpath`` to an output path (``atomic.absolute`` only puts the working
directory in front); ``..`` after a link goes to the parent of the link's target, as the kernel
does, and ``x/..`` with ``x`` missing is refused as the kernel refuses it (ENOENT), for every
output option."""

import os
import subprocess
import sys

import pytest

from preflight import atomic
from preflight.atomic import OutputError, make_dirs, write_atomic

WRONG = pytest.mark.fault("WRONG")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    os.symlink("real/sub", str(tmp_path / "lnk"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _kernel_parent(path):
    """Where the kernel puts ``path``'s file: the real directory of its folder."""
    return os.path.realpath(os.path.dirname(path))


@WRONG
@pytest.mark.parametrize("rel", ["lnk/../r.json", "./lnk/./../r.json", "lnk/../sub/../r.json", "lnk/../../r.json"])
def test_the_writer_goes_where_the_kernel_goes(tree, rel):
    write_atomic(rel, "x\n", "--json")
    expect = os.path.join(_kernel_parent(rel), "r.json")
    assert open(expect).read() == "x\n"
    wrong = os.path.normpath(os.path.join(str(tree), rel))
    if wrong != expect:
        assert not os.path.exists(wrong)


@WRONG
@pytest.mark.parametrize("rel", ["missing/../d", "missing/../../d", "real/missing/../sub/d"])
def test_make_dirs_refuses_dotdot_through_a_missing_directory(tree, rel):
    with pytest.raises(OutputError) as e:
        make_dirs(rel, "--status-dir")
    assert "does not exist" in str(e.value) and "\n" not in str(e.value)
    assert not (tree / "missing").exists() and not (tree / "d").exists() and not (tree / "real" / "missing").exists()
    with pytest.raises(OSError):  # the kernel's answer for the same path
        os.stat(rel)


def test_absolute_keeps_dotdot(tree):
    assert atomic.absolute("lnk/../r") == os.path.join(os.getcwd(), "lnk/../r")
    assert atomic.absolute("/a/b/../c") == "/a/b/../c"


@WRONG
@pytest.mark.parametrize("option", ["--json", "--output"])
def test_report_options_through_a_link_and_dotdot(tree, option):
    p = subprocess.run([sys.executable, "-m", "preflight", "check", "--stage", "host", option, "lnk/../r.out"],
                       cwd=str(tree), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode in (0, 1), p.stderr
    assert (tree / "real" / "r.out").exists() and not (tree / "r.out").exists()


@WRONG
def test_status_dir_through_a_missing_directory_is_refused(tree):
    p = subprocess.run([sys.executable, "-m", "preflight", "check", "--stage", "host", "--status-dir",
                        "missing/../../st"], cwd=str(tree), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 2 and "does not exist" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tree / "missing").exists() and not (tree.parent / "st").exists()
