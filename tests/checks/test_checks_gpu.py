"""gpu stage: NVML error paths through a fake provider, driver vs CUDA, arch lists, torch vs NVML."""

import pytest
from fake_nvml import FakeNvml, h200s
from helpers import rows

from preflight.checks.gpu import arch_covers
from preflight.probes.nvml import collect
from preflight.probes.process import ProbeOutput
from preflight.result import Status


def torch_probe(**kw):
    ev = {"event": "torch_cuda", "torch": "2.11.0+cu130", "cuda": "13.0", "available": True, "device_count": 2,
          "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
          "devices": [], "kernel_ok": True, "cuda_visible_devices": None, "nccl": "2.28.9", "cudnn": 91900}
    ev.update(kw)
    return ProbeOutput(argv=["fake"], returncode=0, events=[ev])


def gpu_rows(ctx_factory, nvml, torch="2.11.0", tc=None, **kw):
    ctx = ctx_factory(dists=[("torch", torch)], nvml=collect(nvml), torch_cuda=tc or torch_probe(),
                      imports={"torch": {"state": "ok", "facts": {"version": torch, "cuda": kw.pop("cuda", None)}}},
                      **kw)
    return rows(ctx, ["gpu"])


@pytest.mark.parametrize("code,kind,words", [
    (12, "library_not_found", "no NVIDIA driver"),
    (9, "driver_not_loaded", "kernel module is not loaded"),
    (4, "no_permission", "no permission"),
    (15, "gpu_lost", "fallen off the bus"),
])
def test_nvml_errors_are_distinct_fails(ctx_factory, code, kind, words):
    snap = collect(FakeNvml(init_error=code))
    assert snap["error"]["kind"] == kind
    got = gpu_rows(ctx_factory, FakeNvml(init_error=code))
    r = got["gpu.nvml"]
    assert r.status == Status.FAIL and words in r.message and r.fix
    assert got["gpu.driver"].status == Status.SKIP and got["gpu.driver"].caused_by == ["gpu.nvml"]


def test_lost_gpu_in_health(ctx_factory):
    got = gpu_rows(ctx_factory, FakeNvml(h200s(2), lost={1}))
    assert got["gpu.health.1"].status == Status.FAIL and "fallen off the bus" in got["gpu.health.1"].message
    assert got["gpu.health.0"].status == Status.PASS


def test_healthy_h200s_pass(ctx_factory):
    got = gpu_rows(ctx_factory, FakeNvml(h200s(2)), cuda="13.0")
    for rid in ("gpu.nvml", "gpu.driver", "gpu.torch", "gpu.arch.0", "gpu.arch.1", "gpu.health.0", "gpu.topology"):
        assert got[rid].status == Status.PASS, (rid, got[rid].message)
    assert "NVLink" in got["gpu.topology"].message


@pytest.mark.parametrize("driver,cuda,status", [
    ("580.65.06", "13.0", Status.PASS),
    ("535.104.05", "13.0", Status.FAIL),    # below CUDA 13's 580 floor
    ("550.54.15", "12.8", Status.WARN),     # below 570.26 but CUDA 12 minor-version compatible
    ("570.124.06", "12.8", Status.PASS),
    ("470.82.01", "12.1", Status.FAIL),     # below CUDA 12's 525 floor
])
def test_driver_vs_torch_cuda(ctx_factory, driver, cuda, status):
    torch = {"13.0": "2.11.0", "12.8": "2.9.1+cu128", "12.1": "2.3.1"}[cuda]
    got = gpu_rows(ctx_factory, FakeNvml(h200s(1), driver=driver), torch=torch, cuda=cuda)
    r = got["gpu.driver"]
    assert r.status == status, r.message
    if status == Status.FAIL and cuda == "13.0":
        assert "580.65.06" in r.fix and "cu126" in r.fix  # upgrade, or the older variant this driver runs


def test_v100_not_in_cu130_build(ctx_factory):
    nv = FakeNvml([{"name": "Tesla V100-SXM2-32GB", "cc": (7, 0)}])
    tc = torch_probe(device_count=1)
    got = gpu_rows(ctx_factory, nv, tc=tc, cuda="13.0")
    r = got["gpu.arch.0"]
    # torch 2.11's cu128 build dropped sm_70 (pytorch/pytorch#182250); its cu126 build has it
    assert r.status == Status.FAIL and "7.0" in r.message and "cu126" in r.fix


