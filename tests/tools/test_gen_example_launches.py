"""verl's example launches as a user's shell would run them (tools/gen_example_launches.py), judged by
the rules at the release they come from.

The truth for the stored launches is verl's own start-up (tools/verl_differential.py; the review of
issue 23 ran it at v0.6.1 and HEAD with verl 0.6.1 and 0.9.1): a variable the scheduler sets to a
count (``trainer.nnodes=$SLURM_JOB_NUM_NODES``, examples/gspo_trainer/test_gspo_3b_math.sh at
v0.7.0) is a whole number in the job, so the launch must not fail ``config_values`` for a path
stand-in no shell produces.
"""

import json
import os
import sys

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_example_launches import launch_of  # noqa: E402
import verl_differential  # noqa: E402
from verl_differential import differential, localise  # noqa: E402

INPUTS = {"model": "/tmp/verl-examples/model", "train": "/tmp/verl-examples/train.parquet",
          "test": "/tmp/verl-examples/test.parquet"}


def _stored(path, ref):
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    return [x for x in doc["launches"] if x["path"] == path and ref in x["refs"]][0]


def test_scheduler_counts_stand_in_as_whole_numbers():
    script = "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=$SLURM_JOB_NUM_NODES \\\n" \
             "  trainer.n_gpus_per_node=${NGPUS_PER_NODE} data.train_files=$DATA_DIR/x.parquet\n"
    got = launch_of(script)["overrides"]
    nnodes = dict(o.split("=", 1) for o in got)
    assert int(nnodes["trainer.nnodes"]) >= 1 and int(nnodes["trainer.n_gpus_per_node"]) >= 1
    assert nnodes["data.train_files"].startswith("/tmp/verl-examples/")


def test_nested_defaults_resolve():
    """``export GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${GPUS_PER_NODE:-2}}`` (recipe/langgraph_agent at
    v0.6.0) and ``CKPTS_DIR=${CKPTS_DIR:-"${RAY_DATA_HOME}/ckpts"}`` (recipe/dapo): bash gives 2 and a
    path; a ``${...`` left in an override would be a Hydra interpolation no shell produces."""
    script = 'RAY_DATA_HOME=${RAY_DATA_HOME:-"${HOME}/verl"}\nCKPTS_DIR=${CKPTS_DIR:-"${RAY_DATA_HOME}/ckpts"}\n' \
             "export GPUS_PER_NODE=${SLURM_GPUS_ON_NODE:-${GPUS_PER_NODE:-2}}\n" \
             "python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=$GPUS_PER_NODE " \
             'trainer.default_local_dir="${CKPTS_DIR}"\n'
    got = dict(o.split("=", 1) for o in launch_of(script)["overrides"])
    assert got["trainer.n_gpus_per_node"] == "2"
    assert got["trainer.default_local_dir"].endswith("/verl/ckpts") and "$" not in got["trainer.default_local_dir"]
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        stored = [o for x in json.load(fh)["launches"] for o in x["overrides"]]
    assert not [o for o in stored if "${" in o.partition("=")[2] and "${oc." not in o and "${." not in o], \
        "an unexpanded shell variable is stored"


@pytest.mark.parametrize("path,ref,release", [
    ("examples/gspo_trainer/test_gspo_3b_math.sh", "v0.7.0", "0.7.0"),
    ("examples/gspo_trainer/test_gspo_3b_math_slurm.sh", "v0.7.0", "0.7.0"),
])
def test_slurm_example_launch_has_no_fail(path, ref, release):
    x = _stored(path, ref)
    comp = compose_stored(parse_launch(localise(x["overrides"], INPUTS)), release=release)
    assert comp.error is None, comp.error
    assert comp.get("trainer.nnodes") == 1
    _plan, found, _note = evaluate(comp.get, release)
    assert [(f.id, f.message) for f in found if f.status == "fail"] == []


@pytest.mark.realenv
def test_061_fails_agree_with_verl(tmp_path):
    """The FAIL rows on verl 0.6.1's own examples are verl's verdict too: run_with_rollout_corr.sh sets no
    micro-batch size and run_deepseek7b_llm_pfppo.sh loses its overrides at a ``\\  # comment`` line (bash
    ends the command there, as the extractor does); verl 0.6.1's start-up rejects both, and no rule fails
    a launch it accepts."""
    env = real_env("verl061-tf4", ["verl==0.6.1", "torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"])
    paths = ("examples/rollout_correction/run_with_rollout_corr.sh",
             "examples/ppo_trainer/run_deepseek7b_llm_pfppo.sh",
             "examples/tuning/7b/qwen2-7b_grpo-lora_1_h100_fsdp_vllm.sh")
    everything = verl_differential.launches_for
    try:
        verl_differential.launches_for = lambda ref, own_dirs=False: [x for x in everything(ref, own_dirs)
                                                                       if x["path"] in paths]
        rep = differential(env, "v0.6.1", tiny_inputs(env, str(tmp_path / "tiny"), 32, 0), "0.6.1")
    finally:
        verl_differential.launches_for = everything
    rows = {c["path"]: c for c in rep["cases"]}
    assert rep["ran"] == 3, rep["cases"]
    for p in paths[:2]:
        assert rows[p]["verl"] != "accepted" and "micro_batch_set.actor" in rows[p]["rules"], rows[p]
    assert rows[paths[2]]["verl"] == "accepted" and rows[paths[2]]["rules"] == [], rows[paths[2]]
    assert rep["rule_fails_verl_accepts"] == [] and rep["disagreements"] == []
