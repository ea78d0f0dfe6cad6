"""The resolver on the real matrix: scenarios with their expected verdicts, and the command."""

import json
import os
import subprocess
import sys

import pytest

from envs import find_python
from preflight.resolve import ResolveError, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def opt(res, prefix):
    """The options of ``res`` starting with ``prefix``."""
    return [o for o in res.options if o.startswith(prefix)]


def cited(res, row_prefix):
    return [c for c in res.citations if c["row"].startswith(row_prefix)]


# ---- scenarios --------------------------------------------------------------------------------
def test_h200_driver_580_verl_091(matrix):
    r = resolve(matrix, "0.9.1", gpu="NVIDIA H200", driver="580.65.06")
    assert r.ok and not r.problems
    assert (r.python, r.torch, r.variant, r.cuda, r.backend, r.vllm) == ("3.12", "2.11.0", "cu130", "13.0", "vllm", "0.24.0")
    assert r.torch_from_pypi and r.extra_index_urls == [] and r.index_url == "https://download.pytorch.org/whl/cu130"
    assert (r.torchvision, r.torchaudio, r.transformers) == ("0.26.0", "2.11.0", "==5.9.0")
    assert r.tensordict == "<=0.10.0,>=0.8.0,!=0.9.0" and r.ray == ">=2.41.0"
    assert r.requirements[:6] == ["verl[vllm]==0.9.1", "torch==2.11.0", "torchvision==0.26.0", "torchaudio==2.11.0",
                                  "vllm==0.24.0", "transformers==5.9.0"]
    # flash-attn: verl pins 2.8.3; no recorded prebuilt wheel for torch 2.11 + CUDA 13
    assert r.flash_attn["version"] == "2.8.3" and r.flash_attn["status"] == "source build"
    assert r.requirements[-1] == "flash-attn==2.8.3"
    assert cited(r, "metadata/vllm.json vllm==0.24.0 requires torch==2.11.0")
    assert cited(r, "metadata/verl.json verl==0.9.1 [vllm] requires vllm==0.24.0")
    assert cited(r, "cuda.toml toolkit 13.0")[0]["value"] == ">= 580.65.06"
    # the vLLM CUDA 13 build row is secondary, and the verdict says so
    assert r.confidence == "S" and any("secondary (S) rows: vllm.toml build >=0.20.0" in w for w in r.warnings)
    assert r.min_driver == "580.65.06"


def test_h100_driver_535_verl_091_needs_r580(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="535.183.01")
    assert not r.ok
    assert r.problems == ["driver 535.183.01 is too old for torch 2.11.0 cu130: CUDA 13.0 needs driver >= 580.65.06"]
    assert opt(r, "upgrade the NVIDIA driver to >= 580.65.06 (R580 branch or newer)")
    # the cu129 vLLM build is offered, flagged as secondary
    assert opt(r, "use vLLM 0.24.0's cu129 build (https://wheels.vllm.ai/0.24.0/cu129")
    # an older verl whose stack runs on this CUDA 12 driver, re-checked
    older = opt(r, "use verl ")
    assert older
    alt = older[0].split()[2].rstrip(":")
    again = resolve(matrix, alt, gpu="H100", driver="535.183.01")
    assert again.ok and again.cuda.startswith("12.") and again.backend_cuda.startswith("12.")


def test_v100_verl_091_no_kernels(matrix):
    r = resolve(matrix, "0.9.1", gpu="Tesla V100-SXM2-32GB", driver="580.65.06")
    assert not r.ok and r.cc == "7.0"
    assert "torch 2.11.0 cu130 has no kernels for compute capability 7.0 (built for 7.5, 8.0, 8.6, 9.0, 10.0, 12.0)" \
        in r.problems
    assert any(p.startswith("vLLM 0.24.0 supports compute capability >= 7.5; this GPU is 7.0") for p in r.problems)
    assert any("dropped compute capability 7.0" in p for p in r.problems)
    assert not opt(r, "upgrade the NVIDIA driver")  # no driver fixes an arch gap
    assert not opt(r, "use vLLM 0.24.0's cu129 build")  # vLLM 0.24's floor is 7.5 on every build


