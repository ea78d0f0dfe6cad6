"""Paths the user names: outputs checked before any work starts, so a typo costs a second, not a
minute of pip or a GPU run (both raise :class:`preflight.errors.UsageError` naming the option and
the fix); inputs read only when they are regular files of a sane size, so a FIFO, a device or a
link to /dev/zero named by mistake (or placed by someone else) cannot block or exhaust memory."""

import errno
import json
import os
import re
import stat
from typing import Any, List, Optional, Tuple, Union

from .errors import UsageError

__all__ = ["check_output_file", "check_output_dir", "code_problem", "bytecode_cache_problem", "model_code_problem", "tree_code_problem",
           "not_run", "CODE_FIX", "dir_files", "file_problem", "foreign_link", "kernel_file", "loads_json",
           "read_regular", "read_text"]


def _could_read(uid: int, real: str) -> bool:
    """Whether ``uid`` could read ``real`` (an absolute path without links) itself: its owner, or
    the file readable by others and every directory above it searchable by them (or theirs).
    Group bits are not judged (their groups are not known here): a group-only file is refused."""
    try:
        st = os.stat(real)
    except OSError:
        return True  # nothing to leak; the caller's own stat names the problem
    if st.st_uid != uid and not st.st_mode & stat.S_IROTH:
        return False
    d = os.path.dirname(real)
    while True:
        try:
            dst = os.stat(d)
        except OSError:
            return False
        if dst.st_uid != uid and not dst.st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(d)
        if parent == d:
            return True
        d = parent


def foreign_link(path: str) -> Optional[str]:
    """Why ``path`` must not be read on another user's word, or None. A link on the way that is
    owned by neither the invoking user nor root is followed only to what its owner could read
    themselves: root reading ``/tmp/x/train.log -> /root/.netrc`` (uid 65534's link) would print
    root's secret into a report or a shared job log (the read-side twin of the writer's link rule
    and of the kernel's ``fs.protected_symlinks``). Links to the owner's own files (a Hugging Face
    cache: snapshots linking blobs) and to world-readable ones (a shared /models) are fine."""
    me = os.geteuid()
    p = os.path.abspath(os.path.expanduser(path))
    parts = [c for c in p.split(os.sep) if c]
    cur = os.sep
    for i, comp in enumerate(parts):
        nxt = os.path.join(cur, comp)
        try:
            st = os.lstat(nxt)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (0, me):
            real = os.path.realpath(os.path.join(nxt, *parts[i + 1:]) if parts[i + 1:] else nxt)
            if not _could_read(st.st_uid, real):
                return ("reached through a link of another user (uid %d, %s) to a file they cannot read "
                        "themselves" % (st.st_uid, nxt))
        cur = os.path.realpath(nxt) if stat.S_ISLNK(st.st_mode) else nxt
    return None


def kernel_file(path: str) -> Optional[str]:
    """A phrase when ``path`` (links followed) is a kernel interface under /proc or /sys, not a file
    of the user's: some are consumed by reading (/proc/kmsg), some are endless or change as read;
    else None."""
    real = os.path.realpath(os.path.expanduser(path))
    if real.startswith(("/proc/", "/sys/")):
        return "a kernel interface (%s), not a file of yours; reading some consumes them" % real.split("/")[1]
    fs = _fs_type(real)  # procfs, sysfs or another kernel filesystem mounted (or bound) elsewhere
    if fs in _KERNEL_FS:
        return "a kernel interface (%s, mounted at another path), not a file of yours; reading some consumes " \
               "them" % fs
    return None


#: Filesystems whose files are kernel interfaces, not data (Linux fstype names).
_KERNEL_FS = frozenset(("proc", "sysfs", "debugfs", "tracefs", "securityfs", "configfs", "cgroup", "cgroup2",
                        "bpf", "pstore", "efivarfs", "fusectl"))


