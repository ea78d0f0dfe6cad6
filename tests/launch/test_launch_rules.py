"""verl's launch rules and the batch arithmetic, table-driven from real cases.

Cases are the config-math failures of shared/reference/failure_cases.md (#23, #25, #28, #30, #22)
and the seeds' worked examples; configs are composed from verl 0.9.1's stored defaults (the
real packaged YAML) with the cases' overrides, then checked against each release's rules in
matrices/verl_rules.toml. Model configs are real published config.json values.
"""

import json
import os

import pytest

from fake_nvml import FakeNvml
from preflight.launch import batch as bm
from preflight.launch.compose import compose_stored, flatten
from preflight.launch.model import hf_cache_dir, read_model
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import entry_point, evaluate, load_rules, mandatory_keys, ruleset, visible_gpus
from preflight.probes.nvml import collect

# Values from the models' published config.json files on the Hugging Face hub.
QWEN25_05B = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
              "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 14,
              "num_hidden_layers": 24, "num_key_value_heads": 2, "tie_word_embeddings": True,
              "torch_dtype": "bfloat16", "vocab_size": 151936}
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
             "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 28,
             "num_hidden_layers": 28, "num_key_value_heads": 4, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16", "vocab_size": 152064}

# A complete, valid GRPO launch on 8 GPUs; cases change it.
BASE = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=8", "trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]


def run_case(overrides, release="0.9.1", machine=None, model=None, base=True, config_name=None):
    words = (BASE if base else []) + list(overrides)
    if config_name:
        words = ["--config-name=%s" % config_name] + words
    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + words), None, release, env={})
    assert c.error is None, c.error.message
    facts, why = (model, "given") if model is not None else (None, "no model in this case")
    plan, found, note = evaluate(c.get, release, machine, facts, why, mandatory_keys(flatten(c.resolved), c.get))
    return plan, {f.id: f for f in found}, note


def bad(found):
    return {k: f for k, f in found.items() if f.status in ("fail", "warn")}


