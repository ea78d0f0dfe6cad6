"""A private directory under a TMPDIR another user can change (rev-attack 3, new kind).

A probe's directory (mode 0700, mkdtemp) holds the command its supervisor runs. In a TMPDIR that
other users can write without the sticky bit (a group's scratch directory), or that belongs to
another user (a job's own TMPDIR while a root prolog runs), that user renames the directory away
and puts their own in its place: root then ran their command. Mechanism (``temproot.temp_root``):
the temporary root must be safe from other users all the way up (owned by the user or root, not
writable by others unless sticky), else the run works under /tmp and says so; bootstrap.sh makes
the same choice for its own directory and hands it on. Each shape is tried with a second user
(uid 65534) watching the directory for anything the run makes there."""

import os
import subprocess
import sys
import tempfile
import time

import pytest

import seckit
from seckit import need_root

from preflight.temproot import temp_root

EXEC = pytest.mark.fault("EXEC")

#: Watches a directory as uid 65534 for ``secs`` seconds and writes every name seen in it.
_WATCH = ("import os, sys, time\nd, out, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])\nseen = set()\n"
          "end = time.time() + secs\nwhile time.time() < end:\n    try:\n        seen.update(os.listdir(d))\n"
          "    except OSError:\n        pass\n    time.sleep(0.0005)\nopen(out, 'w').write('\\n'.join(sorted(seen)))\n")


def _unsafe(tmp_path, shape):
    """A temporary root of ``shape`` another user can change, reachable by uid 65534."""
    seckit.reachable(str(tmp_path))
    d = str(tmp_path / ("tmp-" + shape))
    os.makedirs(d)
    if shape == "group-writable":  # a project's scratch directory: 2775, group not the user's own
        os.chown(d, -1, 4242)
        os.chmod(d, 0o2775)
    elif shape == "world-writable":  # 0777 without the sticky bit
        os.chmod(d, 0o777)
    elif shape == "theirs":  # a job's TMPDIR of its own user, while root runs the checker
        os.chown(d, seckit.NOBODY, seckit.NOBODY)
        os.chmod(d, 0o700)
    elif shape == "under-theirs":  # safe itself, inside a directory of the other user's
        os.chown(d, seckit.NOBODY, seckit.NOBODY)
        os.chmod(d, 0o755)
        d = os.path.join(d, "mine")
        os.makedirs(d, 0o700)
    return d


SHAPES = ("group-writable", "world-writable", "theirs", "under-theirs")


@pytest.mark.parametrize("shape", SHAPES)
def test_an_unsafe_tmpdir_is_passed_over(tmp_path, monkeypatch, shape):
    need_root()
    d = _unsafe(tmp_path, shape)
    monkeypatch.setattr(tempfile, "tempdir", d)
    root, why = temp_root()
    assert why is not None and root in ("/tmp", "/var/tmp", "/usr/tmp"), (root, why)
    assert root != d


@pytest.mark.parametrize("mode", [0o700, 0o1777, 0o755])
def test_a_safe_tmpdir_is_kept(tmp_path, monkeypatch, mode):
    d = str(tmp_path / "t")
    os.makedirs(d)
    os.chmod(d, mode)
    monkeypatch.setattr(tempfile, "tempdir", d)
    assert temp_root() == (d, None)


def _watch(d, secs):
    out = os.path.join(tempfile.mkdtemp(), "seen")
    seckit.reachable(os.path.dirname(out))
    os.chmod(os.path.dirname(out), 0o777)
    pre = ["setpriv", "--reuid=%d" % seckit.NOBODY, "--regid=%d" % seckit.NOBODY, "--clear-groups"]
    return subprocess.Popen(pre + [sys.executable, "-I", "-S", "-c", _WATCH, d, out, str(secs)]), out


