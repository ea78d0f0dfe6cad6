"""The imports stage on fake environments that carry the real Requires-Dist of each release and
stub modules that fail where the real release fails (failure_cases_2.md 36, 37): the rollout
module of the configured backend is imported, "cannot import name X from P" is a version mismatch
of P, and a vLLM import failing on libcuda.so.1 means no driver."""

import json
import os
import subprocess
import sys

import pytest
from envs import _dist_info, _site

MODS_070 = {
    "verl/__init__.py": "__version__ = '0.7.0'\n",
    "verl/workers/__init__.py": "",
    "verl/workers/rollout/__init__.py": "",
    # verl 0.7.0: the package imports .vllm_rollout, which catches only ModuleNotFoundError (verl#5087)
    "verl/workers/rollout/vllm_rollout/__init__.py": "from .vllm_rollout import vLLMAsyncRollout  # noqa\n",
    "verl/workers/rollout/vllm_rollout/vllm_rollout.py": (
        "try:\n    from vllm.worker.worker_base import WorkerWrapperBase\nexcept ModuleNotFoundError:\n"
        "    WorkerWrapperBase = None\nclass vLLMAsyncRollout:\n    pass\n"),
    "verl/workers/rollout/vllm_rollout/vllm_async_server.py": "class vLLMReplica:\n    pass\n",
    "verl/utils/__init__.py": "",
    "verl/utils/model.py": "from transformers import AutoModelForVision2Seq  # noqa\n",
    "verl/workers/fsdp_workers.py": "import verl.utils.model  # noqa\nclass ActorRolloutRefWorker:\n    pass\n",
    "vllm/__init__.py": "__version__ = '0.12.0'\nclass LLM:\n    pass\n",
    "vllm/_C.abi3.so": None,
    "vllm/sequence.py": "class SequenceGroup:\n    pass\n",
    "vllm/worker/__init__.py": "",
    "vllm/worker/worker_base.py": "from vllm.sequence import ExecuteModelRequest  # noqa\n",
    "torch/__init__.py": "__version__ = '2.9.0'\nclass version:\n    cuda = '12.8'\n",
}


def _so(path):
    src = path + ".c"
    with open(src, "w") as fh:
        fh.write("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"_C\", 0, -1, 0};\n"
                 "PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&m); }\n")
    inc = subprocess.check_output([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                                  universal_newlines=True).strip()
    subprocess.run(["gcc", "-shared", "-fPIC", "-I", inc, src, "-o", path], check=True)
    os.remove(src)


def make_env(base, name, mods, dists, matrix):
    venv = os.path.join(base, name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    for dist, ver in dists:
        meta = matrix.meta(dist, ver) or {}
        _dist_info(site, dist, ver, meta.get("requires_dist") or [])
    for rel, src in mods.items():
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if src is None:
            _so(path)
        else:
            with open(path, "w") as fh:
                fh.write(src)
    return os.path.join(venv, "bin", "python")


def check_rows(pyz, python, tmp_path, *extra):
    out = str(tmp_path / ("r%d.json" % len(os.listdir(str(tmp_path)))))
    proc = subprocess.run([sys.executable, "-I", "-S", pyz, "check", "--python", python, "--stage",
                           "python,packages,imports", "--json", out] + list(extra), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    with open(out) as fh:
        return {r["id"]: r for r in json.load(fh)["results"]}


@pytest.fixture(scope="module")
def envs(tmp_path_factory, matrix):
    base = str(tmp_path_factory.mktemp("mismatch-envs"))
    v012 = make_env(base, "v012", MODS_070, [("verl", "0.7.0"), ("vllm", "0.12.0"), ("torch", "2.9.0"),
                                             ("transformers", "4.57.1")], matrix)
    t5 = dict(MODS_070, **{"transformers/__init__.py": "__version__ = '5.1.0'\nclass AutoModelForImageTextToText:\n"
                                                        "    pass\n",
                           "vllm/__init__.py": "__version__ = '0.11.0'\nclass LLM:\n    pass\n",
                           "vllm/sequence.py": "class ExecuteModelRequest:\n    pass\n"})
    tf5 = make_env(base, "tf5", t5, [("verl", "0.7.0"), ("vllm", "0.11.0"), ("torch", "2.8.0"),
                                     ("transformers", "5.1.0")], matrix)
    nodrv = dict(MODS_070, **{"vllm/__init__.py": "raise ImportError('libcuda.so.1: cannot open shared object file: "
                                                   "No such file or directory')\n"})
    nd = make_env(base, "nodrv", nodrv, [("verl", "0.7.0"), ("vllm", "0.11.0"), ("torch", "2.8.0")], matrix)
    return {"v012": v012, "tf5": tf5, "nodrv": nd}


def test_rollout_module_of_verl_070_with_vllm_012(pyz, envs, tmp_path):
    rows = check_rows(pyz, envs["v012"], tmp_path)
    # the key classes and 'import vllm' pass; only the rollout module shows the failure
    assert rows["imports.vllm"]["status"] == "pass"
    r = rows["imports.verl-rollout.verl.workers.rollout.vllm_rollout"]
    assert r["status"] == "fail" and "ExecuteModelRequest" in r["message"]
    assert "version mismatch: vllm 0.12.0 has no ExecuteModelRequest" in r["message"]
    assert "vllm<0.12.0" in r["fix"] and "reinstall" not in r["fix"].split(";")[0]
    # the async server lives in the same package, so its import (replica.py's) fails the same way
    assert "ExecuteModelRequest" in rows["imports.verl-rollout.verl.workers.rollout.vllm_rollout.vllm_async_server"]["message"]
    # and the packages stage already names the pair (known_bad.toml)
    assert rows["packages.known-bad.verl-0.7.0-vllm-0.12"]["status"] == "fail"


def test_cannot_import_name_is_a_transformers_mismatch(pyz, envs, tmp_path):
    rows = check_rows(pyz, envs["tf5"], tmp_path)
    r = rows["imports.verl-classes.ActorRolloutRefWorker"]
    assert r["status"] == "fail" and "version mismatch: transformers 5.1.0 has no AutoModelForVision2Seq" in r["message"]
    assert "transformers<5" in r["fix"] and "reinstall verl" not in r["fix"]
    assert r["evidence"]["version_mismatch"]["owner"] == "transformers"
    assert rows["packages.known-bad.verl-0.7.0-transformers-5"]["status"] == "fail"


def test_libcuda_means_no_driver(pyz, envs, tmp_path):
    rows = check_rows(pyz, envs["nodrv"], tmp_path)
    r = rows["imports.vllm"]
    assert r["status"] == "fail" and "no NVIDIA driver" in r["message"] and "not a broken vllm" in r["message"]
    ev = r["evidence"]["driver_evidence"]
    assert "libcuda.so.1" in ev["import_error"] and ev["nvml"]  # the evidence the fix points to
    assert "install the NVIDIA driver" in r["fix"]
