"""Where verl checks what the batch rules check, per release (matrices/verl_rules.toml: each ruleset's
``where`` and ``where_versions``), and what that means beside verl's dry start-up.

The truth for the file:line data is the installed release's own source: each ``path:N`` (and ``at :N``)
a rule's ``where`` names is read from the verl of a real env and must hold the statement the rule
describes (the assert, the raise, the mesh built from ``world_size // sp``). The 0.9.1 and 0.6.1 envs
are the default suite's; the other releases' envs are opt-in (VERL_PREFLIGHT_RELEASE_ENVS=1, as in
test_verl_startup_releases.py).
"""

import os
import re
import subprocess

import pytest
from envs import real_env

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate
from preflight.launch.rules.table import ruleset
from preflight.launch.startup import Startup, compare

HEAVY = os.environ.get("VERL_PREFLIGHT_RELEASE_ENVS") == "1"
TF4 = ["torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"]
#: (env name, requirements: the recipes of test_verl_startup*.py, so the cached envs are shared; version)
ENVS = [("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"], "0.9.1"),
        ("verl061-tf4", ["verl==0.6.1"] + TF4, "0.6.1")]
HEAVY_ENVS = [("verl030-tf4", ["verl==0.3.0.post1"] + TF4, "0.3.0.post1"),
              ("verl041-tf4", ["verl==0.4.1"] + TF4 + ["setuptools<81"], "0.4.1"),
              ("verl050-tf4", ["verl==0.5.0"] + TF4, "0.5.0"),
              ("verl071-tf4", ["verl==0.7.1"] + TF4, "0.7.1"),
              ("verl080-tf4", ["verl==0.8.0"] + TF4 + ["cachetools", "uvicorn", "fastapi"], "0.8.0")]
#: What the line a rule's ``where`` names must say, per rule (the first ``path:N``; then each ``at :N``).
LINE = {"mini_per_gpu": (r"assert (self\.config\.actor\.ppo_mini_batch_size > 0|mini_batch_size % self\.engine\.get_data_par)",
                         r"ppo_mini_batch_size //= |mini_batch_size_per_gpu = mini_batch_size // "),
        "micro_vs_mini": (r"assert .*%.*micro_batch_size_per_gpu", r"."),
        "sp_remove_padding": (r"raise ValueError\(|assert config\.actor_rollout_ref\.model\.use_remove_padding", r"."),
        "sp_mesh": (r"dp(_size)? = (world_size // self\.ulysses_sequence_parallel_size|self\.get_data_parallel_size\(\))",
                    r"init_device_mesh\(|world_size\(\) // self\.ulysses_sequence_parallel_size")}

BASE = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=8", "trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]


def fails(overrides, release):
    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + BASE + overrides), None, release,
                       env={})
    assert c.error is None, c.error.message
    _plan, found, _note = evaluate(c.get, release)
    return [f for f in found if f.status == "fail"]


ACCEPTED = Startup(ran=True, verl_version="0.6.1", stopped_at="ResourcePoolManager.create_resource_pool")


def test_ulysses_size_over_world_is_the_workers_mesh_not_verls_validation():
    """recipe/langgraph_agent/example/run_qwen2.5_3b.sh at v0.6.1: Ulysses size 4 on 2 GPUs. verl 0.6.1's
    start-up accepts it (its validate_config does not divide), and each worker then builds its mesh
    with dp = 2 // 4 = 0 (fsdp_workers.py:165): the FAIL stands, named where verl fails, and is no
    disagreement with a start-up that stops before the workers."""
    found = fails(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=4",
                   "actor_rollout_ref.model.use_remove_padding=True"], "0.6.1")
    assert [f.id for f in found] == ["sp_remove_padding.actor"]
    assert found[0].where.startswith("verl/workers/fsdp_workers.py:165 "), found[0].where
    assert "after Ray" in found[0].stops
    assert compare(found, ACCEPTED) == []


def test_remove_padding_off_is_verls_validation_before_ray():
    """Ulysses 2 with use_remove_padding=False: FSDPActorConfig.validate raises in validate_config, before
    Ray. Were verl's start-up to accept that, the rules and verl would disagree: compare says so."""
    found = fails(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
                   "actor_rollout_ref.model.use_remove_padding=False"], "0.6.1")
    assert [f.id for f in found] == ["sp_remove_padding.actor"]
    assert found[0].where.startswith("verl/workers/config/actor.py:247 FSDPActorConfig.validate")
    assert [d["id"] for d in compare(found, ACCEPTED)] == ["sp_remove_padding.actor"]


@pytest.mark.parametrize("release,where", [
    ("0.7.0", "verl/workers/fsdp_workers.py:256 "), ("0.8.0", "verl/workers/engine/utils.py:91 "),
    ("0.9.1", "verl/workers/engine/utils.py:125 ")])
