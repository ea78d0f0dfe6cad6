"""The scenario table (tests/data/scenarios.toml): every verl release x GPUs x drivers x Python,
each with its expected verdict and source. A "works" verdict also needs the recorded pip platform
resolve (matrices/proofs.json, re-recorded by tools/record_proofs.py) that proves the set installs,
and that recorded set must hold the versions the scenario names: pip, not our resolver, is the truth."""

import os
import sys

import pytest

from preflight.resolve import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover
    import tomli as _toml

with open(os.path.join(ROOT, "tests", "data", "scenarios.toml"), "rb") as _fh:
    SCENARIOS = _toml.load(_fh)["scenario"]


def test_table_covers_the_space():
    assert len(SCENARIOS) >= 80
    assert len({s["id"] for s in SCENARIOS}) == len(SCENARIOS)
    from preflight.matrix import load

    assert {s["verl"] for s in SCENARIOS} == set(load().verl_versions())
    assert {"V100", "A100", "L4", "H100", "H200", "B200", "RTX 4090", "RTX 5090"} <= {s["gpu"] for s in SCENARIOS}
    assert {s["python"] for s in SCENARIOS if s.get("python")} >= {"3.9", "3.10", "3.11", "3.12", "3.13"}
    branches = {int(s["driver"].split(".")[0]) for s in SCENARIOS}
    assert min(branches) == 470 and max(branches) >= 580
    assert all(s.get("source") for s in SCENARIOS)


def verdict(r):
    if not r.ok:
        return "no stack"
    return {"proven": "works", "unproven": "unproven"}.get(r.proof.get("status"), "not proven (%s)" % r.proof.get("status"))


@pytest.mark.parametrize("s", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
def test_scenario(matrix, s):
    r = resolve(matrix, s["verl"], backend=s.get("backend"), gpu=s["gpu"], driver=s["driver"], python=s.get("python"))
    got = verdict(r)
    assert got == s["expect"], "%s: %s; problems %s; proof %s (source of the expectation: %s)" % (
        s["id"], got, r.problems, r.proof, s["source"])
    if s["expect"] == "no stack":
        assert any(s["problem"] in p for p in r.problems), r.problems
        if s.get("option"):
            assert any(s["option"] in c for c in r.commands), r.options
        # every option names the exact command that selects it, and that command's stack works
        assert len(r.commands) == len(r.options)
        return
    assert (r.vllm, r.torch) == (s["vllm"], s["torch"])
    if s.get("bound"):
        assert any(b["package"] == s["bound"] for b in r.bounds) and any(
            q.startswith(s["bound"]) and "<" in q for q in r.requirements), r.requirements
    if s.get("warn"):
        assert any(s["warn"] in w for w in r.warnings), r.warnings
    if s["expect"] == "works":
        # the recorded pip report (the independent truth) installs exactly these releases
        from preflight import proofs

        p = proofs.lookup(r.requirements, r.python, r.extra_index_urls)
        assert p["installed"]["vllm"] == s["vllm"] and p["installed"]["torch"] == s["torch"]
        assert p["python"] == r.python and p["platform_tags"] and p["resolver"].startswith("pip ")
        # the JSON says how it was proven
        d = r.to_dict()["proof"]
        assert d["status"] == "proven" and d["file"] and os.path.exists(os.path.join(ROOT, d["file"]))
