"""preflight wheelhouse refreshed over its own output and over the user's files (fault_cases:
SameFileError on its own zipapp, --force deleting the user's wheels, an edited requirements.lock
replaced, a non-zipapp --pyz accepted, a temporary archive left behind, messages naming the wrong
option). One real pin (six 1.17.0 from PyPI, cached under ~/.cache/verl-preflight/wheelhouse)."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from preflight.errors import UsageError
from preflight.outputs import wheelhouse as wh

TINY_LOCK = ("six==1.17.0 \\\n    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n")
SIX = "simple/six/six-1.17.0-py2.py3-none-any.whl"


def pf(pyz, *args, cwd=None):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, cwd=cwd)


def _one_line_error(proc):
    assert "Traceback" not in proc.stderr and "please report" not in proc.stderr, proc.stderr[-2000:]
    errs = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(errs) == 1, proc.stderr
    return errs[0]


@pytest.fixture
def lock(tmp_path):
    path = tmp_path / "tiny.lock"
    path.write_text(TINY_LOCK)
    return str(path)


@pytest.fixture(scope="module")
def built(pyz_file, tmp_path_factory):
    """A wheelhouse of the tiny lock written by the zipapp (pristine: copy it before changing)."""
    d = tmp_path_factory.mktemp("whb")
    (d / "tiny.lock").write_text(TINY_LOCK)
    p = pf(pyz_file, "wheelhouse", "--lock", "tiny.lock", "--python", "3.11", "-o", "wh", cwd=str(d))
    assert p.returncode == 0, p.stderr
    return str(d / "wh")


def _copy(built, tmp_path, name="wh"):
    dst = str(tmp_path / name)
    shutil.copytree(built, dst)
    return dst


@pytest.mark.fault("CRASH")
@pytest.mark.parametrize("how", ["own-zipapp", "--pyz-inside", "--pyz-inside-split"])
def test_refresh_with_the_wheelhouses_own_zipapp(built, tmp_path, lock, how):
    """The zipapp inside the wheelhouse refreshes it (run from there, or given as --pyz): no
    SameFileError; the zipapp is intact and the wheelhouse verifies."""
    d = _copy(built, tmp_path)
    inner = os.path.join(d, "preflight.pyz")
    before = open(inner, "rb").read()
    args = ["wheelhouse", "--lock", lock, "--python", "3.11", "-o", d]
    if how != "own-zipapp":
        args += ["--pyz", inner]
    if how == "--pyz-inside-split":
        args += ["--split", "1MiB"]
    p = pf(inner, *args)
    assert p.returncode == 0, p.stderr
    assert open(inner, "rb").read() == before
    assert wh.verify(d)[1] == []
    if how == "--pyz-inside-split":
        assert open(d + ".parts/preflight.pyz", "rb").read() == before


@pytest.mark.fault("CRASH")
def test_parts_dir_equal_to_output_is_a_usage_error(pyz, tmp_path, lock):
    for parts in ("w3", "./w3/", os.path.join(str(tmp_path), "w3")):
        p = pf(pyz, "wheelhouse", "--lock", lock, "--python", "3.11", "--split", "1MiB", "--parts-dir", parts,
               "-o", "w3", cwd=str(tmp_path))
        assert p.returncode == 2 and "--parts-dir" in _one_line_error(p) and "-o" in p.stderr
        assert not (tmp_path / "w3").exists()


@pytest.mark.fault("LOSS")
def test_force_keeps_the_users_wheels(pyz, tmp_path, lock):
    """--force into the user's own directory of wheels adds the wheelhouse beside them."""
    d = tmp_path / "uw"
    theirs = d / "simple" / "numpy" / "numpy-1.0-py3-none-any.whl"
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"their wheel")
    (d / "notes.txt").write_text("mine")
    p = pf(pyz, "wheelhouse", "--lock", lock, "--python", "3.11", "-o", str(d), "--force")
    assert p.returncode == 0, p.stderr
    assert theirs.read_bytes() == b"their wheel" and (d / "notes.txt").read_text() == "mine"
    assert wh.verify(str(d))[1] == []


