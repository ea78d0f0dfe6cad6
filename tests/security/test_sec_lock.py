"""``install --lock FILE``: the lock is data, not a pip program (reviewer's A03). pip options in a
lock (``--find-links``/``--no-index`` to another user's wheel, ``-r`` of a file only root can
read) are refused before anything runs, naming the line; a lock (or a pylock.toml beside it)
another user can change is refused / not used."""

import os
import sys

import pytest

import seckit
from seckit import as_nobody, need_root, one_line_error, pf, shared_dir

EXEC = pytest.mark.fault("EXEC")
LEAK = pytest.mark.fault("LEAK")
H = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"
PY = "%d.%d" % sys.version_info[:2]


@pytest.fixture
def shared(tmp_path):
    need_root()
    seckit.reachable(str(tmp_path))
    return shared_dir(str(tmp_path / "shared"))


def _install(pyz, lock, prefix):
    return pf(pyz, "install", "--lock", str(lock), "--python", PY, "--prefix", str(prefix), "--no-check", timeout=300)


@EXEC
def test_a_lock_taking_wheels_from_another_users_directory_is_refused(pyz, tmp_path, shared):
    wh = os.path.join(shared, "wh")
    as_nobody("mkdir", wh)
    lock = tmp_path / "root.lock"
    lock.write_text("# from somewhere\n--no-index\n--find-links %s\nevil==1.0\n" % wh)
    p = _install(pyz, lock, tmp_path / "pfx")
    assert one_line_error(p), p.stderr
    assert "line 2" in p.stderr and "--no-index" in p.stderr and "spec -o DIR" in p.stderr
    assert not (tmp_path / "pfx").exists()  # nothing made, nothing run


@LEAK
def test_a_lock_reading_a_root_only_file_leaks_nothing(pyz, tmp_path):
    need_root()
    secret = tmp_path / "secret"
    secret.write_text("SECRET-FIRST-LINE\n")
    os.chmod(str(secret), 0o600)
    lock = tmp_path / "root.lock"
    lock.write_text("six==1.17.0 \\\n    --hash=sha256:%s\n-r %s\n" % (H, secret))
    p = _install(pyz, lock, tmp_path / "pfx")
    assert one_line_error(p) and "line 3" in p.stderr, p.stderr
    assert "SECRET" not in p.stdout + p.stderr
    assert not (tmp_path / "pfx").exists()


@EXEC
@pytest.mark.parametrize("shape", ["their-file", "their-dir", "their-link"])
def test_a_lock_another_user_can_change_is_refused(pyz, tmp_path, shared, shape):
    good = "six==1.17.0 \\\n    --hash=sha256:%s\n" % H
    if shape == "their-file":
        lock = os.path.join(shared, "eve.lock")
        as_nobody("sh", "-c", 'printf "%s" "$2" > "$1"', "sh", lock, good)
    elif shape == "their-dir":
        d = os.path.join(shared, "evedir")
        as_nobody("mkdir", "-m", "0777", d)
        lock = os.path.join(d, "root.lock")
        with open(lock, "w") as fh:
            fh.write(good)
    else:
        real = tmp_path / "real.lock"
        real.write_text(good)
        lock = os.path.join(shared, "link.lock")
        as_nobody("ln", "-s", str(real), lock)
    p = _install(pyz, lock, tmp_path / "pfx")
    assert one_line_error(p) and "another user can change it" in p.stderr, p.stderr
    assert not (tmp_path / "pfx").exists()


def test_a_pylock_beside_naming_local_files_or_theirs_is_not_used(tmp_path):
    from preflight.outputs.install import pylock_beside

    lock = tmp_path / "requirements.lock"
    text = "six==1.17.0 \\\n    --hash=sha256:%s\n" % H
    lock.write_text(text)
    remote = '[[packages]]\nname = "six"\nversion = "1.17.0"\n[[packages.wheels]]\nurl = "https://f/six-1.17.0-py2.py3-none-any.whl"\nhashes = {sha256 = "%s"}\n' % H
    (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\n' + remote)
    assert pylock_beside(str(lock), text) == str(tmp_path / "pylock.toml")
    (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\n' + remote.replace(
        'url = "https://f/', 'path = "/home/eve/'))
    assert pylock_beside(str(lock), text) is None
    if os.geteuid() == 0:
        (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\n' + remote)
        os.chown(str(tmp_path / "pylock.toml"), 65534, 65534)
        assert pylock_beside(str(lock), text) is None
