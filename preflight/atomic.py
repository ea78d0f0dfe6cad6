"""The one writer of every file this tool writes (reports, status files, manifests, locks,
Dockerfiles, wheelhouse files, logs): safe on a node shared with other users, atomic for readers.

How a path is reached. The destination's directory is opened one component at a time from ``/``
(``O_DIRECTORY | O_NOFOLLOW``), and everything after that works relative to that directory's
descriptor (``dir_fd``): a directory renamed or swapped for a link after the walk cannot redirect
the write. A symbolic link met on the way (a directory component or the file itself) is followed
only when it is owned by the invoking user or root (the links a user or the system made on
purpose: ``/var/run -> /run``, ``~/out -> /scratch/me/out``); its target is then checked as if
it had been named directly. A link owned by anybody else is refused: another user's link in
``/tmp`` never makes this tool write to a file of its owner's choosing (what the kernel's
``fs.protected_symlinks`` does for sticky directories, applied everywhere).

Who may own what. The directory written into must be owned by the invoking user or root and not
writable by other users; a world-writable directory with the sticky bit (``/tmp``) is accepted,
since others can then neither remove nor rename what this tool puts there. An existing
destination must be owned by the invoking user or root. Anything else is an :class:`OutputError`
naming the path and the fix, unless the run allows shared outputs (``--allow-shared-output`` or
``VERL_PREFLIGHT_ALLOW_SHARED_OUTPUT=1``, see :func:`allow_shared_output`); links owned by
other users are refused even then.

How a regular file is written. The text goes to a new temporary file in the same directory
(``O_CREAT | O_EXCL | O_NOFOLLOW``, a dot name ending in ``.tmp`` that collectors of ``*.prom``
or ``*.json`` ignore), is flushed and fsync'ed, and is renamed over the destination with
``os.replace(..., src_dir_fd=, dst_dir_fd=)``; the directory is fsync'ed (best effort). A reader
sees the old file or the whole new one. A rename never follows a link: a link planted at the
name between the check and the rename is replaced, not written through.

Non-regular destinations. A character device, a FIFO or a socket owned by the invoking user or
root (``/dev/null``, ``/dev/full``, a FIFO the user made) is written through (opened with
``O_NOFOLLOW`` and checked again with ``fstat`` after the open), never replaced; so is a link to
one of the process's own descriptors (``/dev/stdout``, ``/proc/self/fd/1``), which is appended
to. A block device is never written (a report is never put onto a disk).
"""

import contextlib
import errno
import os
import re
import stat
import uuid
from typing import IO, Iterator, List, Optional, Tuple, Union

from .errors import UsageError

__all__ = ["OutputError", "absolute", "allow_shared_output", "check_dir", "check_file", "copy_file", "make_dirs",
           "open_atomic", "open_lock", "open_new", "owner_problem", "remove_file", "run_problem", "shared_allowed",
           "tree_problem", "write_atomic", "write_new"]

#: The environment variable that allows outputs in shared places (as ``--allow-shared-output``).
ALLOW_ENV = "VERL_PREFLIGHT_ALLOW_SHARED_OUTPUT"

_ALLOW_SHARED = [False]
_MAX_LINKS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Permission bits the writer never gives a file or directory it creates (group and others' write):
#: under ``umask 000`` it would otherwise make what its own owner check refuses.
_NO_OTHERS = 0o022
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FD_DIR = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd|dev/fd)$")


class OutputError(UsageError):
    """A file could not be written; the message names the option (or file), the reason and the fix."""


def allow_shared_output(on: bool = True) -> None:
    """Allow (``on``) outputs owned by other users or in directories others can write, for the rest
    of this process (``--allow-shared-output``). Links owned by other users stay refused."""
    _ALLOW_SHARED[0] = bool(on)


def shared_allowed() -> bool:
    """True when :func:`allow_shared_output` was called or ``VERL_PREFLIGHT_ALLOW_SHARED_OUTPUT=1``."""
    return _ALLOW_SHARED[0] or os.environ.get(ALLOW_ENV, "") == "1"


