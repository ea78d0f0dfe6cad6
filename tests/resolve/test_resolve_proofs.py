"""Every stack resolve names is proven by pip's resolver, or says it is not (issue 24).

* The differential: for every (verl release, backend incl. none, Python, platform) the matrix
  knows, resolve's verdict against the recorded resolver answer (matrices/proofs.json): "works"
  only with a recorded proof of exactly its install line, "does not install" whenever pip refused
  that line, "unproven" otherwise.
* The live tests run pip's real ``--dry-run --report`` against PyPI (skipped, with the reason,
  when PyPI is unreachable): pins the index does not serve, Pythons without wheels.
* The audit's scenario kinds (shared/reference/matrix_audit.md, issue 24) and new members of each.
"""

import json
import os
import shlex
import socket
import subprocess
import sys

import pytest

from preflight import proofs
from preflight.resolve import resolve
from sweep import sample

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


def _index():
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        return json.load(fh)["proofs"]


# ---- the differential over the whole grid ---------------------------------------------------
def test_no_answer_says_works_without_a_proof(matrix):
    # an even sample of 5 releases (the grid is 616 cells, ~36 s on the loaded 2 cores);
    # PREFLIGHT_FULL_SWEEP=1 takes every release, as tools/proof_table.py does
    idx = _index()
    seen = {"works": 0, "unproven": 0, "does not install": 0, "no stack": 0}
    for arch in ("x86_64", "aarch64"):
        for v in sample(matrix.verl_versions(), 5):
            for b in sorted((matrix.verl(v) or {}).get("backend_extras") or {}) + ["none"]:
                for py in PYTHONS:
                    r = resolve(matrix, v, b, python=py, arch=arch, _options=False)
                    seen[r.verdict] += 1
                    if not r.requirements:
                        assert r.verdict == "no stack"
                        continue
                    pid = proofs.proof_id(r.requirements, r.python, r.extra_index_urls, arch)
                    row = idx.get(pid) or {}
                    label = (v, b, py, arch)
                    if r.verdict == "works":
                        # the recorded resolver answer is "proven" for exactly this line and target
                        assert row.get("status") == "proven", label
                        assert proofs.proof_requirements(r.requirements)[0] == row["requirements"], label
                        assert row["python"] == r.python and row.get("arch", "x86_64") == arch, label
                    if row.get("status") == "failed" and r.python == py and not proofs.markers_problem(row, py, arch):
                        assert r.verdict == "does not install" and not r.ok, label
                    if r.extra_index_urls:  # a +cuXYZ torch: the PyTorch index is not reachable here
                        assert r.verdict in ("unproven", "no stack"), label
                    if r.verdict == "unproven":
                        assert r.proof["status"] == "unproven" and r.proof.get("reason"), label
    assert seen["works"] >= 1 and seen["unproven"] >= 1


def test_every_recorded_failure_names_why(matrix):
    for pid, row in _index().items():
        if row["status"] == "failed":
            assert row.get("error"), pid
            for name in row.get("source_builds") or []:
                assert row["build_needs"][name], pid


def test_every_option_says_unproven_when_its_stack_is(matrix):
    # options are whole resolutions re-run with one input changed: re-run each from its command
    for args in [("0.5.0", "vllm", "V100", "535.183.01", "3.10"), ("0.9.1", "vllm", "H100", "550.54.15", "3.12"),
                 ("0.6.1", "vllm", "RTX 5090", "560.35.03", "3.12")]:
        r = resolve(matrix, args[0], args[1], args[3], None, args[2], args[4])
        assert r.options and len(r.options) == len(r.commands)
        for text, cmd in zip(r.options, r.commands):
            o = _from_command(matrix, cmd)
            if o.ok and o.verdict == "unproven":
                assert "unproven" in text, text
            if o.verdict == "works":
                assert "unproven" not in text, text


def _from_command(matrix, cmd):
    words = shlex.split(cmd)[2:]
    kw = {}
    for flag, val in zip(words[::2], words[1::2]):
        kw[{"--verl": "verl", "--backend": "backend", "--gpu": "gpu", "--cc": "cc", "--driver": "driver",
            "--python": "python", "--backend-build": "backend_build", "--arch": "arch"}[flag]] = val
    return resolve(matrix, kw.pop("verl"), _options=False, **kw)


