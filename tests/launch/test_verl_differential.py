"""The rules against verl's own dry start-up (issue 23 item 2), on a real verl 0.9.1.

* verl's example launches (tests/data/verl_example_launches.json, the newest tag stored: HEAD) at
  a stride, with local inputs (tools/verl_differential.py): no rule FAILs a launch, on a check it
  places before Ray, that verl's own start-up accepts;
* random mutations of a valid launch's batch sizes (seeded): where verl's validate_config raises,
  a rule fails too, and where verl accepts, no pre-Ray rule fails (:func:`compare` is empty).
"""

import os
import random
import sys

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate
from preflight.launch.startup import compare, run_startup_batch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
from verl_differential import differential, launches_for  # noqa: E402

pytestmark = pytest.mark.realenv


@pytest.fixture(scope="module")
def env091():
    return real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])


@pytest.fixture(scope="module")
def inputs(env091, tmp_path_factory):
    return tiny_inputs(env091, str(tmp_path_factory.mktemp("tiny")), 1024, 0)


def test_example_launches_no_false_positive(env091, inputs):
    n = len(launches_for("HEAD"))
    assert n > 50
    rep = differential(env091, "HEAD", inputs, "0.9.1", limit=6)
    assert rep["ran"] == 6, rep["cases"]
    assert rep["accepted"] + rep["failed"] == rep["ran"]
    assert rep["disagreements"] == [], rep["disagreements"]


BASE = {"data.train_batch_size": 16, "actor_rollout_ref.actor.ppo_mini_batch_size": 8,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 2,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 2, "actor_rollout_ref.rollout.n": 1,
        "algorithm.adv_estimator": "grpo", "trainer.n_gpus_per_node": 1, "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1}


def test_random_batch_mutations_agree(env091, inputs):
    rng = random.Random(23)
    cases = []
    for _ in range(6):
        m = dict(BASE)
        key = rng.choice(["data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                          "actor_rollout_ref.rollout.n"])
        m[key] = rng.choice([1, 3, 4, 12, 32, 64])
        m.update({"data.train_files": inputs["train"], "data.val_files": inputs["test"],
                  "actor_rollout_ref.model.path": inputs["model"]})
        cases.append(["%s=%s" % kv for kv in m.items()])
    sts = run_startup_batch(env091, cases, timeout=600)
    for ovs, st in zip(cases, sts):
        assert st.ran, st.probe
        comp = compose_stored(parse_launch(ovs), release="0.9.1")
        _plan, found, _note = evaluate(comp.get, "0.9.1")
        assert compare(found, st) == [], (ovs, st.error, [f.id for f in found if f.status == "fail"])
