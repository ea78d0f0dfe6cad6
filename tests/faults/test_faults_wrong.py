"""Fault suite, WRONG: the right verdict, exit code and message (shared fault_cases.md t09, t07,
e21, e22, f06, e04, g05, t20 and their kind), and failures that name their real cause: NCCL's
own WARN line, the socket-interface variables against this host's real interfaces, a gloo rank
without torch."""

import json
import os
import subprocess
import sys
import time

import pytest
from faultkit import DAEMON, fake_dist, run_pyz, target, wait_gone

from preflight import netif
from preflight.checks.nccl import nccl_warnings, rank_error, run_ranks
from preflight.probes.process import ProbeOutput

pytestmark = pytest.mark.fault("WRONG")


def _rows(path):
    with open(str(path)) as fh:
        return {r["id"]: r for r in json.load(fh)["results"]}


# ---- t09, t07: a detached daemon holding the pipes -------------------------------------------
def test_daemon_does_not_make_a_working_interpreter_look_hung(pyz, tmp_path):
    """t09: PASS, at once, and the daemon is gone."""
    py, token = target(tmp_path, {"sitecustomize.py": DAEMON})
    t0 = time.monotonic()
    proc = run_pyz(pyz, "check", "--python", py, "--stage", "python", "--timeout", "20", "--json",
                   str(tmp_path / "r.json"))
    assert time.monotonic() - t0 < 15
    assert _rows(tmp_path / "r.json")["python.interpreter"]["status"] == "pass"
    assert proc.returncode == 0, proc.stderr
    assert wait_gone(token) == []


def test_daemon_in_an_import_does_not_make_imports_look_hung(pyz, tmp_path):
    """t07: a fake torch whose import leaves a setsid daemon, beside ray: both imports PASS."""
    files = {}
    files.update(fake_dist("torch", "2.11.0", DAEMON + "\n__version__ = '2.11.0'\n"))
    files.update(fake_dist("ray", "2.40.0", DAEMON + "\n__version__ = '2.40.0'\n"))
    py, token = target(tmp_path, files)
    run_pyz(pyz, "check", "--python", py, "--stage", "python,imports", "--timeout", "20", "--json",
            str(tmp_path / "r.json"))
    rows = _rows(tmp_path / "r.json")
    assert rows["imports.torch"]["status"] == "pass", rows["imports.torch"]
    ray = [r for i, r in rows.items() if i.startswith("imports.") and "ray" in i]
    assert all(r["status"] != "fail" or "hung" not in r["message"] for r in ray), ray
    assert wait_gone(token) == []


def test_banner_without_newline_and_closed_stdout(pyz, tmp_path):
    """Events survive a banner printed without a newline, and a target that closes its stdout."""
    for i, site in enumerate(["import sys\nsys.stdout.write('WELCOME TO THE CLUSTER')\nsys.stdout.flush()\n",
                              "import os\nos.close(1)\n"]):
        py, _ = target(tmp_path, {"sitecustomize.py": site})
        out = tmp_path / ("r%d.json" % i)
        run_pyz(pyz, "check", "--python", py, "--stage", "python", "--json", str(out))
        assert _rows(out)["python.interpreter"]["status"] == "pass"


# ---- e21, e22: a closed stdout --------------------------------------------------------------
@pytest.mark.parametrize("fmt", [[], ["--format", "markdown"], ["-v"]])
def test_closed_stdout_keeps_verdict_and_json(pyz, tmp_path, fmt):
    """e21/e22: `check | head -1`: the same exit code as with a reader, and the --json file written."""
    report = tmp_path / "r.json"
    cmd = "%s -I -S %s check --stage python --json %s %s 2>/dev/null | head -1 >/dev/null; echo ${PIPESTATUS[0]}" % (
        sys.executable, pyz, report, " ".join(fmt))
    proc = subprocess.run(cmd, shell=True, executable="/bin/bash", stdout=subprocess.PIPE, universal_newlines=True,
                          timeout=120)
    alone = run_pyz(pyz, "check", "--stage", "python")
    assert int(proc.stdout.split()[-1]) == alone.returncode
    assert report.exists() and _rows(report)["python.interpreter"]["status"] == "pass"