def _trusted(uid: int) -> bool:
    return uid == 0 or uid == os.geteuid()


def _who(uid: int) -> str:
    try:
        import pwd

        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def _group(gid: int) -> str:
    try:
        import grp

        return "%s (gid %d)" % (grp.getgrgid(gid).gr_name, gid)
    except (ImportError, KeyError):
        return "gid %d" % gid


def owner_problem(st: os.stat_result, is_dir: bool, sticky_ok: bool = True) -> Optional[str]:
    """Why a file or directory with ``st`` is not this run's own (a phrase), or None.

    Owned by someone other than the invoking user or root; for a directory also writable by other
    users (world-writable without the sticky bit, or group-writable by a group other than the
    user's own and root's). ``sticky_ok=False``: the sticky bit does not excuse it (a directory
    whose entries are looked up by name: others may add a new name there)."""
    if not _trusted(st.st_uid):
        return "owned by %s, another user" % _who(st.st_uid)
    if is_dir:
        sticky = bool(st.st_mode & stat.S_ISVTX) and sticky_ok
        if st.st_mode & stat.S_IWOTH and not sticky:
            return "writable by every user"
        if st.st_mode & stat.S_IWGRP and not sticky and st.st_gid not in (0, os.getegid()):
            return "writable by the other members of group %s" % _group(st.st_gid)
    return None


def _fail(label: str, what: str, fix: str) -> OutputError:
    return OutputError("%s: %s; %s (nothing was written)" % (label, what, fix))


_SHARED_FIX = "write into a directory only you can write, or pass --allow-shared-output if that is meant"


