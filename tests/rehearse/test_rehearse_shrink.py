"""The model shrinker against transformers' own config classes (transformers 5.9.0, the version
verl 0.9.1's vllm extra pins): every shrunk config is built by the config class, the small model
is instantiated on CPU by the target script and has the same module tree (names with layer
numbers folded, module classes) as the full-size model on the meta device, and fewer parameters.
The cases share one interpreter (torch and transformers imported once: about 15 s for all, where a
process per case took 40 s each); the fallback case runs the script the way a rehearsal does
(run_script)."""

import json
import os
import subprocess

import pytest

from envs import real_env
from preflight.probes.process import load_script, read_events, run_script
from preflight.rehearse.shrink import fallback_config, head_dim, shrink_config

pytestmark = pytest.mark.realenv

#: (transformers config class, tensor-parallel size): dense GQA, MHA, MoE, a sliding-window
#: model with explicit head_dim, and tied embeddings.
CASES = [("Qwen2Config", 1), ("Qwen2Config", 2), ("LlamaConfig", 1), ("MixtralConfig", 2), ("Qwen2MoeConfig", 1),
         ("Gemma2Config", 1), ("Qwen3Config", 2)]


@pytest.fixture(scope="module")
def tt():
    return real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])


_DEFAULTS = """
import json, sys, transformers
out = {}
for name in sys.argv[1:]:
    d = getattr(transformers, name)().to_dict()
    d["architectures"] = [name.replace("Config", "ForCausalLM")]
    out[name] = d
print(json.dumps(out))
"""

#: Runs the target script (prelude included, as load_script gives it) once per case in one
#: interpreter, each with its own ARGS and events file exactly as spawn_script hands them over
#: ($PREFLIGHT_ARGS, $PREFLIGHT_EVENTS), so torch and transformers are imported once; then reads
#: each written config back with transformers' AutoConfig.
_BATCH = """
import json, os, sys
code = compile(open(sys.argv[1]).read(), "<script rehearse_model>", "exec")
cases = json.load(open(sys.argv[2]))
import transformers
back = {}
for c in cases:
    os.environ["PREFLIGHT_ARGS"], os.environ["PREFLIGHT_EVENTS"] = c["args"], c["events"]
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit:
        pass
    cfg = transformers.AutoConfig.from_pretrained(c["dir"])
    back[c["id"]] = [type(cfg).__name__, cfg.num_hidden_layers, cfg.hidden_size]
print(json.dumps(back))
"""


def _last_json(py, code, *argv):
    out = subprocess.run([py, "-c", code] + list(argv), stdout=subprocess.PIPE, check=True, universal_newlines=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built(tt, tmp_path_factory):
    """{case id: (full config, small config, {event: fields}, config read back)} for every case."""
    root = tmp_path_factory.mktemp("shrink")
    full = _last_json(tt, _DEFAULTS, *sorted({n for n, _ in CASES}))
    cases, shrunk = [], {}
    for name, tp in CASES:
        cid = "%s-%d" % (name, tp)
        small, _ = shrink_config(full[name], tensor_size=tp)
        d = root / cid
        d.mkdir()
        (d / "config.json").write_text(json.dumps(small))
        (root / (cid + ".args")).write_text(json.dumps({
            "out_dir": str(d), "full_config": full[name], "corpus": ["a b c d e f"] * 20, "probe_texts": ["hello"],
            "chat": False}))
        cases.append({"id": cid, "dir": str(d), "args": str(root / (cid + ".args")),
                      "events": str(root / (cid + ".events"))})
        shrunk[cid] = (full[name], small)
    script = root / "rehearse_model.py"
    script.write_text(load_script("rehearse_model"))
    (root / "cases.json").write_text(json.dumps(cases))
    back = _last_json(tt, _BATCH, str(script), str(root / "cases.json"))
    out = {}
    for c in cases:
        ev = {e["event"]: e for e in read_events(c["events"])}
        out[c["id"]] = shrunk[c["id"]] + (ev, back[c["id"]], c["dir"])
    return out


@pytest.mark.parametrize("name,tp", CASES)
def test_shrunk_model_keeps_the_architecture(built, name, tp):
    full, small, ev, back, d = built["%s-%d" % (name, tp)]
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
    model, fm = ev.get("model"), ev.get("full")
    assert model is not None, ev
    assert fm is not None, ev
    assert model["patterns"] == fm["patterns"]
    assert model["params"] < fm["params"]
    assert "model.safetensors" in model["files"] and os.path.exists(os.path.join(d, "model.safetensors"))
    # the config the target wrote is the one its own config class reads back
    assert back == [name, 2, small["hidden_size"]]


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
