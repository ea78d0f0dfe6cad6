"""``--backend none`` is one spelling in every command: resolve and bootstrap.sh accept it."""

import json
import re
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FACTS = ["--no-probe", "--cc", "9.0", "--driver", "580.65.06", "--python", "3.12"]


def _resolve(tmp_path, *args):
    out = str(tmp_path / ("r%d.json" % len(os.listdir(str(tmp_path)))))
    p = subprocess.run([sys.executable, "-m", "preflight", "resolve"] + FACTS + list(args) + ["--json", out],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    with open(out) as fh:
        return json.load(fh)["resolution"], p.stdout


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("spelling", [["--backend", "none"], ["--no-backend"]])
def test_resolve_backend_none(tmp_path, matrix, spelling):
    res, text = _resolve(tmp_path, *spelling)
    with_vllm, _ = _resolve(tmp_path)
    core = (matrix.verl(res["verl"]) or {}).get("core_extra")
    assert res["backend"] == "none" and res["backend_version"] is None
    assert res["requirements"][0] == ("verl[%s]==%s" % (core, res["verl"]) if core else "verl==%s" % res["verl"])
    torch = [r for r in with_vllm["requirements"] if r.startswith("torch==")]
    assert res["requirements"][1:2] == torch
    # the rest are the matrix's works-with bounds that hold for (verl, torch), nothing else
    bounded = {b["package"] for b in res["bounds"]}
    assert {re.split(r"[<>=!~]", r)[0] for r in res["requirements"][2:]} == bounded
    assert not any(r.split("==")[0].split("[")[0] in ("vllm", "sglang", "flash-attn") for r in res["requirements"])
    assert not any(c["choice"].startswith("vllm") for c in res["citations"])
    assert "no rollout engine" in text and "vllm" not in text.lower().split("install")[-1]


def _bootstrap(*args):
    return subprocess.run(["sh", os.path.join(ROOT, "bootstrap.sh")] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.mark.fault("WRONG")
def test_bootstrap_backend_none(pyz_file):
    p = _bootstrap("--pyz", pyz_file, "--backend", "none", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "install --backend none" in p.stderr
    bad = _bootstrap("--pyz", pyz_file, "--backend", "bogus", "--dry-run")
    assert bad.returncode == 2 and "choose vllm, sglang or none" in bad.stderr
