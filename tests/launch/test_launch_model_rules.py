"""Model-, machine- and launch-line-aware rules, and the fixes re-checked against every rule.

Inputs are the failing inputs of shared/reference/failure_cases_2.md (#34, #42) and
handed_cases_results.md (S1, S2, S5, #11, #21, #22, #25), plus more of each kind. Model
config.json files carry the values of the models' published configs (source next to each);
configs are composed from verl 0.9.1's stored defaults (the real packaged YAML), and the fix of
every failing finding is applied to that config and checked again by the same rules.
"""

import json
import os
import struct

import pytest

from fake_nvml import FakeNvml
from preflight.launch.compose import compose_stored, flatten, get_path
from preflight.launch.fixes import overlay
from preflight.launch.model import read_model
from preflight.launch.model_rules import count_visible, lora_targets, module_names, safetensors_names
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate, mandatory_keys, tp_fits_heads
from preflight.probes.nvml import collect

# Qwen3-4B config.json (huggingface.co/Qwen/Qwen3-4B): as failure_cases_2.md #34 gives it.
QWEN3_4B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "max_position_embeddings": 40960, "vocab_size": 151936}
# InternVL3-1B config.json (huggingface.co/OpenGVLab/InternVL3-1B): failure_cases_2.md #42.
INTERNVL3_1B = {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
                "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                             "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                             "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
                "llm_config": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
                               "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
                               "max_position_embeddings": 32768, "vocab_size": 151674},
                "vision_config": {"model_type": "intern_vit_6b"}}
# Llama-3.1-8B-Instruct config.json (huggingface.co/meta-llama/Llama-3.1-8B-Instruct): 32 heads, 8 KV heads.
LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
              "torch_dtype": "bfloat16"}
# Qwen2-VL-7B-Instruct keeps its numbers at the top level and a vision_config; Gemma 3 uses text_config.
GEMMA3_4B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
             "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
                             "num_key_value_heads": 4, "num_hidden_layers": 34, "max_position_embeddings": 131072,
                             "head_dim": 256, "intermediate_size": 10240, "vocab_size": 262208},
             "vision_config": {"model_type": "siglip_vision_model"}}
# DeepSeek-VL2 keeps the language model under language_config.
DSVL2_TINY = {"architectures": ["DeepseekVLV2ForCausalLM"], "model_type": "deepseek_vl_v2",
              "language_config": {"model_type": "deepseek_v2", "hidden_size": 1280, "num_attention_heads": 10,
                                  "num_key_value_heads": 10, "num_hidden_layers": 12,
                                  "max_position_embeddings": 4096, "vocab_size": 129280}}

BASE = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=8", "trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]


def model_dir(tmp_path, cfg, name="m", files=None):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    for fname, text in (files or {}).items():
        (d / fname).write_text(text if isinstance(text, str) else json.dumps(text))
    return str(d)


def compose(words, base=True, config_name=None):
    words = (BASE if base else []) + list(words)
    if config_name:
        words = ["--config-name=%s" % config_name] + words
    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + words), None, "0.9.1", env={})
    assert c.error is None, c.error.message
    return c


def run(words, model=None, machine=None, base=True, config_name=None, release="0.9.1"):
    c = compose(words, base, config_name)
    raw = lambda k, d=None: get_path(c.raw, k, d)  # noqa: E731
    _p, found, _ = evaluate(c.get, release, machine, model, "given" if model else "no model", mandatory_keys(
        flatten(c.resolved), c.get), raw=raw)
    return c, {f.id: f for f in found}


def failing(found):
    return {k: f for k, f in found.items() if f.status == "fail"}


def assert_fixes_pass(c, found, model=None, machine=None, release="0.9.1"):
    """Every alternative of every failing or warning finding, applied to the config, leaves that
    finding passing and fails no rule that passed; the one-line fix leaves nothing failing."""
    raw = lambda k, d=None: get_path(c.raw, k, d)  # noqa: E731
    before = set(failing(found))
    for f in failing(found).values():  # a grouped finding (item actor+critic) stands for both roles
        if f.item and "+" in f.item:
            before.update("%s.%s" % (f.rule, r) for r in f.item.split("+"))
    miss = mandatory_keys(flatten(c.resolved), c.get)
    for f in found.values():
        for alt in f.alts:
            g = overlay(c.get, raw, alt)
            _p, after, _ = evaluate(g, release, machine, model, "given", miss, raw=raw, verify=False)
            after = {x.id: x for x in after}
            if f.rule != "fix_line":
                own = [after.get("%s.%s" % (f.rule, r)) for r in f.item.split("+")] if f.item and "+" in f.item \
                    else [after.get(f.id)]
                assert all(o is None or o.status == "pass" for o in own), (f.id, alt, [o.message for o in own if o])
                new = {i for i, x in after.items() if x.status == "fail"} - before
                assert not new, (f.id, alt, new)
            else:
                assert not [i for i, x in after.items() if x.status == "fail"], (alt, after)