def model_dir(tmp_path, cfg, name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def nvml(n, total_mib=81920, used_mib=0, name="NVIDIA H100 80GB HBM3"):
    """An NVML snapshot as the nvml probe returns it, from the fake provider."""
    return collect(FakeNvml([{"name": name, "cc": (9, 0), "total": total_mib, "used": used_mib} for _ in range(n)]))


# ---- the seeds' worked examples -------------------------------------------------------------------
def test_seed_example_60_prompts_12_rollouts_6_gpus():
    p = bm.plan(60, 12, 6, 1, rollout_tp=2)
    assert p.sequences_per_step == 720 and p.world == 6
    assert p.sequences_per_gpu == 120 and p.prompts_per_gpu == 10
    assert p.rollout_groups == 3 and p.prompts_per_group == 20 and p.sequences_per_group == 240
    assert ("sequences per step", "60 x 12 = 720", "x rollout.n") in p.rows
    assert ("per rollout group", "20 prompts, 240 sequences", "step / rollout groups") in p.rows


def test_seed_example_through_the_composed_config():
    plan, found, _ = run_case(["data.train_batch_size=60", "actor_rollout_ref.rollout.n=12",
                               "trainer.n_gpus_per_node=6", "actor_rollout_ref.actor.ppo_mini_batch_size=30",
                               "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6"])
    assert (plan.sequences_per_step, plan.sequences_per_gpu, plan.rollout_groups, plan.sequences_per_group) == (
        720, 120, 3, 240)
    assert plan.mini_per_gpu == 60 and plan.micro_batches_per_mini == 10 and plan.logprob_rounds == 8
    assert bad(found) == {}, {k: f.message for k, f in bad(found).items()}


@pytest.mark.parametrize("fn,args,expected", [
    (bm.world_size, (8, 2), 16),
    (bm.rollout_groups, (6, 4), (1, 2)),
    (bm.per_gpu_mini, (256, 1, 6, 1), (42, 4)),
    (bm.per_gpu_mini, (8, 1, 8, 2), (2, 0)),
    (bm.rounds, (120, 16), 8),
    (bm.multiples_near, (68, 8), [64, 72]),
    (bm.multiples_near, (32, 48), [48]),
    (bm.multiples_near, (60, 8, 12), [58, 62]),
])
def test_batch_arithmetic(fn, args, expected):
    assert fn(*args) == expected


# ---- verl's rules, failure cases ------------------------------------------------------------------
CASES = [
    # id, overrides, release, expected {finding id: status}, words in message/fix
    ("fc23 batch not divisible by 3x16 GPUs",
     ["trainer.nnodes=3", "trainer.n_gpus_per_node=16", "data.train_batch_size=32", "actor_rollout_ref.rollout.n=1",
      "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"],
     "0.9.1", {"train_batch_divisible": "fail"}, ["32 x 1 = 32 is not divisible by the world size 48",
                                                   "set data.train_batch_size to 48"]),
    ("fc28 micro larger than the normalised mini (0.9.1 asserts)",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8"], "0.9.1",
     {"micro_vs_mini.actor": "fail", "mini_per_gpu.actor": "pass"},
     ["ppo_micro_batch_size_per_gpu 4 > per-GPU mini-batch 1", "ppo_micro_batch_size_per_gpu to 1"]),
    ("fc28 micro larger than mini is a silent NaN in 0.3",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8"], "0.3.0.post1",
     {"micro_vs_mini.actor": "fail"}, ["gradient accumulation 1 // 4 = 0, NaN loss"]),
    ("fc28 mini normalises to 0 (endless loop before the assertion)",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=4"], "0.9.1",
     {"mini_per_gpu.actor": "fail"}, ["4 x 1 / 8 = 0.50", "normalises to 0",
                                       # S5: mini 8 alone trips micro_vs_mini (micro 4 > 1); the fix carries both
                                       "ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"]),
    ("rollout TP does not divide 6 GPUs",
     ["trainer.n_gpus_per_node=6", "data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=30",
      "actor_rollout_ref.rollout.tensor_model_parallel_size=4"], "0.9.1",
     {"rollout_tp_world": "fail"}, ["= 4 GPUs per replica does not divide the world size 6", "to 3 or 6"]),
    ("rollout TP larger than the world",
     ["actor_rollout_ref.rollout.tensor_model_parallel_size=16"], "0.9.1",
     {"rollout_tp_world": "fail"}, ["exceeds the world size 8", "to 8"]),
    ("mini larger than the train batch",
     ["data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=16"], "0.9.1",
     {"mini_le_train.actor": "fail"}, ["train_batch_size 8 < actor_rollout_ref.actor.ppo_mini_batch_size 16"]),
    ("train batch does not split into mini-batches: 0.9.1 asserts",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=24",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"], "0.9.1",
     {"train_divisible_by_mini.actor": "fail"}, ["8 sequences per GPU do not split into mini-batches of 3"]),
    ("... and 0.7 goes on with a short last mini-batch",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=24",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"], "0.7.0",
     {"train_divisible_by_mini.actor": "warn"}, ["do not split"]),
    ("per-GPU mini not whole: 0.9.1 asserts, 0.7 floors",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=20",
      "data.train_batch_size=80", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"], "0.9.1",
     {"mini_per_gpu.actor": "fail"}, ["20 x 1 / 8 = 2.50 is not whole", "to 8, 16 or 40"]),
    ("per-GPU mini floored in 0.7",
     ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=20",
      "data.train_batch_size=80", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"], "0.7.0",
     {"mini_per_gpu.actor": "warn"}, ["floored to 2"]),
    ("both micro forms set",
     ["actor_rollout_ref.actor.ppo_micro_batch_size=32"], "0.9.1",
     {"micro_batch_set.actor": "fail"}, ["both actor_rollout_ref.actor.ppo_micro_batch_size=32",
                                         "remove actor_rollout_ref.actor.ppo_micro_batch_size"]),
    ("only the deprecated global micro: 0.9.1's engine worker needs per-GPU",
     ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null", "actor_rollout_ref.actor.ppo_micro_batch_size=32"],
     "0.9.1", {"per_gpu_required.actor": "fail", "micro_batch_set.actor": "pass"},
     ["ppo_micro_batch_size_per_gpu=4 (that is 32 / 8 data-parallel ranks)"]),
    ("neither micro form for the rollout log-prob",
     ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null"], "0.9.1",
     {"micro_batch_set.rollout": "fail"}, ["log_prob_micro_batch_size_per_gpu=16 (a divisor of the 64 sequences"]),
    ("Ulysses without remove padding",
     ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "actor_rollout_ref.model.use_remove_padding=false"],
     "0.9.1", {"sp_remove_padding.actor": "fail"}, ["use_remove_padding=True"]),
    ("sampled validation at temperature 0",
     ["actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.temperature=0"], "0.9.1",
     {"val_temperature": "fail"}, ["temperature to a value > 0"]),
    ("rollout mode sync was removed",
     ["actor_rollout_ref.rollout.mode=sync"], "0.9.1", {"rollout_mode": "fail"}, ["rollout.mode=sync"]),
    ("rollout name left mandatory",
     ["actor_rollout_ref.rollout.name=???"], "0.9.1", {"mandatory.actor_rollout_ref_rollout_name": "fail"},
     ["set actor_rollout_ref.rollout.name=vllm"]),
    ("a rollout group holds more than max_num_seqs",
     ["data.train_batch_size=1024", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
      "actor_rollout_ref.rollout.tensor_model_parallel_size=1"], "0.9.1",
     {"max_num_seqs": "warn"}, ["holds 1024 sequences but vLLM max_num_seqs is 256: generation runs in 4 waves"]),
    ("dynamic batch size skips the micro rules",
     ["actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null", "data.train_batch_size=60"], "0.9.1",
     {"micro_batch_set": "pass", "train_batch_divisible": "pass"}, ["not checked with use_dynamic_bsz=True"]),
]


