"""Mechanism "bounded unpacking" (F1): ``wheelhouse verify`` unpacks a parts set only when its
members are plain files and directories with plain names (no absolute path, ``..``, link, device,
FIFO or sparse file), at most ``UNPACK_RATIO`` x the archive + ``UNPACK_SLACK`` bytes (headers
first, then the bytes written) in a bounded number of members, with room on the disk; whatever a
failed unpack made is removed."""

import hashlib
import io
import json
import os
import tarfile

import pytest

from preflight.errors import UsageError
from preflight.outputs.wheelhouse import parts as parts_mod
from preflight.outputs.wheelhouse.files import ARCHIVE, PARTS_MANIFEST

LOSS = pytest.mark.fault("LOSS")


def _parts_set(d, add, wheels=1):
    """A parts directory holding one part: the tar made by ``add(tar)``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add(tar)
    raw = buf.getvalue()
    d.mkdir()
    (d / (ARCHIVE + ".part-000")).write_bytes(raw)
    sha = hashlib.sha256(raw).hexdigest()
    (d / PARTS_MANIFEST).write_text(json.dumps({"format": 1, "archive": ARCHIVE, "size": len(raw), "sha256": sha,
                                                "parts": [{"file": ARCHIVE + ".part-000", "size": len(raw),
                                                           "sha256": sha}], "wheels": wheels}))
    return len(raw)


def _file(tar, name, data=b"x", **kw):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data))


def _sparse_bomb(size):
    """A GNU sparse member of ``size`` bytes holding one stored byte (what ``tar -S`` writes for a
    3 GB hole): 1 KB of archive, ``size`` bytes on disk if unpacked."""
    def add(tar):
        info = tarfile.TarInfo("a-1.0-py3-none-any.whl")
        info.size = 1
        info.type = tarfile.GNUTYPE_SPARSE
        buf = bytearray(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
        buf[386:398] = b"%011o\0" % (size - 1)  # sparse map entry 0: offset, numbytes
        buf[398:410] = b"%011o\0" % 1
        buf[482] = 0  # no extended map
        buf[483:495] = b"%011o\0" % size  # real size
        buf[148:156] = b" " * 8
        buf[148:156] = b"%06o\0 " % sum(buf[:512])
        tar.fileobj.write(bytes(buf) + b"x" + b"\0" * 511)
        tar.offset += len(buf) + 512
    return add


def _big_header(tar):  # a plain member that says it is 3 GB (a forged header)
    info = tarfile.TarInfo("big.whl")
    info.size = 3 << 30
    buf = tarfile.TarInfo.tobuf(info, tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    tar.fileobj.write(buf)
    tar.offset += len(buf)


def _many(tar):
    for i in range(300):
        _file(tar, "f%03d" % i)


BOMBS = {"sparse-3GB": _sparse_bomb(3 << 30), "forged-3GB-header": _big_header, "300-members": _many}


@LOSS
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_tar_bomb_unpacks_nothing(tmp_path, name):
    _parts_set(tmp_path / "parts", BOMBS[name])
    dest = tmp_path / "wh"
    try:
        problems = parts_mod.reassemble(str(tmp_path / "parts"), str(dest))
    except UsageError as exc:
        problems = [str(exc)]
    assert problems and "\n" not in problems[0], problems
    left = [os.path.join(r, f) for r, _, fs in os.walk(str(dest)) for f in fs]
    assert left == [], left
    du = sum(os.stat(p).st_blocks * 512 for p in left)
    assert du == 0


@LOSS
@pytest.mark.parametrize("member", ["/etc/evil", "../evil", "a/../../evil", "lnk", "hard", "dev", "fifo"])
def test_unsafe_members_are_refused(tmp_path, member):
    def add(tar):
        _file(tar, "ok.whl", b"fine")
        if member == "lnk":
            info = tarfile.TarInfo("lnk")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        elif member == "hard":
            info = tarfile.TarInfo("hard")
            info.type, info.linkname = tarfile.LNKTYPE, "ok.whl"
            tar.addfile(info)
        elif member in ("dev", "fifo"):
            info = tarfile.TarInfo(member)
            info.type = tarfile.CHRTYPE if member == "dev" else tarfile.FIFOTYPE
            tar.addfile(info)
        else:
            _file(tar, member)
    _parts_set(tmp_path / "parts", add)
    dest = tmp_path / "wh"
    with pytest.raises(UsageError) as e:
        parts_mod.reassemble(str(tmp_path / "parts"), str(dest))
    assert "unsafe entry" in str(e.value)
    assert not (tmp_path / "evil").exists() and not (dest / "ok.whl").exists()
    assert sorted(os.listdir(str(dest))) == []


@LOSS
def test_more_than_the_ratio_is_refused_before_writing(tmp_path):
    """A total just over ``UNPACK_RATIO`` x the archive + ``UNPACK_SLACK``: nothing written."""
    _parts_set(tmp_path / "parts", lambda tar: _file(tar, "a.whl", b"a" * 1000))
    dest = tmp_path / "wh"
    dest.mkdir()
    with tarfile.open(str(tmp_path / "parts" / (ARCHIVE + ".part-000"))) as tar:
        with pytest.raises(UsageError) as e:
            parts_mod._extract(tar, str(dest), archive_size=int(-(parts_mod.UNPACK_SLACK - 500) / parts_mod.UNPACK_RATIO))
    assert "more than" in str(e.value) and os.listdir(str(dest)) == []
    with tarfile.open(str(tmp_path / "parts" / (ARCHIVE + ".part-000"))) as tar:
        with pytest.raises(UsageError):
            parts_mod._extract(tar, str(dest), archive_size=10 ** 6, max_members=0)


def test_no_room_is_one_line_and_nothing_written(tmp_path, monkeypatch):
    _parts_set(tmp_path / "parts", lambda tar: _file(tar, "a.whl", b"a" * 5000))
    monkeypatch.setattr(parts_mod, "_free_bytes", lambda p: 100)
    dest = tmp_path / "wh"
    with pytest.raises(UsageError) as e:
        parts_mod.reassemble(str(tmp_path / "parts"), str(dest))
    assert "bytes free" in str(e.value) and os.listdir(str(dest)) == []


def test_a_good_set_still_unpacks(tmp_path):
    def add(tar):
        d = tarfile.TarInfo("simple")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        _file(tar, "simple/index.html", b"<html/>")
        _file(tar, "a-1.0-py3-none-any.whl", b"w" * 4096)
    _parts_set(tmp_path / "parts", add)
    assert parts_mod.reassemble(str(tmp_path / "parts"), str(tmp_path / "wh")) == []
    assert (tmp_path / "wh" / "a-1.0-py3-none-any.whl").read_bytes() == b"w" * 4096
