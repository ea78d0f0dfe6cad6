"""Three verl eras installed for real with ``preflight install`` and checked (python, packages,
imports, the rollout module included), or the one thing this CPU-only machine cannot do named.

* verl 0.9.1 CPU (torch 2.13.0+cpu from this machine's find-links, no rollout engine): the first
  build took 5 minutes here (pip's lock resolution), later runs reuse it in seconds.
* verl 0.5.0 with vLLM 0.8.5 on Python 3.10, and verl 0.3.0.post1 with vLLM 0.6.3 on Python 3.10:
  real CUDA wheels (torch 2.6.0/2.4.0 and the NVIDIA libraries, several GB each; the lock alone
  took 3.6 minutes here).
All three cost more than 3 minutes to build, so they are opt-in: set VERL_PREFLIGHT_ERA_ENVS=1. They are resolved for a V100
  (flash-attn needs compute capability 8.0, so its GitHub wheel, unreachable here, is left out).

The environments live in the test-env cache (``$VERL_PREFLIGHT_TEST_CACHE``, default
~/.cache/verl-preflight/test-envs); ``install`` answers in seconds for a prefix that already holds
the same lock.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from envs import CACHE

pytestmark = pytest.mark.realenv

HEAVY = os.environ.get("VERL_PREFLIGHT_ERA_ENVS") == "1"


def install_and_check(pyz, name, stack, check_args, tmp_path):
    key = hashlib.sha256(json.dumps(stack).encode()).hexdigest()[:10]
    prefix = os.path.join(CACHE, "era-%s-%s" % (name, key))
    if not os.path.exists(os.path.join(prefix, ".verl-preflight-installed")):
        # an earlier run was killed before install finished: start clean (the cache is ours)
        for d in (prefix, prefix + ".spec"):
            shutil.rmtree(d, ignore_errors=True)
    out = str(tmp_path / ("%s.json" % name))
    p = subprocess.run([sys.executable, "-I", "-S", pyz, "install"] + stack + ["--no-probe", "--prefix", prefix, "--",
                       "--stage", "python,packages,imports", "--json", out] + check_args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=3600)
    assert os.path.exists(out), p.stdout[-3000:] + p.stderr[-3000:]
    with open(out) as fh:
        return p, {r["id"]: r for r in json.load(fh)["results"]}


@pytest.mark.skipif(not HEAVY, reason="first build takes about 5 minutes: set VERL_PREFLIGHT_ERA_ENVS=1")
def test_era_091_cpu(pyz, tmp_path):
    p, rows = install_and_check(pyz, "verl091-cpu", ["--verl", "0.9.1", "--no-backend", "--torch", "2.13.0",
                                                     "--torch-index", "none", "--python", "3.11"],
                                ["--backend", "none"], tmp_path)
    for rid in ("python.interpreter", "packages.verl", "packages.verl-requirements", "imports.torch", "imports.verl",
                "imports.verl-classes.RayPPOTrainer", "imports.verl-classes.ActorRolloutRefWorker"):
        assert rows[rid]["status"] == "pass", (rid, rows[rid]["message"])
    # the one thing this CPU machine cannot do: a CUDA rollout engine; the rollout check says why it is skipped
    r = rows["imports.verl-rollout"]
    assert r["status"] == "skip" and "no rollout backend" in r["message"]
    assert not [k for k, v in rows.items() if v["status"] == "fail"], {k: v["message"] for k, v in rows.items()
                                                                      if v["status"] == "fail"}


@pytest.mark.skipif(not HEAVY, reason="several GB of CUDA wheels: set VERL_PREFLIGHT_ERA_ENVS=1")
@pytest.mark.parametrize("name,verl,vllm", [("verl050-vllm", "0.5.0", "0.8.5"), ("verl030-vllm", "0.3.0.post1", "0.6.3")])
def test_era_with_vllm(pyz, tmp_path, name, verl, vllm):
    p, rows = install_and_check(pyz, name, ["--verl", verl, "--python", "3.10", "--gpu", "V100", "--driver",
                                            "550.54.15"], [], tmp_path)
    assert rows["python.interpreter"]["status"] == "pass"
    for rid in ("packages.verl", "packages.backend", "packages.verl-requirements", "packages.consistency",
                "imports.torch", "imports.verl"):
        assert rows[rid]["status"] == "pass", (rid, rows[rid]["message"])
    assert rows["packages.backend"]["evidence"]["vllm"] == vllm
    assert not [k for k in rows if k.startswith("packages.known-bad.") and rows[k]["status"] == "fail"]
    # vLLM's CUDA extension needs the driver's libcuda.so.1: the one thing this CPU machine cannot do,
    # named as "no NVIDIA driver"; everything else imports
    fails = {k: v for k, v in rows.items() if v["status"] == "fail"}
    for k, v in fails.items():
        assert "no NVIDIA driver" in v["message"] or "libcuda" in v["message"] + json.dumps(v.get("evidence")), (k, v)
    rollout = [k for k in rows if k.startswith("imports.verl-rollout")]
    assert rollout, sorted(rows)