# ---- the install line is the stack ----------------------------------------------------------
@pytest.mark.parametrize("verl,want", [("0.5.0", "transformers<5"), ("0.7.0", "transformers<5"),
                                       ("0.6.1", "transformers<5"), ("0.2", "tensordict<0.6"),
                                       ("0.1", "tensordict<0.6"), ("0.1", "transformers<4.48")])
def test_backend_none_carries_the_matrix_bounds(matrix, verl, want):
    # the audit: verl 0.5.0/0.7.0 --backend none let pip take transformers 5; 0.2 dropped tensordict<0.6
    r = resolve(matrix, verl, "none", python="3.10")
    assert r.backend == "none" and r.requirements[0].startswith("verl")
    assert any(line.replace(" ", "") == want or line.startswith(want.split("<")[0]) and want.split(
        want.split("<")[0])[1] in line for line in r.requirements), r.requirements
    bound_ids = {b["id"] for b in r.bounds}
    assert bound_ids and all(b["package"] in " ".join(r.requirements) for b in r.bounds), bound_ids


def test_spec_top_level_is_resolve_install_line(matrix):
    from preflight.outputs.spec import SpecOptions, top_level

    for verl, backend in (("0.5.0", "none"), ("0.7.0", "vllm"), ("0.2", "none")):
        r = resolve(matrix, verl, backend, python="3.10")
        reqs, extra, _ = top_level(matrix, r, SpecOptions(no_backend=backend == "none"))
        assert [x for x in reqs] == [x for x in r.requirements if not x.startswith("flash-attn==")]
        assert extra == r.extra_index_urls


def test_backend_none_works_where_the_backend_does_not(matrix):
    # the audit: verl 0.9.1 --backend none on an R550 driver said "none works", but verl's core pins
    # no torch and torch 2.11's cu126/cu128 builds run on R550 (minor-version compatibility)
    with_vllm = resolve(matrix, "0.9.1", "vllm", "550.54.15", None, "H100", "3.12")
    none = resolve(matrix, "0.9.1", "none", "550.54.15", None, "H100", "3.12")
    assert not with_vllm.ok and none.ok
    assert none.torch == "2.11.0" and none.variant in ("cu126", "cu128")
    # another member: V100 on R580 -- verl 0.9.1's vLLM stack has no V100 build; the core runs cu126
    v100 = resolve(matrix, "0.9.1", "none", "580.65.06", None, "V100", "3.12")
    assert v100.ok and v100.variant == "cu126" and v100.verdict == "unproven"  # +cu126 needs the PyTorch index


# ---- Blackwell on a driver older than R570 --------------------------------------------------
@pytest.mark.parametrize("gpu,driver", [("B200", "560.35.03"), ("RTX 5090", "550.54.15"), ("B300", "565.57.01")])
def test_blackwell_before_r570_is_no_stack(matrix, gpu, driver):
    for verl in ("0.6.1", "0.9.1"):
        for backend in ("vllm", "none"):
            r = resolve(matrix, verl, backend, driver, None, gpu, "3.12")
            assert not r.ok, (verl, backend, gpu)


# ---- aarch64 --------------------------------------------------------------------------------
@pytest.mark.parametrize("gpu", ["GB200", "GH200", "GB300"])
def test_grace_gpus_imply_aarch64(matrix, gpu):
    r = resolve(matrix, "0.7.0", "vllm", "580.65.06", None, gpu, "3.12")
    assert r.arch == "aarch64" and any("Arm host" in n for n in r.notes)
    # torch 2.9 from PyPI is the CPU build on aarch64 (its nvidia-* requirements are x86_64-only):
    # the CUDA build must come from download.pytorch.org, which is unproven here
    assert r.torch == "2.9.0" and "torch==2.9.0" not in r.requirements
    assert r.verdict in ("unproven", "no stack")
    fa = [x for x in r.requirements if x.startswith("flash-attn")]
    assert not fa or "linux_aarch64" in fa[0] or fa[0].startswith("flash-attn==")
    assert "x86_64" not in " ".join(r.requirements)


def test_aarch64_torch_pypi_build_from_the_matrix(matrix):
    for series in matrix.curated["torch"]["release"]:
        v = series["series"]
        if "pypi_aarch64" not in series:
            continue
        major, minor = (int(x) for x in v.split("."))
        assert series["pypi_aarch64"] == ("cpu" if (major, minor) <= (2, 10) else series["pypi"]), v


