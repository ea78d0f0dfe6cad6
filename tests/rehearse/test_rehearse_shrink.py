"""The model shrinker against transformers' own config classes (transformers 5.9.0, the version
verl 0.9.1's vllm extra pins): every shrunk config is built by the config class, the small model
is instantiated on CPU by the target script and has the same module tree (names with layer
numbers folded, module classes) as the full-size model on the meta device, and fewer parameters."""

import json
import os
import subprocess

import pytest

from envs import real_env
from preflight.probes.process import run_script
from preflight.rehearse.shrink import fallback_config, head_dim, shrink_config

pytestmark = pytest.mark.realenv

#: (transformers config class, tensor-parallel size): dense GQA, MHA, MoE, a sliding-window
#: model with explicit head_dim, and tied embeddings.
CASES = [("Qwen2Config", 1), ("Qwen2Config", 2), ("LlamaConfig", 1), ("MixtralConfig", 2), ("Qwen2MoeConfig", 1),
         ("Gemma2Config", 1), ("Qwen3Config", 2)]


@pytest.fixture(scope="module")
def tt():
    return real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])


def _defaults(py, name):
    out = subprocess.run([py, "-c", "import json, transformers; c = getattr(transformers, %r)(); "
                          "d = c.to_dict(); d['architectures'] = [%r]; print(json.dumps(d))" % (
                              name, name.replace("Config", "ForCausalLM"))],
                         stdout=subprocess.PIPE, check=True, universal_newlines=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,tp", CASES)
def test_shrunk_model_keeps_the_architecture(tt, tmp_path, name, tp):
    full = _defaults(tt, name)
    small, notes = shrink_config(full, tensor_size=tp)
    assert small["model_type"] == full["model_type"] and small["vocab_size"] == full["vocab_size"]
    assert head_dim(small) == head_dim(full)
    kv_f = full.get("num_key_value_heads") or full["num_attention_heads"]
    kv_s = small.get("num_key_value_heads") or small["num_attention_heads"]
    assert full["num_attention_heads"] // kv_f == small["num_attention_heads"] // kv_s
    assert kv_s % tp == 0 or tp % kv_s == 0
    for key in ("rope_theta", "rope_scaling", "rope_parameters", "tie_word_embeddings", "max_position_embeddings",
                "num_experts_per_tok", "sliding_window"):
        assert small.get(key) == full.get(key), key
    assert small["num_hidden_layers"] == 2 < full["num_hidden_layers"]
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(small))
    out = run_script(tt, "rehearse_model", {"out_dir": str(d), "full_config": full, "corpus": ["a b c d e f"] * 20,
                                            "probe_texts": ["hello"], "chat": False}, timeout=600)
    model, fm = out.last("model"), out.last("full")
    assert model is not None, out.describe()
    assert fm is not None, out.events
    assert model["patterns"] == fm["patterns"]
    assert model["params"] < fm["params"]
    assert "model.safetensors" in model["files"]
    # the config the target wrote is the one its own config class reads back
    back = subprocess.run([tt, "-c", "import transformers, json; c = transformers.AutoConfig.from_pretrained(%r); "
                           "print(json.dumps([type(c).__name__, c.num_hidden_layers, c.hidden_size]))" % str(d)],
                          stdout=subprocess.PIPE, check=True, universal_newlines=True)
    cls, layers, hidden = json.loads(back.stdout.strip().splitlines()[-1])
    assert cls == name and layers == 2 and hidden == small["hidden_size"]


def test_pipeline_and_expert_sizes_are_honoured():
    cfg = dict(fallback_config(), num_experts=64, num_experts_per_tok=8, model_type="qwen2_moe",
               moe_intermediate_size=1408)
    small, _ = shrink_config(cfg, pipeline_size=4, expert_size=16)
    assert small["num_hidden_layers"] == 4 and small["num_experts"] == 16 and small["num_experts_per_tok"] == 8
    with pytest.raises(ValueError, match="model_type"):
        shrink_config({"hidden_size": 8})


def test_fallback_is_named_and_builds(tt, tmp_path):
    small, _ = shrink_config(fallback_config())
    d = tmp_path / "fb"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(small))
    out = run_script(tt, "rehearse_model", {"out_dir": str(d), "corpus": ["two plus two is four"] * 50,
                                            "probe_texts": [[{"role": "user", "content": "hi"}]], "chat": True},
                     timeout=600)
    tok = out.last("tokenizer")
    assert tok["made"] is True and tok["has_chat_template"] and 0 <= tok["max_id"] < small["vocab_size"]
    assert out.last("model")["cls"] == "Qwen2ForCausalLM"
    assert os.path.exists(d / "tokenizer.json")