def test_guarded_stream_drops_writes_after_epipe(tmp_path):
    """The mechanism: a write to a pipe with no reader is dropped, the descriptor then discards."""
    from preflight.pipes import GuardedStream

    r, w = os.pipe()
    os.close(r)
    saved = os.dup(2)
    try:
        os.dup2(w, 2)
        stream = GuardedStream(os.fdopen(os.dup(2), "w"))
        stream.write("x" * 100000)
        stream.flush()
        assert stream.broken
        stream.write("more")
        stream.flush()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(w)


# ---- f06: a YAML read that times out --------------------------------------------------------
@pytest.mark.parametrize("reader", [
    "import time\ndef safe_load(fh):\n    time.sleep(300)\n",
    "import os\ndef safe_load(fh):\n    os.abort()\n",
    None,
])
def test_yaml_read_never_uses_a_broken_target_reader(pyz, tmp_path, reader):
    """f06: a target without verl whose yaml module hangs, crashes or is absent: the --file is read
    by the zipapp's own OmegaConf (the vendored Hydra composes), so none of that can stall or break
    the run, and the file's value is used."""
    files = {"yaml/__init__.py": reader} if reader else {"placeholder.txt": ""}
    py, token = target(tmp_path, files)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("trainer:\n  total_epochs: 7\n")
    out = tmp_path / "r.json"
    t0 = time.monotonic()
    proc = run_pyz(pyz, "config", "--python", py, "--verl", "0.9.1", "--file", str(cfg), "--timeout", "20",
                   "--json", str(out))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    values = json.loads(out.read_text())["launch"]["config"]["values"]
    assert values["trainer.total_epochs"] == {"value": 7, "source": "file"}
    assert time.monotonic() - t0 < 60
    assert wait_gone(token) == []


def test_oversized_config_refused_at_once(pyz, tmp_path):
    """f05: a 5 MiB "config" is refused before any work, naming the size limit."""
    big = tmp_path / "big.yaml"
    with open(str(big), "w") as fh:
        fh.write("trainer:\n  extra:\n")
        fh.write("".join("    k%d: v%d\n" % (i, i) for i in range(400000)))
    assert big.stat().st_size > 1 << 20
    t0 = time.monotonic()
    proc = run_pyz(pyz, "config", "--verl", "0.9.1", "--file", str(big))
    assert proc.returncode == 2 and "config file" in proc.stderr and "MiB" in proc.stderr
    assert time.monotonic() - t0 < 20


# ---- e04: the model cache must be writable -------------------------------------------------
@pytest.mark.parametrize("case", ["file", "under-file", "readonly-parent", "ok-missing", "ok"])
def test_disk_check_proves_the_cache_is_writable(tmp_path, case):
    """e04: HF_HOME a file, under a file, or under a read-only directory: FAIL naming the path;
    a writable or creatable one: not failed for that reason."""
    from preflight.probes.host import unusable_dir

    f = tmp_path / "afile"
    f.write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    path = {"file": f, "under-file": f / "hf", "readonly-parent": ro / "hf", "ok-missing": tmp_path / "new" / "hf",
            "ok": tmp_path}[case]
    if case == "readonly-parent":
        if os.getuid() == 0:  # root ignores modes: a read-only bind is what stops root; test as modes for others
            pytest.skip("modes do not bind root; covered by test_disk_check_as_another_user")
        os.chmod(str(ro), 0o555)
    why = unusable_dir(str(path))
    if case.startswith("ok"):
        assert why is None
        assert not (tmp_path / "new").exists()  # proving did not create the user's directories
    else:
        assert why and str(path) in why
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith(".preflight")] == []


