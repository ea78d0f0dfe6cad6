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
    # the PyPI cu130 wheels carry no PTX (audit #34: arch string of torch 2.11.0 / 2.14.1 wheels)
    assert "7.0" not in arch and "9.0" in arch and not ptx
    # torch 2.11's cu128 build dropped Volta (audit #32: pytorch/pytorch#182250), 2.10's still has it
    assert "7.0" not in matrix.torch_arch("2.11.0", "cu128")[0] and "7.0" in matrix.torch_arch("2.10.0", "cu128")[0]
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
    src = os.path.join(os.path.dirname(__file__), "..", "..", "matrices")
    import shutil

    d = tmp_path / "m"
    shutil.copytree(src, str(d))
    (d / "cuda.toml").write_text("[[major]\nbroken = ")
    with pytest.raises(MatrixError) as ei:
        matrix_mod.load(str(d))
    msg = str(ei.value)
    assert "cuda.toml" in msg and "\n" not in msg


def test_missing_source_rejected(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "..", "..", "matrices")
    import shutil

    d = tmp_path / "m"
    shutil.copytree(src, str(d))
    text = (d / "verl.toml").read_text()
    (d / "verl.toml").write_text(text.replace('source = "verl@9fa2cfb4a: setup.py, verl/third_party/vllm/__init__.py, '
                                              'docker/Dockerfile.ngc.vllm"\n', ""))
    with pytest.raises(MatrixError, match="no source"):
        matrix_mod.load(str(d))


# ---- more facts as recorded in package metadata (issue 3: at least 20 in all) ------------------
MORE_PINS = [
    ("verl", "0.9.1", "vllm", "torchvision", "==0.26.0"),
    ("verl", "0.9.1", "vllm", "torchaudio", "==2.11.0"),
    ("verl", "0.9.1", "flash-attn-cu130torch211", "flash-attn", "==2.8.3"),
    ("verl", "0.9.1", "megatron", "megatron-bridge", "==0.5.2"),
    ("verl", "0.9.1", "sglang", "transformers", "==5.9.0"),
    ("verl", "0.9.0", "", "transformers", "!=5.6.0,<5.11,>=5.5.3"),
    ("verl", "0.9.0", "", "numpy", ">=2.0.0"),
    ("verl", "0.9.0", "vllm", "vllm", ">=0.18.0"),
    ("verl", "0.8.0", "sglang", "sglang", "==0.5.8"),
    ("verl", "0.7.0", "vllm", "vllm", "<=0.12.0,>=0.8.5"),
    ("verl", "0.6.0", "vllm", "vllm", "<=0.9.1,>=0.7.3"),
    ("verl", "0.6.0", "sglang", "torch", "==2.8.0"),
    ("verl", "0.5.0", "", "tensordict", "!=0.9.0,<=0.9.1,>=0.8.0"),
    ("verl", "0.5.0", "", "numpy", "<2.0.0"),
    ("verl", "0.3.0.post1", "sglang", "sglang", "==0.4.4.post3"),
    ("verl", "0.2", "", "vllm", "<=0.6.3"),
    ("verl", "0.1", "", "torch", "==2.4.0"),
    ("vllm", "0.20.0", "", "torch", "==2.11.0"),
    ("vllm", "0.27.0", "", "torch", "==2.13.0"),
    ("vllm", "0.27.0", "", "torchaudio", "==2.11.0"),
    ("vllm", "0.12.0", "", "torch", "==2.9.0"),
    ("vllm", "0.7.3", "", "ray", "==2.40.0"),
    ("vllm", "0.32.0", "", "transformers", "<5.20.0,>=5.16.1"),
    ("vllm", "0.4.0", "", "torch", "==2.1.2"),
    ("sglang", "0.5.12", "", "transformers", "==5.6.0"),
    ("sglang", "0.5.6", "", "torch", "==2.9.1"),
    ("sglang", "0.4.6.post5", "srt", "torch", "==2.6.0"),
    ("sglang", "0.5.22", "", "torch", "==2.14.1"),
    ("torch", "2.11.0", "", "nvidia-nccl-cu13", "==2.28.9"),
    ("torch", "2.13.0", "", "nvidia-nccl-cu13", "==2.29.7"),
    ("torch", "2.15.0", "", "nvidia-cudnn-cu13", "==9.26.0.51"),
    ("torch", "2.8.0", "", "nvidia-cuda-runtime-cu12", "==12.8.90"),
    ("torchvision", "0.26.0", "", "torch", "==2.11.0"),
]