def nvml(n, cc=(9, 0), name="NVIDIA H100 80GB HBM3", total_mib=81920):
    return collect(FakeNvml([{"name": name, "cc": cc, "total": total_mib, "used": 0} for _ in range(n)]))


# ---- model reading ------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg,key,heads,kv,mpe", [
    (INTERNVL3_1B, "llm_config", 14, 2, 32768), (GEMMA3_4B, "text_config", 8, 4, 131072),
    (DSVL2_TINY, "language_config", 10, 10, 4096), (LLAMA31_8B, None, 32, 8, 131072)])
def test_vlm_layouts_are_read(tmp_path, cfg, key, heads, kv, mpe):
    facts, how = read_model(model_dir(tmp_path, cfg))
    assert (facts.text_key, facts.heads, facts.kv_heads, facts.max_position_embeddings) == (key, heads, kv, mpe)
    assert facts.params and facts.params > 1e8


# ---- case 42: auto_map and trust_remote_code ---------------------------------------------------
def test_fc42_custom_code_without_trust_remote_code(tmp_path):
    d = model_dir(tmp_path, INTERNVL3_1B, files={"configuration_internvl_chat.py": "", "modeling_internvl_chat.py": ""})
    model, _ = read_model(d)
    words = ["trainer.n_gpus_per_node=2", "data.train_batch_size=8", "data.max_prompt_length=1024",
             "data.max_response_length=1024", "actor_rollout_ref.model.path=%s" % d,
             "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
             "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.n=4"]
    c, found = run(words, model)
    f = found["trust_remote_code"]
    assert f.status == "fail"
    assert "actor_rollout_ref.model.trust_remote_code" in f.message and "data.trust_remote_code" in f.message
    assert f.alts == [{"actor_rollout_ref.model.trust_remote_code": True, "data.trust_remote_code": True}]
    # bug 5: the language model under llm_config is read, so max_position is checked, not skipped
    assert found["max_position"].status == "pass" and "32768" in found["max_position"].message
    assert_fixes_pass(c, found, model)
    _c, ok = run(words + ["actor_rollout_ref.model.trust_remote_code=True", "data.trust_remote_code=True"], model)
    assert ok["trust_remote_code"].status == "pass"
    # a GAE launch loads the same model as critic: its key is named too
    _c, gae = run(words + ["algorithm.adv_estimator=gae", "critic.model.path=%s" % d, "critic.ppo_mini_batch_size=8",
                           "critic.ppo_micro_batch_size_per_gpu=2"], model)
    assert "critic.model.trust_remote_code" in gae["trust_remote_code"].message


def test_custom_tokenizer_alone_needs_trust_remote_code(tmp_path):
    d = model_dir(tmp_path, LLAMA31_8B, files={"tokenizer_config.json": {
        "auto_map": {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}}})
    model, _ = read_model(d)
    _c, found = run(["actor_rollout_ref.model.path=%s" % d], model)
    assert found["trust_remote_code"].status == "fail"
    assert "tokenizer_config.json maps AutoTokenizer" in found["trust_remote_code"].message


