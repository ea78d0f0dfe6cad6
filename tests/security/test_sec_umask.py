"""Under ``umask 000`` the one writer (``preflight/atomic.py``) makes nothing its own owner check
refuses (reviewer's A08): files are 0666 minus (umask | 022), directories 0777 minus (umask | 022);
a directory it made for a destination it then refuses is removed again."""

import os
import stat
import subprocess
import sys

import pytest

import seckit

WRONG = pytest.mark.fault("WRONG")


@pytest.fixture
def umask000():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p):
    return stat.S_IMODE(os.lstat(str(p)).st_mode)


def test_the_writer_under_umask_000_makes_nothing_writable_by_others(tmp_path, umask000):
    sys.path.insert(0, seckit.ROOT)
    from preflight import atomic

    d = atomic.make_dirs(str(tmp_path / "a" / "b"))
    assert _mode(tmp_path / "a") == _mode(d) == 0o755
    atomic.write_atomic(str(tmp_path / "c" / "d" / "r.json"), "{}", create_dirs=True)
    assert _mode(tmp_path / "c") == _mode(tmp_path / "c" / "d") == 0o755
    assert _mode(tmp_path / "c" / "d" / "r.json") == 0o644
    atomic.write_atomic(str(tmp_path / "c" / "d" / "r.json"), "{}")  # its own directory is not refused
    os.umask(0o077)
    atomic.write_atomic(str(tmp_path / "p.json"), "{}")
    assert _mode(tmp_path / "p.json") == 0o600  # a stricter umask still wins


def test_a_refused_destination_leaves_no_directory_behind(tmp_path, monkeypatch):
    sys.path.insert(0, seckit.ROOT)
    from preflight import atomic

    monkeypatch.setattr(atomic, "owner_problem", lambda st, is_dir: "writable by every user" if is_dir else None)
    with pytest.raises(atomic.OutputError):
        atomic.make_dirs(str(tmp_path / "x" / "y" / "z"))
    assert not (tmp_path / "x").exists()
    with pytest.raises(atomic.OutputError):
        atomic.write_atomic(str(tmp_path / "q" / "r" / "f.json"), "{}", create_dirs=True)
    assert not (tmp_path / "q").exists()


@WRONG
def test_reports_and_status_dir_under_umask_000(pyz, tmp_path):
    out, sd = tmp_path / "r.json", tmp_path / "st" / "sd"
    p = subprocess.run(["sh", "-c", 'umask 000 && exec "$@"', "sh", sys.executable, "-I", "-S", pyz, "check",
                        "--stage", "host", "-q", "--json", str(out), "--status-dir", str(sd)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert "writable by every user" not in p.stderr and p.returncode in (0, 1), p.stderr
    assert _mode(out) == 0o644 and _mode(sd) == 0o755 and _mode(tmp_path / "st") == 0o755
    assert all(_mode(os.path.join(sd, f)) & 0o022 == 0 for f in os.listdir(str(sd)))
