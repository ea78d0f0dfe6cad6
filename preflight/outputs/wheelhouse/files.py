"""The files of a wheelhouse: their names, and how they are read (bounded), hashed and written."""

import hashlib
import os
from typing import Any, Callable

from ...paths import loads_json, read_regular

#: The files a wheelhouse and its parts directory hold.
MANIFEST = "wheelhouse.json"
PARTS_MANIFEST = "wheelhouse.parts.json"
SERVED_LOCK = "requirements.lock"
ARCHIVE = "wheelhouse.tar"
#: Bytes read at a time when hashing or joining files.
CHUNK = 1 << 20
#: A progress callback: one line for people.
Say = Callable[[str], None]


#: The most bytes read from a manifest, a lock or a pip listing (a 200-wheel manifest is about 100 KB).
MAX_INPUT_BYTES = 64 << 20


def read_text(path: str) -> str:
    """A manifest, lock or listing as text: regular files only, at most :data:`MAX_INPUT_BYTES`.
    Raises OSError (not a regular file, too large, unreadable) or ValueError (not UTF-8)."""
    return read_regular(path, MAX_INPUT_BYTES).decode("utf-8")


def load_json(path: str) -> Any:
    """:func:`read_text` parsed as JSON; raises OSError or ValueError."""
    return loads_json(read_text(path), path)


def sha256_of(path: str) -> str:
    """The sha256 hex digest of the file ``path``, read in :data:`CHUNK` pieces; raises OSError."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through the one atomic writer (:func:`preflight.atomic.write_atomic`)."""
    from ...atomic import write_atomic

    write_atomic(path, text)


def same_file(src: str, dst: str) -> bool:
    """True when ``src`` and ``dst`` both exist and are one file (``os.path.samefile``)."""
    try:
        return os.path.samefile(src, dst)
    except OSError:
        return False


def copy_file(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` through a temporary name and a rename (a zipapp running from ``dst``
    keeps its file); nothing happens when both are the same file (a wheelhouse refreshed with
    its own zipapp)."""
    if same_file(src, dst):
        return
    from ...atomic import copy_file as _copy

    _copy(src, dst)


def place_file(src: str, dst: str) -> None:
    """Put ``src`` at ``dst`` as a hard link (a copy across file systems), replacing what is there;
    nothing happens when both are the same file."""
    if same_file(src, dst):
        return
    from ...atomic import copy_file as _copy

    _copy(src, dst, link=True)  # a hard link from the cache where it can, else a copy


def plain_name(path: Any) -> bool:
    """True when ``path`` is a relative path that stays inside its directory (no ``..``, not absolute)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path:
        return False
    return ".." not in path.replace("\\", "/").split("/")