def test_arch_rules():
    assert arch_covers("9.0", ["sm_80", "sm_90"]) == (True, "native sm_90")
    assert arch_covers("8.6", ["sm_80"])[0]            # same major, lower minor cubin
    assert arch_covers("8.9", ["sm_80", "sm_86"])[0]
    assert not arch_covers("7.0", ["sm_75", "sm_80"])[0]
    assert arch_covers("12.1", ["sm_120"])[0]
    assert arch_covers("10.3", ["sm_90", "compute_90"])[0]  # PTX JIT
    assert not arch_covers("12.0", ["sm_50", "sm_90"])[0]


def test_torch_sees_fewer_gpus(ctx_factory):
    # CUDA_VISIBLE_DEVICES explains it: a warning naming it
    got = gpu_rows(ctx_factory, FakeNvml(h200s(2)), tc=torch_probe(device_count=1, cuda_visible_devices="0"))
    r = got["gpu.torch"]
    assert r.status == Status.WARN and "NVML sees 2" in r.message and "torch sees 1" in r.message
    assert "CUDA_VISIBLE_DEVICES='0'" in r.message
    # nothing explains it: a failure
    got = gpu_rows(ctx_factory, FakeNvml(h200s(2)), tc=torch_probe(device_count=1))
    assert got["gpu.torch"].status == Status.FAIL


def test_health_warnings(ctx_factory):
    nv = FakeNvml(h200s(1, throttle=0x40, mig=True, compute_mode=3, used=50000, width=8))
    r = gpu_rows(ctx_factory, nv)["gpu.health.0"]
    assert r.status == Status.WARN
    for words in ("hw_thermal_slowdown", "MIG", "exclusive_process", "50000 of 143771 MiB", "x8 of x16"):
        assert words in r.message, words
    r = gpu_rows(ctx_factory, FakeNvml(h200s(1, ecc_uncorrected=3)))["gpu.health.0"]
    assert r.status == Status.FAIL and "3 uncorrected ECC" in r.message


def test_no_p2p_warns(ctx_factory):
    r = gpu_rows(ctx_factory, FakeNvml(h200s(2), p2p_ok=False))["gpu.topology"]
    assert r.status == Status.WARN and "0-1" in r.message


def test_harmful_env_var(ctx_factory, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz123456")
    r = gpu_rows(ctx_factory, FakeNvml(h200s(1)))["gpu.env"]
    assert r.status == Status.WARN and "NCCL_P2P_DISABLE" in r.message
    assert r.evidence["variables"]["HF_TOKEN"] == "***"


def test_driver_one_minor_behind_fails_with_a_rollout_engine(ctx_factory, matrix):
    # handed case 9 (verl-omni#133): driver 535 (CUDA 12.2) with torch built for CUDA 12.9 and vLLM installed
    vllm = ("vllm", "0.11.0", matrix.meta("vllm", "0.11.0")["requires_dist"])
    ctx = ctx_factory(dists=[("torch", "2.8.0+cu129"), vllm], nvml=collect(FakeNvml(h200s(1), driver="535.183.01")),
                      torch_cuda=torch_probe(), imports={"torch": {"state": "ok", "facts": {"version": "2.8.0+cu129",
                                                                                             "cuda": "12.9"}}})
    r = rows(ctx, ["gpu"])["gpu.driver"]
    assert r.status == Status.FAIL and "verl-omni#133" in r.message and "575.51.03" in r.fix
    assert r.evidence["engine"] == "vllm"
    # without an engine the same pair stays a warning (torch's own kernels are prebuilt)
    got = gpu_rows(ctx_factory, FakeNvml(h200s(1), driver="535.183.01"), torch="2.8.0+cu129", cuda="12.9")
    assert got["gpu.driver"].status == Status.WARN


@pytest.mark.parametrize("name,cc,driver,status", [
    ("NVIDIA B200", (10, 0), "565.57.01", Status.FAIL),   # before R570: no Blackwell support at all
    ("NVIDIA GeForce RTX 5090", (12, 0), "550.54.15", Status.FAIL),
    ("NVIDIA B200", (10, 0), "580.65.06", Status.PASS),
    ("Tesla V100-SXM2-32GB", (7, 0), "590.44.01", Status.FAIL),  # R580 is the last branch for Volta
])
def test_driver_branch_per_architecture(ctx_factory, name, cc, driver, status):
    got = gpu_rows(ctx_factory, FakeNvml([{"name": name, "cc": cc}], driver=driver), torch="2.11.0", cuda="13.0")
    r = got["gpu.driver"]
    assert r.status == status, r.message
    if status == Status.FAIL:
        assert "R570" in r.message + r.fix or "R580" in r.message + r.fix
