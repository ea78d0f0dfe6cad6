"""Mechanism "outputs": every file the tool writes goes through preflight/atomic.py, which never
writes through a link or a non-regular file another user put in the way, refuses files owned by
other users and directories they can write, and works relative to a directory descriptor (a swap
between its check and its write changes nothing). Cases: every writer entry point and every output
option x every shape another user can plant (tests/security/seckit.py SHAPES), as root with uid
65534 planting (setpriv). Each case checks the refusal (exit 2, one line naming the path, no
traceback) and that nothing changed: root's file, and what was planted."""

import os
import stat
import time

import pytest

import seckit
from seckit import SHAPES, as_nobody, need_root, one_line_error, pf, plant, shared_dir, snapshot, victim

from preflight import atomic
from preflight.atomic import OutputError

LOSS = pytest.mark.fault("LOSS")
STACK = ["--verl", "0.9.1", "--no-backend", "--torch", "2.13.0", "--torch-index", "none", "--python", "3.11",
         "--no-probe"]

pytestmark = pytest.mark.usefixtures("_root")


@pytest.fixture
def _root(tmp_path):
    need_root()
    seckit.reachable(str(tmp_path))


def _setup(tmp_path, shape, rel="shared/out/report.json"):
    """(path to pass, the victim, the tree to snapshot)."""
    v = victim(str(tmp_path / "root-owned" / "rootfile") if os.makedirs(str(tmp_path / "root-owned")) is None
               else None)
    out = str(tmp_path / rel)
    os.makedirs(os.path.dirname(os.path.dirname(out)), exist_ok=True)
    if shape not in ("dir-link", "other-owner-dir"):
        os.makedirs(os.path.dirname(out), exist_ok=True)
    return plant(shape, out, v), v


# ---- the writer's own entry points x every shape ----------------------------------------------

def _write_atomic(p):
    atomic.write_atomic(p, "report\n", "--json")


def _open_atomic(p):
    with atomic.open_atomic(p, "--parts-dir") as fh:
        fh.write(b"part\n")


def _copy(p):
    atomic.copy_file(seckit.__file__, p, "-o")


def _copy_link(p):
    atomic.copy_file(seckit.__file__, p, "-o", link=True)


def _lock(p):
    os.close(atomic.open_lock(p, "--prefix"))


def _check_file(p):
    atomic.check_file(p, "--json")


WRITERS = {"write_atomic": _write_atomic, "open_atomic": _open_atomic, "copy_file": _copy,
           "copy_file(link)": _copy_link, "open_lock": _lock, "check_file": _check_file}


@LOSS
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_the_writer_refuses_what_another_user_planted(tmp_path, writer, shape):
    path, v = _setup(tmp_path, shape)
    before = snapshot(str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(OutputError) as err:
        WRITERS[writer](path)
    msg = str(err.value)
    assert "\n" not in msg and ("--" in msg or "-o" in msg) and time.monotonic() - t0 < 10
    assert "another user" in msg or "writable by" in msg, msg
    assert snapshot(str(tmp_path)) == before


@LOSS
@pytest.mark.parametrize("shape", ["other-owner", "world-writable-dir", "other-owner-dir"])
def test_allow_shared_output_is_the_one_way_past_an_owner(tmp_path, shape):
    path, v = _setup(tmp_path, shape)
    atomic.allow_shared_output(True)
    try:
        atomic.write_atomic(path, "mine now\n", "--json")
    finally:
        atomic.allow_shared_output(False)
    assert open(path).read() == "mine now\n" and open(v).read().startswith("root:")
    assert not os.path.islink(path) and stat.S_ISREG(os.lstat(path).st_mode)


@LOSS
@pytest.mark.parametrize("shape", ["link", "dir-link"])
def test_links_of_other_users_stay_refused_even_when_shared_is_allowed(tmp_path, shape):
    path, v = _setup(tmp_path, shape)
    before = snapshot(str(tmp_path))
    atomic.allow_shared_output(True)
    try:
        with pytest.raises(OutputError):
            atomic.write_atomic(path, "x\n", "--json")
    finally:
        atomic.allow_shared_output(False)
    assert snapshot(str(tmp_path)) == before


@LOSS
def test_the_users_own_link_is_followed_and_kept(tmp_path):
    # documented: a link owned by the invoking user (or root) is followed; its target is checked as
    # if named directly, replaced atomically, and the link stays
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "r.json").write_text("old\n")
    os.symlink(str(tmp_path / "real"), str(tmp_path / "dirlink"))
    os.symlink("r.json", str(tmp_path / "real" / "link.json"))
    atomic.write_atomic(str(tmp_path / "dirlink" / "link.json"), "new\n", "--json")
    assert (tmp_path / "real" / "r.json").read_text() == "new\n" and os.path.islink(str(tmp_path / "real" / "link.json"))


