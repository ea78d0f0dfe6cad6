"""A run must not say ready for what it could not judge (threat review A06/A07): ``--stage nccl`` on a
machine whose GPUs torch cannot see, ``--stage config`` without a launch. The truth for "no GPU" is
torch itself in the target (``torch.cuda.device_count()``), asked in the test."""

import json
import os
import subprocess
import sys

import pytest

from envs import real_env


def pf(pyz, *args, env=None):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=600,
                          env=dict(os.environ, **(env or {})))


@pytest.fixture(scope="module")
def torch_py():
    return real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])


@pytest.mark.realenv
def test_an_asked_stage_that_judged_nothing_is_not_ready(pyz, torch_py, tmp_path):
    gpus = subprocess.run([torch_py, "-c", "import torch; print(torch.cuda.device_count())"], env=dict(
        os.environ, CUDA_VISIBLE_DEVICES=""), stdout=subprocess.PIPE, universal_newlines=True, timeout=300).stdout
    assert gpus.strip() == "0"  # what the nccl stage's own probe sees below
    sd = tmp_path / "sd"
    p = pf(pyz, "check", "--python", torch_py, "--stage", "nccl", "--json", str(tmp_path / "n.json"),
           "--status-dir", str(sd), env={"CUDA_VISIBLE_DEVICES": ""})
    rows = {r["id"]: r for r in json.loads((tmp_path / "n.json").read_text())["results"]}
    assert rows["nccl.judged"]["status"] == "fail", rows
    assert all(r["status"] == "skip" for k, r in rows.items() if k != "nccl.judged")
    assert p.returncode == 1 and (sd / "verdict").read_text().strip() != "ready"
    p = pf(pyz, "check", "--python", torch_py, "--stage", "config", "--json", str(tmp_path / "c.json"))
    rows = {r["id"]: r for r in json.loads((tmp_path / "c.json").read_text())["results"]}
    assert rows["config.judged"]["status"] == "fail" and p.returncode == 1
    # a stage that judged something, and a default run's skipped stages, are left as they were
    p = pf(pyz, "check", "--python", torch_py, "--stage", "host,python", "--json", str(tmp_path / "h.json"))
    rows = json.loads((tmp_path / "h.json").read_text())["results"]
    assert not any(r["id"].endswith(".judged") for r in rows)