def _fs_type(real: str) -> Optional[str]:
    """The filesystem type of the mount holding the absolute path ``real`` (/proc/self/mountinfo's
    longest mount point above it), or None where that cannot be read."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            lines = fh.read(1 << 22).decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        head, _, tail = line.partition(" - ")
        parts = head.split()
        if len(parts) < 5 or not tail:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, tail.split()[0]
    return kind


def file_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be read as a file (``"no such file"``, ``"not a regular file (a FIFO)"``,
    a link of another user's to what they cannot read: :func:`foreign_link`), or None for a
    regular file. Only stats the path: a FIFO is never opened (opening one blocks)."""
    try:
        mode = os.stat(os.path.expanduser(path)).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return "cannot be read (%s)" % (exc.strerror or exc)
    if stat.S_ISREG(mode):
        return kernel_file(path) or foreign_link(path)
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a file")
    return "not a regular file (%s)" % kind


def dir_files(path: str, suffix: str) -> Tuple[Optional[str], List[str], List[str]]:
    """A directory of inputs, judged as a named file is: (why the directory itself must not be
    listed, or None; its regular ``*suffix`` files directly in it, sorted; ``"FILE: why"`` for each
    such entry that must not be read, :func:`file_problem`). A directory reached through another
    user's link to what they cannot list themselves (root's 0700 directory) is not listed at all;
    a link of theirs inside their directory to root's 0600 file is named, never read. Entries that
    are not regular files (a FIFO, a directory named ``x.parquet``) are left out, unopened."""
    full = os.path.expanduser(path)
    why = foreign_link(full) or kernel_file(full)
    if why:
        return why, [], []
    ok: List[str] = []
    bad: List[str] = []
    for f in sorted(os.listdir(full)):
        entry = os.path.join(path, f)
        if not f.endswith(suffix) or not os.path.isfile(os.path.expanduser(entry)):
            continue
        problem = file_problem(entry)
        if problem:
            bad.append("%s: %s" % (entry, problem))
        else:
            ok.append(entry)
    return None, ok, bad


def read_regular(path: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``.

    Opened without blocking (a FIFO swapped in after a stat cannot hang the read; a /proc file
    that would wait for data ends the read instead). Raises OSError with a one-phrase
    ``strerror`` (``"no such file"``, ``"not a regular file (a FIFO)"``, ``"larger than 64 MiB"``)
    for anything else, so callers that already report an OSError's strerror name the cause."""
    path = os.path.expanduser(path)
    why = file_problem(path)
    if why is not None:
        raise OSError(errno.ENOENT if why == "no such file" else errno.EINVAL, why)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, size = [], 0
        while True:
            try:
                b = os.read(fd, 1 << 20)
            except BlockingIOError:
                break
            if not b:
                break
            size += len(b)
            if size > max_bytes:
                raise OSError(errno.EFBIG, "larger than %s" % _human(max_bytes))
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str, max_bytes: int, option: str, fix: str) -> str:
    """The UTF-8 text of the input file ``path`` (:func:`read_regular`'s rules: a regular file of at
    most ``max_bytes``). Raises UsageError ``"OPTION PATH: WHY; FIX"`` for a missing, odd, too large
    or non-UTF-8 file (the first bad byte and its offset named), so no caller decodes by itself."""
    try:
        data = read_regular(path, max_bytes)
    except OSError as exc:
        raise UsageError("%s %s: %s; %s" % (option, path, exc.strerror or exc, fix))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError("%s %s: not UTF-8 text (byte 0x%02x at offset %d); %s" % (
            option, path, data[exc.start], exc.start, fix))


class _NonFinite(str):
    """A NaN, Infinity, -Infinity or an overflowing number (1e400) met while parsing."""


def _strict_float(text: str) -> Any:
    v = float(text)
    return _NonFinite(text) if v != v or v in (float("inf"), float("-inf")) else v


def _pairs(source: str):
    def hook(pairs: List[Any]) -> dict:
        for k, v in pairs:
            if isinstance(v, _NonFinite) or (isinstance(v, list) and any(isinstance(x, _NonFinite) for x in v)):
                raise ValueError("%s: key %r is %s, which is not a finite number (JSON has no NaN or Infinity); "
                                 "write a number" % (source, k, v if isinstance(v, _NonFinite) else
                                                     next(x for x in v if isinstance(x, _NonFinite))))
        return dict(pairs)
    return hook


