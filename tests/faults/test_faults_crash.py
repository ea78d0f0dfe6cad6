"""Fault suite, CRASH: no traceback, no "please report it", no memory exhaustion for bad input
(shared fault_cases.md t15, t16, e25, i11/r12, c12, t11 and their kind): each gives a one-line
error naming the input and the fix, or a FAIL row saying what is wrong."""

import json
import os
import resource
import subprocess
import sys
import time

import pytest
from faultkit import ROOT, run_pyz, target, wait_gone

from preflight.probes.process import KEEP_BYTES, run_script

pytestmark = pytest.mark.fault("CRASH")

FLOOD = "import os\nb = b'F' * 1000000 + b'\\n'\nwhile True:\n    os.write(1, b)\n"


def _no_crash(proc):
    assert "Traceback" not in proc.stderr and "please report" not in proc.stderr, proc.stderr[-2000:]


def test_flooding_probe_keeps_the_checker_small(pyz, tmp_path):
    """t15: a target writing 1 MB lines forever; the checker's peak RSS stays small, the row is a
    FAIL within about --timeout, and the evidence counts what was dropped."""
    py, token = target(tmp_path, {"sitecustomize.py": FLOOD})
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run([sys.executable, '-I', '-S', %r, 'check', '--python', %r, '--stage', 'python', "
            "'--timeout', '4', '--json', %r], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.stderr.write(p.stderr.decode())\n") % (pyz, py, str(tmp_path / "r.json"))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    took = time.monotonic() - t0
    _no_crash(proc)
    rc, maxrss_kib = (int(x) for x in proc.stdout.split())
    assert rc == 1
    assert maxrss_kib < 200 * 1024, maxrss_kib  # KiB on Linux; unbounded reading grew to gigabytes
    assert took < 60
    row = {r["id"]: r for r in json.load(open(str(tmp_path / "r.json")))["results"]}["python.interpreter"]
    assert row["status"] == "fail"
    assert row["evidence"]["output_bytes"]["stdout"] > 10 * KEEP_BYTES
    assert wait_gone(token) == []


def test_flooding_probe_under_an_address_space_limit(pyz, tmp_path):
    """t16: the same under ulimit -v 3 GB: a FAIL row, not MemoryError."""
    py, token = target(tmp_path, {"sitecustomize.py": FLOOD})

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 10 ** 9, 3 * 10 ** 9))

    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", py, "--stage", "python",
                           "--timeout", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, preexec_fn=limit)
    _no_crash(proc)
    assert proc.returncode == 1 and "MemoryError" not in proc.stdout + proc.stderr


def test_output_that_ends_keeps_events_and_a_tail(tmp_path):
    """A probe that prints 30 MB of noise on stdout and stderr before answering: the answer is
    read, the tails hold the last output, the totals count all of it."""
    noise = ("import os\nfor i in range(30):\n    os.write(1, b'o' * 1000000 + b'\\n')\n"
             "    os.write(2, b'e' * 1000000 + b'\\n')\nos.write(1, b'LAST-STDOUT\\n')\nos.write(2, b'LAST-STDERR\\n')\n")
    py, _ = target(tmp_path, {"sitecustomize.py": noise})
    out = run_script(py, "info", timeout=60)
    assert out.ok and out.last("info") is not None
    assert out.stdout_tail.rstrip().endswith("LAST-STDOUT") and out.stderr_tail.rstrip().endswith("LAST-STDERR")
    assert out.stdout_bytes >= 30 * 10 ** 6 and out.stderr_bytes >= 30 * 10 ** 6
    assert len(out.stdout_tail) <= 4000