def _split(path: str) -> List[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


class _Walk:
    """The directory of a path, opened component by component from ``/`` (see the module doc)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.links = 0
        self.made: List[str] = []

    def _link(self, fd: int, name: str, where: str) -> str:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not _trusted(st.st_uid):
            raise _fail(self.label, "%s is a link owned by %s, another user: it is never followed"
                        % (os.path.join(where, name), _who(st.st_uid)),
                        "remove the link or name the real path")
        self.links += 1
        if self.links > _MAX_LINKS:
            raise _fail(self.label, "too many levels of links at %s" % os.path.join(where, name), "name the real path")
        return os.readlink(name, dir_fd=fd)

    def open_dir(self, path: str, create: bool = False) -> Tuple[int, str]:
        """(descriptor, resolved path) of the directory ``path`` (absolute); with ``create``, missing
        components are made, mode 0755 minus the umask (:data:`_NO_OTHERS`: never writable by
        others, whatever the umask, so the writer never makes what it refuses), and recorded in
        ``self.made`` (outermost first)."""
        todo = _split(path)
        fd = os.open("/", os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        where = "/"
        try:
            while todo:
                comp = todo.pop(0)
                if comp == "..":
                    nfd = os.open("..", os.O_RDONLY | _DIRECTORY | _CLOEXEC, dir_fd=fd)
                    os.close(fd)
                    fd, where = nfd, os.path.dirname(where) or "/"
                    continue
                try:
                    nfd = os.open(comp, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if not create or ".." in todo:  # the kernel cannot go back up through a missing directory
                        raise _fail(self.label, "directory %s does not exist" % os.path.join(where, comp),
                                    "create it or pass another path" + (" (the path goes back up through it with "
                                                                        "'..')" if ".." in todo else ""))
                    try:
                        os.mkdir(comp, 0o777 & ~_NO_OTHERS, dir_fd=fd)
                        self.made.append(os.path.join(where, comp))
                    except FileExistsError:
                        pass
                    todo.insert(0, comp)
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        raise
                    st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISLNK(st.st_mode):
                        raise _fail(self.label, "%s is not a directory" % os.path.join(where, comp),
                                    "pass a path whose folders are directories")
                    target = self._link(fd, comp, where)
                    if target.startswith("/"):
                        os.close(fd)
                        fd, where = os.open("/", os.O_RDONLY | _DIRECTORY | _CLOEXEC), "/"
                    todo[:0] = _split(target)
                    continue
                os.close(fd)
                fd, where = nfd, os.path.join(where, comp)
            return fd, where
        except OSError as exc:
            os.close(fd)
            raise _fail(self.label, "cannot open directory %s: %s" % (where, exc.strerror or exc),
                        "pass a path you can write")
        except BaseException:
            os.close(fd)
            raise

    def destination(self, path: str, create_dirs: bool = False) -> Tuple[int, str, str, Optional[os.stat_result]]:
        """(directory descriptor, its path, the file's name in it, the file's lstat or None),
        links at the file itself followed (when allowed) to what they name. ``..`` is resolved
        by the walk (the parent of the directory actually reached), never on the text."""
        path = absolute(path)
        while True:
            folder, name = os.path.split(path)
            if not name or name in (".", ".."):
                raise _fail(self.label, "%s is a directory" % path, "pass a file path")
            fd, where = self.open_dir(folder, create=create_dirs)
            if name == "..":
                os.close(fd)
                raise _fail(self.label, "%s is a directory" % path, "pass a file path")
            try:
                st: Optional[os.stat_result] = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                os.close(fd)
                raise _fail(self.label, "cannot read %s: %s" % (os.path.join(where, name), exc.strerror or exc),
                            "pass another path")
            if st is not None and stat.S_ISLNK(st.st_mode) and not _FD_DIR.match(where):
                try:
                    target = self._link(fd, name, where)
                finally:
                    os.close(fd)
                path = target if target.startswith("/") else os.path.join(where, target)
                continue
            return fd, where, name, st


def _check_place(label: str, dfd: int, where: str, name: str, st: Optional[os.stat_result]) -> str:
    """Raise unless ``name`` in the directory ``dfd`` may be written; returns the kind:
    ``new``, ``file`` (replace), ``through`` (write into it) or ``fd`` (one of our descriptors)."""
    full = os.path.join(where, name)
    if _FD_DIR.match(where):
        return "fd"
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise _fail(label, "%s is a directory" % full, "pass a file path")
    if st is not None and stat.S_ISBLK(st.st_mode):
        raise _fail(label, "%s is a block device" % full, "a report is never written onto a disk; pass a file path")
    allow = shared_allowed()
    if st is not None:
        why = owner_problem(st, is_dir=False)
        if why and not stat.S_ISREG(st.st_mode):  # another user's FIFO or device: never, whatever is allowed
            raise _fail(label, "%s is %s, not a regular file" % (full, why), "choose another path")
        if why and not allow:
            raise _fail(label, "%s is %s" % (full, why), "remove it, choose another path, or pass "
                        "--allow-shared-output to replace it")
        if not stat.S_ISREG(st.st_mode):
            return "through"
    dst = os.fstat(dfd)
    why = owner_problem(dst, is_dir=True)
    if why and not allow:
        raise _fail(label, "directory %s is %s" % (where, why), _SHARED_FIX)
    return "file" if st is not None else "new"


def _label(path: str, option: str) -> str:
    return ("%s %s" % (option, path)) if option else path


def absolute(path: str) -> str:
    """``path`` (``~`` expanded) made absolute by putting the working directory in front, with
    nothing else changed: ``a/link/../b`` keeps its ``..``, which the writer's walk (like the
    kernel) resolves against the directory the link led to. Never ``os.path.abspath`` or
    ``normpath`` on an output path: they drop ``link/..`` on the text and write elsewhere."""
    p = os.path.expanduser(path)
    return p if p.startswith("/") else os.path.join(os.getcwd(), p)


_full = absolute


def check_file(path: str, option: str = "") -> None:
    """Raise :class:`OutputError` unless ``path`` could be written by :func:`write_atomic` now
    (its directory exists and is this run's own, no foreign link or file is in the way, and the
    kernel lets a new name be made there: see :func:`_creation_problem`, the one thing it writes,
    and removes)."""
    w = _Walk(_label(path, option))
    dfd, where, name, st = w.destination(_full(path))
    try:
        _check_place(w.label, dfd, where, name, st)
        if not _FD_DIR.match(where) and (st is None or stat.S_ISREG(st.st_mode)):
            if not os.access(".", os.W_OK, dir_fd=dfd):
                raise _fail(w.label, "directory %s is not writable" % where, "pass another path")
            why = _creation_problem(dfd, where)
            if why:
                raise _fail(w.label, why, "pass another path")
    finally:
        os.close(dfd)


def check_dir(path: str, option: str = "") -> None:
    """Raise :class:`OutputError` unless ``path`` is a directory this run may write into, or could
    be made in the nearest existing one (which must then be this run's own, and one where the kernel
    lets a new name be made: :func:`_creation_problem`, the one thing it writes, and removes)."""
    label = _label(path, option)
    full = _full(path)
    probe = full
    while not os.path.lexists(probe) and probe != "/":
        probe = os.path.dirname(probe)
    w = _Walk(label)
    if ".." in _split(full[len(probe):]):  # x/../y with x missing: the kernel gives ENOENT, so does this
        raise _fail(label, "%s does not exist and the path goes back up through it with '..'"
                    % os.path.join(probe, _split(full[len(probe):])[0]), "create it or pass a path without '..'")
    fd, where = w.open_dir(probe)
    try:
        why = owner_problem(os.fstat(fd), is_dir=True)
        if why and not shared_allowed():
            raise _fail(label, "directory %s is %s" % (where, why), _SHARED_FIX)
        if not os.access(".", os.W_OK, dir_fd=fd):
            raise _fail(label, "%s is not a writable directory" % where, "pass another path")
        why = _creation_problem(fd, where)
        if why:
            raise _fail(label, why, "pass another path")
    finally:
        os.close(fd)


def make_dirs(path: str, option: str = "") -> str:
    """Create the directory ``path`` and its missing parents (as ``os.makedirs(exist_ok=True)``)
    under the rules of the module doc; returns its resolved path. Raises :class:`OutputError`."""
    w = _Walk(_label(path, option))
    try:
        fd, where = w.open_dir(_full(path), create=True)
    except OSError as exc:  # pragma: no cover - open_dir turns these into OutputError
        raise _fail(w.label, "cannot create it: %s" % (exc.strerror or exc), "pass another path")
    try:
        why = owner_problem(os.fstat(fd), is_dir=True)
        if why and not shared_allowed():
            _unmake(w.made)  # refused: what this call made goes (a default ACL, a setgid group's bits)
            raise _fail(w.label, "directory %s is %s" % (where, why), _SHARED_FIX)
    finally:
        os.close(fd)
    return where


def _unmake(made: List[str]) -> None:
    """Remove the directories a walk made (innermost first), where they are still empty."""
    for d in reversed(made):
        try:
            os.rmdir(d)
        except OSError:
            pass


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "nothing was written")
        view = view[n:]


def _through(label: str, dfd: int, where: str, name: str, st: Optional[os.stat_result], kind: str) -> int:
    """A write descriptor for a destination written through (device, FIFO, our own descriptor)."""
    if kind == "fd":
        return os.open(name, os.O_WRONLY | os.O_APPEND | _CLOEXEC, dir_fd=dfd)
    fd = os.open(name, os.O_WRONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    now = os.fstat(fd)
    if st is None or (now.st_dev, now.st_ino, stat.S_IFMT(now.st_mode)) != (st.st_dev, st.st_ino,
                                                                           stat.S_IFMT(st.st_mode)):
        os.close(fd)
        raise _fail(label, "%s changed while it was opened" % os.path.join(where, name), "run the command again")
    return fd


class _Sink:
    """The file object :func:`open_atomic` yields: ``write(bytes)`` only."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: Union[bytes, bytearray, memoryview]) -> int:
        _write_all(self.fd, bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def open_atomic(path: str, option: str = "", mode: Optional[int] = None,
                create_dirs: bool = False) -> Iterator[IO[bytes]]:
    """``with open_atomic(path) as fh: fh.write(b"...")``: the bytes written replace ``path`` when
    the block ends without an error (under the rules of the module doc); an error in the block
    leaves ``path`` as it was and removes the temporary file.

    Args:
        path: destination; ``~`` is expanded.
        option: how the user named it (``--json``), for messages.
        mode: permission bits of a new file (default 0o666 minus the umask, like ``open``, and
            never group- or world-writable).
        create_dirs: make missing directories first.

    Raises:
        OutputError: the path is refused (see the module doc), or the write failed (ENOSPC,
            EIO); the message names ``option`` and the path.
    """
    w = _Walk(_label(path, option))
    dfd, where, name, st = w.destination(_full(path), create_dirs=create_dirs)
    tmp = None
    fd = -1
    try:
        try:
            kind = _check_place(w.label, dfd, where, name, st)
        except OutputError:
            _unmake(w.made)  # refused: the directories this call made for it go too
            raise
        try:
            if kind in ("through", "fd"):
                fd = _through(w.label, dfd, where, name, st, kind)
            else:
                if mode is None:  # as open() does, but never writable by others (umask 000 included)
                    umask = os.umask(0)
                    os.umask(umask)
                    mode = 0o666 & ~(umask | _NO_OTHERS)
                for _ in range(100):
                    tmp = ".%s.%s.tmp" % (name[:200], uuid.uuid4().hex[:12])
                    try:
                        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600,
                                     dir_fd=dfd)
                        break
                    except FileExistsError:
                        continue
                os.fchmod(fd, mode)
            yield _Sink(fd)  # type: ignore[misc]
            if tmp is not None:
                os.fsync(fd)
                os.close(fd)
                fd = -1
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                tmp = None
                try:
                    os.fsync(dfd)
                except OSError:
                    pass
        except OSError as exc:
            raise _fail(w.label, "cannot write %s: %s" % (os.path.join(where, name), exc.strerror or exc),
                        "free space or pass another path")
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        os.close(dfd)


