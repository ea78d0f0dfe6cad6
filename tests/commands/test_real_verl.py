"""The checker on real verl environments (issue 2's real input), through the built zipapp.

A: ``pip install verl==0.9.1 torch==2.13.0`` (the plain install lacks cachetools/uvicorn).
B: ``pip install "verl[verl-core]==0.9.1" torch==2.13.0``.
Both are built once into the test-env cache (about a minute each) and reused.
"""

import json
import subprocess
import sys

import pytest
from envs import real_env

pytestmark = pytest.mark.realenv

TORCH = "torch==2.13.0"  # the CPU build this machine kind keeps on disk


@pytest.fixture(scope="module")
def env_a():
    return real_env("verl091-plain", ["verl==0.9.1", TORCH])


@pytest.fixture(scope="module")
def env_b():
    return real_env("verl091-core", ["verl[verl-core]==0.9.1", TORCH])


def check(pyz, python, tmp_path, *args):
    out = str(tmp_path / "report.json")
    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", python, "--json", out] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    assert "Traceback" not in proc.stderr + proc.stdout
    with open(out) as fh:
        data = json.load(fh)
    return proc, data, {r["id"]: r for r in data["results"]}


def test_plain_install_fails_imports_with_verl_core_fix(pyz, env_a, tmp_path):
    proc, data, rows = check(pyz, env_a, tmp_path)
    assert proc.returncode == 1 and data["exit_code"] == 1 and not data["ready"]
    r = rows["imports.verl-classes.RayPPOTrainer"]
    assert r["status"] == "fail"
    assert "No module named 'cachetools'" in r["message"]
    assert "uvicorn" in r["message"]  # found by stubbing cachetools and importing again
    assert r["fix"].startswith("%s -m pip install 'verl[verl-core]==0.9.1'" % env_a)
    assert rows["packages.verl-requirements"]["status"] == "fail"
    assert "verl[verl-core]==0.9.1" in rows["packages.verl-requirements"]["fix"]


def test_verl_core_install_report(pyz, env_b, tmp_path):
    proc, data, rows = check(pyz, env_b, tmp_path)
    assert proc.returncode == 1
    assert data["schema_version"] == 1 and data["verl"] == {"version": "0.9.1", "chosen_by": "installed"}
    # passes: Python 3.11 within >=3.10,<3.13; verl 0.9.1; its key classes
    assert rows["python.version"]["status"] == "pass" and "3.11" in rows["python.version"]["message"]
    assert rows["packages.verl"]["status"] == "pass"
    assert rows["imports.verl"]["status"] == "pass"
    assert rows["imports.verl-classes.RayPPOTrainer"]["status"] == "pass"
    ar = rows["imports.verl-classes.ActorRolloutRefWorker"]
    assert ar["status"] == "pass" and ar["evidence"]["expected_at"] == "verl.workers.engine_workers:ActorRolloutRefWorker"
    # named, each with a fix: the CPU-only build, torch vs the extras' pin, no rollout engine, no driver
    cpu = rows["packages.torch-build"]
    assert cpu["status"] in ("warn", "fail") and "CPU-only" in cpu["message"] and cpu["fix"]
    t = rows["packages.torch"]
    assert t["status"] in ("warn", "fail") and "2.13.0" in t["message"] and "torch==2.11.0" in t["message"]
    b = rows["packages.backend"]
    assert b["status"] == "fail" and "vLLM or SGLang" in b["message"] and "verl[vllm]==0.9.1" in b["fix"]
    g = rows["gpu.nvml"]
    assert g["status"] == "fail" and "no NVIDIA driver" in g["message"] and g["fix"]
    # every warn and fail has a fix; every skip names its cause or says why
    for r in data["results"]:
        if r["status"] in ("warn", "fail"):
            assert r["fix"], r["id"]
    assert rows["nccl.allreduce"]["status"] == "skip" and "gpu.nvml" in rows["nccl.allreduce"]["caused_by"]
    # per-check durations are recorded: the first import check runs the shared import probe, and each
    # import row carries its own import time measured in the target
    assert rows["imports.torch"]["duration_s"] > 0.5
    assert rows["imports.verl"]["evidence"]["duration_s"] > 0


def test_verl_override_for_absent_verl(pyz, tmp_path):
    """Checking a bare interpreter against --verl 0.5.0 uses that release's Requires-Python."""
    proc, data, rows = check(pyz, sys.executable, tmp_path, "--verl", "0.5.0", "--stage", "python,packages")
    assert data["verl"] == {"version": "0.5.0", "chosen_by": "--verl"}
    assert ">=3.10" in rows["python.version"]["message"]
    assert rows["packages.verl"]["status"] == "fail" and "verl[vllm]==0.5.0" in rows["packages.verl"]["fix"]
