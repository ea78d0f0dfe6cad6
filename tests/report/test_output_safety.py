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


# ---- 4, 5: --status-dir replaces only its own files, and always leaves a final word -----------

@LOSS
@pytest.mark.parametrize("name,kind", [("config", "file"), ("verdict", "file"), ("gpu", "symlink"),
                                       ("nccl", "directory"), ("host", "file")])
def test_status_dir_keeps_the_users_files(pyz, tmp_path, name, kind):
    sd = tmp_path / "sd"
    sd.mkdir()
    p = sd / name
    if kind == "file":
        p.write_text("mine\n")
    elif kind == "symlink":
        (tmp_path / "victim").write_text("precious\n")
        os.symlink(str(tmp_path / "victim"), str(p))
    else:
        p.mkdir()
    r = pf(pyz, "check", "--stage", "host,python", "-q", "--status-dir", str(sd))
    assert r.returncode == 2 and str(p) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(os.listdir(str(sd))) == [name]
    if kind == "file":
        assert p.read_text() == "mine\n"
    elif kind == "symlink":
        assert os.path.islink(str(p)) and (tmp_path / "victim").read_text() == "precious\n"


def test_status_dir_replaces_its_own_files_on_the_next_run(pyz, tmp_path):
    from preflight.outputs.owned import MANIFEST

    sd = tmp_path / "sd"
    for stages in ("host,python", "host"):
        r = pf(pyz, "check", "--stage", stages, "-q", "--status-dir", str(sd))
        assert r.returncode in (0, 1), r.stderr
    # the second run replaced the first run's python file (its answer is stale): python was not
    # selected, so it says skipped, as every other stage not selected does
    from preflight.stages import STAGE_NAMES

    assert sorted(os.listdir(str(sd))) == sorted(list(STAGE_NAMES) + ["verdict", MANIFEST])
    assert (sd / "python").read_text() == "skipped\n" and (sd / "host").read_text() in ("ready\n", "failed\n")
    (sd / "legacy").mkdir()
    (sd / "gpu").write_text("ready\n")  # what an older verl-preflight left (no manifest entry)
    r = pf(pyz, "check", "--stage", "host", "-q", "--status-dir", str(sd))
    assert r.returncode in (0, 1) and (sd / "gpu").read_text() == "skipped\n", r.stderr


@WRONG
@pytest.mark.parametrize("exc,word", [(KeyboardInterrupt, "interrupted"), (RuntimeError, "failed")])
def test_stopped_run_leaves_a_final_word(tmp_path, exc, word):
    """A SIGTERM/SIGINT/SIGHUP (KeyboardInterrupt, cli.py) or a crash in the middle of a stage:
    every selected stage without a file, and verdict, get a word a waiter can act on."""
    from preflight.report.status import StatusDir
    from preflight.result import Result, Status

    sd = StatusDir(str(tmp_path / "sd"), stages=["host", "python", "gpu"])
    sd.progress("result", Result("host.os", "host", Status.PASS, "ok"))
    sd.progress("end:host", None)
    sd.interrupted(word)
    got = {f: (tmp_path / "sd" / f).read_text() for f in ("host", "python", "gpu", "verdict")}
    assert got == {"host": "ready\n", "python": word + "\n", "gpu": word + "\n", "verdict": word + "\n"}


@WRONG
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_signalled_check_writes_interrupted(pyz, tmp_path, signame):
    """A real run stopped by a signal while a probe runs (a python that sleeps) leaves a word."""
    import signal
    import time

    slow = tmp_path / "python3"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    sd = tmp_path / "sd"
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz, "check", "--stage", "host,python", "-q",
                             "--python", str(slow), "--status-dir", str(sd)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while not (sd / "host").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(getattr(signal, signame))
    proc.communicate(timeout=60)
    assert (sd / "verdict").read_text() == "interrupted\n"
    assert (sd / "python").read_text() == "interrupted\n"


# ---- 6: control characters are shown escaped on the console and in markdown -------------------

EVIL = "name\x1b]0;pwned\x07\x1b[2J\x9b31m\rend"


def _evil_report():
    from preflight.report import Report
    from preflight.result import Result, Status

    rows = [Result("host.os", "host", Status.FAIL, "cannot read %s" % EVIL, evidence={"path": EVIL},
                   fix="rm '%s'" % EVIL)]
    return Report(results=rows, stages=["host"], target={"python": "/x/%s/python3" % EVIL}, tool_version="t",
                  matrix_version="m", sections={"files": [EVIL]})


