"""Runs the `config`-level handed failure cases (shared/reference/failure_cases*.md) through
`preflight config` (no verl in the target: the rules and facts alone) and prints, per case, whether
a FAIL (or, where the case accepts it, a WARN) row names what the case expects.

    python3 bench/handed_config_cases.py
"""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = ["python3", "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=grpo", "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1", "actor_rollout_ref.rollout.name=vllm",
        "trainer.logger=[console]"]


def model(tmp, name, cfg, tok=None, files=()):
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    if tok is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
            json.dump(tok, fh)
    for f in files:
        open(os.path.join(d, f), "w").close()
    return d


def run(verl, gpus, words):
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "preflight", "config", "-q", "--json", "-", "--verl", verl, "--gpus",
                        str(gpus), "--"] + words, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return p.returncode, json.loads(p.stdout)["results"]


def hit(rows, needles, statuses=("fail",)):
    for r in rows:
        text = " ".join([r["id"], r["message"], r.get("fix") or ""])
        if r["status"] in statuses and all(any(n in text for n in alt[0].split("|")) for alt in needles):
            return r["id"]
    return None


def main():
    tmp = tempfile.mkdtemp(prefix="handed-")
    q7 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28,
          "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 131072, "vocab_size": 152064}
    tmpl = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    m47 = model(tmp, "qwen7b", q7, {"chat_template": tmpl})
    m48 = model(tmp, "base", {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                              "max_position_embeddings": 16384, "vocab_size": 32256}, {"tokenizer_class": "X"})
    m34 = model(tmp, "qwen3", {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560,
                               "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                               "head_dim": 128, "max_position_embeddings": 40960, "vocab_size": 151936},
                {"chat_template": tmpl})
    m42 = model(tmp, "internvl", {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
                                  "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                                               "AutoModel": "modeling_internvl_chat.InternVLChatModel"},
                                  "llm_config": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                                                 "hidden_size": 896, "num_hidden_layers": 24,
                                                 "num_attention_heads": 14, "num_key_value_heads": 2,
                                                 "max_position_embeddings": 32768, "vocab_size": 151674}},
                {"chat_template": tmpl}, files=("configuration_internvl_chat.py", "modeling_internvl_chat.py"))
    m51 = model(tmp, "qwen35moe", {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                                   "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048,
                                                   "num_hidden_layers": 40, "num_attention_heads": 16,
                                                   "num_key_value_heads": 2, "num_experts": 256,
                                                   "max_position_embeddings": 262144, "vocab_size": 248320}},
                {"chat_template": tmpl})
    rw = os.path.join(tmp, "rw.py")
    with open(rw, "w") as fh:
        fh.write("def char_count_reward_function(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    return 0.0\n")
    meg = ["python3", "-m", "verl.trainer.main_ppo", "--config-name=ppo_megatron_trainer"] + BASE[3:]
    cases = [
        ("23", "0.9.1", 16, BASE + ["trainer.nnodes=3", "data.train_batch_size=32"], [["train_batch_size"]], ("fail",)),
        ("25", "0.9.1", 8, meg + ["actor_rollout_ref.actor.strategy=megatron",
                                  "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                                  "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2", "trainer.nnodes=6",
                                  "data.train_batch_size=16"], [["train_batch_size"]], ("fail",)),
        ("28", "0.9.1", 8, BASE + ["actor_rollout_ref.rollout.n=1", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                                   "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"], [["micro"]], ("fail",)),
        ("33", "0.9.1", 8, BASE + ["actor_rollout_ref.actor.fsdp_config.grad_offload=False"],
         [["grad_offload"], ["delete|remove"]], ("fail",)),
        ("33+", "0.9.1", 8, BASE + ["+actor_rollout_ref.actor.fsdp_config.grad_offload=False"], [["grad_offload"]],
         ("fail",)),
        ("34", "0.9.1", 8, BASE + ["data.max_prompt_length=8192", "data.max_response_length=32768",
                                   "actor_rollout_ref.model.path=" + m34, "actor_rollout_ref.actor.use_dynamic_bsz=True",
                                   "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384", "actor_rollout_ref.rollout.n=4"],
         [["max_token_len|token_len_per_gpu"], ["40960"]], ("fail",)),
        ("42", "0.9.1", 2, BASE + ["actor_rollout_ref.model.path=" + m42, "data.max_prompt_length=1024",
                                   "data.max_response_length=1024"], [["trust_remote_code"]], ("fail",)),
        ("47", "0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m47,
                                   "actor_rollout_ref.rollout.tensor_model_parallel_size=8"],
         [["tensor_model_parallel_size"], ["28"]], ("fail",)),
        ("48", "0.9.1", 8, BASE + ["actor_rollout_ref.model.path=" + m48], [["chat_template|chat template"]], ("fail",)),
        ("49", "0.5.0", 8, BASE + ["reward_model.reward_manager=prime", "custom_reward_function.path=" + rw,
                                   "custom_reward_function.name=char_count_reward_function"],
         [["prime"], ["pickl|serializ|naive"]], ("fail",)),
        ("50", "0.6.0", 8, BASE + ["actor_rollout_ref.model.lora_rank=1", "actor_rollout_ref.model.lora_alpha=2",
                                   "actor_rollout_ref.model.target_modules=all-linear",
                                   "actor_rollout_ref.rollout.load_format=safetensors"], [["lora_rank"], ["8"]],
         ("fail",)),
        ("51", "0.9.1", 8, meg + ["actor_rollout_ref.model.path=" + m51,
                                  "actor_rollout_ref.actor.megatron.use_mbridge=True",
                                  "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
                                  "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=4"],
         [["tensor_model_parallel_size"], ["num_query_groups|num_key_value_heads|KV heads|KV groups"]], ("fail", "warn")),
        ("52", "0.5.0", 8, BASE + ["data.max_prompt_length=2048", "data.max_response_length=8192"],
         [["max_num_batched_tokens"]], ("fail",)),
    ]
    caught = []
    for cid, verl, gpus, words, needles, statuses in cases:
        rc, rows = run(verl, gpus, words)
        h = hit(rows, needles, statuses)
        print("%-4s verl %-6s %-8s %s" % (cid, verl, "CAUGHT" if h else "MISSED", h or ""))
        if h:
            caught.append(cid)
    rc, rows = run("0.9.1", 8, BASE + ["data.max_prompt_length=2048", "data.max_response_length=8192"])
    neg = hit(rows, [["max_num_batched_tokens"]])
    print("52 negative control (0.9.1): %s" % ("FALSE FAIL " + neg if neg else "no FAIL (right)"))
    print("caught %d of %d config-level cases: %s" % (len(caught), len(cases), ", ".join(caught)))


if __name__ == "__main__":
    main()