def loads_json(data: Union[bytes, str], source: str) -> Any:
    """The JSON document ``data`` read from ``source`` (a path, for messages), strictly: NaN,
    Infinity, -Infinity and numbers too large for a float (1e400) are refused, as RFC 8259 does
    (Python's json accepts them, and ``int(float('nan'))`` later crashes a check). Every input JSON
    file the checker reads goes through this. Raises ValueError, one line naming the file and the
    key (UnicodeDecodeError and RecursionError as json does)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    out = json.loads(text, parse_constant=_NonFinite, parse_float=_strict_float, object_pairs_hook=_pairs(source))
    if isinstance(out, _NonFinite) or (isinstance(out, list) and any(isinstance(x, _NonFinite) for x in out)):
        raise ValueError("%s: holds a non-finite number (NaN or Infinity); write a number" % source)
    return out


def _human(n: int) -> str:
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10) if n >= 1 << 10 else "%d bytes" % n


def check_output_file(path: str, option: str) -> None:
    """``path`` can be created or replaced as a file ('-' means stdout and is accepted)."""
    if not path or path == "-":
        return
    from .atomic import absolute

    full = absolute(path)  # '..' stays for the kernel to resolve (never on the text)
    if os.path.isdir(full):
        raise UsageError("%s %s is a directory; pass a file path such as %s" % (option, path,
                                                                               os.path.join(path, "report.json")))
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise UsageError("%s %s: directory %s does not exist; create it or pass another path" % (option, path, folder))
    if not os.access(folder, os.W_OK):
        raise UsageError("%s %s: directory %s is not writable; pass another path" % (option, path, folder))
    from .atomic import check_file

    check_file(path, option)  # no foreign link, file or shared directory in the way


def check_output_dir(path: str, option: str) -> None:
    """``path`` is an existing writable directory, or can be created (its nearest existing
    ancestor is a writable directory)."""
    from .atomic import absolute

    full = absolute(path)  # '..' stays for the kernel to resolve (never on the text)
    if os.path.exists(full) and not os.path.isdir(full):
        raise UsageError("%s %s exists and is not a directory; pass a directory path" % (option, path))
    probe = full
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK):
        raise UsageError("%s %s: %s is not a writable directory; pass another path" % (option, path, probe))
    from .atomic import check_dir

    check_dir(path, option)  # owned by this user or root, not writable by others


def writable_problem(path: str) -> Optional[str]:
    """Why this user could not create ``path`` (a file or directory that may not exist yet): the
    nearest existing ancestor is not a directory, is on a kernel filesystem (procfs, sysfs...: root's
    ``os.access`` says yes, the kernel refuses), or is not writable and searchable by this user;
    None when it could. Only ``os.access`` and /proc/self/mountinfo are asked: nothing is created."""
    from .atomic import absolute

    p = absolute(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if not os.path.isdir(p):
        return "%s is not a directory" % p
    fs = _fs_type(os.path.realpath(p))
    if fs in _KERNEL_FS:  # os.access says yes to root there, but the kernel creates nothing in /proc or /sys
        return "%s is on a kernel filesystem (%s): nothing can be created there" % (p, fs)
    if not os.access(p, os.W_OK | os.X_OK):
        return "%s is not writable by this user" % p
    return None


#: The fix named by every "not run" row of :func:`not_run`.
CODE_FIX = ("make it yours (chown it, and the directories above it, to you or root; chmod go-w them), or copy it "
            "somewhere only you can write and point the launch (or --python) there")


def code_problem(path: str, is_dir: bool = False) -> Optional[str]:
    """Why the code at ``path`` (a Python file, or with ``is_dir`` a directory whose files are
    imported) is unsafe for this process to execute (a phrase naming the path and the owner), or
    None: the one judgement for "code another user can change, run by this process".

    Unsafe: the file, or any directory above it (``path`` itself when ``is_dir``), or a link on the
    way, is owned by a user other than the invoking one or root, or writable by other users
    (POSIX ACLs on the directories count; a sticky directory such as /tmp is fine on the way to a
    file: others cannot rename what is in it; but not as the ``is_dir`` directory itself, whose
    files are imported by name: others may add one there; ``atomic.run_problem``). A file of yours in a
    directory another user can write (no sticky bit) is unsafe too: they can rename another file
    over it. A missing path is None (the caller reports it)."""
    from .atomic import run_problem

    full = os.path.abspath(os.path.expanduser(path))
    why = run_problem(full, is_dir=is_dir, by_name=is_dir)
    if why or is_dir or not full.endswith((".py", ".pyw")) or not os.path.isfile(full):
        return why
    return bytecode_cache_problem(os.path.realpath(full))


def bytecode_cache_problem(source: str) -> Optional[str]:
    """Why the bytecode Python would run in place of the source file ``source`` (a real path) is
    unsafe, or None. Importing a ``.py`` file reads ``__pycache__/NAME.TAG.pyc`` beside it when
    its header matches the source's mtime and size (which anyone who can read the source's
    metadata knows): that directory, where it exists, is judged as one code is looked up in by
    name; where it does not, the source's own directory is, since whoever can add a name there
    can make it (a sticky /tmp is no excuse)."""
    from .atomic import run_problem

    folder = os.path.dirname(source)
    cache = os.path.join(folder, "__pycache__")
    if os.path.lexists(cache):
        why = run_problem(cache, is_dir=True, by_name=True)
        return "%s (the bytecode cache read in place of %s)" % (why, source) if why else None
    why = run_problem(folder, is_dir=True, by_name=True)
    return ("%s: others can make __pycache__ there, whose bytecode Python runs in place of %s" % (why, source)
            if why else None)


def model_code_problem(directory: str) -> Optional[str]:
    """:func:`code_problem` for a model directory whose ``auto_map`` names Python files that
    transformers imports with ``trust_remote_code=True``: the directory and every ``*.py`` in it."""
    why = code_problem(directory, is_dir=True)
    if why:
        return why
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".py"))
    except OSError:
        return None
    for n in names:
        why = code_problem(os.path.join(directory, n))
        if why:
            return why
    return None


def tree_code_problem(tree: Any) -> Optional[str]:
    """:func:`code_problem` for what an interpreter runs before any script (the ``tree`` event of
    ``target/info.py`` run with ``-I -S``): ``prefix``, the ``site_dirs`` (site-packages, the user
    site), ``path_dirs`` (the standard library's, PYTHONPATH's), the ``.pth`` files and
    sitecustomize/usercustomize (``startup`` files). None when nothing is unsafe or the event is
    malformed (nothing to judge)."""
    if not isinstance(tree, dict):
        return None

    def strs(key: str) -> List[str]:
        v = tree.get(key)
        return [x for x in v if isinstance(x, str) and x.startswith("/")] if isinstance(v, list) else []
    prefix = tree.get("prefix")
    dirs = ([prefix] if isinstance(prefix, str) and prefix.startswith("/") else []) + strs("site_dirs") + strs(
        "path_dirs")
    for d in dirs:
        while not os.path.lexists(d) and os.path.dirname(d) != d:
            d = os.path.dirname(d)  # not there yet: whoever can make it there decides what is imported
        why = code_problem(d, is_dir=os.path.isdir(d))
        if why:
            return why
    for d in strs("site_dirs") + strs("path_dirs"):  # what is imported by name: the entries themselves
        why = entries_problem(d)
        if why:
            return why
    for f in strs("startup"):
        why = code_problem(f, is_dir=os.path.isdir(f))
        if why:
            return why
    return None


def entries_problem(directory: str) -> Optional[str]:
    """:func:`code_problem`'s phrase for the first entry of ``directory`` (a site-packages, a
    ``sys.path`` directory: each entry is a package or module imported by its name) that another
    user owns or can write, a link included (judged through to what it names); None when none is
    or it cannot be listed. Only the entries themselves: what is inside a package directory of
    root's or yours was put there by one of you."""
    from .atomic import owner_problem

    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return None
    for n in names:
        path = os.path.join(directory, n)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            why = code_problem(path, is_dir=os.path.isdir(path))
        else:
            is_dir = stat.S_ISDIR(st.st_mode)
            why = owner_problem(st, is_dir=is_dir, sticky_ok=False)
            if why is None and not is_dir and st.st_mode & stat.S_IWOTH:
                why = "writable by every user"
            why = "%s is %s" % (path, why) if why else None
        if why:
            return why
    return None


def not_run(what: str, why: str) -> str:
    """The message of a refusal by :func:`code_problem`: ``not run: <why>``, who could change it
    and what this process would have done with it."""
    return ("not run: %s: %s is code another user can change, and this run (uid %d) would execute it"
            % (why, what, os.geteuid()))