def write_atomic(path: str, data: Union[str, bytes], option: str = "", mode: Optional[int] = None,
                 create_dirs: bool = False) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically; see :func:`open_atomic`
    for the arguments and the errors (:class:`OutputError`, one line naming ``option``, the path
    and the fix; a regular destination is then unchanged)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open_atomic(path, option, mode, create_dirs) as fh:
        fh.write(raw)


def copy_file(src: str, dst: str, option: str = "", mode: Optional[int] = None, link: bool = False) -> None:
    """Copy the regular file ``src`` (an input, opened as named) to ``dst`` through
    :func:`open_atomic`, 1 MiB at a time. With ``link``, a hard link to ``src`` under a new
    temporary name renamed over ``dst`` is tried first (no copy of a gigabyte wheel); the copy is
    the fallback (another file system). Raises :class:`OutputError`."""
    if link and _link_into(src, dst, option):
        return
    try:
        sfd = os.open(src, os.O_RDONLY | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise OutputError("%s: cannot read %s: %s" % (option or dst, src, exc.strerror or exc))
    try:
        if not stat.S_ISREG(os.fstat(sfd).st_mode):
            raise OutputError("%s: %s is not a regular file; pass a file" % (option or dst, src))
        with open_atomic(dst, option, mode) as fh:
            while True:
                block = os.read(sfd, 1 << 20)
                if not block:
                    break
                fh.write(block)
    finally:
        os.close(sfd)


def _link_into(src: str, dst: str, option: str) -> bool:
    w = _Walk(_label(dst, option))
    dfd, where, name, st = w.destination(_full(dst))
    try:
        if _check_place(w.label, dfd, where, name, st) not in ("new", "file"):
            return False
        tmp = ".%s.%s.tmp" % (name[:200], uuid.uuid4().hex[:12])
        try:
            os.link(src, tmp, dst_dir_fd=dfd, follow_symlinks=False)
        except (OSError, NotImplementedError):
            return False
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            os.unlink(tmp, dir_fd=dfd)
            return False
        return True
    finally:
        os.close(dfd)


def open_new(path: str, mode: int = 0o600) -> int:
    """A write descriptor of the new file ``path`` (``O_CREAT | O_EXCL | O_NOFOLLOW``): for files
    inside a private directory this run made (``tempfile.mkdtemp``). Raises OSError
    (FileExistsError when something is already there)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)


def write_new(path: str, data: Union[str, bytes], mode: int = 0o600) -> None:
    """Create ``path`` (which must not exist) and write ``data``: for files inside a private
    directory this run made (``tempfile.mkdtemp``), where nothing else can be in the way.
    ``O_EXCL | O_NOFOLLOW``; raises OSError (FileExistsError when something is there)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd = open_new(path, mode)
    try:
        _write_all(fd, raw)
    finally:
        os.close(fd)


def _creation_problem(dfd: int, where: str) -> Optional[str]:
    """Why nothing can be created in the directory ``dfd`` (reached by :class:`_Walk`, its path
    ``where``), found by creating (and at once removing) an empty directory of a random name in it,
    relative to the descriptor; None when it can. ``os.access`` alone says yes to root on /proc,
    /sys and other filesystems that refuse every new name, so a command would otherwise find out only
    when it writes, after minutes of work."""
    name = ".preflight-probe-%s" % uuid.uuid4().hex[:12]
    try:
        os.mkdir(name, 0o700, dir_fd=dfd)
    except OSError as exc:
        return "cannot create anything in %s (%s)" % (where, os.strerror(exc.errno) if exc.errno else exc)
    try:
        os.rmdir(name, dir_fd=dfd)
    except OSError:
        pass
    return None


def remove_file(path: str, option: str = "", links: bool = False) -> bool:
    """Remove ``path`` when it is a regular file this run may replace (see the module doc), working
    in its directory's descriptor; with ``links``, remove it only when it is a link (the link
    itself, never what it names). Anything else is left alone. Returns True when something was
    removed. Raises :class:`OutputError` when the place is refused."""
    w = _Walk(_label(path, option))
    full = _full(path)
    name = os.path.basename(full)
    if name in ("", ".", ".."):
        return False
    fd, where = w.open_dir(os.path.dirname(full))
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if links != stat.S_ISLNK(st.st_mode) or not (links or stat.S_ISREG(st.st_mode)):
            return False
        if links:
            why = owner_problem(os.fstat(fd), is_dir=True)
            if why and not shared_allowed():
                raise _fail(w.label, "directory %s is %s" % (where, why), _SHARED_FIX)
        else:
            _check_place(w.label, fd, where, name, st)
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _fail(w.label, "cannot remove %s: %s" % (full, exc.strerror or exc), "pass another path")
        return True
    finally:
        os.close(fd)


def open_lock(path: str, option: str = "") -> int:
    """A read-write descriptor of the lock file ``path`` (created, mode 0644, when missing) for
    ``fcntl.flock``; refused as a destination is (see the module doc): a FIFO, a device or a
    link in its place is never opened. Raises :class:`OutputError`."""
    w = _Walk(_label(path, option))
    dfd, where, name, st = w.destination(_full(path))
    try:
        kind = _check_place(w.label, dfd, where, name, st)
        if kind not in ("new", "file"):
            raise _fail(w.label, "%s is not a regular file" % os.path.join(where, name), "remove it")
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), 0o644,
                         dir_fd=dfd)
        except OSError as exc:
            raise _fail(w.label, "cannot open %s: %s" % (os.path.join(where, name), exc.strerror or exc),
                        "pass another path")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _fail(w.label, "%s is not a regular file" % os.path.join(where, name), "remove it")
        return fd
    finally:
        os.close(dfd)


