"""The values of the variables the job inherits, judged by the installed libraries' own code: each
VLLM_* value through vLLM 0.32's own getter in vllm/envs.py, the allocator settings through torch
2.13's own parser, and CUDA_VISIBLE_DEVICES from anywhere in the job's environment against
trainer.n_gpus_per_node (verl 0.9.1's resource pool check). The truth each test holds the rows to is
computed in the test by running the real getter or parser."""

import json
import subprocess

import pytest

from test_launch_facts import BASE, config, facts, vllm_py  # noqa: F401 - the module fixture

BAD_VLLM = {"VLLM_WORKER_MULTIPROC_METHOD": "forkserver", "VLLM_PORT": "abc"}
GOOD_VLLM = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "VLLM_LOGGING_LEVEL": "INFO"}
BAD_ALLOC = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:10", "PYTORCH_ALLOC_CONF": "expandable_segments:yes"}
GOOD_ALLOC = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


def _truth(py, code, cases):
    """{name: error text or None} from ``code`` run by ``py`` (the real library) for ``cases``."""
    p = subprocess.run([py, "-c", code, json.dumps(cases)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


VLLM_TRUTH = ("import json, os, sys\n"
              "import vllm.envs as e\n"  # the whole package, as the engine imports it
              "out = []\n"
              "for n, v in json.loads(sys.argv[1]):\n    os.environ[n] = v\n    try:\n"
              "        e.environment_variables[n]()\n        out.append(None)\n"
              "    except Exception as exc:\n        out.append('%s: %s' % (type(exc).__name__, exc))\n"
              "print(json.dumps(out))")
TORCH_TRUTH = ("import json, sys, torch\nout = {}\n"
               "for n, v in json.loads(sys.argv[1]).items():\n    try:\n"
               "        torch._C._accelerator_setAllocatorSettings(v)\n        out[n] = None\n"
               "    except Exception as exc:\n        out[n] = '%s: %s' % (type(exc).__name__, exc)\n"
               "print(json.dumps(out))")


@pytest.mark.realenv
def test_vllm_values_and_alloc_conf_judged_by_the_installed_libraries(vllm_py):  # noqa: F811
    """Planted bad values (one inherited from the shell, one in the launch line) FAIL with vLLM's and
    torch's own message; valid values PASS (no row FAILs)."""
    cases = sorted(BAD_VLLM.items()) + sorted(GOOD_VLLM.items())
    got = _truth(vllm_py, VLLM_TRUTH, cases)
    vt = dict(zip([n for n, _ in BAD_VLLM.items()], [got[cases.index(c)] for c in BAD_VLLM.items()]))
    assert all(vt.values())  # the real getters reject both planted values
    assert got[len(BAD_VLLM):] == [None] * len(GOOD_VLLM)  # and accept the valid ones
    tt = _truth(vllm_py, TORCH_TRUTH, BAD_ALLOC)
    assert all(tt.values())
    # before this check these launches gave no env row for the values: the rollout would have stopped
    shell = {"VLLM_WORKER_MULTIPROC_METHOD": BAD_VLLM["VLLM_WORKER_MULTIPROC_METHOD"], **BAD_ALLOC,
             "VLLM_LOGGING_LEVEL": "INFO"}
    rc, rows = config(["VLLM_PORT=abc", "python3", "-m", "verl.trainer.main_ppo"] + BASE, env=shell, python=vllm_py)
    f = facts(rows)
    for name in BAD_VLLM:
        r = f["env.vllm_value.%s" % name]
        assert r["status"] == "fail" and vt[name] in r["message"], (name, r)
        assert r["evidence"]["where"].startswith("vllm/envs.py:")
    assert "inherited from this shell" in f["env.vllm_value.VLLM_WORKER_MULTIPROC_METHOD"]["message"]
    assert "set in the launch line" in f["env.vllm_value.VLLM_PORT"]["message"]
    assert "spawn, fork" in f["env.vllm_value.VLLM_WORKER_MULTIPROC_METHOD"]["fix"]
    assert "env.vllm_value.VLLM_LOGGING_LEVEL" not in f
    for name in BAD_ALLOC:
        r = f["env.alloc_parse.%s" % name]
        assert r["status"] == "fail" and tt[name] in r["message"], (name, r)
    assert rc == 1

    rc, rows = config(BASE, env=dict(GOOD_VLLM, **GOOD_ALLOC), python=vllm_py)
    f = facts(rows)
    assert not [k for k, r in f.items() if k.startswith("env.") and r["status"] == "fail"], f
    assert f["env.alloc_parse.PYTORCH_CUDA_ALLOC_CONF"]["status"] == "pass"
    assert not [k for k in f if k.startswith("env.vllm_value")]


@pytest.mark.realenv
def test_envs_loaded_without_torch(vllm_py):  # noqa: F811
    """The getters run from vllm/envs.py loaded by path: neither torch nor vllm/__init__.py is
    imported (importing vllm.envs the usual way imports torch through vllm/__init__.py)."""
    from preflight.probes.process import run_script

    code = ("import sys, vllm.envs\nprint('torch' in sys.modules)")
    assert subprocess.run([vllm_py, "-c", code], capture_output=True, text=True,
                          timeout=300).stdout.strip().endswith("True")
    out = run_script(vllm_py, "launch_facts", {"vllm": True, "vllm_env": {"VLLM_USE_AOT_COMPILE": "1",
                                                                          **BAD_VLLM}}, timeout=120)
    got = out.last("vllm_env")
    assert sorted(got["rejected"]) == sorted(BAD_VLLM)
    # a getter that needs torch for its default is reported as not evaluated, never as a rejection
    assert "VLLM_USE_AOT_COMPILE" in got["not_evaluated"]
    assert got["engine_reads_all"].startswith("vllm/v1/engine/core.py:")


# ---- CUDA_VISIBLE_DEVICES from the job's whole environment --------------------------------------------
def test_cuda_visible_devices_from_the_shell_and_a_script(tmp_path):
    """Inherited from this shell (not in the launch line) and exported by a wrapper script: both reach
    the Ray verl starts; 2 GPUs for n_gpus_per_node 8 is verl's 'Total available GPUs 2 is less
    than total desired GPUs 8'."""
    try:
        import pynvml  # noqa: F401
        pynvml.nvmlInit()
        pytest.skip("NVML answers here: gpus_present judges the real GPUs")
    except Exception:
        pass
    rc, rows = config(BASE, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    r = rows["config.rules.gpus_launch"]
    assert r["status"] == "fail" and "inherited from this shell" in r["message"]
    assert "Total available GPUs 2 is less than total desired GPUs 8" in r["message"]
    script = tmp_path / "train.sh"
    script.write_text("export CUDA_VISIBLE_DEVICES=0,1,2\npython3 -m verl.trainer.main_ppo \"$@\"\n")
    rc, rows = config(["bash", str(script)] + BASE, cwd=str(tmp_path))
    r = rows["config.rules.gpus_launch"]
    assert r["status"] == "fail" and "shell script" in r["message"] and "(3 GPU(s)" in r["message"]
    # enough GPUs: a pass; a job joining a running cluster (RAY_ADDRESS): the driver's variable is not counted
    rc, rows = config(BASE, env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(8)))})
    assert rows["config.rules.gpus_launch"]["status"] == "pass"
    rc, rows = config(BASE, env={"CUDA_VISIBLE_DEVICES": "0", "RAY_ADDRESS": "10.0.0.1:6379"})
    assert "config.rules.gpus_launch" not in rows and "RAY_ADDRESS" in rows["config.rules.gpus_present"]["message"]


def test_cuda_visible_devices_rule_reads_the_job_env():
    """The rule itself: the job env (job_env True) is read, the launch_env alone otherwise (older callers)."""
    from test_launch_model_rules import run

    no_nvml = {"error": {"kind": "library_not_found", "message": "libnvidia-ml.so.1 not found"}}
    _c, found = run([], machine={"nvml": no_nvml, "host": {}, "env": {"CUDA_VISIBLE_DEVICES": "0,1"}, "launch_env": {},
                                 "job_env": True, "cvd_source": "set by the ray job submit"})
    f = found["gpus_launch"]
    assert f.status == "fail" and "set by the ray job submit" in f.message and f.alts
    _c, found = run([], machine={"nvml": no_nvml, "host": {}, "env": {"CUDA_VISIBLE_DEVICES": "0,1"}, "launch_env": {},
                                 "job_env": True, "attached": "the job is submitted to a running Ray cluster"})
    assert "gpus_launch" not in found and "running Ray cluster" in found["gpus_present"].message