def test_aarch64_proofs_install_the_cuda_runtime_the_matrix_names(matrix):
    # pip's own aarch64 resolves (the target's markers given to it) are the truth for pypi_aarch64:
    # a CUDA build of torch pulls its CUDA runtime wheels for aarch64, the matrix's cuXYZ major
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        rows = [r for r in json.load(fh)["proofs"].values() if r.get("arch") == "aarch64" and r["status"] == "proven"]
    assert len(rows) >= 10
    for row in rows:
        with open(os.path.join(ROOT, row["file"])) as fh:
            wheels = {x["name"].lower().replace("_", "-"): x["wheel"] for x in json.load(fh)["install"]}
        torch = [x.split("==")[1] for x in row["installed"] if x.startswith("torch==")][0]
        build = matrix.torch_series(torch)["pypi_aarch64"]
        assert "aarch64" in wheels["torch"] and not any("x86_64" in w for w in wheels.values()), row["file"]
        nccl = [n for n in wheels if n.startswith("nvidia-nccl-")]
        assert nccl == (["nvidia-nccl-cu%s" % build[2:4]] if build.startswith("cu") else []), (torch, build, nccl)


def test_flash_attn_is_x86_64_unless_a_row_says_aarch64(matrix):
    r = resolve(matrix, "0.6.0", "vllm", "580.65.06", None, "GH200", "3.12")
    assert r.arch == "aarch64"
    fa = r.flash_attn or {}
    if fa.get("status") == "wheel":
        assert "aarch64" in fa["url"]


def test_arch_flag_overrides_and_is_checked(matrix):
    from preflight.resolve import ResolveError

    assert resolve(matrix, "0.9.1", "vllm", python="3.12", arch="aarch64").arch == "aarch64"
    with pytest.raises(ResolveError, match="--arch"):
        resolve(matrix, "0.9.1", arch="ppc64le")