def tree_problem(root: str, names: Tuple[str, ...] = ()) -> Optional[str]:
    """Why the directory ``root`` (a prefix, a cache) and the entries ``names`` in it (markers,
    ``bin``, ``bin/python``: those that exist) are not this run's own, or None.

    Own means: each is owned by the invoking user or root, none is a link owned by someone else,
    and no directory among them (``root`` included) is writable by other users (the sticky bit
    does not count here: a prefix is run from, not only written to). A missing ``root`` is None."""
    full = _full(root)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "%s cannot be read (%s)" % (full, exc.strerror or exc)
    if stat.S_ISLNK(st.st_mode):
        if not _trusted(st.st_uid):
            return "%s is a link owned by %s, another user" % (full, _who(st.st_uid))
        try:
            st = os.stat(full)
        except OSError as exc:
            return "%s cannot be read (%s)" % (full, exc.strerror or exc)
    for rel in ("",) + tuple(names):
        p = os.path.join(full, rel) if rel else full
        try:
            s = os.lstat(p) if rel else st
        except FileNotFoundError:
            continue
        except OSError as exc:
            return "%s cannot be read (%s)" % (p, exc.strerror or exc)
        if not _trusted(s.st_uid):
            return "%s is owned by %s, another user" % (p, _who(s.st_uid))
        if stat.S_ISDIR(s.st_mode) and (s.st_mode & stat.S_IWOTH or
                                        (s.st_mode & stat.S_IWGRP and s.st_gid not in (0, os.getegid()))):
            return "%s is writable by other users" % p
    return None


