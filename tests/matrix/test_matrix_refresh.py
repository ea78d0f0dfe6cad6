"""``preflight matrix refresh``, offline: pip's answers recorded from the real index
(tests/data/refresh, see its README) are replayed by a stand-in for ``python -m pip``, so the
subprocess calls, the report parsing and the JSON regeneration all run as they do for real."""

import json
import os
import shutil
import stat
import sys

import pytest

from preflight import matrix as matrix_mod
from preflight.cli import main as cli_main
from preflight.matrix.refresh import (RefreshError, fetch_metadata, list_versions, parse_report, refresh,
                                      select_versions)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "refresh")
MATRICES = os.path.join(ROOT, "matrices")


@pytest.fixture
def fake_python(tmp_path):
    """An executable that behaves like ``python -m pip`` on the recorded index; its argv log."""
    log = tmp_path / "pip.log"
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\nFAKEPIP_LOG=%s exec %s %s \"$@\"\n" % (log, sys.executable,
                                                                     os.path.join(DATA, "fakepip.py")))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe), log


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_list_versions_reads_pip_index(fake_python):
    exe, log = fake_python
    got = list_versions("torch", python=exe)
    assert got[0] == "2.15.0" and "2.13.0+cpu" in got and "2.1.0" in got
    assert _calls(log)[0][-3:] == ["index", "versions", "torch"]
    # local builds (a find-links directory's +cpu wheel) and releases outside the range are not releases
    assert select_versions(got, ">=2.13.0,<2.15") == ["2.13.0", "2.14.0", "2.14.1"]
    assert select_versions(list_versions("verl", python=exe), ">=0.1")[:3] == ["0.1", "0.2", "0.2.0.post1"]


def test_fetch_metadata_reads_the_release_not_a_local_build(fake_python):
    exe, log = fake_python
    row = fetch_metadata("torch", "2.13.0", python=exe)
    assert "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; " \
           "platform_system == \"Linux\"" in row["requires_dist"]
    assert "nvidia-nccl-cu13==2.29.7; platform_system == \"Linux\"" in row["requires_dist"]
    assert row["requires_python"] == ">=3.10"
    argv = _calls(log)[-1]
    for flag in ("--dry-run", "--no-deps", "--ignore-installed", "--report"):
        assert flag in argv
    assert argv[-1] == "torch===2.13.0"


def test_double_equals_report_is_the_local_build_and_is_rejected():
    # what pip answers for torch==2.13.0 on the recording machine: the +cpu build from find-links
    with open(os.path.join(DATA, "report-torch-2.13.0-double-equals.json")) as fh:
        data = json.load(fh)
    assert data["install"][0]["metadata"]["version"] == "2.13.0+cpu"
    with pytest.raises(RefreshError, match=r"2\.13\.0\+cpu"):
        parse_report(data, "torch", "2.13.0")
    with pytest.raises(RefreshError, match="nothing to install"):
        parse_report({"install": []}, "torch", "2.13.0")


def test_fetch_unknown_release_is_a_refresh_error(fake_python):
    exe, _ = fake_python
    with pytest.raises(RefreshError, match="No matching distribution found for verl===0.99"):
        fetch_metadata("verl", "0.99", python=exe)
    with pytest.raises(RefreshError, match="could not list versions of nosuchpkg"):
        list_versions("nosuchpkg", python=exe)


def _tree(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def test_refresh_regenerates_metadata_keeps_curated_and_prints_a_diff(tmp_path, fake_python):
    exe, _ = fake_python
    d = tmp_path / "matrices"
    shutil.copytree(MATRICES, str(d))
    verl_path, torch_path = d / "metadata" / "verl.json", d / "metadata" / "torch.json"
    real_verl = json.loads(verl_path.read_text())["releases"]
    real_torch = json.loads(torch_path.read_text())["releases"]
    # an older matrix: no 0.9.1 yet, a stale 0.9.0 row, and torch 2.13.0 read from the local +cpu build
    verl = json.loads(verl_path.read_text())
    del verl["releases"]["0.9.1"]
    verl["releases"]["0.9.0"]["requires_python"] = ">=3.9"
    verl_path.write_text(json.dumps(verl, indent=1, sort_keys=True) + "\n")
    torch = json.loads(torch_path.read_text())
    cpu_row = dict(torch["releases"]["2.13.0"])
    cpu_row["requires_dist"] = [x for x in cpu_row["requires_dist"] if "cuda" not in x and "nvidia" not in x]
    torch["releases"]["2.13.0"] = cpu_row
    torch["releases"]["2.13.0+cpu"] = cpu_row
    torch_path.write_text(json.dumps(torch, indent=1, sort_keys=True) + "\n")
    before = _tree(str(d))

    lister = lambda name: list_versions(name, python=exe)  # noqa: E731
    fetch = lambda name, version: fetch_metadata(name, version, python=exe)  # noqa: E731
    packages = {"verl": ">=0.9.0", "torch": ">=2.13.0,<2.14"}
    diff, n = refresh(str(d), packages, lister, fetch, write=False)
    assert n == 3  # verl 0.9.0, 0.9.1, torch 2.13.0
    assert _tree(str(d)) == before  # --dry-run writes nothing
    lines = diff.splitlines()
    assert "+  \"0.9.1\": {" in lines
    assert "-   \"requires_python\": \">=3.9\"," in lines and "+   \"requires_python\": \">=3.10\"," in lines
    assert "-  \"2.13.0+cpu\": {" in lines
    assert any(x.startswith("+") and "nvidia-nccl-cu13==2.29.7" in x for x in lines)
    assert "--- a/metadata/torch.json" in lines and "+++ b/metadata/verl.json" in lines

    diff2, _ = refresh(str(d), packages, lister, fetch, write=True)
    assert diff2 == diff
    after = _tree(str(d))
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {os.path.join("metadata", "verl.json"), os.path.join("metadata", "torch.json")}
    assert all(not k.endswith(".toml") for k in changed)  # curated files untouched
    new_verl = json.loads(verl_path.read_text())["releases"]
    new_torch = json.loads(torch_path.read_text())["releases"]
    assert new_verl["0.9.1"] == real_verl["0.9.1"] and new_verl["0.9.0"] == real_verl["0.9.0"]
    assert new_verl["0.1"] == real_verl["0.1"]  # outside the refreshed range: kept
    assert new_torch["2.13.0"] == real_torch["2.13.0"] and "2.13.0+cpu" not in new_torch
    # the regenerated directory loads, and an unchanged index gives an empty diff
    mx = matrix_mod.load(str(d))
    assert [str(r.specifier) for r in mx.requirements("verl", "0.9.1", ["vllm"]) if r.name == "vllm"] == ["==0.24.0"]
    assert refresh(str(d), packages, lister, fetch, write=True)[0] == ""


def test_refresh_command_bad_dir_is_one_line(capsys):
    assert cli_main(["matrix", "refresh", "--dir", "/no/such/matrices"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dir /no/such/matrices: no such directory" in err[0]
    assert cli_main(["matrix", "refresh", "--dir", MATRICES, "--package", "numpy"]) == 2
    assert "--package numpy: not refreshed by this tool" in capsys.readouterr().err


def test_malformed_recorded_metadata_is_one_line(tmp_path):
    from preflight.matrix.refresh import RefreshError, refresh

    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "tensordict.json").write_text("{not json")
    with pytest.raises(RefreshError) as ei:
        refresh(str(tmp_path), {"tensordict": ">=0.5.0"}, lister=lambda n: [], fetch=lambda n, v: {})
    assert "tensordict.json is not valid JSON" in str(ei.value) and "\n" not in str(ei.value)