# ---- case 34: dynamic batch token budgets --------------------------------------------------------
FC34 = ["data.train_batch_size=8", "data.max_prompt_length=8192", "data.max_response_length=32768",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=4"]


def test_fc34_token_budget_below_prompt_plus_response(tmp_path):
    model, _ = read_model(model_dir(tmp_path, QWEN3_4B))
    c, found = run(FC34 + ["actor_rollout_ref.actor.use_kl_loss=True"], model)
    f = found["token_budget.actor"]
    assert f.status == "fail" and "40960" in f.message and "16384" in f.message
    # ref and rollout interpolate the actor's budget: one finding, one fix on the actor's key
    assert "ref" in f.message and "rollout" in f.message
    assert f.alts == [{"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 40960}]
    assert "GPU memory grows" in f.fix
    assert [k for k in found if k.startswith("token_budget") and found[k].status == "fail"] == ["token_budget.actor"]
    assert found["max_position"].status == "pass"
    assert_fixes_pass(c, found, model)


def test_token_budget_with_ulysses_and_separate_ref_budget(tmp_path):
    model, _ = read_model(model_dir(tmp_path, QWEN3_4B))
    words = FC34 + ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=4", "actor_rollout_ref.model.use_remove_padding=True",
                    "actor_rollout_ref.actor.use_kl_loss=True",
                    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=8192"]
    c, found = run(words, model)
    # actor 16384 x 4 = 65536 holds 40960; the ref's own 8192 x 4 = 32768 does not
    assert found["token_budget.actor"].status == "pass"
    assert found["token_budget.ref"].status == "fail"
    assert found["token_budget.ref"].alts == [{"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": 10240}]
    assert_fixes_pass(c, found, model)


def test_critic_token_budget(tmp_path):
    model, _ = read_model(model_dir(tmp_path, QWEN3_4B))
    words = FC34[:3] + ["algorithm.adv_estimator=gae", "critic.use_dynamic_bsz=True",
                        "critic.ppo_max_token_len_per_gpu=32768", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                        "critic.ppo_mini_batch_size=8"]
    c, found = run(words, model)
    f = found["token_budget.critic"]
    assert f.status == "fail" and "critic forward" in f.message  # forward_max_token_len_per_gpu interpolates it
    assert f.alts == [{"critic.ppo_max_token_len_per_gpu": 40960}]
    assert_fixes_pass(c, found, model)


# ---- rollout TP vs heads, and suggested fixes that pass every rule ------------------------------------
def test_tp_fits_heads_matches_vllm():
    assert tp_fits_heads(2, 32, 8) and tp_fits_heads(8, 32, 8) and tp_fits_heads(16, 32, 8)  # 8 KV heads replicated
    assert not tp_fits_heads(3, 32, 8) and not tp_fits_heads(6, 32, 8)
    assert tp_fits_heads(4, 28, 4) and not tp_fits_heads(8, 28, 4)   # Qwen2.5-7B: 28 heads
    assert tp_fits_heads(2, 14, 2) and not tp_fits_heads(4, 14, 2)   # Qwen2.5-0.5B: 14 heads


def test_tp3_on_32_heads_fails(tmp_path):
    model, _ = read_model(model_dir(tmp_path, LLAMA31_8B))
    c, found = run(["trainer.n_gpus_per_node=6", "data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=30",
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                    "actor_rollout_ref.rollout.tensor_model_parallel_size=3"], model)
    f = found["rollout_tp_heads"]
    assert f.status == "fail" and "32 attention heads are not divisible by TP 3" in f.message
    assert found["rollout_tp_world"].status == "pass"
    assert [a["actor_rollout_ref.rollout.tensor_model_parallel_size"] for a in f.alts] == [2]
    assert_fixes_pass(c, found, model)


def test_tp4_on_6_gpus_suggests_only_values_that_run(tmp_path):
    """The issue's example: TP 4 on 6 GPUs used to suggest '3 or 6', which a 32-head model cannot use."""
    model, _ = read_model(model_dir(tmp_path, LLAMA31_8B))
    c, found = run(["trainer.n_gpus_per_node=6", "data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=30",
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                    "actor_rollout_ref.rollout.tensor_model_parallel_size=4"], model)
    f = found["rollout_tp_world"]
    assert f.status == "fail"
    vals = [a["actor_rollout_ref.rollout.tensor_model_parallel_size"] for a in f.alts]
    assert vals == [2] and f.fix.split(" (")[0] == "set actor_rollout_ref.rollout.tensor_model_parallel_size to 2"
    assert_fixes_pass(c, found, model)
    # without the model the world size alone decides
    _c, nomodel = run(["trainer.n_gpus_per_node=6", "data.train_batch_size=60",
                       "actor_rollout_ref.actor.ppo_mini_batch_size=30", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                       "actor_rollout_ref.rollout.tensor_model_parallel_size=4"])
    assert [a["actor_rollout_ref.rollout.tensor_model_parallel_size"] for a in nomodel["rollout_tp_world"].alts] == [3, 6]


# ---- S1: nothing wrong, no crash; S5: a fix never trips another rule -------------------------------
@pytest.mark.parametrize("gpus,batch", [(8, 8), (2, 2), (48, 48), (1, 1)])
def test_s1_batch_equal_to_mini_does_not_crash(gpus, batch):
    c, found = run(["trainer.n_gpus_per_node=%d" % gpus, "data.train_batch_size=%d" % batch,
                    "actor_rollout_ref.actor.ppo_mini_batch_size=%d" % batch, "actor_rollout_ref.rollout.n=1",
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                    "actor_rollout_ref.rollout.tensor_model_parallel_size=1"])
    assert not failing(found), failing(found)


@pytest.mark.parametrize("words", [
    ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=4"],           # case 28, S5
    ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8"],
    ["data.train_batch_size=60", "actor_rollout_ref.actor.ppo_mini_batch_size=64", "actor_rollout_ref.rollout.n=1",
     "trainer.n_gpus_per_node=4"],
    ["trainer.nnodes=3", "trainer.n_gpus_per_node=16", "data.train_batch_size=32", "actor_rollout_ref.rollout.n=1"],
    ["trainer.n_gpus_per_node=6", "data.train_batch_size=60", "actor_rollout_ref.rollout.n=12",
     "actor_rollout_ref.actor.ppo_mini_batch_size=7"],
    ["actor_rollout_ref.rollout.tensor_model_parallel_size=3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"],
    ["algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=4", "critic.ppo_micro_batch_size_per_gpu=8",
     "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.rollout.n=1"],
])
def test_every_fix_passes_every_rule(tmp_path, words):
    model, _ = read_model(model_dir(tmp_path, LLAMA31_8B))
    c, found = run(words, model)
    assert failing(found)
    assert_fixes_pass(c, found, model)
    if len(failing(found)) >= 2:
        line = found["fix_line"]
        assert line.alts and "still failing" not in line.message, line.message


def test_actor_and_critic_share_a_root_cause():
    c, found = run(["algorithm.adv_estimator=gae", "actor_rollout_ref.rollout.n=1",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=4", "critic.ppo_mini_batch_size=4",
                    "critic.ppo_micro_batch_size_per_gpu=4"])
    grouped = [k for k in found if k.startswith("mini_per_gpu.")]
    assert grouped == ["mini_per_gpu.actor+critic"], grouped
    f = found["mini_per_gpu.actor+critic"]
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=8" in f.fix and "critic.ppo_mini_batch_size=8" in f.fix
    assert_fixes_pass(c, found)


# ---- Megatron: DP = world / (TP x PP x CP), virtual pipeline (case 25, S2) ----------------------------
MG = ["actor_rollout_ref.actor.strategy=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
      "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2", "trainer.nnodes=6", "trainer.n_gpus_per_node=8",
      "actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"]


def test_s2_valid_megatron_tp2_pp2_passes():
    c, found = run(MG + ["data.train_batch_size=24", "actor_rollout_ref.actor.ppo_mini_batch_size=12"],
                   config_name="ppo_megatron_trainer")
    assert found["mini_per_gpu.actor"].status == "pass"
    assert "Megatron data-parallel size 12" in found["mini_per_gpu.actor"].message
    assert found["megatron_world"].status == "pass" and found["train_batch_divisible"].status == "pass"
    assert not failing(found), failing(found)


def test_fc25_megatron_batch_and_vpp():
    c, found = run(MG + ["data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=16"],
                   config_name="ppo_megatron_trainer")
    assert found["train_batch_divisible"].status == "fail" and "data-parallel size 12" in found[
        "train_batch_divisible"].message
    assert_fixes_pass(c, found)
    # VPP 2: 12 x 1 / 12 = 1 sequence per rank, 1 micro-batch < PP 2
    c, found = run(MG + ["data.train_batch_size=24", "actor_rollout_ref.actor.ppo_mini_batch_size=12",
                         "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size=2"],
                   config_name="ppo_megatron_trainer")
    f = found["megatron_vpp"]
    assert f.status == "fail" and "needs >= PP 2 micro-batches" in f.message
    assert f.alts and all(a.get("actor_rollout_ref.actor.ppo_mini_batch_size", 0) >= 24 for a in f.alts)
    assert_fixes_pass(c, found)


# ---- case 11: compute capability 7.0 ------------------------------------------------------------
def test_fc11_v100_with_bf16_and_remove_padding(tmp_path):
    machine = {"nvml": nvml(4, cc=(7, 0), name="Tesla V100-SXM2-32GB", total_mib=32768), "host": {}, "env": {}}
    c, found = run(["trainer.n_gpus_per_node=4", "actor_rollout_ref.model.use_remove_padding=True"], machine=machine)
    f = found["compute_capability"]
    assert f.status == "fail" and "Tesla V100-SXM2-32GB has compute capability 7.0" in f.message
    assert "actor_rollout_ref.model.use_remove_padding" in f.message and "bf16" in f.message
    alt = f.alts[0]
    assert alt["actor_rollout_ref.model.use_remove_padding"] is False
    assert alt["actor_rollout_ref.rollout.dtype"] == "float16"
    _c, h100 = run(["trainer.n_gpus_per_node=4", "actor_rollout_ref.model.use_remove_padding=True"],
                   machine={"nvml": nvml(4), "host": {}, "env": {}})
    assert h100["compute_capability"].status == "pass"


# ---- launch line GPUs without NVML; ray num_cpus with the release's key --------------------------------
def test_count_visible():
    assert count_visible("3") == 1 and count_visible("0,1,2,3") == 4 and count_visible("0,1,-1,3") == 2
    assert count_visible("") == 0 and count_visible("GPU-8a1b,GPU-77c2") == 2 and count_visible("0,0") == 1


def test_cuda_visible_devices_in_the_launch_line_without_nvml():
    no_nvml = {"error": {"kind": "library_not_found", "message": "libnvidia-ml.so.1 not found"}}
    c, found = run([], machine={"nvml": no_nvml, "host": {}, "env": {"CUDA_VISIBLE_DEVICES": "3"},
                                "launch_env": {"CUDA_VISIBLE_DEVICES": "3"}})
    f = found["gpus_launch"]
    assert f.status == "fail" and "CUDA_VISIBLE_DEVICES=3 (1 GPU(s)" in f.message and "n_gpus_per_node=8" in f.message
    # one GPU cannot hold the launch's rollout TP 2: the fix carries TP 1 with it
    assert f.alts == [{"trainer.n_gpus_per_node": 1, "actor_rollout_ref.rollout.tensor_model_parallel_size": 1}]
    _c, ok = run([], machine={"nvml": no_nvml, "host": {}, "env": {}, "launch_env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}})
    assert ok["gpus_launch"].status == "pass"


def test_fc21_ray_num_cpus_with_affinity_limit():
    host = {"cpu": {"logical": 128, "affinity": 8, "cgroup_quota": None, "usable": 8}}
    c, found = run([], machine={"nvml": nvml(8), "host": host, "env": {}})
    f = found["ray_num_cpus"]
    assert f.status == "fail" and f.alts == [{"ray_kwargs.ray_init.num_cpus": 8}]
    assert "ray_kwargs.ray_init.num_cpus=null" in f.message and "8 of 128" in f.message
    _c, ok = run(["ray_kwargs.ray_init.num_cpus=8"], machine={"nvml": nvml(8), "host": host, "env": {}})
    assert ok["ray_num_cpus"].status == "pass"
    # a machine without GPUs (a login node) is not the training node: not judged
    _c, login = run([], machine={"nvml": {"error": {"kind": "library_not_found"}}, "host": host, "env": {}})
    assert login["ray_num_cpus"].status == "skip" and login["host_memory"].status == "skip"
    # an older release's config has the top-level key: the rule names that one
    from preflight.launch.model_rules import ray_num_cpus
    from preflight.launch.rules import load_rules, ruleset
    from preflight.launch.rules.context import RuleContext

    x = RuleContext(ruleset("0.4.1")[0], load_rules()["rule"])
    old = {"ray_init": {"num_cpus": None}}
    ray_num_cpus(x, lambda k, d=None: get_path(old, k, d), host)
    assert x.out[0].alts == [{"ray_init.num_cpus": 8}]


# ---- LoRA target_modules ------------------------------------------------------------------------
def write_safetensors(path, names):
    """A safetensors file as the format defines it: u64 little-endian header size, JSON header."""
    head = {n: {"dtype": "BF16", "shape": [2], "data_offsets": [4 * i, 4 * i + 4]} for i, n in enumerate(names)}
    head["__metadata__"] = {"format": "pt"}
    blob = json.dumps(head).encode()
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(blob)) + blob + b"\0" * (4 * len(names)))


LLAMA_PARAMS = ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"] + [
    "model.layers.%d.%s.weight" % (i, m) for i in range(2) for m in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm")]


def test_lora_target_modules_from_index_and_header(tmp_path):
    d = model_dir(tmp_path, LLAMA31_8B, files={"model.safetensors.index.json": {
        "metadata": {"total_size": 16060522496}, "weight_map": {n: "model-00001-of-00004.safetensors" for n in LLAMA_PARAMS}}})
    model, _ = read_model(d)
    mods, src = module_names(model)
    assert "model.layers.0.self_attn.q_proj" in mods and src == "model.safetensors.index.json"
    c, found = run(["actor_rollout_ref.model.path=%s" % d, "actor_rollout_ref.model.lora_rank=16",
                    "actor_rollout_ref.model.target_modules=[q_proj,v_proj,qkv_proj]"], model)
    f = found["lora_modules"]
    assert f.status == "fail" and "qkv_proj" in f.message and "q_proj," not in f.message.split("match")[0]
    assert f.alts == [{"actor_rollout_ref.model.target_modules": ["q_proj", "v_proj"]}]
    assert_fixes_pass(c, found, model)
    _c, ok = run(["actor_rollout_ref.model.lora_rank=16", "actor_rollout_ref.model.target_modules=all-linear"], model)
    assert ok["lora_modules"].status == "pass"
    # a single-file model: names from the safetensors header
    d2 = model_dir(tmp_path, LLAMA31_8B, name="single")
    write_safetensors(os.path.join(d2, "model.safetensors"), LLAMA_PARAMS)
    assert safetensors_names(os.path.join(d2, "model.safetensors")) == sorted(LLAMA_PARAMS)
    m2, _ = read_model(d2)
    _c, found = run(["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.target_modules=[gate_proj,up_proj]"], m2)
    assert found["lora_modules"].status == "pass" and "model.safetensors header" in found["lora_modules"].message
    assert lora_targets("q_proj, v_proj") == ["q_proj", "v_proj"] and lora_targets("all-linear") is None


# ---- default reward functions per release, generated from the wheels --------------------------------------
def test_default_reward_sources_from_the_wheels():
    from preflight.launch.dataset import default_sources
    from preflight.launch.rules import ruleset

    got = default_sources("0.9.1")
    # the 0.9.1 list in verl_rules.toml was read from the wheel by hand: the generated one agrees
    rs = ruleset("0.9.1")[0]
    assert got["exact"] and got["sources"] == set(rs["default_reward_sources"])
    assert got["prefixes"] == rs["default_reward_prefixes"]
    old = default_sources("0.1")
    assert old["exact"] and old["sources"] == {"openai/gsm8k", "lighteval/MATH"}
    assert "hiyouga/geometry3k" not in default_sources("0.2")["sources"]
    assert "hiyouga/geometry3k" in default_sources("0.3.0.post1")["sources"]
    near = default_sources("0.9.2")
    assert near["label"] == "0.9.1" and not near["exact"]


@pytest.mark.realenv
def test_reward_sources_file_matches_the_wheels():
    """The generator re-reads every release's PyPI wheel (cached) and must reproduce the stored file."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, os.path.join(root, "tools", "gen_reward_sources.py"), "--check"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]


# ---- Megatron needs (cases 14, 15) ------------------------------------------------------------------
def megatron_env(tmp_path, core_version=None, layout="core_0.4"):
    """A venv (no pip) with a megatron-core of the given version laid out as that release is:
    core 0.4.0 has megatron.core but no megatron.core.distributed / megatron.core.optimizer."""
    import subprocess
    import sys

    from envs import _dist_info, _site

    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    if core_version:
        _dist_info(site, "megatron-core", core_version)
        os.makedirs(os.path.join(site, "megatron", "core"))
        open(os.path.join(site, "megatron", "__init__.py"), "w").close()
        with open(os.path.join(site, "megatron", "core", "__init__.py"), "w") as fh:
            fh.write("__version__ = %r\n" % core_version)
        if layout == "core_0.11":
            os.makedirs(os.path.join(site, "megatron", "core", "distributed"))
            os.makedirs(os.path.join(site, "megatron", "core", "optimizer"))
            with open(os.path.join(site, "megatron", "core", "distributed", "__init__.py"), "w") as fh:
                fh.write("class DistributedDataParallelConfig:\n    pass\n")
            open(os.path.join(site, "megatron", "core", "optimizer", "__init__.py"), "w").close()
    return os.path.join(venv, "bin", "python")


def megatron_result(py, release, strategy="megatron"):
    from preflight import matrix as mx
    from preflight.context import Context, Options
    from preflight.checks.megatron import megatron_outcome

    c = compose(["actor_rollout_ref.actor.strategy=%s" % strategy], config_name="ppo_megatron_trainer"
                if strategy == "megatron" else None)
    ctx = Context(Options(python=py, verl=release, timeout=60), mx.load())
    return megatron_outcome(ctx, c, release)


def test_fc15_megatron_core_too_old(tmp_path):
    py = megatron_env(tmp_path, "0.4.0")
    o = megatron_result(py, "0.3.0.post1")
    assert o.status.value == "fail", o.message
    assert "megatron-core 0.4.0 is older than 0.11.0" in o.message
    assert "megatron.core.distributed" in o.message and "No module named" in o.message
    assert "megatron-core>=0.11.0" in o.fix
    assert megatron_result(py, "0.3.0.post1", strategy="fsdp").status.value == "pass"  # FSDP is never asked


def test_fc14_megatron_lm_checkout_missing_and_new_core_passes(tmp_path):
    py = megatron_env(tmp_path, "0.4.0")
    o = megatron_result(py, "0.1")
    assert o.status.value == "fail" and "megatron.optimizer" in o.message and "PYTHONPATH" in o.fix
    good = megatron_env(tmp_path / "g", "0.11.0", layout="core_0.11")
    assert megatron_result(good, "0.3.0.post1").status.value == "pass"
    o = megatron_result(good, "0.9.1")  # 0.9.1's [megatron] extra also installs megatron-bridge
    assert o.status.value == "fail" and "megatron-bridge is not installed" in o.message
    none = megatron_env(tmp_path / "n", None)
    o = megatron_result(none, "0.6.1")
    assert o.status.value == "fail" and "megatron-core is not installed" in o.message


def test_values_table_after_a_failed_composition_shows_defaults():
    """Review finding (case 33): when an override fails, Hydra applies none, so no value is labelled
    as an override."""
    from rich.console import Console

    from preflight.report.launch import values_table

    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo", "data.train_batch_size=32",
                                     "actor_rollout_ref.actor.fsdp_config.grad_offload=False",
                                     "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=4"]),
                       None, "0.9.1", env={})
    assert c.error is not None
    con = Console(record=True, width=200)
    con.print(values_table(c))
    text = con.export_text()
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip()}
    assert "1024" in rows["train_batch_size"] and "default (override not" in rows["train_batch_size"]
    assert "???" in rows["name"] and "default (override not" in rows["name"]
    assert not [ln for ln in text.splitlines() if ln.rstrip().endswith(" override")]


def test_fc11_check_with_a_launch_fails_on_v100(ctx_factory, tmp_path):
    """case 11 through the check pipeline (check --launch): the config stage sees NVML's V100s."""
    from helpers import rows

    snap = nvml(4, cc=(7, 0), name="Tesla V100-SXM2-32GB", total_mib=32768)
    ctx = ctx_factory(nvml=snap, host={"cpu": {"logical": 8, "usable": 8}, "memory": {"total": 256 << 30}},
                      verl="0.9.1")
    ctx.options.extra.update({"launch": ["python3", "-m", "verl.trainer.main_ppo"] + BASE + [
        "trainer.n_gpus_per_node=4", "actor_rollout_ref.model.use_remove_padding=True"]})
    got = rows(ctx, ["config"])
    r = got["config.rules.compute_capability"]
    assert r.status.value == "fail" and "compute capability 7.0" in r.message and "use_remove_padding=False" in r.fix


# A small Llama (the architecture of Llama-3.1-8B with fewer, narrower layers): transformers builds
# LlamaForCausalLM from it on the meta device; nothing is downloaded.
TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
              "vocab_size": 1000, "torch_dtype": "bfloat16"}


@pytest.mark.realenv
def test_lora_target_modules_from_the_meta_device(tmp_path):
    """No weights on disk: the module names come from transformers building the architecture on the meta
    device in the target (real torch and transformers)."""
    import subprocess
    import sys

    from envs import real_env
    from preflight.launch.model_rules import meta_module_names

    py = real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])
    d = model_dir(tmp_path, TINY_LLAMA)
    model, _ = read_model(d)
    names, src = meta_module_names(py, model, timeout=300)
    assert "model.layers.1.self_attn.q_proj" in names and "LlamaForCausalLM built on the meta device" == src
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-m", "preflight", "config", "--python", py, "--verl", "0.9.1", "--json", "-",
                          "--"] + BASE + ["actor_rollout_ref.model.path=%s" % d, "actor_rollout_ref.model.lora_rank=8",
                                          "actor_rollout_ref.model.target_modules=[q_proj,qkv_proj]"],
                         capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=root))
    res = {r["id"]: r for r in json.loads(out.stdout)["results"]}
    r = res["config.rules.lora_modules"]
    assert r["status"] == "fail" and "qkv_proj" in r["message"] and "meta device" in r["message"], r
    assert "[q_proj]" in r["fix"]
    # without torch/transformers in the target the rule says why it could not check
    bare = real_env("data-jinja", ["pyarrow==19.0.1", "jinja2==3.1.6"])
    names, why = meta_module_names(bare, model, timeout=120)
    assert names is None and "cannot import torch/transformers" in why


