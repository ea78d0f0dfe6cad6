"""The stored verl config trees (matrices/verl_config, tools/gen_verl_config.py) and verl's own
example launches composed over them.

* every stored file is byte for byte the wheel's (sha256 as the generator checked it against the
  wheel's RECORD), and regenerating from the wheels gives the same bytes (realenv: downloads);
* each example launch of verl's repository (tests/data/verl_example_launches.json) composes,
  with the vendored Hydra, for the stored release of the tag it was taken from (HEAD's, a
  0.8.0.dev checkout, for 0.8.0).
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from sweep import sample

from preflight.launch.compose import release_doc, run_here, stored_index, stored_tree, hydra_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORE = os.path.join(ROOT, "matrices", "verl_config")


def test_every_release_on_pypi_is_stored_with_its_wheel_hash():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import gen_verl_config

    idx = stored_index()
    assert sorted(idx) == sorted(gen_verl_config.RELEASES)
    for ver, rec in idx.items():
        doc = release_doc(ver)
        assert doc["sha256"] == rec["sha256"] and doc["wheel"].startswith("verl-%s-" % ver)
        assert "ppo_trainer" in doc["configs"]


@pytest.mark.parametrize("ver", sorted(stored_index()))
def test_stored_files_are_the_wheels_bytes(ver):
    doc = release_doc(ver)
    on_disk = set()
    for dirpath, _dirs, files in os.walk(os.path.join(STORE, ver)):
        for f in files:
            on_disk.add(os.path.relpath(os.path.join(dirpath, f), os.path.join(STORE, ver)).replace(os.sep, "/"))
    assert on_disk == set(doc["files"]), "regenerate with tools/gen_verl_config.py; never edit by hand"
    for rel, digest in doc["files"].items():
        with open(os.path.join(STORE, ver, rel), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == digest, rel


@pytest.mark.realenv
def test_regenerating_from_the_wheels_is_byte_identical():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_verl_config.py"), "--check"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=900)
    assert p.returncode == 0 and "byte-identical" in p.stdout, p.stdout + p.stderr


def _launches():
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        return json.load(fh)["launches"]


def _release_of(ref):
    return "0.8.0" if ref == "HEAD" else ref.lstrip("v")


#: What Hydra may refuse in verl's own published scripts: keys a release does not have (stale
#: examples: an override of a key dropped earlier, the case of verl-project/verl#1080) or a ``+key``
#: the config already has. Anything else (a grammar error, a failed merge) fails the test.
STALE = ("Could not override '", "Could not append to config. An item is already at '")
#: verl's published scripts that Hydra refuses for another reason, each with what it is.
KNOWN_BROKEN = {
    "examples/grpo_trainer/run_qwen3_4b_grpo_vllm_1k_npu.sh": "trainer_experiment_name=\"qwen3_4b_grpo_8npu}\" ends in a "
                                                             "stray '}': Hydra's grammar refuses the override",
}


@pytest.mark.realenv  # slow, not networked: about 300 compositions (the vendored Hydra, in this process)
@pytest.mark.parametrize("ver", sorted({_release_of(r) for x in _launches() for r in x["refs"]} & set(stored_index()),
                                       key=lambda v: [int(p) if p.isdigit() else p for p in v.replace("post", "").split(".")]))
def test_example_launches_compose_for_their_release(ver):
    """verl's own example launches of ``ver`` compose over its stored tree, or Hydra refuses them as
    verl published them (STALE, KNOWN_BROKEN). The default suite takes 12 per config (tests/sweep.py;
    PREFLIGHT_FULL_SWEEP=1: all of them, about 80 per release)."""
    doc = release_doc(ver)
    groups = {}
    for x in _launches():
        name = (x["config_name"] or "ppo_trainer")
        name = name[:-5] if name.endswith(".yaml") else name
        if any(_release_of(r) == ver for r in x["refs"]) and not x["config_path"] and name in doc["configs"]:
            groups.setdefault(name, []).append(x)
    assert groups, "no example launch applies to %s" % ver
    tried, stale, failed = 0, [], []
    for name, launches in sorted(groups.items()):
        launches = sample(launches, 12)
        out = run_here("verl_compose", {"stored_dir": stored_tree(ver), "stored_version": ver, "config_name": name,
                                        "sys_path": hydra_path(), "batch": [x["overrides"] for x in launches]})
        cases = {e["i"]: e for e in out.events if e.get("event") == "case"}
        assert len(cases) == len(launches), out.stderr_tail
        for i, x in enumerate(launches):
            tried += 1
            err = cases[i].get("error")
            if err:
                line = "%s (%s): %s" % (x["path"], name, err["message"].splitlines()[0])
                if x["path"] in KNOWN_BROKEN and err["message"].startswith("Error parsing override"):
                    stale.append(line)
                else:
                    (stale if err["message"].startswith(STALE) else failed).append(line)
    print("\nverl %s: %d example launches tried, %d composed, %d refused as verl published them:\n  %s" % (
        ver, tried, tried - len(stale) - len(failed), len(stale), "\n  ".join(stale)))
    assert not failed, failed
    assert len(stale) < tried / 2