@pytest.mark.fault("LOSS")
def test_rerun_keeps_user_added_package_dir(built, pyz, tmp_path, lock):
    d = _copy(built, tmp_path)
    mine = os.path.join(d, "simple", "mypkg", "mypkg-1.0-py3-none-any.whl")
    os.makedirs(os.path.dirname(mine))
    with open(mine, "wb") as fh:
        fh.write(b"mine")
    p = pf(pyz, "wheelhouse", "--lock", lock, "--python", "3.11", "-o", d)
    assert p.returncode == 0, p.stderr
    assert open(mine, "rb").read() == b"mine" and wh.verify(d)[1] == []


@pytest.mark.fault("LOSS")
@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("victim", ["requirements.lock", "simple/index.html", "simple/six/index.html"])
def test_rerun_refuses_to_replace_an_edited_file(built, pyz, tmp_path, lock, force, victim):
    """A file the wheelhouse wrote and the user edited since is listed and kept, with or without
    --force; nothing else changes."""
    d = _copy(built, tmp_path)
    path = os.path.join(d, victim)
    with open(path, "a") as fh:
        fh.write("# my edit\n")
    snapshot = {f: open(os.path.join(r, f), "rb").read() for r, _, fs in os.walk(d) for f in fs}
    p = pf(pyz, "wheelhouse", "--lock", lock, "--python", "3.11", "-o", d, *(["--force"] if force else []))
    assert p.returncode == 2 and victim in _one_line_error(p)
    assert {f: open(os.path.join(r, f), "rb").read() for r, _, fs in os.walk(d) for f in fs} == snapshot


@pytest.mark.fault("LOSS")
def test_rerun_removes_only_its_own_older_wheels(built, tmp_path, lock):
    """A pin that changed: the earlier build's wheel goes (the manifest listed it); a wheel the
    user put beside it in the same package directory stays."""
    d = _copy(built, tmp_path)
    m = json.load(open(os.path.join(d, wh.MANIFEST)))
    old = os.path.join(d, "simple", "six", "six-1.16.0-py2.py3-none-any.whl")
    shutil.copyfile(os.path.join(d, SIX), old)
    m["wheels"][0]["file"] = "simple/six/six-1.16.0-py2.py3-none-any.whl"
    with open(os.path.join(d, wh.MANIFEST), "w") as fh:
        json.dump(m, fh)
    os.remove(os.path.join(d, SIX))
    theirs = os.path.join(d, "simple", "six", "six-0.9-py3-none-any.whl")
    with open(theirs, "wb") as fh:
        fh.write(b"theirs")
    wh.build(lock, d, "3.11")
    assert not os.path.exists(old) and os.path.exists(theirs) and os.path.isfile(os.path.join(d, SIX))
    assert wh.verify(d)[1] == []


@pytest.mark.fault("LOSS")
def test_parts_dir_force_keeps_the_users_parts(built, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "wheelhouse.tar.part-000").write_bytes(b"their own part")
    with pytest.raises(UsageError) as exc:
        wh.split(built, str(parts), 1 << 20)
    assert "wheelhouse.tar.part-000" in str(exc.value)
    assert (parts / "wheelhouse.tar.part-000").read_bytes() == b"their own part"
    os.remove(str(parts / "wheelhouse.tar.part-000"))
    doc = wh.split(built, str(parts), 4096)
    again = wh.split(built, str(parts), 1 << 20)  # its own parts are replaced, the surplus ones removed
    assert len(doc["parts"]) > 1 and sorted(f for f in os.listdir(str(parts)) if ".part-" in f) == [
        p["file"] for p in again["parts"]]


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("what", ["lock", "zip-without-main", "missing", "directory"])
def test_pyz_must_be_the_checkers_zipapp(pyz_file, tmp_path, lock, what):
    import zipfile

    bad = {"lock": lock, "missing": str(tmp_path / "nope.pyz"), "directory": str(tmp_path),
           "zip-without-main": str(tmp_path / "x.zip")}[what]
    if what == "zip-without-main":
        with zipfile.ZipFile(bad, "w") as zf:
            zf.writestr("hello.txt", "hi")
    p = pf(pyz_file, "wheelhouse", "--lock", lock, "--python", "3.11", "-o", str(tmp_path / "w4"), "--pyz", bad)
    assert p.returncode == 2 and ("--pyz %s" % bad) in _one_line_error(p)
    assert not (tmp_path / "w4").exists()