def test_json_to_a_closed_pipe(pyz):
    """e25: --json - into a pipe closed at once: the run's own exit code, no traceback."""
    proc = subprocess.run("%s -I -S %s check --stage python --json - | true; echo ${PIPESTATUS[0]}" % (
        sys.executable, pyz), shell=True, executable="/bin/bash", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=120)
    _no_crash(proc)
    ready = run_pyz(pyz, "check", "--stage", "python", "--json", os.devnull).returncode
    assert int(proc.stdout.strip().splitlines()[-1]) == ready


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_console_to_a_closed_pipe(pyz, tmp_path, stream):
    """A closed stderr (2>&1 | head) or stdout: no BrokenPipeError traceback, same exit code."""
    redirect = "2>&1 >/dev/null" if stream == "stderr" else "2>/dev/null"
    cmd = "%s -I -S %s check --stage python --json - %s | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}" % (
        sys.executable, pyz, redirect) if stream == "stderr" else \
        "%s -I -S %s check --stage python %s | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}" % (sys.executable, pyz,
                                                                                          redirect)
    proc = subprocess.run(cmd, shell=True, executable="/bin/bash", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    ready = run_pyz(pyz, "check", "--stage", "python").returncode
    assert int(proc.stdout.strip().splitlines()[-1]) == ready
    _no_crash(proc)


def _answers_tree(tmp_path, event: str):
    """A fake 'python' that answers the start-up read (-I -S) with a clean tree, and anything else
    with ``event`` (one JSON line)."""
    fake = tmp_path / "g.sh"
    tree = json.dumps({"event": "tree", "executable": str(fake), "prefix": "/usr", "site_dirs": [], "path_dirs": [],
                       "startup": []})
    fake.write_text("#!/bin/sh\nif [ \"$1\" = -I ]; then echo '@@PREFLIGHT@@ %s'; exit 0; fi\n"
                    "echo '@@PREFLIGHT@@ %s'\n" % (tree, event))
    fake.chmod(0o755)
    return fake


def test_an_interpreter_that_does_not_answer_the_start_up_read_is_not_run(pyz, tmp_path):
    """B10 (threat review): a 'python' that exits 0 to -I -S without the read (so what its normal
    start runs is unknown) is never started again; before, it was taken as clean and ran."""
    mark = tmp_path / "ran"
    fake = tmp_path / "g.sh"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = -I ]; then exit 0; fi\ntouch %s\n" % mark)
    fake.chmod(0o755)
    proc = run_pyz(pyz, "check", "--python", str(fake), "--stage", "python", "--json", str(tmp_path / "r.json"))
    _no_crash(proc)
    r = {r["id"]: r for r in json.load(open(str(tmp_path / "r.json")))["results"]}["python.interpreter"]
    assert r["status"] == "fail" and "did not say what it runs at start-up" in r["message"], r
    assert not mark.exists()


def test_malformed_info_event_is_a_fail_row(pyz, tmp_path):
    """c12: a 'python' that prints an info event with missing fields: a FAIL row naming what is
    missing, not 'check crashed: KeyError'."""
    fake = _answers_tree(tmp_path, '{"event":"info","version":"x"}')
    proc = run_pyz(pyz, "check", "--python", str(fake), "--stage", "python,packages,imports", "--json",
                   str(tmp_path / "r.json"))
    _no_crash(proc)
    rows = {r["id"]: r for r in json.load(open(str(tmp_path / "r.json")))["results"]}
    r = rows["python.interpreter"]
    assert r["status"] == "fail" and "malformed" in r["message"] and "executable missing" in r["message"]
    assert not [i for i, r in rows.items() if r["status"] == "error"]


@pytest.mark.parametrize("event", [
    {"event": "info", "executable": 3, "version": [3, 11, 0], "version_string": "3.11.0", "implementation": "cpython",
     "prefix": "/x", "base_prefix": "/x", "marker_env": {}, "distributions": []},
    {"event": "info", "executable": "/x", "version": ["3", "11"], "version_string": "3.11", "implementation": "cpython",
     "prefix": "/x", "base_prefix": "/x", "marker_env": {}, "distributions": []},
    {"event": "info", "executable": "/x", "version": [3, 11, 0], "version_string": "3.11.0", "implementation": "cpython",
     "prefix": "/x", "base_prefix": "/x", "marker_env": {}, "distributions": ["torch"]},
])
def test_wrong_types_in_info_event(tmp_path, matrix, event):
    """More than the example: wrong types, not only missing fields."""
    from preflight.context import Context, Options
    from preflight.runner import run

    fake = _answers_tree(tmp_path, json.dumps(event))
    ctx = Context(Options(python=str(fake), timeout=20), matrix)
    rows = {r.id: r for r in run(ctx, ["python", "packages"])}
    assert rows["python.interpreter"].status.value == "fail"
    assert "malformed" in rows["python.interpreter"].message
    assert not [r for r in rows.values() if r.status.value == "error"]


