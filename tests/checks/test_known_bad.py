"""Known-bad pairs (matrices/known_bad.toml) caught by `check` on installed environments, with
fixes that satisfy the verl release's own requirements (resolved over the recorded metadata)."""

from helpers import rows
from packaging.version import Version

from preflight.result import Status


def vllm_dist(matrix, version):
    return ("vllm", version, matrix.meta("vllm", version)["requires_dist"])


def verl_dist(matrix, version):
    return ("verl", version, matrix.meta("verl", version)["requires_dist"])


def test_verl_070_with_transformers_5(ctx_factory, matrix):
    # failure_cases_2.md 36 (verl#5007): verl 0.7.0, vLLM 0.11.0, transformers 5.1.0, pip check clean
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.7.0"), ("torch", "2.8.0"), vllm_dist(matrix, "0.11.0"),
                             ("transformers", "5.1.0")], python_version="3.12.3")
    got = rows(ctx, ["python", "packages"])
    r = got["packages.known-bad.verl-0.7.0-transformers-5"]
    assert r.status == Status.FAIL and "transformers 5.1.0" in r.message and "AutoModelForVision2Seq" in r.message
    # the fix is the cap combined with verl 0.7.0's own requirement on transformers (none: plain 'transformers')
    assert "transformers<5" in r.fix and r.evidence["fix_resolved"]["verl_requires"] == ["transformers"]
    # vLLM 0.11.0 breaks on transformers 5 as well (audit kind A)
    assert got["packages.known-bad.vllm-0.11-transformers-5"].status == Status.FAIL
    # and the torch row does not suggest the SGLang extra's torch==2.9.1 on this vLLM install (product bug 1)
    t = got["packages.torch"]
    assert t.status == Status.PASS and "2.9.1" not in (t.fix or "") + t.message and t.evidence["applies"] == "vllm"


def test_transformers_5_fine_where_the_stack_supports_it(ctx_factory, matrix):
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.9.1"), ("torch", "2.11.0"), vllm_dist(matrix, "0.24.0"),
                             ("transformers", "5.9.0")], python_version="3.12.3")
    got = rows(ctx, ["python", "packages"])
    assert not [k for k in got if k.startswith("packages.known-bad.") and "transformers" in k]


def test_verl_070_with_vllm_012(ctx_factory, matrix):
    # failure_cases_2.md 37 (verl#5087): inside verl's declared range, but the rollout import fails
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.7.0"), ("torch", "2.9.0"), vllm_dist(matrix, "0.12.0"),
                             ("transformers", "4.57.1")], python_version="3.12.3")
    got = rows(ctx, ["python", "packages"])
    r = got["packages.known-bad.verl-0.7.0-vllm-0.12"]
    assert r.status == Status.FAIL and "0.7.1" in r.fix and "ExecuteModelRequest" in r.message
    assert got["packages.backend"].status == Status.PASS  # the declared range admits it: only the row catches it
    # verl 0.7.1 with the same vLLM is fine
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.7.1"), ("torch", "2.9.0"), vllm_dist(matrix, "0.12.0")],
                      python_version="3.12.3")
    assert "packages.known-bad.verl-0.7.0-vllm-0.12" not in rows(ctx, ["python", "packages"])


def test_vllm_use_v1_judged_against_the_release(ctx_factory, matrix, monkeypatch):
    # handed case 6 (verl#410): vLLM 0.7.4.dev0 with VLLM_USE_V1=1
    dists = [("verl", "0.3.0.post1"), ("torch", "2.5.1"), ("vllm", "0.7.4.dev0", ["torch==2.5.1"])]
    monkeypatch.setenv("VLLM_USE_V1", "1")
    r = rows(ctx_factory(dists=dists), ["packages"])["packages.known-bad.vllm-v1-before-0.8"]
    assert r.status == Status.FAIL and r.evidence["environment"] == {"VLLM_USE_V1": "1"}
    # the same flag with vLLM 0.8.5 (V1 by default there) is not flagged
    ok = [("verl", "0.4.1"), ("torch", "2.6.0"), vllm_dist(matrix, "0.8.5")]
    assert "packages.known-bad.vllm-v1-before-0.8" not in rows(ctx_factory(dists=ok), ["packages"])
    monkeypatch.delenv("VLLM_USE_V1")
    assert "packages.known-bad.vllm-v1-before-0.8" not in rows(ctx_factory(dists=dists), ["packages"])


