"""Unknowns are never a PASS (issue 21, fault_cases_3.md x03): a fact that cannot be read or a
check that does not finish is WARN, SKIP or FAIL, and a launch whose chat template render timed
out is not ready."""

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRONG = pytest.mark.fault("WRONG")
VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]
ROWS = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 2+2?"}], "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"split": "train", "index": 0}}] * 3
NEVER = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}{{ messages[0]['content'] }}"
SECOND_ROW = ("{% if messages[0]['content'] == 'slow' %}{% for a in range(100000) %}{% for b in range(100000) %}"
              "{% endfor %}{% endfor %}{% endif %}{{ messages[0]['content'] }}")


@pytest.fixture(scope="module")
def verl_py():
    from envs import real_env

    return real_env("verl091-core", VERL_CORE)


def _parquet(py, path, rows):
    code = "import json,sys,pyarrow as pa,pyarrow.parquet as pq; pq.write_table(pa.Table.from_pylist(json.load(sys.stdin)), sys.argv[1])"
    subprocess.run([py, "-c", code, str(path)], input=json.dumps(rows), universal_newlines=True, check=True)
    return str(path)


def _model(tmp_path, template):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "num_attention_heads": 14,
                                               "num_key_value_heads": 2, "max_position_embeddings": 32768}))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return d


@WRONG
@pytest.mark.realenv
@pytest.mark.parametrize("template,rows", [(NEVER, ROWS), (SECOND_ROW, ROWS[:1] + [dict(ROWS[0], prompt=[
    {"role": "user", "content": "slow"}])])], ids=["first-row", "second-row"])
def test_x03_a_template_that_never_finishes_is_not_ready(verl_py, tmp_path, template, rows):
    train = _parquet(verl_py, tmp_path / "train.parquet", rows)
    d = _model(tmp_path, template)
    out = tmp_path / "d.json"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "preflight", "data", "--python", verl_py, "--model", str(d), train,
                        "--timeout", "8", "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert time.monotonic() - t0 < 60
    doc = json.loads(out.read_text())
    row = [r for r in doc["results"] if r["id"].endswith("chat_template")]
    assert row and row[0]["status"] == "fail", [(r["id"], r["status"], r["message"]) for r in doc["results"]]
    assert "did not finish rendering row %d" % (0 if template == NEVER else 1) in row[0]["message"]
    assert p.returncode == 1 and doc["ready"] is False


def _host(**over):
    h = {"os": {"system": "Linux", "name": "Ubuntu 24.04", "id": "ubuntu", "version_id": "24.04"}, "kernel": "6.8", "arch": "x86_64", "glibc": "glibc 2.35",
         "cpu": {"logical": 32, "affinity": 32, "cgroup_quota": None, "usable": 32},
         "memory": {"total": 256 << 30, "available": 200 << 30, "cgroup_limit": None},
         "shm": {"path": "/dev/shm", "total": 64 << 30, "free": 64 << 30},
         "disk": {"path": "/root/.cache/huggingface", "decided_by": "default", "checked": "/", "free": 500 << 30,
                  "total": 1000 << 30},
         "limits": {"nofile": {"soft": 1 << 20, "hard": 1 << 20}, "memlock": {"soft": None, "hard": None}},
         "container": None}
    h.update(over)
    return h


@WRONG
@pytest.mark.parametrize("item,over", [
    ("host.memory", {"memory": {"total": None, "available": None, "cgroup_limit": None}}),  # /proc hidden
    ("host.memory", {"memory": {}}),
    ("host.cpu", {"cpu": {"logical": None, "affinity": None, "cgroup_quota": None, "usable": None}}),
    ("host.glibc", {"glibc": "glibc 2.x"}),
    ("host.limits", {"limits": {}}),
], ids=["ram-proc-hidden", "ram-empty", "cpu-unknown", "glibc-unparsed", "limits-unread"])
def test_a_host_fact_that_cannot_be_read_is_not_a_pass(ctx_factory, item, over):
    from helpers import rows
    from preflight.result import Status

    ctx = ctx_factory(host=_host(**over))
    got = rows(ctx, ["host"])
    assert got[item].status == Status.WARN, (got[item].status, got[item].message)
    base = rows(ctx_factory(host=_host()), ["host"])
    assert base[item].status == Status.PASS, base[item].message  # the same check passes when the fact is read


@WRONG
def test_ram_with_proc_hidden_reads_as_unknown(tmp_path, ctx_factory):
    """The real reader on a root whose /proc and cgroup files are absent (psutil not importable
    in the checker), then the check: WARN."""
    from preflight.probes import host as h

    facts = h.read_host(str(tmp_path), {})
    if facts["memory"].get("via") == "psutil":
        pytest.skip("psutil reads the real machine here")
    assert facts["memory"].get("total") is None
    from helpers import rows
    from preflight.result import Status

    got = rows(ctx_factory(host=_host(memory=facts["memory"])), ["host"])
    assert got["host.memory"].status == Status.WARN


def _gpu_rows(ctx_factory, snap):
    from helpers import rows as _rows
    from preflight.probes.process import ProbeOutput

    tc = ProbeOutput(argv=["fake"], returncode=0, events=[{
        "event": "torch_cuda", "torch": "2.11.0+cu130", "cuda": "13.0", "available": True, "device_count": 2,
        "arch_list": ["sm_90"], "devices": [], "kernel_ok": True, "cuda_visible_devices": None, "nccl": "2.28.9",
        "cudnn": 91900}])
    ctx = ctx_factory(dists=[("torch", "2.11.0")], nvml=snap, torch_cuda=tc,
                      imports={"torch": {"state": "ok", "facts": {"version": "2.11.0", "cuda": None}}})
    return _rows(ctx, ["gpu"])


@WRONG
@pytest.mark.parametrize("case", ["no-pairs", "p2p-unread-no-nvlink"])
def test_peer_access_that_cannot_be_read_is_not_a_pass(ctx_factory, case):
    """Two GPUs whose P2P NVML did not report: WARN, not "one GPU: no peer links" or "P2P works"."""
    from fake_nvml import FakeNvml, h200s
    from preflight.probes.nvml import collect
    from preflight.result import Status

    snap = collect(FakeNvml(h200s(2)))
    assert _gpu_rows(ctx_factory, snap)["gpu.topology"].status == Status.PASS  # read: passes
    if case == "no-pairs":
        snap["pairs"] = []
    else:
        for p in snap["pairs"]:
            p.update(p2p_read=None, nvlink=None)
        for d in snap["devices"]:
            d["nvlinks_active"] = 0
    r = _gpu_rows(ctx_factory, snap)["gpu.topology"]
    assert r.status == Status.WARN, (r.status, r.message)


def test_h200_over_nvswitch_without_p2p_status_still_passes(ctx_factory):
    """The real H200 node (tests/data/gpu_run_h200x2) reports no P2P status; NVSwitch answers."""
    from fake_nvml import FakeNvml, h200s
    from preflight.probes.nvml import collect
    from preflight.result import Status

    snap = collect(FakeNvml(h200s(2)))
    for p in snap["pairs"]:
        p.update(p2p_read=None, nvlink="switch")  # as the real node reported it
    real = json.load(open(os.path.join(ROOT, "tests", "data", "gpu_run_h200x2", "report.json")))
    assert any(p.get("p2p_read") is None for r in real["results"] if r["id"] == "gpu.topology"
               for p in r["evidence"]["pairs"])
    r = _gpu_rows(ctx_factory, snap)["gpu.topology"]
    assert r.status == Status.PASS and "NVSwitch" in r.message, r.message