def test_rtx5090_verl_041_torch_26_has_no_blackwell_kernels(matrix):
    r = resolve(matrix, "0.4.1", gpu="NVIDIA GeForce RTX 5090", driver="575.57.08")
    assert not r.ok and r.torch == "2.6.0" and r.cc == "12.0"
    assert any(p.startswith("no CUDA variant of torch 2.6.0 has kernels for compute capability 12.0") for p in r.problems)
    assert any("built with CUDA 12.4, which has no kernels for compute capability 12.0 (first toolkit: CUDA 12.8)" in p
               for p in r.problems)
    assert r.confidence == "U"  # the vLLM 0.8 CUDA 12.4 row is unverified
    newer = opt(r, "use verl 0.6.0: vLLM 0.9.1 with torch 2.7.0 (cu128)")
    assert newer


def test_rtx5090_verl_060_takes_the_cu128_index(matrix):
    r = resolve(matrix, "0.6.0", gpu="RTX 5090", driver="575.57.08")
    assert r.ok and (r.torch, r.variant, r.vllm) == ("2.7.0", "cu128", "0.9.1")
    assert not r.torch_from_pypi  # torch 2.7's PyPI wheel is cu126, without Blackwell
    assert "torch==2.7.0+cu128" in r.requirements and "torchvision==0.22.0+cu128" in r.requirements
    assert r.extra_index_urls == ["https://download.pytorch.org/whl/cu128"]
    assert r.flash_attn["wheel"] == "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"


def test_python_313_verl_091_use_312(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="580.82.07", python="3.13")
    assert not r.ok and r.python_requested == "3.13" and r.python == "3.12"
    assert r.problems == ["Python 3.13 does not fit: verl 0.9.1 needs Python <3.13,>=3.10; Python 3.10, 3.11, 3.12 do"]
    assert opt(r, "use Python 3.12")
    assert r.requirements[:2] == ["verl[vllm]==0.9.1", "torch==2.11.0"]  # the stack 3.12 gets


@pytest.mark.parametrize("verl,need", [("0.9.1", "580.65.06"), ("0.9.0", "580.65.06"), ("0.8.0", "575.51.03"),
                                       ("0.7.0", "575.51.03"), ("0.6.1", "570.26")])
def test_driver_470_with_current_verl_upgrade_the_driver(matrix, verl, need):
    r = resolve(matrix, verl, gpu="A100", driver="470.256.02")
    assert not r.ok
    assert any(p.startswith("driver 470.256.02 is too old") for p in r.problems)
    assert opt(r, "upgrade the NVIDIA driver to >= %s" % need)
    assert not opt(r, "use verl ")  # no release's PyPI stack runs on R470


