"""Splitting a wheelhouse into parts of at most N bytes, and reassembling (and checking) them."""

import hashlib
import io
import json
import os
import re
import tarfile
from typing import Any, Dict, List, Optional

from ... import __version__
from ...atomic import make_dirs, open_atomic, remove_file
from ...errors import UsageError
from .files import (
    ARCHIVE,
    CHUNK,
    MANIFEST,
    PARTS_MANIFEST,
    SERVED_LOCK,
    Say,
    copy_file,
    load_json,
    plain_name,
    sha256_of,
    write_text,
)
from .ownership import refuse_theirs


def parse_size(text: str) -> int:
    """Bytes of a size such as ``64MiB``, ``60M``, ``1GiB``, ``500KB``, ``1048576``.

    Binary units (KiB, MiB, GiB and K, M, G) are powers of 1024; KB, MB, GB are powers of 1000.
    Raises UsageError for anything else or a size under 1 MiB (parts that small are a mistake).
    """
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(i?)(B?)\s*$", text or "", re.I)
    if not m:
        raise UsageError("--split %r: give a size such as 64MiB, 60M or 1GiB" % text)
    num, unit, binary, byte = m.groups()
    power = " KMG".index(unit.upper() or " ")
    base = 1000 if (byte and not binary and unit) else 1024
    size = int(float(num) * base ** power)
    if size < (1 << 20):
        raise UsageError("--split %r is under 1 MiB; give a size such as 64MiB" % text)
    return size


def _tar_members(wh_dir: str) -> List[str]:
    m = load_json(os.path.join(wh_dir, MANIFEST))
    names = [MANIFEST, SERVED_LOCK] + ([m["pyz"]["file"]] if m.get("pyz") else [])
    names += ["simple/index.html"]
    for r in m["wheels"]:
        names += [r["file"], "simple/%s/index.html" % r["key"]]
    return names