@EXEC
@pytest.mark.parametrize("shape", ["group-writable", "theirs"])
def test_no_probe_directory_is_made_where_another_user_can_swap_it(pyz, tmp_path, shape):
    """check's probes (and their children, through TMPDIR) work under /tmp; a one-line warning says why."""
    need_root()
    d = _unsafe(tmp_path, shape)
    log = str(tmp_path / "target.log")
    wrapper = str(tmp_path / "py")
    with open(wrapper, "w") as fh:  # the target: logs what its probes were given, then runs Python
        fh.write('#!/bin/sh\necho "$TMPDIR $PWD" >> %s\nexec %s "$@"\n' % (log, sys.executable))
    os.chmod(wrapper, 0o755)
    watcher, seen = _watch(d, 8)
    time.sleep(0.3)
    p = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", wrapper, "--stage", "host,python"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                       env=dict(os.environ, TMPDIR=d))
    watcher.wait(30)
    assert "warning: TMPDIR %s" % d in p.stderr and "instead" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    with open(seen) as fh:
        assert fh.read() == "", "the run made entries in %s" % d
    with open(log) as fh:
        runs = [line.split() for line in fh.read().splitlines()]
    assert runs and all(t == "/tmp" and not cwd.startswith(d) for t, cwd in runs), runs


@EXEC
def test_bootstrap_works_under_tmp_when_tmpdir_is_a_group_scratch(pyz_file, tmp_path):
    need_root()
    d = _unsafe(tmp_path, "group-writable")
    watcher, seen = _watch(d, 8)
    time.sleep(0.3)
    r = subprocess.run(["sh", os.path.join(seckit.ROOT, "bootstrap.sh"), "--pyz", pyz_file, "--check-only",
                        "--python", sys.executable, "--", "--stage", "host", "-q"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120, env=dict(os.environ, TMPDIR=d))
    watcher.wait(30)
    assert r.returncode in (0, 1), r.stderr
    assert "TMPDIR %s can be changed by other users" % d in r.stderr, r.stderr
    with open(seen) as fh:
        assert fh.read() == "", "bootstrap.sh made entries in %s" % d


def test_a_missing_tmpdir_does_not_fall_through_to_an_unjudged_temp(tmp_path, monkeypatch):
    """TMPDIR missing (or a file): tempfile would quietly take $TEMP/$TMP, which nobody judged, or
    another user could make TMPDIR before the first mkdtemp (re-attack T1). The run works under a
    safe root, and tempfile is pinned to it."""
    need_root()
    theirs = _unsafe(tmp_path, "theirs")
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "not-yet"))
    monkeypatch.setenv("TEMP", theirs)
    from preflight.temproot import use_safe_temp_root

    warn = use_safe_temp_root()
    assert warn and "not a directory" in warn
    assert tempfile.gettempdir() in ("/tmp", "/var/tmp", "/usr/tmp") and os.environ["TMPDIR"] == tempfile.gettempdir()


def _acl_user_rwx(path, uid):
    """An access ACL granting ``uid`` rwx (the kernel's xattr form), or skip where none can be set."""
    import struct

    entries = [(1, 7, 0xFFFFFFFF), (2, 7, uid), (4, 5, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF)]
    data = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", data)
    except (OSError, AttributeError) as exc:
        pytest.skip("no POSIX ACLs here: %s" % exc)


def test_a_tmpdir_another_user_may_write_through_an_acl_is_passed_over(tmp_path, monkeypatch):
    """A 0700 root directory whose ACL lets uid 65534 write (re-attack T2): the mode bits look safe."""
    need_root()
    seckit.reachable(str(tmp_path))
    d = tmp_path / "acl"
    d.mkdir(mode=0o700)
    _acl_user_rwx(str(d), seckit.NOBODY)
    sub = d / "mine"
    sub.mkdir(mode=0o700)
    for cand in (d, sub):  # the ACL on the directory itself, or on one above it
        monkeypatch.setattr(tempfile, "tempdir", str(cand))
        root, why = temp_root()
        assert root != str(cand) and "ACL" in why, (cand, root, why)