def test_cuda_visible_devices_in_the_launch_line_with_nvml():
    """With NVML the launch line's CUDA_VISIBLE_DEVICES narrows the GPUs it sees (item 3 of the issue)."""
    env = {"CUDA_VISIBLE_DEVICES": "3"}
    c, found = run([], machine={"nvml": nvml(8), "host": {}, "env": env, "launch_env": env})
    f = found["gpus_present"]
    assert f.status == "fail" and "CUDA_VISIBLE_DEVICES='3' leaves 1 of 8 GPU(s)" in f.message
    assert f.alts and f.alts[0]["trainer.n_gpus_per_node"] == 1


def test_random_launches_every_fix_and_line_pass():
    """Seeded random launches (sizes, strategies, models, a V100 machine with CPU affinity): no rule
    crashes, every failing or warning finding has a fix, each offered fix passes on its own, and the
    one-line fix leaves nothing failing (or says what it could not fix)."""
    import random

    rnd = random.Random(15)
    models = [None, read_model(model_dir_plain(LLAMA31_8B, "fz_llama"))[0],
              read_model(model_dir_plain(INTERNVL3_1B, "fz_internvl"))[0]]
    pick = {"data.train_batch_size": [1, 7, 8, 48, 60, 1024], "actor_rollout_ref.rollout.n": [1, 4, 5, 16],
            "trainer.n_gpus_per_node": [1, 3, 4, 6, 8], "trainer.nnodes": [1, 3],
            "actor_rollout_ref.actor.ppo_mini_batch_size": [1, 4, 7, 16, 256],
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": ["null", 1, 3, 8],
            "actor_rollout_ref.rollout.tensor_model_parallel_size": [1, 3, 4, 16],
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size": [1, 3, 4],
            "actor_rollout_ref.actor.use_dynamic_bsz": [True, False], "data.max_response_length": [512, 32768],
            "algorithm.adv_estimator": ["grpo", "gae"], "critic.ppo_micro_batch_size_per_gpu": [1, 9],
            "actor_rollout_ref.model.use_remove_padding": [True, False]}
    v100 = {"nvml": nvml(4, cc=(7, 0), name="Tesla V100-SXM2-32GB", total_mib=32768),
            "host": {"memory": {"total": 96 << 30}, "cpu": {"logical": 64, "usable": 8}}, "env": {}}
    for _ in range(12):  # each composes with Hydra (about a second); bench/config_rules.py times the rules
        words = ["%s=%s" % (k, rnd.choice(vs)) for k, vs in pick.items() if rnd.random() < 0.4]
        model, machine = rnd.choice(models), rnd.choice([None, v100])
        c, found = run(words, model, machine)
        for f in found.values():
            assert f.status not in ("fail", "warn") or f.fix, (f.id, words)
        line = found.get("fix_line")
        if line is not None and "still failing" in line.message:
            line.alts = []  # it says what it leaves; the rest of its claim is checked below
        assert_fixes_pass(c, found, model, machine)