def test_python2_target_says_what_it_is(pyz, tmp_path):
    """t11: a CPython 2.7 target: FAIL 'is Python 2.7.x, not Python 3.6 or newer'."""
    import glob
    import shutil

    cands = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/2.7*/bin/python2.7")))
    found = shutil.which("python2.7")
    if found and "/shims/" not in found:
        cands.append(found)
    if not cands:
        pytest.skip("no Python 2.7 on this machine")
    py27 = cands[0]
    proc = run_pyz(pyz, "check", "--python", py27, "--stage", "python", "--json", str(tmp_path / "r.json"))
    _no_crash(proc)
    r = {r["id"]: r for r in json.load(open(str(tmp_path / "r.json")))["results"]}["python.interpreter"]
    assert r["status"] == "fail" and "is Python 2.7" in r["message"] and "not Python 3.6 or newer" in r["message"]


@pytest.mark.parametrize("args,name", [
    (["check", "--launch", ""], "--launch"), (["check", "--verl", ""], "--verl"), (["check", "--json", ""], "--json"),
    (["check", "--python", " "], "--python"), (["config", "--verl", "0.9.1", "--file", ""], "--file"),
    (["spec", "--verl", ""], "--verl"), (["install", "--prefix", ""], "--prefix"), (["data", ""], "FILE"),
    (["check", "--timeout", "nan"], "--timeout"), (["check", "--timeout", "inf"], "--timeout"),
    (["config", "--timeout", "nan"], "--timeout"), (["data", "--timeout", "inf", "x.parquet"], "--timeout"),
    (["check", "--timeout", "1e400"], "--timeout"), (["check", "--nccl-world-size", "nan"], "--nccl-world-size"),
    (["data", "--examples", "-1", "x.parquet"], "--examples"), (["check", "--nccl-inject", "1:melt"], "--nccl-inject"),
])
def test_bad_command_line_values_are_one_line_errors(pyz, args, name):
    """Empty and non-finite values: exit 2 at once with one line naming the option."""
    t0 = time.monotonic()
    proc = run_pyz(pyz, *args, timeout=60)
    _no_crash(proc)
    assert proc.returncode == 2, (args, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert name in lines[0]
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("value", ["nan", "-inf", "1e400", "1e18"])
def test_non_finite_or_huge_sizes_in_overrides(pyz, value):
    """A size override that is nan, inf or absurd: a FAIL naming the key, quickly; never a crash
    (int(nan) raises) nor hours of divisor search (1e18)."""
    t0 = time.monotonic()
    proc = run_pyz(pyz, "config", "--verl", "0.9.1", "--json", "-", "--", "data.train_batch_size=%s" % value,
                   "actor_rollout_ref.rollout.gpu_memory_utilization=%s" % value, timeout=120)
    _no_crash(proc)
    assert time.monotonic() - t0 < 60
    doc = json.loads(proc.stdout)
    assert not [r for r in doc["results"] if r["status"] == "error"], [r["message"] for r in doc["results"]]
    msgs = " ".join(r["message"] for r in doc["results"] if r["status"] == "fail")
    assert "data.train_batch_size" in msgs


def test_matrix_refresh_unwritable_dir_refused_before_work(pyz_file):
    """r12: --dir that cannot be written: exit 2 at once, before pip reads any index (as root, the
    run drops to uid 65534, for whom the directory's mode counts)."""
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="pf-r12-")
    try:
        os.chmod(base, 0o755)
        mine = os.path.join(base, "preflight.pyz")
        shutil.copy(pyz_file, mine)
        os.chmod(mine, 0o644)
        ro = os.path.join(base, "ro")
        os.mkdir(ro)
        open(os.path.join(ro, "stack.toml"), "w").close()
        os.chmod(ro, 0o555)
        kw = {}
        python = sys.executable
        if os.getuid() == 0:
            if not os.path.exists("/usr/bin/python3"):
                pytest.skip("no system python3 that uid 65534 can run")
            python = "/usr/bin/python3"

            def drop():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)

            kw["preexec_fn"] = drop
        t0 = time.monotonic()
        proc = subprocess.run([python, "-I", "-S", mine, "matrix", "refresh", "--dir", ro], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60, cwd=base, **kw)
        _no_crash(proc)
        assert proc.returncode == 2 and "--dir" in proc.stderr and "not writable" in proc.stderr, proc.stderr
        assert time.monotonic() - t0 < 15
    finally:
        os.chmod(os.path.join(base, "ro"), 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_checker_failure_is_one_line(tmp_path):
    """The checker's own failure (a bug) is one line on stderr, with every probe gone."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import preflight.runner as r\n"
            "def boom(*a, **k):\n    raise RuntimeError('injected')\n"
            "r.run = boom\n"
            "from preflight import cli\nsys.exit(cli.main(['check', '--stage', 'python']))\n") % ROOT
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "injected" in lines[0]


def test_absurd_gloo_world_size_is_refused(matrix):
    """--nccl-world-size 100000 with gloo would start 100000 processes: refused by name, at once."""
    from preflight.checks.nccl import gloo_rank_cap
    from preflight.context import Context, Options
    from preflight.runner import run

    ctx = Context(Options(python=sys.executable, timeout=30, nccl_world_size=100000,
                          extra={"nccl_backend": "gloo"}), matrix)
    t0 = time.monotonic()
    r = {x.id: x for x in run(ctx, ["nccl"])}["nccl.allreduce"]
    assert time.monotonic() - t0 < 5
    assert r.status.value == "fail" and "--nccl-world-size 100000" in r.message
    assert "<= %d" % gloo_rank_cap() in r.fix


# ---- a stdout that takes no bytes (ENOSPC, EIO) -----------------------------------------------
def _full_device(tmp_path):
    """A character device like /dev/full (major 1, minor 7: every write fails with ENOSPC), made in
    tmp_path so the real one is never touched."""
    import stat

    path = str(tmp_path / "full")
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (PermissionError, AttributeError):
        pytest.skip("making a character device needs root")
    return path


@pytest.mark.parametrize("args", [["--version"], ["check", "--stage", "host", "--json", "REPORT"], ["--help"],
                                  ["wheelhouse", "--help"]])
def test_stdout_that_cannot_be_written_exits_2_with_one_line(pyz, tmp_path, args):
    """``> /dev/full``: not a traceback and not "please report it", but one line naming the problem
    and exit 2 (the report was lost, so the run does not claim success); a --json file is still
    written in full."""
    full = _full_device(tmp_path)
    report = tmp_path / "r.json"
    args = [str(report) if a == "REPORT" else a for a in args]
    with open(full, "w") as fh:
        proc = subprocess.run([sys.executable, "-I", "-S", pyz] + args, stdout=fh, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)
    _no_crash(proc)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if "could not write" in l]
    assert lines == ["error: could not write the report to stdout: %s" % os.strerror(28)], proc.stderr
    if "--json" in args:
        assert json.loads(report.read_text())["stages"], "the --json report was lost"


def test_guarded_stream_records_enospc_but_not_epipe(tmp_path):
    """The mechanism: ENOSPC is recorded as ``error`` (the output was lost); a reader that went
    away (EPIPE) is not."""
    from preflight.pipes import GuardedStream

    full = open(_full_device(tmp_path), "w")
    stream = GuardedStream(full)
    stream.write("x" * 100000)
    stream.flush()
    assert stream.broken and stream.error is not None and stream.error.errno == 28
    stream.write("more")
    stream.flush()
    full.close()
    r, w = os.pipe()
    os.close(r)
    piped = GuardedStream(os.fdopen(w, "w"))
    piped.write("x" * 100000)
    piped.flush()
    assert piped.broken and piped.error is None
    piped.close()


@pytest.mark.fault("CRASH")
@pytest.mark.parametrize("args,name", [(["config", "--config", ""], "--config"), (["config", "--file", ""], "--file"),
                                       (["config", "--config="], "--config")])
def test_an_empty_value_names_the_spelling_typed(pyz, args, name):
    proc = run_pyz(pyz, *args, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: %s is empty" % name), proc.stderr