@pytest.mark.parametrize("name,overrides,release,expected,words", CASES, ids=[c[0] for c in CASES])
def test_rules(name, overrides, release, expected, words):
    _plan, found, note = run_case(overrides, release)
    for fid, status in expected.items():
        assert fid in found, (fid, sorted(found))
        assert found[fid].status == status, (fid, found[fid].message)
    text = " ".join("%s %s" % (found[f].message, found[f].fix or "") for f in expected)
    for w in words:
        assert w in text, (w, text)
    for fid in expected:
        f = found[fid]
        if f.status in ("fail", "warn"):
            assert f.fix and f.check, fid  # names verl's check and the smallest change
    assert {"0.9.1": "rules of verl 0.9.1", "0.7.0": "rules of verl 0.6.x-0.9.0",
            "0.3.0.post1": "rules of verl 0.3.x"}[release] in note


def test_fc25_megatron_dispatch_size():
    over = ["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2", "trainer.nnodes=6",
            "trainer.n_gpus_per_node=8", "data.train_batch_size=16", "actor_rollout_ref.rollout.n=1",
            "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"]
    _p, found, _ = run_case(over, config_name="ppo_megatron_trainer")
    f = found["train_batch_divisible"]
    assert f.status == "fail" and "Megatron data-parallel size 12 x ppo_micro_batch_size_per_gpu 2 = 24" in f.message
    assert "16 x 1 = 16 is not divisible" in f.message and f.fix == "set data.train_batch_size to 24"
    _p, found, _ = run_case(over[:2] + ["trainer.nnodes=1", "trainer.n_gpus_per_node=6"],
                            config_name="ppo_megatron_trainer")
    assert found["megatron_world"].status == "fail" and "6 is not divisible by Megatron TP 2 x PP 2" in \
        found["megatron_world"].message