# (package, version, Requires-Python) as the index serves them
REQUIRES_PYTHON = [
    ("verl", "0.9.1", ">=3.10,<3.13"), ("verl", "0.5.0", ">=3.10"), ("verl", "0.4.1", ">=3.8"),
    ("vllm", "0.33.0", ">=3.11,<3.15"), ("vllm", "0.32.0", ">=3.11,<3.15"), ("vllm", "0.11.1", ">=3.10,<3.14"),
    ("torch", "2.15.0", ">=3.11"),
    ("verl", "0.2", ">=3.8"), ("verl", "0.6.1", ">=3.10"), ("vllm", "0.8.3", ">=3.9"), ("vllm", "0.8.4", ">=3.9,<3.13"),
    ("vllm", "0.10.2", ">=3.9,<3.14"), ("vllm", "0.20.0", ">=3.10,<3.15"), ("sglang", "0.5.22", ">=3.11"),
    ("sglang", "0.5.1", ">=3.10"), ("torch", "2.9.0", ">=3.10"), ("torch", "2.6.0", ">=3.9.0")]


@pytest.mark.parametrize("pkg,version,extra,dep,spec", PINS + MORE_PINS)
def test_pins_from_metadata(matrix, pkg, version, extra, dep, spec):
    got = extra_pin(matrix, pkg, version, extra, dep)
    assert SpecifierSet(spec) in [SpecifierSet(g) for g in got], got


@pytest.mark.parametrize("pkg,version,spec", REQUIRES_PYTHON)
def test_requires_python(matrix, pkg, version, spec):
    assert SpecifierSet(matrix.meta(pkg, version)["requires_python"]) == SpecifierSet(spec)


def test_verl_01_has_no_requires_python(matrix):
    assert matrix.meta("verl", "0.1")["requires_python"] is None


# ---- curated facts ------------------------------------------------------------------------------
def test_curated_facts(matrix):
    assert matrix.backend_build("vllm", "0.24.0")["cuda"] == "13.0"
    assert matrix.backend_build("vllm", "0.12.0")["cuda"] == "12.9"
    assert matrix.backend_build("vllm", "0.6.3")["cuda"] == "12.1"
    assert matrix.backend_gpu_floor("vllm", "0.20.0")["min_cc"] == "7.5"
    assert matrix.backend_gpu_floor("vllm", "0.11.0")["min_cc"] == "7.0"
    assert matrix.backend_python_tags("vllm", "0.5.1")["python"][-1] == "3.11"
    assert matrix.backend_python_tags("vllm", "0.5.2") is None  # abi3 from here
    assert matrix.backend_platform("sglang", "0.5.12")["glibc"] == "2.34"
    assert matrix.torch_python("2.15.0")["python"][0] == "3.11"
    assert matrix.torch_cxx11abi("2.6.0", "cu124")[0] is False and matrix.torch_cxx11abi("2.6.0", "cu126")[0] is True
    assert matrix.torch_cxx11abi("2.7.1", "cu126")[0] is True and matrix.torch_cxx11abi("2.5.1", "cu124")[0] is False
    assert matrix.toolkit_arch("12.0")["first_toolkit"] == "12.8" and matrix.toolkit_arch("8.6") is None
    assert matrix.toolkit_arch("10.3")["first_toolkit"] == "12.8"  # same family as 10.0
    assert [i["image"] for i in matrix.images("0.7.0", "sglang")] == ["verlai/verl:sgl056.latest"]
    assert matrix.arch_support(13)["min_cc"] == "7.5"
    assert {n["id"] for n in matrix.backend_notes("vllm", "0.7.2")} >= {"vllm-0.7-verl", "vllm-exact-torch"}


# ---- consistency ---------------------------------------------------------------------------------
def _covers_once(matrix, stem, table, versions):
    for v in versions:
        rows = matrix.ranged(stem, table, v)
        assert len(rows) == 1, (stem, table, v, [r["versions"] for r in rows])


def test_backend_rows_cover_every_release_exactly_once(matrix):
    _covers_once(matrix, "vllm", "build", matrix.versions("vllm"))
    _covers_once(matrix, "vllm", "gpu_floor", matrix.versions("vllm"))
    _covers_once(matrix, "vllm", "platform", matrix.versions("vllm"))
    _covers_once(matrix, "sglang", "build", matrix.versions("sglang"))
    for stem in ("vllm", "sglang"):
        for v in matrix.versions(stem):
            assert len(matrix.ranged(stem, "python_tags", v)) <= 1, (stem, v)