@pytest.mark.fault("LOSS")
def test_verify_refusing_an_unsafe_member_leaves_no_temporary_archive(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"escaped"
        info = tarfile.TarInfo("../escaped.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    (parts / "wheelhouse.tar.part-000").write_bytes(blob)
    import hashlib

    digest = hashlib.sha256(blob).hexdigest()
    (parts / wh.PARTS_MANIFEST).write_text(json.dumps({
        "format": 1, "archive": "wheelhouse.tar", "size": len(blob), "sha256": digest, "part_size": len(blob),
        "parts": [{"file": "wheelhouse.tar.part-000", "size": len(blob), "sha256": digest}]}))
    with pytest.raises(UsageError) as exc:
        wh.open_wheelhouse(str(parts), option="wheelhouse verify")
    assert "unsafe" in str(exc.value)
    assert not (tmp_path / "escaped.txt").exists()
    left = [os.path.join(r, f) for r, _, fs in os.walk(str(parts / "wheelhouse")) for f in fs]
    assert left == []


@pytest.mark.fault("WRONG")
def test_messages_name_the_argument_used(pyz, tmp_path):
    p = pf(pyz, "wheelhouse", "verify", "wh.parts", cwd=str(tmp_path))
    line = _one_line_error(p)
    assert p.returncode == 2 and "wheelhouse verify wh.parts" in line and "--wheelhouse" not in line
    p = pf(pyz, "install", "--wheelhouse", "wh.parts", "--python", "3.11", "--prefix", "v", cwd=str(tmp_path))
    assert p.returncode == 2 and "--wheelhouse wh.parts" in _one_line_error(p)
    (tmp_path / "wh").mkdir()
    p = pf(pyz, "wheelhouse", "--check", "wh", "--python", str(tmp_path / "opt/verl/bin/python"), cwd=str(tmp_path))
    line = _one_line_error(p)
    assert p.returncode == 2 and "no such interpreter" in line and "needs --python" not in line
    p = pf(pyz, "wheelhouse", "--check", "wh", cwd=str(tmp_path))
    assert p.returncode == 2 and "needs --python PATH" in _one_line_error(p)


@pytest.mark.fault("WRONG")
def test_help_examples_can_be_pasted_into_a_shell(pyz):
    """Every example line of ``wheelhouse --help`` is valid shell (sh -n), quotes balanced."""
    p = pf(pyz, "wheelhouse", "--help")
    text = p.stdout.split("examples:", 1)[1].split("exit codes:", 1)[0]
    text = text.replace("then, on the offline machine:", "")
    cmds = [l.split("   (")[0].strip() for l in text.replace("\\\n", " ").splitlines() if "preflight.pyz" in l]
    assert len(cmds) >= 4
    for cmd in cmds:
        chk = subprocess.run(["sh", "-n", "-c", cmd], stderr=subprocess.PIPE, universal_newlines=True)
        assert chk.returncode == 0, (cmd, chk.stderr)


def _verify_one_file(pyz, tmp_path, name, text):
    """``wheelhouse verify`` on a directory holding only ``name`` with ``text``: exactly one error line."""
    d = tmp_path / "wh"
    d.mkdir()
    (d / name).write_text(text)
    proc = pf(pyz, "wheelhouse", "verify", str(d))
    _one_line_error(proc)
    return proc


@pytest.mark.fault("CRASH")
@pytest.mark.parametrize("manifest", ['{"wheels": [{"file": "x"}]}', "[]", '{"wheels": null}',
                                      '{"wheels": [{"name": "a", "version": "1", "file": "../../etc/passwd", '
                                      '"size": 1, "sha256": "00"}]}',
                                      '{"wheels": [{"name": "a", "version": "1", "file": "a.whl", "size": "big", '
                                      '"sha256": "00"}]}',
                                      '{"wheels": []}', '{"wheels": [], "python": "3.12", "total_bytes": "big"}',
                                      '{"wheels": [], "python": "3.12", "total_bytes": 1e999}',
                                      '{"wheels": [], "python": "3.12", "omitted": 5}',
                                      '{"wheels": [], "python": "3.12", "served_lock": "../../etc/hostname"}',
                                      '{"wheels": [], "python": "3.12", "served_lock": "/etc/hostname"}',
                                      '{"wheels": [{"name": "a", "version": "1", "file": "a.whl", "size": 1, '
                                      '"sha256": "00"}], "python": "3.12"}',
                                      "[" * 100000 + "]" * 100000], ids=lambda m: m[:40])
def test_malformed_manifest_is_one_line_not_a_crash(pyz, tmp_path, manifest):
    proc = _verify_one_file(pyz, tmp_path, "wheelhouse.json", manifest)
    assert ("is not a wheelhouse manifest" in proc.stderr or "no readable" in proc.stderr), proc.stderr
    assert "nothing was installed" not in proc.stderr  # verify installs nothing either way


@pytest.mark.fault("CRASH")
@pytest.mark.parametrize("manifest", ["{}", "[]", '{"parts": [{"file": 3}]}', '{"parts": []}',
                                      '{"parts": [{"file": "../x", "size": 1, "sha256": "0"}], "size": 1, "sha256": "0"}'])
def test_malformed_parts_manifest_is_one_line_not_a_crash(pyz, tmp_path, manifest):
    proc = _verify_one_file(pyz, tmp_path, "wheelhouse.parts.json", manifest)
    assert "wheelhouse.parts.json" in proc.stderr


@pytest.mark.fault("HANG")
@pytest.mark.parametrize("case", ["verify a FIFO manifest", "verify a /dev/zero manifest", "lock FIFO",
                                  "install lock FIFO", "exclude-installed FIFO"])
def test_inputs_that_are_not_regular_files_are_refused_at_once(pyz, tmp_path, lock, case):
    """A FIFO (never opened: opening one blocks) or a device (never read: /dev/zero has no end) named
    where a manifest, a lock or a pip listing belongs: one line naming it, within seconds."""
    whd = tmp_path / "wh"
    whd.mkdir()
    fifo = str(tmp_path / "f.lock")
    os.mkfifo(fifo)
    if case == "verify a FIFO manifest":
        os.mkfifo(str(whd / "wheelhouse.json"))
        args, kind = ["wheelhouse", "verify", str(whd)], "a FIFO"
    elif case == "verify a /dev/zero manifest":
        os.symlink("/dev/zero", str(whd / "wheelhouse.json"))
        args, kind = ["wheelhouse", "verify", str(whd)], "a character device"
    elif case == "lock FIFO":
        args, kind = ["wheelhouse", "--lock", fifo, "-o", str(tmp_path / "out")], "a FIFO"
    elif case == "install lock FIFO":
        args, kind = ["install", "--lock", fifo, "--prefix", str(tmp_path / "p")], "a FIFO"
    else:
        args, kind = ["wheelhouse", "--lock", lock, "-o", str(tmp_path / "out"), "--exclude-installed", fifo], "a FIFO"
    p = pf(pyz, *args)
    assert p.returncode == 2 and "not a regular file (%s)" % kind in _one_line_error(p), p.stderr
    assert not os.path.exists(str(tmp_path / "out")) and not os.path.exists(str(tmp_path / "p"))


def test_a_wheel_that_is_not_a_zip_is_named(tmp_path):
    """A file whose hash the manifest records but which is no zip archive (copied wrong at the
    source): one line naming it, not a BadZipFile traceback."""
    bad = tmp_path / "x-1.0-py3-none-any.whl"
    bad.write_bytes(b"abc")
    with pytest.raises(UsageError) as e:
        wh.wheel_requires(str(bad))
    assert str(bad) in str(e.value) and "not a readable wheel" in str(e.value)