def test_fc25_without_the_megatron_config_hydra_refuses():
    c = compose_stored(parse_launch(["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]), None,
                       "0.9.1", env={})
    assert c.error.kind == "override_missing" and "--config-name=ppo_megatron_trainer" in c.error.fix


def test_rules_data_has_sources_and_every_rule_text():
    data = load_rules()
    for rs in data["ruleset"]:
        assert rs["source"] and rs["confidence"] in ("V", "S", "U")
    assert ruleset("0.9.1")[0]["label"] == "0.9.1" and ruleset("0.5.0")[0]["label"] == "0.4.x-0.5.x"
    assert "not recorded" in ruleset("0.2")[1]
    _p, found, _ = run_case(["actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.rollout.n=1"])
    for f in found.values():
        assert f.rule in data["rule"], f.rule


def test_entry_point_rows_have_sources_and_match_module_or_script():
    rows = load_rules()["entry_point"]
    for row in rows:
        assert row["source"] and row["confidence"] in ("V", "S", "U") and row["kind"] in (
            "ppo", "sft", "generation", "eval")
    assert entry_point("verl.trainer.main_ppo")["kind"] == "ppo"
    assert entry_point("verl/trainer/main_ppo.py")["config_name"] == "ppo_trainer"
    assert entry_point("/src/verl/verl/trainer/fsdp_sft_trainer.py")["config_name"] == "sft_trainer"
    assert entry_point("verl.trainer.sft_trainer")["config_name"] == "sft_trainer_engine"
    assert entry_point("recipe/dapo/main_dapo.py") is None and entry_point(None) is None


# ---- sizes of 0 or less: never read as the default ------------------------------------------------
@pytest.mark.parametrize("overrides,key,config_name", [
    (["actor_rollout_ref.rollout.n=0"], "actor_rollout_ref.rollout.n", None),
    (["actor_rollout_ref.rollout.tensor_model_parallel_size=0"],
     "actor_rollout_ref.rollout.tensor_model_parallel_size", None),
    (["trainer.nnodes=0"], "trainer.nnodes", None),
    (["actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=0"],
     "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size", None),
    (["actor_rollout_ref.actor.ulysses_sequence_parallel_size=0"],
     "actor_rollout_ref.actor.ulysses_sequence_parallel_size", None),
    (["actor_rollout_ref.rollout.pipeline_model_parallel_size=-1"],
     "actor_rollout_ref.rollout.pipeline_model_parallel_size", None),
    (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"],
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", None),
    (["actor_rollout_ref.actor.ppo_mini_batch_size=0"], "actor_rollout_ref.actor.ppo_mini_batch_size", None),
    (["actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=0"],
     "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", "ppo_megatron_trainer"),
])
def test_sizes_below_one_fail(overrides, key, config_name):
    plan, found, _ = run_case(overrides, config_name=config_name)
    f = found["config_values.%s" % key.replace(".", "_")]
    assert plan is None and f.status == "fail"
    assert f.message == "%s is %s: it must be 1 or more" % (key, overrides[0].split("=")[1])
    assert f.fix.startswith("set %s to " % key)


def test_unset_sizes_take_the_default():
    plan, found, _ = run_case(["actor_rollout_ref.rollout.n=null", "actor_rollout_ref.rollout.data_parallel_size=null"])
    assert plan is not None and plan.rollout_n == 1 and not [f for f in found if f.startswith("config_values")]


def test_mini_batch_fix_lists_several_divisors():
    _p, found, _ = run_case(["data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=64",
                             "actor_rollout_ref.rollout.n=1", "trainer.n_gpus_per_node=4"])
    f = found["mini_le_train.actor"]
    # each offered value is re-checked: with the launch's micro-batch 4, mini 12 and 60 need micro 3, 20 needs 1
    assert f.status == "fail" and f.fix == (
        "set actor_rollout_ref.actor.ppo_mini_batch_size=12 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3 "
        "or actor_rollout_ref.actor.ppo_mini_batch_size=20 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
        "or actor_rollout_ref.actor.ppo_mini_batch_size=60 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3")
    assert f.evidence["candidates"] == [12, 20, 60]
    assert found["train_divisible_by_mini.actor"].fix == f.fix


# ---- the model: Ulysses heads and context length ---------------------------------------------------
@pytest.mark.parametrize("sp,status,words", [
    (4, "fail", ["Ulysses size 4 vs 14 attention heads / 2 KV heads", "to 2"]),
    (2, "pass", ["Ulysses size 2 divides 14 heads"]),
])
def test_ulysses_heads_real_qwen_config(tmp_path, sp, status, words):
    facts, how = read_model(model_dir(tmp_path, QWEN25_05B))
    assert how == "local directory" and facts.heads == 14 and facts.kv_heads == 2
    _p, found, _ = run_case(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=%d" % sp], model=facts)
    f = found["ulysses_heads.actor"]
    assert f.status == status and all(w in f.message + (f.fix or "") for w in words)


@pytest.mark.parametrize("over,release,status,words", [
    (["data.max_prompt_length=30000", "data.max_response_length=4096"], "0.9.1", "warn",
     ["30000 + response 4096 = 34096 > 32768", "max_response_length=2768"]),
    (["data.max_prompt_length=30000", "data.max_response_length=4096"], "0.3.0.post1", "fail",
     ["34096 > max_position_embeddings 32768"]),
    (["actor_rollout_ref.rollout.max_model_len=40000"], "0.9.1", "fail", ["max_model_len 40000 > max_position"]),
    (["data.max_prompt_length=1024", "data.max_response_length=2048"], "0.9.1", "pass", ["3072 <= 32768"]),
])
def test_max_position_embeddings(tmp_path, over, release, status, words):
    facts, _ = read_model(model_dir(tmp_path, QWEN25_05B))
    _p, found, _ = run_case(over, release, model=facts)
    f = found["max_position"]
    assert f.status == status and all(w in f.message + (f.fix or "") for w in words), f.message


def test_model_from_the_local_hf_cache_never_the_network(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf")}
    root = os.path.join(hf_cache_dir(env), "models--Qwen--Qwen2.5-0.5B-Instruct")
    snap = os.path.join(root, "snapshots", "7ae557604adf67be50417f59c2c2f167def9a775")
    os.makedirs(snap)
    os.makedirs(os.path.join(root, "refs"))
    with open(os.path.join(root, "refs", "main"), "w") as fh:
        fh.write("7ae557604adf67be50417f59c2c2f167def9a775")
    with open(os.path.join(snap, "config.json"), "w") as fh:
        json.dump(QWEN25_05B, fh)
    facts, how = read_model("Qwen/Qwen2.5-0.5B-Instruct", env)
    assert facts.max_position_embeddings == 32768 and how.startswith("Hugging Face cache (revision 7ae557604adf")
    assert 0.45e9 < facts.params < 0.55e9  # Qwen2.5-0.5B has 0.49B parameters
    none, why = read_model("Qwen/Qwen2.5-7B-Instruct", env)
    assert none is None and "not in the local Hugging Face cache" in why and "no network" in why
    assert read_model("hdfs://x/y")[0] is None


# ---- this machine: GPUs, GPU memory, host memory ---------------------------------------------------
def test_gpus_asked_vs_present():
    _p, found, _ = run_case([], machine={"nvml": nvml(4), "host": {}, "env": {}})
    f = found["gpus_present"]
    assert f.status == "fail" and "n_gpus_per_node=8 but this node has 4 usable GPU(s)" in f.message
    assert f.fix == "set trainer.n_gpus_per_node=4"
    _p, found, _ = run_case(["trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.ppo_mini_batch_size=16"],
                            machine={"nvml": nvml(8), "host": {}, "env": {"CUDA_VISIBLE_DEVICES": "0,1"}})
    f = found["gpus_present"]
    assert f.status == "fail" and "CUDA_VISIBLE_DEVICES='0,1' leaves 2 of 8" in f.message
    assert "widen CUDA_VISIBLE_DEVICES" in f.fix
    _p, found, _ = run_case([], machine={"nvml": {"error": {"kind": "library_not_found", "message": "no libnvidia-ml"}},
                                         "host": {}, "env": {}})
    assert found["gpus_present"].status == "skip" and "no NVIDIA GPU on this machine" in found["gpus_present"].message


def test_visible_gpus_stops_at_the_first_invalid_entry():
    gpus, how = visible_gpus(nvml(4), {"CUDA_VISIBLE_DEVICES": "1,7,2"})
    assert [g["index"] for g in gpus] == [1]
    gpus, _ = visible_gpus(nvml(2), {"CUDA_VISIBLE_DEVICES": "GPU-0001"})
    assert [g["index"] for g in gpus] == [1]


@pytest.mark.parametrize("util,status", [(0.9, "fail"), (0.8, "pass")])
def test_fc30_gpu_memory_utilization_against_free_memory(util, status):
    # 80 GiB GPUs with 12 GiB held by another process: 0.9 wants 72 GiB, 68 GiB are free
    m = {"nvml": nvml(8, total_mib=81920, used_mib=12288), "host": {}, "env": {}}
    _p, found, _ = run_case(["actor_rollout_ref.rollout.gpu_memory_utilization=%s" % util], machine=m)
    f = found["gpu_memory"]
    assert f.status == status
    if status == "fail":
        assert "68.0 GiB free, vLLM wants 0.90 x 80.0 GiB = 72.0 GiB (8 GPU(s) short)" in f.message
        assert "gpu_memory_utilization=0.83" in f.fix


def test_fc22_host_memory_workers_and_offload(tmp_path):
    """failure_cases #22: 8 workers x ~11 GB for a 7.6B model on a 96 GiB host is a WARN before any
    offload (the thread's ~88 GB); offload on top fails; a 1 TiB host passes."""
    facts, _ = read_model(model_dir(tmp_path, QWEN25_7B))
    assert 7.0e9 < facts.params < 8.0e9  # Qwen2.5-7B has 7.6B parameters
    host = {"memory": {"total": 96 << 30, "cgroup_limit": None}}
    _p, found, _ = run_case([], machine={"nvml": nvml(8), "host": host, "env": {}}, model=facts)
    f = found["host_memory"]
    assert f.status == "warn" and "8 workers x 10.2 GiB" in f.message and "vs 96 GiB" in f.message and f.silent
    assert 80 << 30 < f.evidence["need_bytes"] < 90 << 30
    over = ["actor_rollout_ref.actor.fsdp_config.param_offload=true",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true"]
    _p, found, _ = run_case(over, machine={"nvml": nvml(8), "host": host, "env": {}}, model=facts)
    f = found["host_memory"]
    assert f.status == "fail" and "param_offload + optimizer_offload" in f.message and "optimizer_offload" in f.fix
    _p, found, _ = run_case(over, machine={"nvml": nvml(8), "host": {"memory": {"total": 1 << 40}}, "env": {}},
                            model=facts)
    assert found["host_memory"].status == "pass"




def _fix_all(found):
    """The one-line fix as the report prints it: the ``fix_line`` finding's overrides, else
    (one failure) that failure's first override."""
    if "fix_line" in found:
        return found["fix_line"].alts[0]
    fails = [f for f in found.values() if f.status == "fail"]
    assert len(fails) == 1, sorted(f.id for f in fails)
    assert fails[0].alts, (fails[0].id, fails[0].fix)  # a fix that is an override is a structured one
    return fails[0].alts[0]


FAILING = [(c[0], c[1], c[2]) for c in CASES if "fail" in c[3].values()] + [
    ("README example: rollout.name left ???, no micro-batch sizes, mini > train batch",
     ["data.train_batch_size=60", "actor_rollout_ref.rollout.n=12", "trainer.n_gpus_per_node=6"], "0.9.1", False),
]


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("case", FAILING, ids=[c[0] for c in FAILING])
def test_the_printed_fix_all_line_makes_the_config_pass(case):
    name, overrides, release = case[:3]
    base = case[3] if len(case) > 3 else True
    _plan, found, _note = run_case(overrides, release, base=base)
    assert any(f.status == "fail" for f in found.values())
    line = _fix_all(found)
    words = ["%s=%s" % (k, "null" if v is None else v) for k, v in line.items()]
    _plan, after, _note = run_case(list(overrides) + words, release, base=base)
    assert not [f.id for f in after.values() if f.status == "fail"], (words, {
        i: f.message for i, f in after.items() if f.status == "fail"})