def test_backend_wheel_cuda_major_matches_its_torch_pins_pypi_build(matrix):
    """The CUDA a vLLM/SGLang PyPI wheel is built with has the major of the PyPI build of the torch
    it pins (libcudart.so.12 vs .so.13): vllm.toml/sglang.toml agree with torch.toml and metadata."""
    for pkg in ("vllm", "sglang"):
        for v in matrix.versions(pkg):
            reqs = matrix.requirements(pkg, v, ["srt"])
            pins = [next(iter(r.specifier)).version for r in reqs if r.name == "torch" and len(r.specifier) == 1
                    and next(iter(r.specifier)).operator == "==" and "extra" not in str(r.marker or "")
                    or r.name == "torch" and "srt" in str(r.marker or "")]
            if not pins:
                continue
            build = matrix.backend_build(pkg, v)
            cuda = build["cuda"]
            pypi_cuda = matrix.torch_variant(matrix.torch_series(pins[0])["pypi"])["cuda"]
            if cuda == "torch":
                continue
            assert cuda.split(".")[0] == pypi_cuda.split(".")[0], (pkg, v, cuda, pins[0], pypi_cuda)


def test_torch_rows_agree_with_torch_metadata(matrix):
    """torch.toml's NCCL, cuDNN and PyPI variant per series equal what every release's wheel pins."""
    for row in matrix.curated["torch"]["release"]:
        vs = [v for v in matrix.versions("torch") if v.startswith(row["series"] + ".")]
        assert vs, row["series"]
        for v in vs:
            reqs = {r.name: str(r.specifier) for r in matrix.requirements("torch", v)}
            nccl = [s for n, s in reqs.items() if n.startswith("nvidia-nccl-")]
            cudnn = [s for n, s in reqs.items() if n.startswith("nvidia-cudnn-")]
            runtime = [s for n, s in reqs.items() if n.startswith("nvidia-cuda-runtime") or n == "cuda-toolkit"]
            assert nccl == ["==" + row["nccl"]] and cudnn == ["==" + row["cudnn"]], (v, nccl, cudnn)
            cuda = Version(runtime[0].lstrip("="))
            assert "cu%d%d" % (cuda.major, cuda.minor) == row["pypi"], (v, runtime)
        assert matrix.torch_python(row["series"]), row["series"]
        for name in row["variants"]:
            variant = matrix.torch_variant(name)
            assert variant and matrix.cuda_toolkit(variant["cuda"]), (row["series"], name)


def test_arch_lists_agree_with_what_each_cuda_major_can_build(matrix):
    for name, variant in matrix.curated["torch"]["variants"].items():
        if not variant["cuda"]:
            continue
        sup = matrix.arch_support(int(variant["cuda"].split(".")[0]))
        for series in matrix.curated["torch"]["release"]:
            if name in series["variants"]:
                arch, _ = matrix.torch_arch(series["series"] + ".0", name)
                if sup:  # no kernels below what the variant's CUDA major can compile
                    assert Version(min(arch, key=Version)) >= Version(sup["min_cc"]), (series["series"], name, arch)
                for cc in arch:
                    need = matrix.toolkit_arch(cc)
                    assert need is None or Version(variant["cuda"]) >= Version(need["first_toolkit"]), (name, cc)
    for row in matrix.curated["vllm"]["build"]:
        sup = matrix.arch_support(int(row["cuda"].split(".")[0]))
        floor = matrix.backend_gpu_floor("vllm", SpecifierSet(row["versions"]).__iter__().__next__().version)
        if sup and floor:
            assert Version(floor["min_cc"]) >= Version(sup["min_cc"]), row["versions"]


def test_cuda_tables_agree(matrix):
    toolkits = matrix.curated["cuda"]["toolkit"]
    drivers = [tuple(int(x) for x in t["driver"].split(".")) for t in sorted(toolkits, key=lambda t: Version(t["version"]))]
    assert drivers == sorted(drivers)  # a newer toolkit never needs an older driver
    for b in matrix.curated["cuda"]["branch"]:
        tk = matrix.cuda_toolkit(b["cuda"])
        if tk:
            assert int(tk["driver"].split(".")[0]) == int(b["branch"]), b
    for m in matrix.curated["cuda"]["major"]:
        first = min((t for t in toolkits if Version(t["version"]).major == m["major"]), key=lambda t: Version(t["version"]),
                    default=None)
        if first:
            assert Version(first["driver"]) >= Version(m["minor_compat_min"]), m
    for r in matrix.curated["wheels"]["toolkit_arch"]:
        assert matrix.cuda_toolkit(r["first_toolkit"]), r