def test_disk_check_as_another_user(pyz_file):
    """e04 as in the report: HOME a 0555 directory, run as uid 65534: host.disk FAILs naming it."""
    import shutil
    import tempfile

    if os.getuid() != 0 or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root (to run as uid 65534) and a system python3")
    base = tempfile.mkdtemp(prefix="pf-e04-")
    try:
        os.chmod(base, 0o755)
        mine = os.path.join(base, "preflight.pyz")
        shutil.copy(pyz_file, mine)
        os.chmod(mine, 0o644)
        home = os.path.join(base, "rohome")
        os.mkdir(home, 0o555)
        os.chmod(home, 0o555)
        out = os.path.join(base, "out")
        os.mkdir(out)
        os.chown(out, 65534, 65534)  # the report directory is that user's own (the writer refuses a 0777 one)
        os.chmod(out, 0o755)

        def drop():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)

        env = dict(os.environ, HOME=home)
        env.pop("HF_HOME", None)
        env.pop("HF_HUB_CACHE", None)
        env.pop("XDG_CACHE_HOME", None)
        proc = subprocess.run(["/usr/bin/python3", "-I", "-S", mine, "check", "--stage", "host", "--json",
                               os.path.join(out, "r.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60, preexec_fn=drop, env=env, cwd=base)
        r = _rows(os.path.join(out, "r.json"))["host.disk"]
        assert proc.returncode == 1
        assert r["status"] == "fail" and "not writable" in r["message"] and "rohome" in r["message"], r
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- g05, t20 -----------------------------------------------------------------------------
def test_empty_launch_is_not_ready(pyz):
    """g05: `--launch ''` (an empty CI variable) is a usage error, never READY."""
    proc = run_pyz(pyz, "check", "--stage", "config", "--launch", "")
    assert proc.returncode == 2 and "--launch" in proc.stderr


@pytest.mark.parametrize("verl,vllm", [("not.a.version", "dev"), ("0.9.1", "dev"), ("0.0.1", "0.24.0")])
def test_unparseable_versions_are_never_passed(pyz, tmp_path, verl, vllm):
    """t20: no PASS row against 'verl None'; an unparseable verl or vLLM version is named."""
    files = {}
    files.update(fake_dist("verl", verl, ""))
    files.update(fake_dist("vllm", vllm, ""))
    files.update(fake_dist("torch", "2.11.0", ""))
    py, _ = target(tmp_path, files)
    run_pyz(pyz, "check", "--python", py, "--stage", "python,packages", "--json", str(tmp_path / "r.json"))
    rows = _rows(tmp_path / "r.json")
    for r in rows.values():
        assert "None" not in r["message"], r
    if vllm == "dev":
        assert rows["packages.backend"]["status"] != "pass"
        if verl == "0.9.1":
            assert "dev" in rows["packages.backend"]["message"]
    if verl == "not.a.version":
        assert rows["packages.verl"]["status"] == "fail" and "not.a.version" in rows["packages.verl"]["message"]
        assert rows["python.version"]["status"] != "pass"


# ---- interfaces: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME against this host ----------------------
def test_interfaces_are_the_hosts():
    """Against the kernel's own list (/sys/class/net); loopback is there."""
    names = netif.interfaces()
    assert "lo" in names
    if os.path.isdir("/sys/class/net"):
        assert set(names) == set(os.listdir("/sys/class/net"))


@pytest.mark.parametrize("spec,selected", [
    ("lo", True), ("l", True), ("=lo", True), ("=l", False), ("^lo", None), ("^=lo", None), ("nosuch0", False),
    ("nosuch0,lo", True), ("=nosuch0,lo", True), ("=nosuch0,=lo", False), ("lo:1234", True), ("^nosuch0", True), (",", False),
])
def test_nccl_ifname_rules_on_this_host(spec, selected):
    """NCCL's rules (prefix, = exact, ^ exclude, comma lists, :port) on the real interfaces:
    ``selected`` True: lo is among those chosen; False: nothing chosen; None: lo is not chosen."""
    names = netif.interfaces()
    got = netif.nccl_matches(spec, names)
    if selected is True:
        assert "lo" in got
    elif selected is False:
        assert got == []
        assert netif.check_ifname("NCCL_SOCKET_IFNAME", spec, names) is not None
    else:
        assert "lo" not in got
        assert set(got) == set(names) - {n for n in names if n == "lo" or (not spec.startswith("^=") and
                                                                           n.startswith(spec.lstrip("^")))}
    if got:
        assert netif.check_ifname("NCCL_SOCKET_IFNAME", spec, names) is None


def test_nccl_exclude_everything():
    names = netif.interfaces()
    spec = "^" + ",".join(sorted({n[0] for n in names}))
    why = netif.check_ifname("NCCL_SOCKET_IFNAME", spec, names)
    assert why and "excludes every interface" in why and "lo" in why


@pytest.mark.parametrize("spec,ok", [("lo", True), ("l", False), ("lo,nosuch0", False), ("=lo", False), ("", True)])
def test_gloo_ifname_exact_names(spec, ok):
    assert (netif.check_ifname("GLOO_SOCKET_IFNAME", spec) is None) == ok


@pytest.mark.parametrize("var,value,status", [
    ("NCCL_SOCKET_IFNAME", "nosuch0", "fail"), ("NCCL_SOCKET_IFNAME", "^=lo,lo", None),
    ("NCCL_SOCKET_IFNAME", "lo", "pass"), ("GLOO_SOCKET_IFNAME", "nosuch0", "fail"),
    ("GLOO_SOCKET_IFNAME", "lo", "pass"),
])
def test_gpu_env_row(pyz, tmp_path, var, value, status):
    """gpu.env says what the variable selects on this host (it said nothing before)."""
    env = dict(os.environ)
    for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        env.pop(k, None)
    env[var] = value
    subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--stage", "gpu", "--json", str(tmp_path / "r.json")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
    r = _rows(tmp_path / "r.json")["gpu.env"]
    expected = status or ("pass" if netif.nccl_matches(value, netif.interfaces()) else "fail")
    assert r["status"] == expected or (expected == "pass" and r["status"] == "warn"), r
    if expected == "fail":
        assert value in r["message"] and "lo" in r["message"]


# ---- NCCL's own words ---------------------------------------------------------------------
FAKE_TORCH = '''
__version__ = "2.11.0"
float32, bfloat16 = "float32", "bfloat16"
class _T:
    def element_size(self):
        return 4
def tensor(*a, **k):
    return _T()
def device(*a):
    return a
class cuda:
    @staticmethod
    def set_device(i):
        pass
    @staticmethod
    def synchronize():
        pass
from . import distributed
'''

FAKE_DIST = '''
import os, sys
class DistBackendError(RuntimeError):
    pass
def init_process_group(backend, init_method, rank, world_size, timeout, **kw):
    # a torch warning that has nothing to do with the failure, printed last on stderr
    sys.stderr.write("/site/torch/distributed/distributed_c10d.py:1: UserWarning: barrier(): using the device "
                     "under current context\\n")
    level = os.environ.get("NCCL_DEBUG", "").upper()
    if level in ("WARN", "INFO", "TRACE"):  # as NCCL does: WARN lines only when asked for
        line = "host:%d:%d [%d] NCCL WARN Bootstrap : no socket interface found\\n" % (os.getpid(), os.getpid(), rank)
        path = os.environ.get("NCCL_DEBUG_FILE")
        if path:
            with open(path, "a") as fh:
                fh.write(line)
        else:
            sys.stdout.write(line)
    raise DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:1, invalid usage (run with NCCL_DEBUG=WARN for "
                           "details), NCCL version 2.28.9\\nncclInvalidUsage: This usually reflects invalid usage "
                           "of NCCL library.\\nLast error:\\nBootstrap : no socket interface found")
class ReduceOp:
    MAX = "max"
'''


@pytest.fixture
def fake_nccl_python(tmp_path):
    files = fake_dist("torch", "2.11.0", FAKE_TORCH)
    files["torch/distributed.py"] = FAKE_DIST
    return target(tmp_path, files)


@pytest.mark.parametrize("user_debug", [None, "NONE", "INFO"])
def test_nccl_failure_quotes_nccls_warn_line(fake_nccl_python, monkeypatch, user_debug):
    """The rank fails at init with NCCL's WARN line in its log and an unrelated torch warning last
    on stderr: the row's reason is NCCL's line, whatever NCCL_DEBUG the user set."""
    py, token = fake_nccl_python
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    if user_debug is None:
        monkeypatch.delenv("NCCL_DEBUG", raising=False)
    else:
        monkeypatch.setenv("NCCL_DEBUG", user_debug)
    outs, timed_out, alive, _ = run_ranks(py, 2, "nccl", [1 << 20], 1, 1, 30)
    assert not timed_out
    for o in outs:
        assert o.logs["nccl_warn"] == ["NCCL WARN Bootstrap : no socket interface found"]
        assert rank_error(o) == "NCCL WARN Bootstrap : no socket interface found"
        assert "UserWarning" in o.stderr_tail  # it was there, and not quoted
    assert wait_gone(token) == []


def test_nccl_row_names_the_interface_variable(fake_nccl_python, matrix, monkeypatch):
    """The full row: FAIL quoting NCCL, and the fix names the NCCL_SOCKET_IFNAME that matches nothing."""
    from preflight.context import Context, Options
    from preflight.runner import run

    py, _ = fake_nccl_python
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "nosuch0")
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    ctx = Context(Options(python=py, timeout=30, nccl_world_size=2), matrix,
                  {"torch_cuda": ProbeOutput(argv=[], returncode=0, events=[{"event": "torch_cuda", "device_count": 2}]),
                   "nvml": {"devices": []}})
    r = {x.id: x for x in run(ctx, ["nccl"])}["nccl.allreduce"]
    assert r.status.value == "fail"
    assert "NCCL WARN Bootstrap : no socket interface found" in r.message and "UserWarning" not in r.message
    assert "NCCL_SOCKET_IFNAME=nosuch0 matches no interface" in r.fix


def test_rank_error_without_warn_lines():
    """No WARN line: the exception's 'Last error' (NCCL's text), else the last real error line."""
    o = ProbeOutput(argv=[], returncode=1, events=[{"event": "error", "type": "DistBackendError",
                                                    "message": "NCCL error in: x\nLast error:\nSocket timeout"}])
    assert "Socket timeout" in rank_error(o)
    o = ProbeOutput(argv=[], returncode=1, stderr_tail="Traceback\nRuntimeError: boom\n"
                                                       "x.py:1: UserWarning: unrelated\n")
    assert rank_error(o) == "RuntimeError: boom"
    assert nccl_warnings("a\nh:1:2 [0] NCCL WARN x\nh:1:2 [0] NCCL WARN x\n") == ["NCCL WARN x"]


def test_gloo_without_torch_says_so(tmp_path, matrix):
    """A gloo rank in an interpreter without torch: the row says torch cannot be imported."""
    from preflight.context import Context, Options
    from preflight.runner import run

    py, _ = target(tmp_path, {"placeholder.txt": ""})
    ctx = Context(Options(python=py, timeout=30, nccl_world_size=2, extra={"nccl_backend": "gloo"}), matrix)
    r = {x.id: x for x in run(ctx, ["nccl"])}["nccl.allreduce"]
    assert r.status.value == "fail"
    assert "torch cannot be imported" in r.message and "No module named 'torch'" in r.message
    assert "install torch" in r.fix and "NCCL_DEBUG" not in r.fix


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("stages", ["imports", "packages", "imports,nccl", "vllm"])
@pytest.mark.parametrize("script", ["sleep 1000", "echo not python", "exit 3"])
def test_unrunnable_python_is_never_ready_whatever_the_stages(pyz, tmp_path, stages, script):
    """A --python that hangs, prints garbage or dies made every package look "not installed" (READY)
    when the python stage was not selected: its interpreter check now runs and gates them."""
    py = tmp_path / "python"
    py.write_text("#!/bin/sh\n%s\n" % script)
    py.chmod(0o755)
    out = tmp_path / "r.json"
    proc = run_pyz(pyz, "check", "--python", str(py), "--stage", stages, "--timeout", "3", "--json", str(out))
    doc = json.loads(out.read_text())
    rows = {r["id"]: r for r in doc["results"]}
    assert proc.returncode == 1 and not doc["ready"], proc.stdout[-1500:]
    assert rows["python.interpreter"]["status"] == "fail"
    chosen = [r for r in doc["results"] if r["stage"] in stages.split(",")]
    assert chosen and all(r["status"] == "skip" and "python.interpreter" in r["caused_by"] for r in chosen), chosen


@pytest.mark.fault("WRONG")
def test_missing_verl_is_not_ready_when_only_imports_run(pyz, tmp_path):
    """With the packages stage not selected, a target without torch or verl was READY (every
    import row skipped, naming a packages row that never ran)."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    out = tmp_path / "r.json"
    proc = run_pyz(pyz, "check", "--python", str(venv / "bin" / "python"), "--stage", "imports", "--json", str(out))
    rows = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert proc.returncode == 1
    assert rows["imports.torch"]["status"] == rows["imports.verl"]["status"] == "fail"
    # a venv without pip: the fix installs with uv's pip into it
    assert "uv pip install --python %s 'verl[" % (venv / "bin" / "python") in rows["imports.verl"]["fix"]
    # with the packages stage, the packages rows fail and the import rows name them as the cause
    proc = run_pyz(pyz, "check", "--python", str(venv / "bin" / "python"), "--stage", "packages,imports", "--json",
                   str(out))
    rows = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["imports.verl"]["status"] == "skip" and rows["imports.verl"]["caused_by"] == ["packages.verl"]