def _has_acl(path: str) -> bool:
    """True when the directory ``path`` carries an access ACL beyond its mode bits (an entry for a
    named user or group: the mode's group bits then show only the ACL's mask)."""
    try:
        return "system.posix_acl_access" in os.listxattr(path, follow_symlinks=False)
    except (OSError, AttributeError):  # no xattrs on this filesystem or platform
        return False


def run_problem(path: str, is_dir: bool = False, by_name: bool = False) -> Optional[str]:
    """Why running the program ``path`` runs code another user controls (a phrase), or None.

    Every directory on its way and every link followed (to the real file) must be owned by the
    invoking user or root and not writable by other users (a sticky directory such as /tmp is
    fine for directories: others cannot swap what is in it); the file itself must be owned by the
    invoking user or root and not writable by others. ``is_dir``: ``path`` is a directory whose
    entries must be safe from other users (a temporary root): it is judged like the directories on
    its way. ``by_name``: with ``is_dir``, code is looked up by name inside ``path`` (a directory on
    ``sys.path``, a library search path, a bytecode cache): there a sticky bit is no excuse, since
    others may still add a new name (``/tmp/json.py`` in ``PYTHONPATH=/tmp``). A missing path is
    None (the caller reports it)."""
    todo = _split(_full(path))
    cur = "/"
    hops = 0
    while todo:
        comp = todo.pop(0)
        nxt = os.path.normpath(os.path.join(cur, comp))
        try:
            st = os.lstat(nxt)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if not _trusted(st.st_uid):
                return "%s is a link owned by %s" % (nxt, _who(st.st_uid))
            if hops > _MAX_LINKS:
                return None
            target = os.readlink(nxt)
            cur = "/" if target.startswith("/") else cur
            todo[:0] = _split(target)
            continue
        last = not todo and not is_dir
        why = owner_problem(st, is_dir=not last, sticky_ok=not (by_name and is_dir and not todo))
        if why is None and not last and _has_acl(nxt):
            why = "given a POSIX ACL (other users may be allowed to write it)"
        if why is None and last and st.st_mode & (stat.S_IWOTH | stat.S_IWGRP) and not (
                st.st_mode & stat.S_IWGRP and not st.st_mode & stat.S_IWOTH and st.st_gid in (0, os.getegid())):
            why = "writable by other users"
        if why:
            return "%s is %s" % (nxt, why)
        cur = nxt
    return None
