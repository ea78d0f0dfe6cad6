"""The runner's deferred rows and the Context's prefetch, with checks registered for the test."""

import threading
import time

import pytest

from preflight.checks.base import REGISTRY, Check, Deferred, failed, passed
from preflight.result import Status
from preflight.runner import load_stage, run
from preflight.stages import stage


@pytest.fixture
def checks(monkeypatch):
    """Replace the checks of some stages: ``checks(stage_name, [Check, ...])``."""
    def put(name, lst):
        load_stage(stage(name))  # the real module registers first; then the test's list replaces it
        monkeypatch.setitem(REGISTRY, name, lst)
    return put


def test_deferred_row_lets_later_stages_run_and_is_answered_when_gated(checks, ctx_factory):
    log = []

    def slow(ctx):
        log.append("slow started")
        return Deferred(lambda: log.append("slow answered") or passed("done late", {"n": 1}))

    checks("imports", [Check("imports.slow", slow), Check("imports.quick", lambda c: log.append("quick") or passed("q"))])
    checks("gpu", [Check("gpu.a", lambda c: log.append("gpu.a") or passed("a"))])
    checks("vllm", [Check("vllm.b", lambda c: log.append("vllm.b") or passed("b"), needs=("imports.slow",))])
    events = []
    ctx = ctx_factory()
    rows = run(ctx, ["imports", "gpu", "vllm"], lambda e, r: events.append(e if r is None else r.id))
    assert log == ["slow started", "quick", "gpu.a", "slow answered", "vllm.b"]
    # the imports stage implies the python stage's gate checks (not selected here): they come first
    assert [r.id for r in rows] == ["python.interpreter", "python.version", "imports.slow", "imports.quick", "gpu.a",
                                    "vllm.b"]  # the deferred row keeps its place
    slow = next(r for r in rows if r.id == "imports.slow")
    assert slow.status == Status.PASS and slow.evidence == {"n": 1}
    # the imports stage ends when its deferred row is answered: after the gpu stage
    assert events.index("end:gpu") < events.index("imports.slow") < events.index("end:imports") < events.index("vllm.b")
    t = ctx.peek("stage_timings")
    assert t["gpu"]["start_s"] <= t["imports"]["end_s"] and set(t) == {"imports", "gpu", "vllm"}


def test_deferred_failure_gates_and_a_crash_is_an_error_row(checks, ctx_factory):
    checks("imports", [Check("imports.bad", lambda c: Deferred(lambda: failed("no", "fix it"))),
                       Check("imports.boom", lambda c: Deferred(lambda: 1 / 0)),
                       Check("imports.never", lambda c: Deferred(lambda: passed("answered at the end")))])
    checks("vllm", [Check("vllm.b", lambda c: passed("b"), needs=("imports.bad",))])
    rows = {r.id: r for r in run(ctx_factory(), ["imports", "vllm"])}
    assert rows["python.interpreter"].status == Status.PASS  # implied by the imports stage
    assert rows["imports.bad"].status == Status.FAIL
    assert rows["vllm.b"].status == Status.SKIP and rows["vllm.b"].caused_by == ["imports.bad"]
    assert rows["imports.boom"].status == Status.ERROR and "ZeroDivisionError" in rows["imports.boom"].message
    assert rows["imports.never"].status == Status.PASS  # nothing gated on it: answered at the end


def test_deferred_duration_runs_to_its_answer(checks, ctx_factory):
    checks("imports", [Check("imports.slow", lambda c: Deferred(lambda: passed("x")))])
    checks("gpu", [Check("gpu.sleep", lambda c: time.sleep(0.3) or passed("slept"))])
    rows = {r.id: r for r in run(ctx_factory(), ["imports", "gpu"])}
    assert rows["imports.slow"].duration_s >= 0.3 > rows["gpu.sleep"].duration_s - 0.3


def test_prefetch_runs_in_the_background_and_hands_errors_to_the_reader(ctx_factory, monkeypatch):
    from preflight.context import Context

    gate = threading.Event()
    seen = []

    def nvml(self):
        seen.append(threading.current_thread().name)
        gate.wait(5)
        return {"device_count": 3}

    def target(self):
        raise OSError("probe could not start")

    monkeypatch.setattr(Context, "_read_nvml", nvml)
    monkeypatch.setattr(Context, "_read_target", target)
    ctx = ctx_factory()
    ctx._facts.pop("target", None)
    ctx._facts.pop("nvml", None)
    ctx.prefetch(["nvml", "target_probe"])
    time.sleep(0.05)
    assert seen == ["prefetch-nvml"] and ctx.peek("nvml") is None  # still running
    gate.set()
    assert ctx.nvml() == {"device_count": 3}
    with pytest.raises(OSError, match="could not start"):
        ctx.target_probe()
    with pytest.raises(KeyError):
        ctx.prefetch(["host"])
