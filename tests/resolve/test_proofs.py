"""Platform-resolve proofs (preflight/proofs.py) and what resolve does with them, on the real
matrix and the recorded pip reports (matrices/proofs.json, tests/data/proofs)."""

import json
import os
import platform

import pytest

from preflight import proofs
from preflight.resolve import resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="needs a glibc x86_64 host")
def test_platform_tags_equal_packaging_for_this_glibc():
    # differential: packaging's own manylinux tags for the running glibc (PEP 600 / 599 aliases)
    from packaging import tags

    libc = platform.libc_ver()
    assert libc[0] == "glibc"
    major, minor = (int(x) for x in libc[1].split(".")[:2])
    want = [t for t in tags.platform_tags() if t.startswith("manylinux")]
    assert proofs.platform_tags((major, minor)) == want


def test_default_tags_cover_2_17_to_2_35_and_aliases():
    t = proofs.platform_tags()
    assert t[0] == "manylinux_2_35_x86_64" and "manylinux_2_31_x86_64" in t and "manylinux_2_17_x86_64" in t
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(t)


def test_flash_attn_url_and_source_build_are_left_out_of_a_proof():
    inside, out = proofs.proof_requirements(["verl==0.9.1", "flash-attn==2.8.3", "torch==2.11.0",
                                             "flash-attn @ https://github.com/x/flash_attn-2.8.3.whl"])
    assert inside == ["verl==0.9.1", "torch==2.11.0"] and len(out) == 2


def test_every_recorded_proof_is_what_pip_reported():
    idx = json.load(open(os.path.join(ROOT, "matrices", "proofs.json")))["proofs"]
    assert idx
    for pid, row in idx.items():
        assert pid == proofs.proof_id(row["requirements"], row["python"], (), row.get("arch", "x86_64")), pid
        if row["status"] == "not recorded":
            assert row.get("reason"), pid  # pip did not answer in time: retried by the next recording
            continue
        if row["status"] != "proven":
            assert row.get("error"), pid
            continue
        with open(os.path.join(ROOT, row["file"])) as fh:
            rep = json.load(fh)
        got = sorted("%s==%s" % (i["name"].lower(), i["version"]) for i in rep["install"])
        assert got == row["installed"], pid
        # every top-level requirement holds in pip's resolved set
        from packaging.requirements import Requirement

        have = {i["name"].lower().replace("_", "-"): i["version"] for i in rep["install"]}
        for line in row["requirements"]:
            r = Requirement(line)
            assert r.specifier.contains(have[r.name.lower().replace("_", "-")], prereleases=True), (pid, line)


def test_resolve_json_says_how_the_stack_was_proven(matrix):
    r = resolve(matrix, "0.9.1", gpu="H100", driver="580.65.06", python="3.12")
    p = r.to_dict()["proof"]
    assert p["status"] == "proven" and p["resolver"].startswith("pip ") and p["python"] == "3.12"
    assert p["glibc"] == "2.35" and "manylinux_2_35_x86_64" in p["platform_tags"] and p["date"]
    assert p["left_out"] == ["flash-attn==2.8.3"]  # verl's pin, a named source build


def test_a_cuda_variant_from_download_pytorch_org_is_unproven_not_works(matrix):
    # verl 0.6.0 on B200: torch 2.7.0's PyPI build is cu126 (no sm_100), so the cu128 variant from
    # download.pytorch.org is needed, which the recorder cannot reach
    r = resolve(matrix, "0.6.0", gpu="B200", driver="570.133.20", python="3.12")
    assert r.ok and r.variant == "cu128" and "torch==2.7.0+cu128" in r.requirements
    assert r.proof["status"] == "unproven" and "download.pytorch.org" in r.proof["reason"]
    assert any(w.startswith("unproven:") for w in r.warnings) and r.verdict == "unproven"


def test_cpu_wheel_is_never_the_cuda_build(matrix):
    # torch 2.13.0+cpu (find-links on this machine) vs the cu130 PyPI default: different builds
    assert matrix.torch_build("2.13.0+cpu")[0] == "cpu" and matrix.torch_build("2.13.0")[0] == "cu130"
    # a proof of a CUDA stack pins the plain release, which pip must take from the index, not a local +cpu
    idx = json.load(open(os.path.join(ROOT, "matrices", "proofs.json")))["proofs"]
    for row in idx.values():
        assert not any("+cpu" in x for x in row.get("installed") or []), row["requirements"]


def test_only_the_resolvers_refusal_makes_a_stack_fail():
    """pip's own crash or a full disk proves nothing about the set ("unproven"); the resolver's
    refusal does ("does not install"). The texts are pip's own messages."""
    from preflight.proofs import failure_facts, refused_by_resolver

    crash = ["ERROR: Exception:", "Traceback (most recent call last):", "OSError: [Errno 28] No space left on device"]
    disk = ["ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"]
    nomatch = ["ERROR: Could not find a version that satisfies the requirement sgl-kernel==0.0.5 (from versions: none)",
               "ERROR: No matching distribution found for sgl-kernel==0.0.5"]
    conflict = ["ERROR: Cannot install a and b because these package versions have conflicting dependencies.",
                "The conflict is caused by:", "    a 1 depends on c==1", "    b 1 depends on c==2",
                "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/"]
    for lines in (crash, disk):
        assert not refused_by_resolver(lines, failure_facts(lines)[1])
    for lines in (nomatch, conflict):
        assert refused_by_resolver(lines, failure_facts(lines)[1])


def test_pips_list_of_versions_for_another_python_is_cut_to_a_count():
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        rows = json.load(fh)["proofs"].values()
    long = [r["error"] for r in rows if r.get("error") and r["error"].count("Requires-Python") > 5]
    assert long  # py3.8/3.14 refusals: pip lists every version whose Requires-Python excludes the target
    for err in long:
        short = proofs.short_error(err)
        assert short.count("Requires-Python") <= 3 and "pip ignored" in short, short[:300]
        for words in ("No matching distribution found for", "Could not find a version that satisfies"):
            assert (words in short) == (words in err)