# ---- every format says unproven -------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["json", "markdown", "console"])
def test_unproven_in_every_format(tmp_path, fmt):
    out = str(tmp_path / "out")
    args = ["--no-probe", "--verl", "0.6.0", "--gpu", "B200", "--driver", "570.133.20", "--python", "3.12"]
    p = subprocess.run([sys.executable, "-m", "preflight", "resolve"] + args + (
        ["--format", fmt, "--output", out] if fmt != "console" else []), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    text = p.stdout if fmt == "console" else open(out).read()
    assert "unproven" in text and "A stack works" not in text


#: Cells whose proof pip reached with the target's markers given to it (no native interpreter):
#: aarch64, CPython 3.8 (pip 26 does not run there) and 3.14; and one that needs the PyTorch index.
GIVEN_CELLS = [(("--verl", "0.9.1", "--python", "3.12", "--arch", "aarch64"), "works"),
               (("--verl", "0.2", "--backend", "none", "--python", "3.8"), "does not install"),
               (("--verl", "0.9.0", "--backend", "none", "--python", "3.14"), "does not install"),
               (("--verl", "0.6.0", "--python", "3.12", "--arch", "aarch64"), "unproven")]


@pytest.mark.parametrize("args,verdict", GIVEN_CELLS)
def test_py38_py314_and_aarch64_say_the_same_in_every_format(matrix, tmp_path, args, verdict):
    kw = dict(zip([a.lstrip("-") for a in args[2::2]], args[3::2]))
    r = resolve(matrix, args[1], kw.pop("backend", "vllm"), _options=False, **kw)
    assert r.verdict == verdict, r.proof
    if verdict != "unproven":  # pip's verdict, reached with the target's own marker environment
        assert r.proof["markers"].split()[:3] == ["cpython", r.proof["markers"].split()[1], r.arch]
        assert r.proof["markers"].split()[1].startswith(r.python + ".") and "given to pip" in r.proof["markers"]
    status = {"works": "pass", "unproven": "warn", "does not install": "fail"}[verdict]
    for fmt in ("json", "prometheus"):
        out = str(tmp_path / fmt)
        p = subprocess.run([sys.executable, "-m", "preflight", "resolve", "--no-probe", "--format", fmt, "--output", out]
                           + list(args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300)
        assert p.returncode == (0 if verdict == "works" else 1) or verdict == "unproven", p.stderr
        text = open(out).read()
        if fmt == "json":
            doc = json.loads(text)
            assert doc["resolution"]["verdict"] == verdict and doc["resolution"]["arch"] == r.arch
            assert [x["status"] for x in doc["results"] if x["id"] == "resolve.proof"] == [status]
        else:
            assert 'check="resolve.proof",status="%s"} 1' % status in text
        if verdict == "does not install":  # a refused line comes with a way out: here another Python
            assert doc["resolution"]["commands"], doc["resolution"]["options"]
        for o in (doc["resolution"].get("commands") or []):  # every option offered is itself proven or says not
            assert _from_command(matrix, o).verdict == "works", o


# ---- live: pip's real resolver against PyPI --------------------------------------------------
def _pypi():
    try:
        socket.create_connection(("pypi.org", 443), 5).close()
        return None
    except OSError as exc:
        return "PyPI unreachable from this machine (%s)" % exc


def _pip():
    """An interpreter with pip >= 22.2: the lock-tools venv's pip 26 first (it skips the wheel
    download in a dry run once it has the metadata; pip 23.2 still downloads every wheel), else
    this one's."""
    import glob

    for py in sorted(glob.glob(os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "test-envs",
                                            "lock-tools-*", "bin", "python"))) + [sys.executable]:
        try:
            out = subprocess.run([py, "-m", "pip", "--version"], stdout=subprocess.PIPE, universal_newlines=True,
                                 timeout=60).stdout.split()
        except OSError:
            continue
        if len(out) > 1 and tuple(int(x) for x in out[1].split(".")[:2]) >= (22, 2):
            return py
    return None


live = pytest.mark.skipif(_pypi() is not None, reason=str(_pypi()))


@live
@pytest.mark.parametrize("reqs,python,arch,name", [
    (["sgl-kernel==0.0.5"], "3.10", "x86_64", "sgl-kernel"),   # SGLang 0.4.4's pin: the index does not serve it
    (["xgrammar==0.1.15"], "3.10", "x86_64", "xgrammar"),
    (["numpy<2"], "3.13", "x86_64", "numpy"),                  # numpy 1.x has no cp313 wheel
    (["ray>=2.41"], "3.8", "x86_64", "ray"),                   # ray 2.41 dropped cp38
])
def test_live_pip_refuses_what_the_index_does_not_serve(reqs, python, arch, name):
    p = proofs.prove_live(reqs, python, arch, timeout=240, pip_python=_pip())
    if p["status"] == "unproven":
        pytest.skip(p["reason"])
    assert p["status"] == "failed" and name in " ".join(p["no_wheel"]) + p["error"], p


@live
@pytest.mark.skipif(not os.environ.get("PREFLIGHT_LIVE_STACKS"),
                    reason="a whole stack's live proof takes ~30 s with a warm proof-index cache, minutes cold: "
                           "set PREFLIGHT_LIVE_STACKS=1")
def test_live_proof_agrees_with_the_recorded_one():
    idx = _index()
    small = sorted((row for row in idx.values() if row["status"] == "proven" and not row.get("source_builds")),
                   key=lambda r: len(r["installed"]))
    assert small
    row = small[0]
    p = proofs.prove_live(row["requirements"], row["python"], row.get("arch", "x86_64"), timeout=400,
                          pip_python=_pip())
    if p["status"] == "unproven":
        pytest.skip(p["reason"])
    assert p["status"] == "proven", p.get("error")
    recorded = dict(x.split("==", 1) for x in row["installed"])
    for line in row["requirements"]:  # every exact pin resolves to the recorded version today
        if "==" in line:
            name = line.split("==")[0].split("[")[0].lower().replace("_", "-")
            have = {k.replace("_", "-"): v for k, v in p["installed"].items()}
            assert have[name] == recorded.get(name, recorded.get(name.replace("-", "_"))), line


@live
@pytest.mark.skipif(not os.environ.get("PREFLIGHT_LIVE_STACKS"),
                    reason="two live proofs, one building pyairports' sdist natively (~50 s): set PREFLIGHT_LIVE_STACKS=1")
def test_live_sdist_only_dependency_is_named_with_what_building_needs():
    # outlines 0.0.4x (vLLM 0.6.x's pin) depends on pyairports, which PyPI serves as an sdist only: a
    # pure-Python one, so pip's resolver, run natively (the lock-tools CPython 3.11) with --no-binary
    # pyairports, proves the set; for a Python this machine has no interpreter with pip 26 of, unproven
    from preflight.sdist_purity import PURE_BUILD_NEEDS

    pip = _pip()
    p = proofs.prove_live(["outlines==0.0.46"], "3.11", timeout=240, pip_python=pip)
    if p["status"] == "unproven" and "native" not in p.get("reason", ""):
        pytest.skip(p["reason"])
    if proofs.native_interpreter(pip, "3.11", "x86_64")[0] is None:
        assert p["status"] == "unproven" and "pyairports" in p["reason"], p
        return
    assert p["status"] == "proven" and p["source_builds"] == ["pyairports"], p
    assert p["build_needs"]["pyairports"] == PURE_BUILD_NEEDS and p["installed"]["pyairports"] == "0.0.1"
    assert p["binary_only"]["no_wheel"] == ["pyairports"] and "--no-binary" in p["command"]
    q = proofs.prove_live(["outlines==0.0.46"], "3.10", timeout=240, pip_python=pip)  # pip runs under 3.11
    assert q["status"] == "unproven" and "pure Python" in q["reason"] and "pyairports" in q["reason"], q


def test_unreachable_index_is_one_line_unproven():
    p = proofs.prove_live(["verl==0.9.1"], "3.12", index_url="https://127.0.0.1:9/simple", timeout=5)
    assert p["status"] == "unproven" and "unreachable" in p["reason"] and "\n" not in p["reason"]


def test_a_torch_index_line_is_unproven_not_run():
    p = proofs.prove_live(["torch==2.9.0+cu128"], "3.12", extra_index_urls=["https://download.pytorch.org/whl/cu128"])
    assert p["status"] == "unproven" and "PyTorch index" in p["reason"]


# ---- the audit's kinds A and C on the vLLM stacks -------------------------------------------
@pytest.mark.parametrize("verl,gpu,driver,py", [("0.5.0", "H100", "535.183.01", "3.10"),   # s16
                                                ("0.4.1", "H100", "535.183.01", None),     # s19
                                                ("0.6.1", "RTX 5090", "570.133.07", "3.12"),  # s23
                                                ("0.2.0.post2", "A100", "535.183.01", None),  # s28
                                                ("0.3.0.post1", "L4", "550.54.15", "3.11")])  # new member
def test_old_vllm_stacks_cap_transformers_below_5(matrix, verl, gpu, driver, py):
    r = resolve(matrix, verl, "vllm", driver, None, gpu, py)
    line = [x for x in r.requirements if x.startswith("transformers")]
    assert line and "<5" in line[0] or "<4.48" in line[0], r.requirements


@pytest.mark.parametrize("verl,py", [("0.8.0", "3.13"), ("0.6.1", "3.13"), ("0.3.0.post1", "3.13"), ("0.4.0", "3.8")])
def test_a_python_without_wheels_comes_out_of_the_proof(matrix, verl, py):
    # numpy<2 has no cp313 wheel, ray>=2.41 no cp38 wheel: pip's recorded answer, not a hand rule
    row = {}
    r = resolve(matrix, verl, "vllm", python=py)
    pid = proofs.proof_id(r.requirements, py, r.extra_index_urls, "x86_64") if r.python == py else None
    row = _index().get(pid or "") or {}
    if row.get("status") != "failed":
        pytest.skip("the %s/py%s proof is not recorded yet (tools/record_proofs.py)" % (verl, py))
    if proofs.markers_problem(row, py, "x86_64"):  # pip ran under another CPython: its refusal proves nothing
        assert r.verdict == "unproven" and "environment markers" in r.proof["reason"]
        return
    assert r.verdict == "does not install" and not r.ok
    assert any(w in row["error"] for w in ("numpy", "ray"))
    # the nearest options never offer the same release and backend on the same Python again; an
    # option on that Python (another release or backend) is marked unproven unless it is proven
    for text, cmd in zip(r.options, r.commands):
        if "--python %s" % py in cmd:
            assert "--verl %s " % verl not in cmd + " " or "--backend" in cmd, cmd
            assert "unproven" in text or _from_command(matrix, cmd).verdict == "works", text
