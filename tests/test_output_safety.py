"""Report outputs (``--json``, ``--output``, ``--status-dir``) never destroy what is in their way:
device nodes, FIFOs and links are written through, an input is never an output, two outputs never
share a path, status files are replaced only when this tool wrote them, and control characters
from file names never reach the terminal raw. Device nodes are made here with mknod (never the
real /dev/null or /dev/full)."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from preflight.atomic import OutputError, write_atomic

LOSS = pytest.mark.fault("LOSS")
WRONG = pytest.mark.fault("WRONG")


def pf(pyz, *args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, cwd=cwd)


def _node(path, minor):
    """A character device 1:minor (3 null, 7 full) at ``path``; skip where mknod is not allowed."""
    try:
        os.mknod(str(path), 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except (PermissionError, AttributeError) as exc:
        pytest.skip("mknod not allowed here: %s" % exc)
    return str(path)


# ---- 1: the atomic writer never replaces a non-regular file ----------------------------------

@LOSS
def test_device_node_is_written_through_not_replaced(tmp_path):
    null = _node(tmp_path / "mynull", 3)
    ino = os.stat(null).st_ino
    write_atomic(null, "x" * 1000, "--json")
    assert stat.S_ISCHR(os.stat(null).st_mode) and os.stat(null).st_ino == ino


@LOSS
def test_symlink_to_device_is_kept(tmp_path):
    null = _node(tmp_path / "mynull", 3)
    link = tmp_path / "link"
    os.symlink(null, str(link))
    write_atomic(str(link), "data\n", "--output")
    assert os.path.islink(str(link)) and stat.S_ISCHR(os.stat(null).st_mode)


@LOSS
def test_full_device_is_an_error_not_silence(tmp_path):
    full = _node(tmp_path / "myfull", 7)
    with pytest.raises(OutputError) as err:
        write_atomic(full, "data\n", "--json")
    assert "--json" in str(err.value) and "\n" not in str(err.value)
    assert stat.S_ISCHR(os.stat(full).st_mode)


@LOSS
def test_fifo_is_written_through(tmp_path):
    fifo = str(tmp_path / "myfifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_atomic(fifo, "through the pipe\n", "--json")
    reader.join(10)
    assert got == ["through the pipe\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


@LOSS
def test_symlink_to_regular_file_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old\n")
    link = tmp_path / "report.json"
    os.symlink("real.json", str(link))
    write_atomic(str(link), "new\n", "--json")
    assert os.path.islink(str(link)) and target.read_text() == "new\n"
    assert sorted(os.listdir(str(tmp_path))) == ["real.json", "report.json"]


@LOSS
def test_cli_outputs_keep_nodes_fifos_and_fd_links(pyz, tmp_path):
    null = _node(tmp_path / "mynull", 3)
    link = tmp_path / "mystdout"
    os.symlink("/proc/self/fd/1", str(link))
    r = pf(pyz, "check", "--stage", "host", "-q", "--json", "mynull", "--output", "mystdout", "--format", "json",
           cwd=str(tmp_path))
    assert r.returncode in (0, 1), r.stderr
    assert stat.S_ISCHR(os.stat(null).st_mode) and os.path.islink(str(link))
    assert '"results"' in r.stdout  # the --output went through the link to this process's stdout
    full = _node(tmp_path / "myfull", 7)
    r = pf(pyz, "check", "--stage", "host", "-q", "--json", full)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--json" in r.stderr, r.stderr
    assert stat.S_ISCHR(os.stat(full).st_mode)


# ---- 2, 3: an output is never an input, and two outputs never share a file ---------------------

@LOSS
@pytest.mark.parametrize("args", [
    ["config", "--verl", "0.9.1", "--file", "my.yaml", "--json", "my.yaml"],
    ["config", "--verl", "0.9.1", "--file", "my.yaml", "--format", "markdown", "--output", "./sub/../my.yaml"],
    ["check", "--stage", "config", "--config", "my.yaml", "--json", "link.yaml"],
    ["data", "train.parquet", "--json", "train.parquet"],
])
def test_output_that_is_an_input_is_refused(pyz, tmp_path, args):
    (tmp_path / "my.yaml").write_text("trainer:\n  n_gpus_per_node: 8\n")
    (tmp_path / "sub").mkdir()
    os.symlink("my.yaml", str(tmp_path / "link.yaml"))
    (tmp_path / "train.parquet").write_bytes(b"PAR1 mine")
    before = {p: (tmp_path / p).read_bytes() for p in ("my.yaml", "train.parquet")}
    r = pf(pyz, *args, cwd=str(tmp_path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "input" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert {p: (tmp_path / p).read_bytes() for p in before} == before
    assert os.path.islink(str(tmp_path / "link.yaml"))


@WRONG
@pytest.mark.parametrize("second", ["same.out", "./same.out", "alias.out"])
def test_two_outputs_to_one_file_are_refused(pyz, tmp_path, second):
    (tmp_path / "same.out").write_text("old\n")
    os.symlink("same.out", str(tmp_path / "alias.out"))
    r = pf(pyz, "check", "--stage", "host", "-q", "--format", "junit", "--output", "same.out", "--json", second,
           cwd=str(tmp_path))
    assert r.returncode == 2 and "same file" in r.stderr, r.stderr
    assert (tmp_path / "same.out").read_text() == "old\n"


def test_two_outputs_to_one_device_are_allowed(pyz, tmp_path):
    null = _node(tmp_path / "mynull", 3)
    r = pf(pyz, "check", "--stage", "host", "-q", "--format", "junit", "--output", null, "--json", null)
    assert r.returncode in (0, 1), r.stderr
