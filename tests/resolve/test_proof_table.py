"""tools/proof_table.py: the closing note's table is built from the recorded proofs (fast: a few
cells resolved, the rest of the grid is the tool's own run)."""

import importlib.util
import json
import os

from preflight import proofs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location("proof_table", os.path.join(ROOT, "tools", "proof_table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_recorded_refusal_has_a_short_reason_naming_pips_package():
    tool = _tool()
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        rows = json.load(fh)["proofs"]
    failed = [r for r in rows.values() if r["status"] == "failed"]
    assert failed
    for r in failed:
        why = tool._why_failed(r)
        assert "\n" not in why and len(why) < 300, why
        named = r.get("no_wheel") or []
        assert not named or any(n.split("<")[0].split(">")[0].split("=")[0] in why for n in named), (why, named)
        for s in r.get("source_builds") or []:
            assert "only an sdist" in why and s in why
            need = (r.get("build_needs") or {}).get(s)
            assert not need or tool._short_need(need) in why, (why, need)  # what building it needs, too


def test_a_proven_cell_that_builds_an_sdist_says_so():
    tool = _tool()
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        rows = json.load(fh)["proofs"]
    built = [r for r in rows.values() if r["status"] == "proven" and r.get("source_builds")]
    assert built
    for r in built:
        why = tool._why_proven(r)
        assert all(s in why for s in r["source_builds"]) and "--no-binary" in why, why
    assert all(not tool._why_proven(r) for r in rows.values() if not r.get("source_builds"))


def test_cells_follow_the_recorded_proof(matrix):
    tool = _tool()
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        idx = json.load(fh)["proofs"]
    mx_rows = list(tool.cells(matrix, ["x86_64"], releases=("0.9.1", "0.2"), pythons=("3.10", "3.12", "3.13")))
    assert {c["verdict"] for c in mx_rows} <= set(tool.MARK)
    for c in mx_rows:
        row = idx.get(c["proof"] or "") or {}
        if c["verdict"] == "proven":
            assert row.get("status") == "proven" and row["python"] == c["python"], c
        if row.get("status") == "failed":
            assert c["verdict"] == "does not install" and c["why"], c
        if c["verdict"] == "unproven":
            assert c["why"] and row.get("status") != "proven", c
    text = tool.grid(mx_rows)
    assert text.splitlines()[0].startswith("%d cells: " % len(mx_rows))
    assert "| 0.9.1 | vllm | x86_64 |" in text
    assert proofs.PYPI  # the proofs module the table reads through resolve