def test_micro_vs_mini_names_the_release_s_own_split(release, where):
    """micro 8 > per-GPU mini-batch 16 x 1 / 8 = 2 (examples/rollout_correction at HEAD): the finding names the
    file that splits the mini-batch in that release; 0.8.0's main_ppo has only the engine worker."""
    found = fails(["trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=1",
                   "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"], release)
    f = [f for f in found if f.id == "micro_vs_mini.actor"]
    assert f and f[0].where.startswith(where), [(x.id, x.where) for x in found]


@pytest.mark.parametrize("release,status", [("0.7.1", "warn"), ("0.8.0", "fail"), ("0.9.1", "fail")])
def test_mini_batch_not_whole_per_gpu_by_release(release, status):
    """ppo_mini_batch_size 12 x n 1 on 8 GPUs = 1.5 per GPU: 0.7.1's fsdp_workers.py floors it to 1 (a WARN);
    0.8.0's and 0.9.1's engine worker asserts ``mini_batch_size % dp == 0`` (engine_workers.py:258, :267:
    the where lines the installed-source test checks), a FAIL."""
    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + BASE + [
        "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=1", "data.train_batch_size=48",
        "actor_rollout_ref.actor.ppo_mini_batch_size=12", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"]),
        None, release, env={})
    assert c.error is None, c.error.message
    got = [f for f in evaluate(c.get, release)[1] if f.id == "mini_per_gpu.actor"]
    assert [f.status for f in got] == [status], [(f.status, f.message) for f in got]


def _package_dir(py):
    out = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec('verl').submodule_search_locations[0])"],
                         stdout=subprocess.PIPE, universal_newlines=True, check=True, timeout=60)
    return out.stdout.strip()


@pytest.mark.realenv
@pytest.mark.parametrize("name,reqs,version", ENVS + (HEAVY_ENVS if HEAVY else []),
                         ids=[e[2] for e in ENVS + (HEAVY_ENVS if HEAVY else [])])
def test_where_lines_are_the_installed_verls_own(name, reqs, version):
    root = os.path.dirname(_package_dir(real_env(name, reqs)))
    where = ruleset(version)[0]["where"]
    checked = 0
    for rule, (first, then) in LINE.items():
        text = where.get(rule, "")
        m = re.match(r"^(verl/[\w/]+\.py):(\d+) ", text)
        if not m:
            continue  # a where without a line (0.3-0.5 micro_vs_mini: dp_actor's gradient accumulation)
        with open(os.path.join(root, m.group(1)), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        assert re.search(first, lines[int(m.group(2)) - 1]), (version, rule, text, lines[int(m.group(2)) - 1])
        for at in re.findall(r"at :(\d+)", text):
            assert re.search(then, lines[int(at) - 1]), (version, rule, text, lines[int(at) - 1])
        checked += 1
    assert checked >= 2, where



_SPLIT = r"""
import importlib.util, sys, torch
from tensordict import TensorDict
import verl.utils.tensordict_utils as tu
root = importlib.util.find_spec("verl").submodule_search_locations[0]
spec = importlib.util.spec_from_file_location("engine_utils", root + "/workers/engine/utils.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)  # the file alone: verl.workers.engine's __init__ imports every engine
rows, micro = int(sys.argv[1]), int(sys.argv[2])
td = TensorDict({"input_ids": torch.zeros(rows, 3, dtype=torch.long)}, batch_size=[rows])
tu.assign_non_tensor(td, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)
try:
    print(len(m.prepare_micro_batches(td)[0]))
except AssertionError as exc:
    print("AssertionError: %s" % exc)
"""


@pytest.mark.realenv
@pytest.mark.skipif(not HEAVY, reason="imports torch and verl (~10 s of CPU): set VERL_PREFLIGHT_RELEASE_ENVS=1")
def test_micro_over_mini_is_refused_by_0_9_1_s_own_split():
    """The 0.9.1 row's two rule FAILs verl's start-up accepts (examples/rollout_correction/run_with_rollout_corr*.sh:
    ppo_mini_batch_size 32 on 8 GPUs = 4 rows per GPU, ppo_micro_batch_size_per_gpu 8) are verl's verdict at
    the first update: 0.9.1's own prepare_micro_batches refuses 4 rows in micro-batches of 8, and splits 8 rows
    of micro 4 in two. Not false positives: the dry start-up stops before the workers."""
    py = real_env(*ENVS[0][:2])
    got = [subprocess.run([py, "-c", _SPLIT, str(rows), str(micro)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          universal_newlines=True, timeout=300).stdout.strip() for rows, micro in ((4, 8), (8, 4))]
    assert got[0].startswith("AssertionError: data size must be divisible"), got
    assert got[1] == "2", got
    found = fails(["trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=1",
                   "actor_rollout_ref.actor.ppo_mini_batch_size=32",
                   "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"], "0.9.1")
    assert "micro_vs_mini.actor" in [f.id for f in found]