def test_flash_attn_rows_are_consistent(matrix):
    fa = matrix.flash_attn()
    series = {r["series"] for r in matrix.curated["torch"]["release"]}
    seen = {}
    for r in fa["release"]:
        Version(r["version"])
        for t in r["torch"]:
            assert t in series, (r["version"], t)
            assert (r["version"], t) not in seen, ("two rows for", r["version"], t)
            seen[(r["version"], t)] = r
            tp = matrix.torch_python(t)["python"]
            # a wheel needs a torch wheel for the same Python to build against
            assert set(r["python"]) - {x["python"] for x in r["exclude"] if x["torch"] == t} <= set(tp), (r["version"], t)
        for major in r["cuda"]:
            assert matrix.cuda_major(int(major)), (r["version"], major)
        assert not r["torch"] or r["confidence"] in ("V", "S")
    # verl's flash-attn pin has its own row
    assert ("2.8.3", "2.8") in seen


def test_images_refer_to_recorded_rows(matrix):
    known_gap = set()
    for img in matrix.curated["images"]["image"]:
        for v in img["verl"]:
            assert matrix.verl(v), img["image"]
        for b in img["backend"]:
            assert b in ("vllm", "sglang")
            if img.get(b):
                assert matrix.meta(b, img[b]), (img["image"], b, img[b])
        assert matrix.meta("torch", img["torch"]), img["image"]
        if img["cuda"]:
            assert matrix.cuda_toolkit(img["cuda"]), img["image"]
        local = Version(img["torch"]).local
        if local:
            series = matrix.torch_series(img["torch"])
            if local not in series["variants"]:
                known_gap.add((series["series"], local))
    # verl's 0.7.0 Dockerfiles install torch 2.9.x from the cu129 index, which torch.toml (RELEASE.md) does not list
    assert known_gap == {("2.9", "cu129")}
    for v in matrix.verl_versions():
        row = matrix.verl(v)
        if row.get("image_cuda"):
            assert row["image_cuda"] in {i["cuda"] for i in matrix.images(v)}, v


def test_verl_rows_name_real_extras(matrix):
    for v in matrix.verl_versions():
        row = matrix.verl(v)
        lines = " ".join(matrix.meta("verl", v)["requires_dist"])
        for backend, extra in row["backend_extras"].items():
            if extra:
                assert 'extra == "%s"' % extra in lines.replace("'", '"').replace("extra ==\"", 'extra == "'), (v, extra)
            assert [r for r in matrix.requirements("verl", v, [extra]) if r.name == backend] or row.get("vllm_runtime")


def test_no_version_literal_in_check_code():
    """The packages and gpu checks take every version from the matrix (issue 3, item 4)."""
    import ast
    import re

    root = os.path.join(os.path.dirname(__file__), "..", "..", "preflight", "checks")
    pat = re.compile(r"(?<![\w%.])\d+\.\d+(\.\d+)?(?!\w)|\bcu1\d\d\b|\bR\d{3}\b|\bsm_\d{2,3}\b")
    for name in ("packages.py", "gpu.py"):
        with open(os.path.join(root, name)) as fh:
            tree = ast.parse(fh.read())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found = [(name, n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
                 and isinstance(n.value, str) and id(n) not in docs and pat.search(n.value)]
        assert not found, found


def test_matrix_show_blocks_fit_80_columns(matrix):
    import io

    from rich.console import Console

    from preflight.errors import UsageError
    from preflight.report.matrix import extra_pins, show

    buf = io.StringIO()
    assert show(matrix, None, Console(file=buf, width=80, color_system=None, highlight=False)) == 0
    text = buf.getvalue()
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert sum(1 for x in lines if x.startswith("verl 0.")) == len(matrix.verl_versions())  # one block each
    assert "[vllm] mbridge (any), torch==2.11.0, torchaudio==2.11.0," in text
    assert "verlai/verl:vllm012.latest" in text and "ray[default]>=2.41.0" in text
    pins = dict(extra_pins(matrix, "0.5.0"))
    assert pins["vllm"] == ["tensordict!=0.9.0,<=0.9.1,>=0.8.0", "vllm<=0.8.5,>=0.7.3"]
    assert pins["gpu"] == ["flash-attn (any)", "liger-kernel (any)"]
    with pytest.raises(UsageError, match="--verl 0.99: not a verl release"):
        show(matrix, "0.99", Console(file=io.StringIO()))
