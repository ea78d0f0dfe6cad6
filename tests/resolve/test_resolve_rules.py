"""resolve: works-with bounds written into the requirements, the driver branch of each GPU
architecture, options that carry the command selecting them, and --backend-build."""

import shlex

import pytest

from preflight.resolve import ResolveError, resolve


@pytest.mark.parametrize("verl,gpu,driver,py", [
    ("0.5.0", "H100", "535.183.01", "3.10"),     # audit s16
    ("0.4.1", "H100", "535.183.01", "3.10"),     # s19
    ("0.6.1", "V100", "550.54.15", "3.10"),      # s38
    ("0.6.0", "B200", "570.133.20", "3.12"),     # s24
    ("0.2.0.post2", "A100", "535.183.01", "3.10"),  # s28
])
def test_transformers_capped_below_5_for_old_vllm(matrix, verl, gpu, driver, py):
    # vLLM <= 0.11.0 fails at tokenizer start on transformers 5 (worker-vllm#258); 0.11.1's own metadata caps <5
    r = resolve(matrix, verl, gpu=gpu, driver=driver, python=py)
    assert r.ok, r.problems
    tf = [q for q in r.requirements if q.startswith("transformers")]
    from packaging.requirements import Requirement

    spec = Requirement(tf[0]).specifier
    assert not spec.contains("5.0.0") and spec.contains("4.57.6"), tf
    assert any(b["package"] == "transformers" and b["spec"] == "<5" for b in r.bounds)


def test_vllm_0_11_1_and_later_need_no_added_cap(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="580.65.06", python="3.12")
    assert r.ok and not r.bounds and "transformers==5.9.0" in r.requirements


def test_old_verl_bounds_tensordict_and_numpy(matrix):
    r = resolve(matrix, "0.1", gpu="A100", driver="550.54.15", python="3.10")
    assert {b["id"] for b in r.bounds} >= {"tensordict-verl-0.1", "numpy-2-old-verl", "transformers-verl-0.1"}
    assert "tensordict<0.6" in r.requirements and "numpy<2.0.0" in r.requirements


@pytest.mark.parametrize("verl", ["0.4.1", "0.6.1", "0.9.1"])
@pytest.mark.parametrize("gpu,driver", [("B200", "550.54.15"), ("RTX 5090", "565.57.01"), ("B200", "535.183.01")])
def test_blackwell_before_r570_is_no_stack_never_minor_version_compat(matrix, verl, gpu, driver):
    r = resolve(matrix, verl, gpu=gpu, driver=driver)
    assert not r.ok and any("R570" in p for p in r.problems)
    assert not any("minor-version compatibility" in w for w in r.warnings)
    up = [c for c in r.commands if "--driver" in c]
    if up:  # the driver option selects a driver of R570 or newer
        d = shlex.split(up[0])[shlex.split(up[0]).index("--driver") + 1]
        assert int(d.split(".")[0]) >= 570


def test_every_option_command_selects_a_working_stack(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="535.183.01", python="3.12")
    assert not r.ok and len(r.commands) == len(r.options) >= 2
    assert any("preflight resolve --verl 0.9.0" in c for c in r.commands)
    assert any("--backend-build cu129" in c for c in r.commands)
    for c in r.commands:
        args = shlex.split(c)[2:]
        kw = {}
        while args:
            k, v = args.pop(0).lstrip("-").replace("-", "_"), args.pop(0)
            kw[k] = v
        again = resolve(matrix, kw.pop("verl"), backend=kw.pop("backend", None), gpu=kw.pop("gpu", None),
                        cc=kw.pop("cc", None), driver=kw.pop("driver", None), python=kw.pop("python", None),
                        backend_build=kw.pop("backend_build", None))
        assert again.ok, (c, again.problems)


def test_backend_build_flag(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="535.183.01", python="3.12", backend_build="cu129")
    assert r.ok and r.backend_cuda == "12.9" and r.variant == "cu128"
    assert "https://wheels.vllm.ai/0.24.0/cu129" in r.extra_index_urls
    assert r.proof["status"] == "unproven"  # wheels.vllm.ai / download.pytorch.org are not reachable here
    bad = resolve(matrix, "0.9.1", gpu="H100", driver="580.65.06", backend_build="cu118")
    assert not bad.ok and "no recorded cu118 build" in bad.problems[0]
    with pytest.raises(ResolveError):
        resolve(matrix, "0.9.1", backend_build="cuda13")


def test_volta_on_a_driver_after_r580(matrix):
    r = resolve(matrix, "0.5.0", gpu="V100", driver="590.44.01", python="3.10")
    assert not r.ok and any("R580 is the last driver branch" in p for p in r.problems)