def split(wh_dir: str, parts_dir: str, part_size: int, say: Say = lambda s: None) -> Dict[str, Any]:
    """Write ``wh_dir`` as one tar (sorted members, fixed times: the same wheelhouse gives the same
    bytes) cut into parts of at most ``part_size`` bytes in ``parts_dir``, with
    ``wheelhouse.parts.json`` (each part's size and sha256, the whole tar's) and the zipapp
    beside them. Returns the parts manifest."""
    make_dirs(parts_dir, "--parts-dir")
    try:  # the parts an earlier split wrote here: the only ones removed
        old = load_json(os.path.join(parts_dir, PARTS_MANIFEST))
        owned: Optional[Dict[str, Optional[str]]] = {p["file"]: None for p in old["parts"]}
        owned.update({PARTS_MANIFEST: None, "preflight.pyz": None})
    except (OSError, ValueError, KeyError, TypeError):
        owned = None
    mine = [f for f in os.listdir(parts_dir) if f.startswith(ARCHIVE + ".part-")]
    has_pyz = bool(load_json(os.path.join(wh_dir, MANIFEST)).get("pyz"))
    refuse_theirs(parts_dir, mine + [PARTS_MANIFEST] + (["preflight.pyz"] if has_pyz else []), owned, "--parts-dir")
    for f in mine:
        remove_file(os.path.join(parts_dir, f), "--parts-dir")

    class _Cutter(io.RawIOBase):
        def __init__(self):
            self.parts: List[Dict[str, Any]] = []
            self.whole = hashlib.sha256()
            self.total = 0
            self.fh = None
            self.cm = None
            self.h = None
            self.n = 0

        def writable(self):
            return True

        def _open(self):
            name = "%s.part-%03d" % (ARCHIVE, len(self.parts))
            self.cm = open_atomic(os.path.join(parts_dir, name), "--parts-dir")
            self.fh = self.cm.__enter__()
            self.h = hashlib.sha256()
            self.n = 0
            self.parts.append({"file": name})

        def _close(self):
            if self.fh is not None:
                self.cm.__exit__(None, None, None)
                self.parts[-1].update(size=self.n, sha256=self.h.hexdigest())
                self.fh = None

        def write(self, b):
            b = bytes(b)
            view = memoryview(b)
            while len(view):
                if self.fh is None or self.n >= part_size:
                    self._close()
                    self._open()
                take = min(len(view), part_size - self.n)
                chunk = view[:take]
                self.fh.write(chunk)
                self.h.update(chunk)
                self.whole.update(chunk)
                self.n += take
                self.total += take
                view = view[take:]
            return len(b)

    cut = _Cutter()
    with tarfile.open(fileobj=cut, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for name in _tar_members(wh_dir):
            path = os.path.join(wh_dir, name)
            info = tar.gettarinfo(path, arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o644
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    cut._close()
    m = load_json(os.path.join(wh_dir, MANIFEST))
    doc = {"format": 1, "archive": ARCHIVE, "size": cut.total, "sha256": cut.whole.hexdigest(),
           "part_size": part_size, "parts": cut.parts, "wheels": len(m["wheels"]), "python": m["python"],
           "created_by": "verl-preflight %s" % __version__,
           "reassemble": "preflight wheelhouse verify DIR (or: cat %s.part-* > %s && tar xf %s)" % (ARCHIVE, ARCHIVE,
                                                                                                   ARCHIVE)}
    write_text(os.path.join(parts_dir, PARTS_MANIFEST), json.dumps(doc, indent=1, sort_keys=True) + "\n")
    if m.get("pyz"):
        copy_file(os.path.join(wh_dir, m["pyz"]["file"]), os.path.join(parts_dir, "preflight.pyz"))
    say("%d parts of at most %d bytes in %s (%d bytes in all)" % (len(cut.parts), part_size, parts_dir, cut.total))
    return doc


#: unpacked bytes allowed per byte of archive (wheels are already compressed: a tar of them holds
#: about its own size), plus a constant for the headers of a small archive
UNPACK_RATIO = 1.1
UNPACK_SLACK = 1 << 20
#: members allowed beyond two per wheel (the wheel and its simple/ index) and the fixed files
MEMBER_SLACK = 64


def _safe_members(tar: tarfile.TarFile, max_bytes: int, max_members: int) -> List[tarfile.TarInfo]:
    """The members of ``tar``, refused (UsageError, one line) unless every one is a plain file
    or directory with a plain relative name (no absolute path, no ``..``, no link, device, FIFO
    or sparse file) and together they hold at most ``max_bytes`` bytes in at most
    ``max_members`` members (a tar bomb is refused before anything is written)."""
    out: List[tarfile.TarInfo] = []
    total = 0
    for mem in tar:
        n = mem.name
        if not plain_name(n) or not (mem.isfile() or mem.isdir()) or mem.issparse():
            what = ("a sparse file" if mem.issparse() else "a link" if mem.issym() or mem.islnk() else
                    "a device or FIFO" if mem.isdev() else "an unsafe name" if not plain_name(n) else "not a file")
            raise UsageError("the wheelhouse archive holds an unsafe entry %r (%s); not extracting it" % (n, what))
        total += max(0, mem.size)
        out.append(mem)
        if len(out) > max_members or total > max_bytes:
            raise UsageError("the wheelhouse archive would unpack to more than %d bytes or %d entries (its parts "
                             "are %d bytes in all): not a wheelhouse split by this tool; nothing was extracted"
                             % (max_bytes, max_members, int((max_bytes - UNPACK_SLACK) / UNPACK_RATIO)))
    return out


def _free_bytes(path: str) -> Optional[int]:
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def _parts_problem(doc: Any) -> Optional[str]:
    """What makes ``doc`` (a parsed wheelhouse.parts.json) unusable, or None: the shape
    :func:`split` writes, each part a plain file name in the parts directory."""
    if not isinstance(doc, dict) or not isinstance(doc.get("parts"), list) or not doc["parts"]:
        return "no list of parts"
    if not isinstance(doc.get("size"), int) or isinstance(doc.get("size"), bool) or not isinstance(
            doc.get("sha256"), str):
        return "no valid size and sha256 of the archive"
    for i, p in enumerate(doc["parts"]):
        if not (isinstance(p, dict) and plain_name(p.get("file")) and "/" not in p["file"]
                and isinstance(p.get("size"), int) and not isinstance(p.get("size"), bool)
                and isinstance(p.get("sha256"), str)):
            return "part %d has no valid file, size and sha256" % i
    return None


def _extract(tar: tarfile.TarFile, dest: str, archive_size: int, max_members: int = 1 << 20) -> None:
    """Unpack the plain files and directories of ``tar`` into ``dest`` through the one writer
    (never through a link or a file another user put there), at most ``UNPACK_RATIO`` times
    ``archive_size`` plus ``UNPACK_SLACK`` bytes in all (checked on the headers first, then on the
    bytes actually written) and only when the file system has room. On any failure every file and
    directory this call created is removed again. Raises UsageError (one line)."""
    max_bytes = int(archive_size * UNPACK_RATIO) + UNPACK_SLACK
    members = _safe_members(tar, max_bytes, max_members)
    need = sum(m.size for m in members if m.isfile())
    free = _free_bytes(dest)
    if free is not None and need > free:
        raise UsageError("%s: %d bytes free, the wheelhouse needs %d; free space or pass another --wheelhouse"
                         % (dest, free, need))
    made_files: List[str] = []
    made_dirs: List[str] = []
    written = 0
    try:
        for mem in members:
            path = os.path.join(dest, mem.name)
            if mem.isdir():
                if not os.path.isdir(path):
                    made_dirs.append(path)
                make_dirs(path, "--wheelhouse")
                continue
            parent = os.path.dirname(path)
            while parent != dest and not os.path.isdir(parent):
                made_dirs.append(parent)
                parent = os.path.dirname(parent)
            src = tar.extractfile(mem)
            assert src is not None
            if not os.path.lexists(path):
                made_files.append(path)
            with open_atomic(path, "--wheelhouse", create_dirs=True) as out:
                left = mem.size
                for chunk in iter(lambda: src.read(min(CHUNK, max(left, 1))), b""):
                    written += len(chunk)
                    left -= len(chunk)
                    if left < 0 or written > max_bytes:
                        raise UsageError("the wheelhouse archive unpacks to more than its headers say (%r); "
                                         "nothing was kept" % mem.name)
                    out.write(chunk)
    except BaseException:
        for f in reversed(made_files):
            remove_file(f, "--wheelhouse")
        for d in sorted(set(made_dirs), key=len, reverse=True):
            try:
                os.rmdir(d)  # only directories this call made, and only when empty
            except OSError:
                pass
        raise


def reassemble(parts_dir: str, dest: str, say: Say = lambda s: None) -> List[str]:
    """Check every part listed in ``parts_dir/wheelhouse.parts.json`` (present, size, sha256),
    then the joined archive's sha256, then unpack it into ``dest``. Returns the problems found
    (one line each: which part is missing or corrupt); nothing is unpacked unless there are none."""
    try:
        doc = load_json(os.path.join(parts_dir, PARTS_MANIFEST))
    except (OSError, ValueError, RecursionError) as exc:
        return ["%s: cannot read %s (%s)" % (parts_dir, PARTS_MANIFEST, getattr(exc, "strerror", None)
                                             or type(exc).__name__)]
    bad = _parts_problem(doc)
    if bad:
        return ["%s: %s is not a parts manifest (%s)" % (parts_dir, PARTS_MANIFEST, bad)]
    problems = []
    for p in doc["parts"]:
        path = os.path.join(parts_dir, p["file"])
        if not os.path.isfile(path):
            problems.append("part %s is missing (%d bytes expected)" % (p["file"], p["size"]))
        elif os.path.getsize(path) != p["size"]:
            problems.append("part %s has %d bytes, expected %d (cut short or a different copy)" % (
                p["file"], os.path.getsize(path), p["size"]))
        elif sha256_of(path) != p["sha256"]:
            problems.append("part %s is corrupt: its sha256 is not %s" % (p["file"], p["sha256"][:16]))
    if problems:
        return problems
    say("%d parts verified; joining %d bytes" % (len(doc["parts"]), doc["size"]))
    make_dirs(dest, "--wheelhouse")
    archive = os.path.join(dest, ARCHIVE + ".tmp")
    whole = hashlib.sha256()
    try:  # the joined archive is removed however this ends (a refused member, a full disk, Ctrl-C)
        with open_atomic(archive, "--wheelhouse") as out:
            for p in doc["parts"]:
                with open(os.path.join(parts_dir, p["file"]), "rb") as fh:
                    for chunk in iter(lambda: fh.read(CHUNK), b""):
                        whole.update(chunk)
                        out.write(chunk)
        if whole.hexdigest() != doc["sha256"]:
            return ["the joined parts have sha256 %s, expected %s (parts out of order or from another build)" % (
                whole.hexdigest()[:16], doc["sha256"][:16])]
        wheels = doc.get("wheels")
        limit = 2 * wheels + MEMBER_SLACK if isinstance(wheels, int) and not isinstance(wheels, bool) else 1 << 20
        with tarfile.open(archive) as tar:
            _extract(tar, dest, doc["size"], limit)
    finally:
        remove_file(archive, "--wheelhouse")
    return []
