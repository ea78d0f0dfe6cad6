"""Inputs read through another user's link (rev-attack, new kind, LEAK): root ran ``explain
/tmp/x/train.log`` where uid 65534 had made ``train.log -> /root/.netrc`` (0600) and printed the
secret's line into its report; ``config --file`` did the same for a YAML error. Mechanism
(``paths.foreign_link``, in ``file_problem`` and so in ``read_regular`` and every input gate): a
link owned by neither the invoker nor root is followed only to what its owner could read
themselves. A link to its owner's own file or to a world-readable one still works."""

import os
import sys

import pytest

import seckit
from seckit import as_nobody, need_root, one_line_error, pf, shared_dir

LEAK = pytest.mark.fault("LEAK")
WRONG = pytest.mark.fault("WRONG")
SECRET = "RootPw_Zq81xx"


@pytest.fixture
def setup(tmp_path):
    need_root()
    seckit.reachable(str(tmp_path))
    private = tmp_path / "rootonly"
    private.mkdir(mode=0o700)
    os.chmod(str(private), 0o700)
    secret = private / "netrc"
    secret.write_text("machine host login root password %s\nRuntimeError: CUDA error: out of memory %s\n"
                      "trainer: {x: %s}\n" % (SECRET, SECRET, SECRET))
    os.chmod(str(secret), 0o644)  # readable, but only by who can pass the 0700 directory
    shared = shared_dir(str(tmp_path / "shared"))
    return str(secret), str(private), shared


def _cases(shared, secret, private):
    as_nobody("ln", "-s", secret, os.path.join(shared, "file-link"))
    as_nobody("ln", "-s", private, os.path.join(shared, "dir-link"))
    return {"file-link": os.path.join(shared, "file-link"), "dir-link": os.path.join(shared, "dir-link", "netrc")}


@LEAK
@pytest.mark.parametrize("how", ["file-link", "dir-link"])
@pytest.mark.parametrize("cmd", ["explain", "config --file", "check --config"])
def test_no_input_is_read_through_another_users_link(pyz, setup, how, cmd):
    secret, private, shared = setup
    path = _cases(shared, secret, private)[how]
    argv = cmd.split() + [path]
    if cmd.startswith("check"):
        argv += ["--stage", "host", "-q"]
    p = pf(pyz, *argv)
    assert SECRET not in p.stdout + p.stderr, (p.stdout + p.stderr)[-1500:]
    assert "link of another user" in p.stderr and (one_line_error(p) or p.returncode == 2), p.stderr


@LEAK
def test_read_regular_refuses_the_link(setup):
    secret, private, shared = setup
    sys.path.insert(0, seckit.ROOT)
    from preflight.paths import read_regular

    for path in _cases(shared, secret, private).values():
        with pytest.raises(OSError) as err:
            read_regular(path, 1 << 20)
        assert "link of another user" in str(err.value)


@WRONG
def test_links_to_what_their_owner_can_read_still_work(pyz, setup):
    """An HF cache's links to its owner's blobs, a link to a world-readable file: unchanged."""
    _, _, shared = setup
    as_nobody("sh", "-c", 'echo "RuntimeError: CUDA error: out of memory" > "$1/own.log" && '
              'ln -s "$1/own.log" "$1/mine.log" && echo "all fine" > "$1/pub.txt"', "sh", shared)
    as_nobody("ln", "-s", os.path.join(shared, "pub.txt"), os.path.join(shared, "pub.log"))
    p = pf(pyz, "explain", os.path.join(shared, "mine.log"))
    assert p.returncode == 1 and "out of memory" in p.stdout, p.stdout + p.stderr
    p = pf(pyz, "explain", os.path.join(shared, "pub.log"))
    assert p.returncode == 0 and "no error found" in p.stdout, p.stdout + p.stderr