@LOSS
def test_own_link_to_another_users_file_is_refused(tmp_path):
    theirs = shared_dir(str(tmp_path / "shared"))
    as_nobody("sh", "-c", 'echo theirs > "$1"', "sh", os.path.join(theirs, "f"))
    os.symlink(os.path.join(theirs, "f"), str(tmp_path / "mine.json"))
    with pytest.raises(OutputError, match="another user"):
        atomic.write_atomic(str(tmp_path / "mine.json"), "x", "--json")
    assert open(os.path.join(theirs, "f")).read() == "theirs\n"


@LOSS
def test_a_block_device_is_never_written(tmp_path):
    dev = str(tmp_path / "disk")
    try:
        os.mknod(dev, 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    except (PermissionError, OSError) as exc:
        pytest.skip("mknod not allowed: %s" % exc)
    with pytest.raises(OutputError, match="block device"):
        atomic.write_atomic(dev, "x", "--json")


# ---- swaps between the check and the write (TOCTOU) ------------------------------------------

@LOSS
def test_a_link_planted_after_the_check_is_replaced_not_followed(tmp_path, monkeypatch):
    v = victim(str(tmp_path / "rootfile"))
    d = shared_dir(str(tmp_path / "shared"))
    out = os.path.join(d, "report.json")
    real = atomic._check_place

    def then_plant(*a):
        kind = real(*a)
        as_nobody("ln", "-s", v, out)  # the other user wins the race
        return kind

    monkeypatch.setattr(atomic, "_check_place", then_plant)
    atomic.write_atomic(out, "report\n", "--json")
    assert open(v).read().startswith("root:") and not os.path.islink(out) and open(out).read() == "report\n"


@LOSS
def test_a_directory_swapped_after_the_walk_gets_nothing(tmp_path, monkeypatch):
    # the write goes through the descriptor of the directory that was checked: a rename of that
    # directory and a link in its place (to root's directory) after the walk changes nothing
    v = victim(str(tmp_path / "etc" / "passwd") if os.makedirs(str(tmp_path / "etc")) is None else None)
    d = tmp_path / "out"
    d.mkdir()
    real = atomic._check_place

    def then_swap(*a):
        kind = real(*a)
        os.rename(str(d), str(tmp_path / "moved"))
        os.symlink(str(tmp_path / "etc"), str(d))
        return kind

    monkeypatch.setattr(atomic, "_check_place", then_swap)
    atomic.write_atomic(str(d / "passwd"), "report\n", "--json")
    assert open(v).read().startswith("root:") and (tmp_path / "moved" / "passwd").read_text() == "report\n"


@LOSS
def test_a_fifo_swapped_in_after_the_check_is_refused(tmp_path, monkeypatch):
    mine = str(tmp_path / "mine.fifo")
    os.mkfifo(mine)
    real = atomic._check_place

    import threading

    def then_swap(*a):
        kind = real(*a)
        os.rename(mine, mine + ".old")  # kept: its inode number cannot be reused
        os.mkfifo(mine)  # another inode: what was checked is not what would be opened
        threading.Thread(target=lambda: open(mine, "rb").read(), daemon=True).start()  # a reader on the new one
        return kind

    monkeypatch.setattr(atomic, "_check_place", then_swap)
    with pytest.raises(OutputError, match="changed"):
        atomic.write_atomic(mine, "x", "--json")


# ---- every output option of the command line x every shape ----------------------------------

def _check_json(pyz, path):
    return pf(pyz, "check", "--stage", "host", "-q", "--json", path)


def _check_junit(pyz, path):
    return pf(pyz, "check", "--stage", "host", "-q", "--format", "junit", "--output", path)


def _check_markdown(pyz, path):
    return pf(pyz, "check", "--stage", "host", "-q", "--format", "markdown", "--output", path)


def _status_dir(pyz, path):
    return pf(pyz, "check", "--stage", "host", "-q", "--status-dir", os.path.dirname(path))


def _spec(pyz, path):
    return pf(pyz, "spec", *STACK, "-o", os.path.dirname(path))


def _image(pyz, path):
    return pf(pyz, "image", *STACK, "-o", os.path.dirname(path))


#: output option: (the file another user plants, how the command is run)
OUTPUTS = {"check --json": ("report.json", _check_json), "check --output (junit)": ("r.xml", _check_junit),
           "check --output (markdown)": ("r.md", _check_markdown), "check --status-dir": ("verdict", _status_dir),
           "spec -o": ("requirements.lock", _spec), "image -o": ("Dockerfile", _image)}


@LOSS
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_every_output_option_refuses_what_another_user_planted(pyz, tmp_path, output, shape):
    if output.startswith("check --output") and shape not in ("link", "fifo", "other-owner-dir"):
        pytest.skip("the same path as check --json")
    name, runner = OUTPUTS[output]
    path, v = _setup(tmp_path, shape, "shared/out/" + name)
    before = snapshot(str(tmp_path))
    t0 = time.monotonic()
    p = runner(pyz, path)
    assert one_line_error(p), (p.returncode, p.stderr[-2000:])
    assert time.monotonic() - t0 < 60
    assert snapshot(str(tmp_path)) == before
    assert open(v).read().startswith("root:")


@LOSS
def test_o03_json_through_another_users_link_in_a_sticky_dir(pyz, tmp_path):
    # fault_cases_3 o03, as reproduced there
    shared = shared_dir(str(tmp_path / "shared"))
    v = victim(str(tmp_path / "rootfile"))
    as_nobody("ln", "-s", v, os.path.join(shared, "report.json"))
    p = pf(pyz, "check", "--stage", "host", "-q", "--json", os.path.join(shared, "report.json"))
    assert one_line_error(p) and "report.json" in p.stderr and "another user" in p.stderr, p.stderr
    assert open(v).read() == "root:x:0:0::/root:/bin/bash\n"


@LOSS
def test_a_sticky_shared_dir_still_takes_a_new_report(pyz, tmp_path):
    shared = shared_dir(str(tmp_path / "shared"))
    p = pf(pyz, "check", "--stage", "host", "-q", "--json", os.path.join(shared, "report.json"))
    assert p.returncode in (0, 1), p.stderr
    assert os.lstat(os.path.join(shared, "report.json")).st_uid == 0


@pytest.mark.fault("HANG")
def test_another_users_fifo_is_refused_even_when_shared_output_is_allowed(pyz, tmp_path):
    """rev-attack finding 2: root writing a report into a user's directory on purpose
    (--allow-shared-output) blocked forever on the user's FIFO at that name."""
    from seckit import as_nobody, need_root, one_line_error, pf, reachable

    need_root()
    reachable(str(tmp_path))
    d = str(tmp_path / "theirs")
    os.makedirs(d)
    os.chmod(d, 0o777)
    as_nobody("mkfifo", os.path.join(d, "r.json"))
    p = pf(pyz, "check", "--stage", "host", "-q", "--json", os.path.join(d, "r.json"), "--allow-shared-output",
           timeout=60)
    assert one_line_error(p) and "not a regular file" in p.stderr, p.stderr