def test_tensordict_fix_respects_the_release_pin(ctx_factory, matrix):
    # handed case 4 (verl#700): tensordict 0.5.0 on torch 2.6 fails to import (ForkingPickler)
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.2.0.post2"), ("torch", "2.6.0"), ("tensordict", "0.5.0")],
                      python_version="3.10.14")
    r = rows(ctx, ["python", "packages"])["packages.known-bad.tensordict-forkingpickler"]
    # verl 0.2.0.post2 requires tensordict<0.6: no tensordict >= 0.6.2 fits, so the fix is torch<2.6 or a newer verl
    assert r.status == Status.FAIL and "tensordict>=0.6.2" not in r.fix.split(":")[0]
    assert "torch<2.6" in r.fix and "<0.6" in r.fix and r.evidence["fix_resolved"]["fitting_releases"] == []
    # verl 0.3.0.post1 allows tensordict<=0.6.2: 0.6.2 has the fix, and its torch>=2.5.0 holds
    ctx = ctx_factory(dists=[verl_dist(matrix, "0.3.0.post1"), ("torch", "2.6.0"), ("tensordict", "0.5.0")],
                      python_version="3.10.14")
    r = rows(ctx, ["python", "packages"])["packages.known-bad.tensordict-forkingpickler"]
    assert "tensordict==0.6.2" in r.fix
    # independent truth: that release's own metadata admits the installed torch
    from packaging.requirements import Requirement

    pins = [Requirement(x) for x in matrix.meta("tensordict", "0.6.2")["requires_dist"] if x.startswith("torch ")]
    assert pins and all(p.specifier.contains("2.6.0") for p in pins)


def test_vllm_fixes_stay_inside_the_release_range(ctx_factory, matrix):
    # handed case 6 (verl#410): verl 0.3.0.post1 admits vllm<=0.8.2; with torch 2.5.1 installed the fix
    # of the dev-build row is the newest recorded release inside that range whose torch pin holds
    from packaging.requirements import Requirement

    dists = [verl_dist(matrix, "0.3.0.post1"), ("torch", "2.5.1"), ("vllm", "0.7.4.dev0", ["torch==2.5.1"])]
    got = rows(ctx_factory(dists=dists, python_version="3.10.14"), ["python", "packages"])
    dev = got["packages.known-bad.vllm-dev-build"]
    spec = [Requirement(r.split(";")[0]) for r in matrix.meta("verl", "0.3.0.post1")["requires_dist"]
            if r.startswith("vllm")][0].specifier
    pick = dev.evidence["fix_resolved"]["fitting_releases"][-1]
    assert "pip install vllm==%s " % pick in dev.fix and spec.contains(pick)
    # independent truth: the chosen release pins the installed torch, and nothing newer in range does
    assert "torch==2.5.1" in matrix.meta("vllm", pick)["requires_dist"]
    newer = [v for v in matrix.versions("vllm") if spec.contains(v) and Version(v) > Version(pick)]
    assert all("torch==2.5.1" not in matrix.meta("vllm", v)["requires_dist"] for v in newer)
    # the 0.7.x row no longer offers vllm>=0.8.3, which verl 0.3.0.post1 does not admit
    old = got["packages.known-bad.vllm-0.7-with-verl"]
    assert "'vllm>=0.8.3'" not in old.fix and "<=0.8.2" in old.fix
