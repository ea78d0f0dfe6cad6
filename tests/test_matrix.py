"""The matrix: loading, consistency, and facts as recorded in package metadata."""

import os

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from preflight import matrix as matrix_mod
from preflight.matrix import AnySpec, MatrixError


def extra_pin(m, pkg, version, extra, dep):
    reqs = [r for r in m.requirements(pkg, version, [extra]) if r.name.lower() == dep and
            (not extra or "extra" in str(r.marker))]
    return sorted(str(r.specifier) for r in reqs)


# (package, version, extra, dependency, expected specifier) straight from the index metadata
PINS = [
    ("verl", "0.9.1", "vllm", "torch", "==2.11.0"),
    ("verl", "0.9.1", "vllm", "vllm", "==0.24.0"),
    ("verl", "0.9.1", "sglang", "sglang", "==0.5.12"),
    ("verl", "0.9.1", "vllm", "transformers", "==5.9.0"),
    ("verl", "0.5.0", "vllm", "vllm", "<=0.8.5,>=0.7.3"),
    ("verl", "0.6.1", "vllm", "vllm", "<=0.11.0,>=0.8.5"),
    ("verl", "0.7.0", "sglang", "torch", "==2.9.1"),
    ("verl", "0.4.0", "sglang", "torch", "==2.6.0"),
    ("vllm", "0.11.0", "", "torch", "==2.8.0"),
    ("vllm", "0.24.0", "", "torch", "==2.11.0"),
    ("vllm", "0.33.0", "", "torch", "==2.14.0"),
    ("vllm", "0.6.3", "", "torch", "==2.4.0"),
    ("vllm", "0.8.5", "", "torch", "==2.6.0"),
    ("sglang", "0.5.12", "", "torch", "==2.11.0"),
]


@pytest.mark.parametrize("pkg,version,extra,dep,spec", PINS)
def test_pins_from_metadata(matrix, pkg, version, extra, dep, spec):
    got = extra_pin(matrix, pkg, version, extra, dep)
    assert SpecifierSet(spec) in [SpecifierSet(g) for g in got], got


@pytest.mark.parametrize("pkg,version,spec", [
    ("verl", "0.9.1", ">=3.10,<3.13"), ("verl", "0.5.0", ">=3.10"), ("verl", "0.4.1", ">=3.8"),
    ("vllm", "0.33.0", ">=3.11,<3.15"), ("vllm", "0.32.0", ">=3.11,<3.15"), ("vllm", "0.11.1", ">=3.10,<3.14"),
    ("torch", "2.15.0", ">=3.11"),
])
def test_requires_python(matrix, pkg, version, spec):
    assert SpecifierSet(matrix.meta(pkg, version)["requires_python"]) == SpecifierSet(spec)


def test_every_pypi_verl_release_has_curated_and_generated_rows(matrix):
    expected = ["0.1", "0.2", "0.2.0.post1", "0.2.0.post2", "0.3.0.post0", "0.3.0.post1", "0.4.0", "0.4.1",
                "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"]
    assert matrix.verl_versions() == expected
    for v in expected:
        assert matrix.meta("verl", v) is not None, v
        assert matrix.verl(v)["source"]


def test_pinned_versions_have_their_own_rows(matrix):
    """Every exact torch/vllm/sglang pin in verl's metadata refers to a release the matrix records."""
    for v in matrix.verl_versions():
        for line in matrix.meta("verl", v)["requires_dist"]:
            r = Requirement(line)
            if r.name.lower() in ("torch", "vllm", "sglang") and len(r.specifier) == 1:
                s = next(iter(r.specifier))
                if s.operator == "==":
                    assert matrix.meta(r.name, s.version), (v, line)
                    if r.name.lower() == "torch":
                        assert matrix.torch_series(s.version), (v, line)


def test_every_specifier_parses(matrix):
    for pkg, rel in matrix.metadata.items():
        for v, row in rel.items():
            Version(v)
            if row.get("requires_python"):
                SpecifierSet(row["requires_python"])
    for r in matrix.curated["verl"]["release"]:
        if r.get("vllm_runtime"):
            AnySpec(r["vllm_runtime"])


def test_torch_vllm_pins_are_consistent_with_torchvision_pairs(matrix):
    # the torchvision vLLM 0.24.0 pins is the one whose metadata pins vLLM's torch
    assert "0.26.0" in matrix.paired("torchvision", "2.11.0")
    assert "0.28.0" in matrix.paired("torchvision", "2.13.0")
    assert "0.24.1" in matrix.paired("torchvision", "2.9.1")


def test_torch_builds_and_arch(matrix):
    assert matrix.torch_build("2.13.0+cpu")[0] == "cpu"
    assert matrix.torch_build("2.9.1+cu128")[0] == "cu128"
    assert matrix.torch_build("2.11.0")[0] == "cu130"
    assert matrix.torch_build("2.7.1")[0] == "cu126"
    arch, ptx = matrix.torch_arch("2.11.0", "cu130")
    assert "7.0" not in arch and "9.0" in arch and ptx
    assert "7.0" not in matrix.torch_arch("2.7.0", "cu128")[0]
    assert "7.0" in matrix.torch_arch("2.8.0", "cu128")[0]


def test_cuda_and_gpus(matrix):
    assert matrix.cuda_toolkit("13.0")["driver"] == "580.65.06"
    assert matrix.cuda_toolkit("12.8")["driver"] == "570.26"
    assert matrix.min_driver_for_cuda_major(12) == "525.60.13"
    assert matrix.gpu("NVIDIA H200")["cc"] == "9.0"
    assert matrix.gpu("Tesla V100-SXM2-32GB")["cc"] == "7.0"
    assert matrix.gpu("NVIDIA A10G")["cc"] == "8.6"
    assert matrix.gpu("NVIDIA A100-SXM4-80GB")["cc"] == "8.0"
    assert matrix.gpu("NVIDIA GeForce RTX 5090")["cc"] == "12.0"
    assert matrix.gpu("NVIDIA L40S")["cc"] == "8.9"
    assert matrix.gpu("Mystery GPU") is None


def test_anyspec():
    s = AnySpec("==0.5.4 || >=0.6.3,<0.6.4 || >=0.7.0")
    assert "0.6.3.post1" in s and "0.5.4" in s and "0.8.0" in s
    assert "0.6.0" not in s and "0.5.5" not in s


def test_nearest_verl(matrix):
    assert matrix.nearest_verl("0.9.2.dev0") == "0.9.1"
    assert matrix.nearest_verl("0.6.5") == "0.6.1"


def test_malformed_toml_is_one_line_error(tmp_path):
    src = os.path.join(os.path.dirname(os.path.dirname(__file__)), "matrices")
    import shutil

    d = tmp_path / "m"
    shutil.copytree(src, str(d))
    (d / "cuda.toml").write_text("[[major]\nbroken = ")
    with pytest.raises(MatrixError) as ei:
        matrix_mod.load(str(d))
    msg = str(ei.value)
    assert "cuda.toml" in msg and "\n" not in msg


def test_missing_source_rejected(tmp_path):
    src = os.path.join(os.path.dirname(os.path.dirname(__file__)), "matrices")
    import shutil

    d = tmp_path / "m"
    shutil.copytree(src, str(d))
    text = (d / "verl.toml").read_text()
    (d / "verl.toml").write_text(text.replace('source = "verl@9fa2cfb4a: setup.py, verl/third_party/vllm/__init__.py, '
                                              'docker/Dockerfile.ngc.vllm"\n', ""))
    with pytest.raises(MatrixError, match="no source"):
        matrix_mod.load(str(d))