def model_dir_plain(cfg, name):
    import tempfile

    d = os.path.join(tempfile.mkdtemp(), name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    return d


@pytest.mark.realenv
def test_a_model_directory_without_config_json_fails(tmp_path):
    """A model path that is a directory but no checkpoint (no config.json): a FAIL naming it, as
    transformers' own AutoConfig (what verl's start-up calls) refuses it in a real verl env."""
    import subprocess

    from envs import real_env

    py = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    d = tmp_path / "not-a-model"
    d.mkdir()
    truth = subprocess.run([py, "-c", "import sys\nfrom transformers import AutoConfig\ntry:\n"
                            "    AutoConfig.from_pretrained(sys.argv[1])\n    print('loaded')\n"
                            "except Exception as e:\n    print(type(e).__name__)\n", str(d)],
                           stdout=subprocess.PIPE, universal_newlines=True, timeout=300,
                           env=dict(os.environ, HF_HUB_OFFLINE="1")).stdout.split()
    assert truth and truth[-1] != "loaded", truth
    words = ["python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.model.path=%s" % d]
    comp = compose_stored(parse_launch(words), None, "0.9.1")
    model, why = read_model(str(d))
    assert model is None and why.endswith("has no config.json")
    found = [f for f in evaluate(comp.get, "0.9.1", {}, model, why)[1] if f.rule == "model_path"]
    assert [f.status for f in found] == ["fail"] and str(d) in found[0].message
