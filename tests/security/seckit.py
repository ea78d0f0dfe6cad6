"""Helpers of the security suite (tests/security/): a second user (uid 65534, "nobody") planting
files, links and FIFOs, the way another user of a shared node does, and the shapes of what can
be in an output's way."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

NOBODY = 65534
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (a second uid plants the files)")


def as_nobody(*cmd, **kw):
    """Run ``cmd`` as uid/gid 65534 with no groups (setpriv, else runuser)."""
    if shutil.which("setpriv"):
        pre = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    elif shutil.which("runuser"):
        pre = ["runuser", "-u", "nobody", "--"]
    else:  # pragma: no cover
        pytest.skip("neither setpriv nor runuser")
    return subprocess.run(pre + list(cmd), check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def reachable(path):
    """Let the second user reach ``path`` (pytest's base directories are 0700): o+x up the tree."""
    p = os.path.abspath(path)
    while p not in ("/", "/tmp"):
        st = os.stat(p)
        if not st.st_mode & 0o001:
            os.chmod(p, stat.S_IMODE(st.st_mode) | 0o005)
        p = os.path.dirname(p)


def shared_dir(path):
    """A directory like /tmp: mode 1777, root's."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o1777)
    return path


def victim(path, text="root:x:0:0::/root:/bin/bash\n"):
    """A file of root's that must never change."""
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o644)
    return path


#: What another user can put where an output goes (in a sticky shared directory unless said).
SHAPES = ("link", "fifo", "other-owner", "world-writable-dir", "group-writable-dir", "dir-link", "other-owner-dir")


def plant(shape, out_path, victim_path):
    """Put ``shape`` where ``out_path`` (a file path) would be written; returns the path to pass
    to the tool (it differs from ``out_path`` for the directory shapes)."""
    d = os.path.dirname(out_path)
    if shape == "link":  # another user's link in a sticky directory, to root's file
        shared_dir(d)
        as_nobody("ln", "-s", victim_path, out_path)
        return out_path
    if shape == "fifo":  # another user's FIFO: no reader, ever
        shared_dir(d)
        as_nobody("mkfifo", out_path)
        return out_path
    if shape == "other-owner":  # another user's regular file
        shared_dir(d)
        as_nobody("sh", "-c", 'echo theirs > "$1"', "sh", out_path)
        return out_path
    if shape == "world-writable-dir":  # 0777, no sticky bit: anyone can swap the file
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
        return out_path
    if shape == "group-writable-dir":  # 0775, group nogroup: its members can swap the file
        os.makedirs(d, exist_ok=True)
        os.chown(d, 0, NOBODY)
        os.chmod(d, 0o775)
        return out_path
    if shape == "other-owner-dir":  # a directory another user made in /tmp
        parent = shared_dir(os.path.dirname(d))
        as_nobody("mkdir", "-m", "755", d)
        assert os.path.dirname(d) == parent
        return out_path
    if shape == "dir-link":  # the directory is another user's link, to root's directory
        parent = shared_dir(os.path.dirname(d))
        as_nobody("ln", "-s", os.path.dirname(victim_path), d)
        assert os.path.dirname(d) == parent
        return os.path.join(d, os.path.basename(victim_path))
    raise ValueError(shape)


def snapshot(*paths):
    """{path: bytes or link target or kind} of the files under ``paths`` (FIFOs never opened)."""
    out = {}
    for top in paths:
        for dirpath, dirs, files in os.walk(top):
            for f in files + [x for x in dirs if os.path.islink(os.path.join(dirpath, x))]:
                p = os.path.join(dirpath, f)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    out[p] = ("link", os.readlink(p), st.st_uid)
                elif stat.S_ISREG(st.st_mode):
                    out[p] = (open(p, "rb").read(), st.st_uid, st.st_mode)
                else:
                    out[p] = ("node", stat.S_IFMT(st.st_mode), st.st_uid)
    return out


def pf(pyz, *args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, **kw)


def one_line_error(p):
    """The process ended with exit 2 and one line on stderr, no traceback."""
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    return p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr and lines[0].startswith("error:")