def test_a100_driver_550_verl_070_minor_version_compat(matrix):
    r = resolve(matrix, "0.7.0", gpu="A100", driver="550.54.15")
    assert r.ok
    # vLLM 0.12.0 is in verl 0.7.0's range but fails its rollout import (verl#5087): the newest other one
    assert (r.python, r.torch, r.variant, r.vllm, r.backend_cuda) == ("3.12", "2.9.0", "cu128", "0.11.2", "12.9")
    assert any(n.startswith("vLLM 0.12.0 is in verl 0.7.0's range but known-bad") and "verl#5087" in n for n in r.notes)
    assert any(w.startswith("driver 550.54.15 runs CUDA 12.9 only through minor-version compatibility (>= 525.60.13)")
               for w in r.warnings)
    assert (r.min_driver, r.min_driver_compat) == ("575.51.03", "525.60.13")
    assert opt(r, "upgrade the NVIDIA driver to >= 575.51.03")
    assert r.flash_attn["url"] == ("https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
                                   "flash_attn-2.8.3+cu12torch2.9cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    assert [i["image"] for i in r.images] == ["verlai/verl:vllm012.latest"] and r.images[0]["driver"] == "compat"


def test_driver_560_verl_070_prefers_the_variant_it_runs_natively(matrix):
    r = resolve(matrix, "0.7.0", gpu="A100", driver="560.35.03")
    assert r.ok and r.variant == "cu126" and "torch==2.9.0+cu126" in r.requirements
    assert r.extra_index_urls == ["https://download.pytorch.org/whl/cu126"]


def test_l4_driver_570_verl_061(matrix):
    r = resolve(matrix, "0.6.1", gpu="NVIDIA L4", driver="570.133.20")
    assert r.ok and not any("minor-version" in w for w in r.warnings)
    assert (r.python, r.torch, r.variant, r.vllm) == ("3.12", "2.8.0", "cu128", "0.11.0")
    assert r.flash_attn["wheel"] == "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    # vLLM 0.11.0 and verl 0.6.1 give transformers only a lower bound; transformers 5 breaks vLLM <= 0.11.0
    # (audit kind A, s23: runpod-workers/worker-vllm#258; vLLM 0.11.1's own metadata adds <5)
    assert "transformers>=4.55.2,<5" in r.requirements
    assert {b["id"] for b in r.bounds} == {"transformers-5-old-vllm", "transformers-5-verl-0.7.0"}


def test_sglang_verl_091_transformers_pins_conflict(matrix):
    # verl[sglang]==0.9.1 pins transformers==5.9.0 (and excludes 5.6.0); sglang 0.5.12 pins 5.6.0:
    # pip answers ResolutionImpossible for this extra
    r = resolve(matrix, "0.9.1", backend="sglang", gpu="H100", driver="580.65.06")
    assert not r.ok and r.sglang == "0.5.12"
    assert r.problems == ["verl 0.9.1 requires transformers==5.9.0 but SGLang 0.5.12 requires transformers==5.6.0"]
    assert opt(r, "use --backend vllm: vLLM 0.24.0 with torch 2.11.0 (cu130)")


def test_sglang_verl_070_on_r535(matrix):
    r = resolve(matrix, "0.7.0", backend="sglang", gpu="A100", driver="535.104.05")
    assert r.ok and (r.sglang, r.torch, r.variant) == ("0.5.6", "2.9.1", "cu128")
    assert "sglang[openai,srt]==0.5.6" in r.requirements and "transformers==4.57.1" in r.requirements
    assert any("CUDA 12.8 only through minor-version compatibility" in w for w in r.warnings)
    assert r.confidence == "U"  # SGLang's kernel CUDA before 0.5.11 is not documented


def test_sglang_verl_041(matrix):
    r = resolve(matrix, "0.4.1", backend="sglang", gpu="H100", driver="550.54.15")
    assert (r.sglang, r.torch, r.variant, r.python) == ("0.4.6.post5", "2.6.0", "cu124", "3.10")
    # pip's recorded resolve refuses the line: flashinfer_python==0.2.5 (sglang[srt]'s pin) is an sdist only
    assert r.verdict == "does not install" and any("flashinfer_python==0.2.5" in p for p in r.problems)
    assert r.flash_attn["wheel"] == "flash_attn-2.8.3+cu12torch2.6cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"


def test_verl_02_has_no_sglang(matrix):
    r = resolve(matrix, "0.2", backend="sglang", gpu="A100", driver="550.54.15")
    assert not r.ok and r.problems == ["verl 0.2 has no sglang rollout (its backends: vllm)"]
    # the nearest release with an SGLang stack that installs: 0.3.0.post0's SGLang 0.4.4 pins sgl-kernel==0.0.5,
    # which the index does not serve (pip's recorded refusal), so it is not offered
    assert [o for o in opt(r, "use verl ") if ": SGLang " in o] and opt(r, "use --backend vllm")
    assert not opt(r, "use verl 0.3.0.post0: SGLang 0.4.4")


def test_python_39_verl_050(matrix):
    r = resolve(matrix, "0.5.0", python="3.9", gpu="A100", driver="550.54.15")
    assert not r.ok and r.python == "3.10"
    assert r.problems == ["Python 3.9 does not fit: verl 0.5.0 needs Python >=3.10; Python 3.10, 3.11, 3.12 do"]
    assert opt(r, "use Python 3.10")
    assert opt(r, "use verl 0.4.1: vLLM 0.8.5 with torch 2.6.0 (cu124), Python 3.9")


def test_verl_090_newest_vllm_whose_transformers_range_meets_verls(matrix):
    r = resolve(matrix, "0.9.0", gpu="H100", driver="580.65.06")
    # vllm>=0.18.0 admits 0.33.0, but 0.32.0/0.33.0 need transformers>=5.16.1 and verl 0.9.0 <5.11
    assert r.ok and (r.vllm, r.torch) == ("0.31.0", "2.13.0")
    assert any(n.startswith("vLLM 0.31.0 is the newest release in range that fits") and "0.33.0, 0.32.0" in n
               for n in r.notes)


def test_t4_runs_without_flash_attn(matrix):
    r = resolve(matrix, "0.9.1", gpu="Tesla T4", driver="580.95.05")
    assert r.ok and r.flash_attn["status"] == "unsupported"
    assert not any(x.startswith("flash-attn") for x in r.requirements)
    assert any(w.startswith("FlashAttention 2 needs compute capability >= 8.0; this GPU is 7.5") for w in r.warnings)


def test_b200_driver_570_verl_091(matrix):
    r = resolve(matrix, "0.9.1", gpu="B200", driver="570.172.08")
    assert not r.ok and opt(r, "upgrade the NVIDIA driver to >= 580.65.06")
    assert opt(r, "use verl 0.9.0: vLLM 0.19.1 with torch 2.10.0 (cu128)")


def test_verl_050_h100_driver_550_rests_on_unverified_row(matrix):
    r = resolve(matrix, "0.5.0", gpu="H100", driver="550.54.15")
    assert r.ok and (r.vllm, r.torch, r.variant, r.python) == ("0.8.5", "2.6.0", "cu124", "3.10")
    assert r.flash_attn["wheel"] == "flash_attn-2.8.3+cu12torch2.6cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"
    assert r.confidence == "U" and any(w.startswith("this verdict rests on unverified (U) rows") for w in r.warnings)


def test_verl_030post1_avoids_vllm_07(matrix):
    r = resolve(matrix, "0.3.0.post1", gpu="A100", driver="550.54.15")
    # not 0.7.x (verl's docs), and not 0.8.0-0.8.2 either: they pin xgrammar==0.1.16, gone from PyPI
    assert r.ok and r.vllm == "0.6.3"
    assert any("vllm-0.8.0-0.8.2-xgrammar-gone" in n for n in r.notes)
    r01 = resolve(matrix, "0.1", gpu="A100", driver="550.54.15")
    assert r01.ok and (r01.vllm, r01.torch, r01.variant) == ("0.6.3", "2.4.0", "cu121")  # the runtime gate's newest


def test_unknown_machine_is_not_checked_but_says_what_it_needs(matrix):
    r = resolve(matrix, "0.9.1")
    assert r.ok and r.driver is None and r.cc is None
    assert r.notes[:2] == ["GPU not given: compute capability coverage was not checked",
                           "driver not given: this stack needs >= 580.65.06 (>= 580.65.06 through minor-version "
                           "compatibility)"]


def test_prefer_python_is_a_preference(matrix):
    assert resolve(matrix, "0.9.1", prefer_python="3.11").python == "3.11"
    r = resolve(matrix, "0.9.1", prefer_python="3.14")
    assert r.ok and r.python == "3.12"


@pytest.mark.parametrize("kw,words", [
    ({"verl": "0.99"}, "--verl 0.99: not a verl release in the matrix"),
    ({"verl": "0.9.1", "driver": "abc"}, "--driver abc: not a full NVIDIA driver version"),
    ({"verl": "0.9.1", "driver": "580"}, "--driver 580: not a full NVIDIA driver version"),
    ({"verl": "0.9.1", "gpu": "Mystery GPU"}, "--gpu Mystery GPU: unknown GPU name"),
    ({"verl": "0.9.1", "cc": "nine"}, "--cc nine: not a compute capability"),
    ({"verl": "0.9.1", "cc": "99.9"}, "--cc 99.9: no NVIDIA GPU has compute capability 99.9"),
    ({"verl": "0.9.1", "cc": "sm_85"}, "--cc sm_85: no NVIDIA GPU has compute capability 8.5"),
    ({"verl": "0.9.1", "python": "2.7"}, "--python 2.7: Python 2 runs no verl release"),
    ({"verl": "0.9.1", "python": "three"}, "--python three: not a CPython version"),
    ({"verl": "0.9.1", "gpu": "H100", "cc": "8.0"}, "--gpu H100 has compute capability 9.0 but --cc 8.0"),
])
def test_bad_input_raises_one_line(matrix, kw, words):
    with pytest.raises(ResolveError) as ei:
        resolve(matrix, **kw)
    assert words in str(ei.value) and "\n" not in str(ei.value)


def test_every_release_and_backend_resolves_without_error(matrix):
    """Every (verl release, backend) on a current machine: a verdict, never an exception, and an ok
    verdict always has pins the matrix records."""
    for v in matrix.verl_versions():
        for backend in sorted(matrix.verl(v)["backend_extras"]):
            r = resolve(matrix, v, backend=backend, gpu="H100", driver="580.95.05")
            assert r.ok or r.problems, (v, backend)
            if r.ok:
                assert matrix.meta("torch", r.torch) and matrix.meta(backend, r.backend_version), (v, backend)
                assert r.variant in matrix.torch_series(r.torch)["variants"]
                assert r.citations and all(c["confidence"] in ("V", "S", "U") for c in r.citations)


# ---- the command ------------------------------------------------------------------------------
def run_cli(*args, python=sys.executable):
    env = dict(os.environ, COLUMNS="80", NO_COLOR="1")
    return subprocess.run([python, "-m", "preflight", "resolve", "--no-probe"] + list(args), cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, env=env)


def test_command_report_fits_80_columns_and_exits_1_when_no_stack(tmp_path):
    out = tmp_path / "r.json"
    p = run_cli("--verl", "0.9.1", "--gpu", "H100", "--driver", "535.183.01", "--python", "3.12", "--json", str(out))
    assert p.returncode == 1, p.stderr
    assert "No stack works" in p.stdout and "upgrade the NVIDIA driver to >= 580.65.06" in p.stdout.replace("\n", " ")
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    doc = json.loads(out.read_text())
    assert doc["resolution"]["ok"] is False and doc["resolution"]["min_driver"] == "580.65.06"


def test_command_ok_prints_choices_with_citations_and_install_lines():
    p = run_cli("--verl", "0.6.1", "--gpu", "L4", "--driver", "570.133.20", "--python", "3.12")
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "A stack works" in text and "2.8.0 cu128 (CUDA 12.8), the plain PyPI wheel" in text
    assert "torch: metadata/vllm.json vllm==0.11.0 requires torch==2.8.0" in text
    assert "vllm==0.11.0 \\" in text and "pip install \\" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_command_json_stdout():
    p = run_cli("--verl", "0.9.1", "--cc", "9.0", "--driver", "580.65.06", "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["resolution"]["vllm"] == "0.24.0" and doc["resolution"]["variant"] == "cu130"


@pytest.mark.parametrize("args,words", [
    (["--verl", "0.99"], "--verl 0.99: not a verl release"),
    (["--verl", "0.9.1", "--driver", "abc"], "--driver abc: not a full NVIDIA driver version"),
    (["--verl", "0.9.1", "--gpu", "Foo"], "--gpu Foo: unknown GPU name"),
    (["--verl", "0.9.1", "--cc", "9.0", "--json", "/no/such/dir/r.json"], "--json /no/such/dir/r.json: directory /no/such/dir does not exist"),
])
def test_command_bad_input_exit_2(args, words):
    p = run_cli(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0] and "Traceback" not in p.stderr


def test_zipapp_resolves_on_the_oldest_python(pyz):
    try:
        py = find_python("3.8")
    except LookupError:
        py = sys.executable
    p = subprocess.run([py, "-I", "-S", pyz, "resolve", "--no-probe", "--verl", "0.7.0", "--gpu", "A100", "--driver",
                        "550.54.15", "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["resolution"]["vllm"] == "0.11.2"  # 0.12.0 is known-bad with verl 0.7.0


def test_every_gpu_row_and_torch_build_names_a_shipped_compute_capability(matrix):
    """The table --cc is checked against holds the compute capability of every GPU row
    (gpus.toml) and every architecture a torch build targets (torch.toml variants' arch lists)."""
    known = set(matrix.compute_capabilities())
    rows = {str(r["cc"]) for r in matrix.curated["gpus"]["gpu"]}
    built = {str(a) for v in matrix.curated["torch"]["variants"].values() for a in v.get("arch", [])}
    assert rows and rows <= known, rows - known
    assert built <= known, built - known