@WRONG
@pytest.mark.parametrize("fmt", ["console", "markdown"])
def test_control_characters_are_escaped(fmt):
    import io

    from preflight.report.render import render

    buf = io.StringIO()
    render(_evil_report(), fmt, stream=buf, verbose=True)
    text = buf.getvalue()
    assert "\\x1b]0;pwned" in text and "\\x9b31m" in text
    assert not any(c in text for c in "\x1b\x07\x9b\r"), repr(text)


FORGED = "data.parquet\nFAIL   host.gpu  forged\u2028PASS   host.ram  forged"


@WRONG
@pytest.mark.parametrize("view", ["generic", "launch"])
def test_a_line_break_in_an_input_cannot_forge_rows(view):
    """A file name with a newline or U+2028 (rev-attack W1) stays inside its row: the console shows
    the break escaped, so the row count on screen is the report's."""
    import io

    from preflight.report import Report
    from preflight.report.console import SafeConsole
    from preflight.report.launch import results_table
    from preflight.report.render import show_console
    from preflight.result import Result, Status

    rows = [Result("data.files.%s.file" % FORGED, "data", Status.FAIL, "%s: cannot be read" % FORGED,
                   fix="check %s" % FORGED)]

    def launch_view(rep, console, verbose):
        console.print(results_table(rep.results, verbose))
    rep = Report(results=rows, stages=["data"], target={"python": "p"}, tool_version="t", matrix_version="m",
                 view=launch_view if view == "launch" else None)
    buf = io.StringIO()
    show_console(rep, SafeConsole(file=buf, width=400))
    text = buf.getvalue()
    assert "forged" in text and "\\n" in text and "\\u2028" in text
    assert not any(line.lstrip().startswith(("FAIL   host", "PASS   host")) for line in text.splitlines()), text


@WRONG
def test_a_line_break_in_the_target_path_stays_in_the_header(pyz, tmp_path):
    """--python through a directory whose name holds a newline (re-attack L1): the header's target
    line is one line, the break shown escaped."""
    d = tmp_path / "pyd\nPASS    verl    ready (faked)"
    d.mkdir()
    os.symlink(sys.executable, str(d / "python3"))
    r = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--stage", "host", "--python", str(d / "python3")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                       env=dict(os.environ, COLUMNS="2000"))
    assert not any(line.startswith("PASS    verl") for line in r.stdout.splitlines()), r.stdout
    assert "pyd\\nPASS" in r.stdout


@WRONG
def test_terminal_console_keeps_its_colours_but_escapes_the_text():
    import io

    from preflight.report.render import show_console
    from preflight.report.console import SafeConsole

    buf = io.StringIO()
    show_console(_evil_report(), SafeConsole(file=buf, force_terminal=True, color_system="standard", width=200))
    text = buf.getvalue()
    assert "\x1b[" in text  # rich's own styles still reach the terminal
    assert "\x1b]0;" not in text and "\x07" not in text and "\x1b[2J" not in text and "\\x1b]0;pwned" in text


@WRONG
def test_cli_never_prints_a_files_control_characters(pyz, tmp_path):
    (tmp_path / "c.yaml").write_text('trainer:\n  project_name: "\\e]0;pwned\\a\\e[2J"\n')
    for fmt in ("console", "markdown"):
        r = pf(pyz, "config", "--verl", "0.9.1", "--file", "c.yaml", "--format", fmt, cwd=str(tmp_path))
        assert r.returncode in (0, 1), r.stderr
        assert "\x1b" not in r.stdout + r.stderr, r.stdout
        assert fmt == "markdown" or "\\x1b]0;pwned" in r.stdout, r.stdout  # markdown shows findings only
    bad = "c\x1b[32m.yaml"
    (tmp_path / bad).write_text("a: [\n")
    r = pf(pyz, "config", "--verl", "0.9.1", "--file", bad, cwd=str(tmp_path))
    assert r.returncode == 2 and "\x1b" not in r.stderr and "c\\x1b[32m.yaml" in r.stderr, r.stderr


@WRONG
@pytest.mark.parametrize("name", ["verdict", "host", ".verl-preflight-outputs.json"])
def test_output_into_a_status_file_is_refused(pyz, tmp_path, name):
    sd = tmp_path / "sd"
    sd.mkdir()
    r = pf(pyz, "check", "--stage", "host", "-q", "--status-dir", "sd", "--json", "sd/" + name, cwd=str(tmp_path))
    assert r.returncode == 2 and "--status-dir" in r.stderr and os.listdir(str(sd)) == [], r.stderr


def test_the_same_document_twice_to_one_file_is_allowed(pyz, tmp_path):
    r = pf(pyz, "check", "--stage", "host", "-q", "--format", "json", "--output", "r.json", "--json", "./r.json",
           cwd=str(tmp_path))
    assert r.returncode in (0, 1) and '"results"' in (tmp_path / "r.json").read_text(), r.stderr
