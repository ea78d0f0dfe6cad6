"""Mechanism "one strict JSON reader for input files" (F10): ``paths.loads_json`` refuses NaN,
Infinity, -Infinity and numbers a float cannot hold (1e400), one line naming the file and the key;
the model's dimensions (heads, layers, sizes) must be positive whole numbers, else the model is
reported unreadable naming the key, never a crash (``int(float('nan'))``)."""

import json
import os
import subprocess
import sys
import time

import pytest

from preflight.launch.model import read_model
from preflight.paths import loads_json

CRASH = pytest.mark.fault("CRASH")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = ('{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, '
          '"num_attention_heads": %s, "num_key_value_heads": 2, "num_hidden_layers": 24, "vocab_size": 151936, '
          '"intermediate_size": 4864, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}')
#: (the value written for num_attention_heads, what the reason must say)
BAD = [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e400", "1e400"),
       ("-14", "-14"), ('"32"', '"32"'), ("true", "true"), ("0", "0"), ("3.5", "3.5")]


@CRASH
@pytest.mark.parametrize("value,shown", BAD, ids=[b[0] for b in BAD])
def test_a_bad_head_count_names_the_key(tmp_path, value, shown):
    (tmp_path / "config.json").write_text(CONFIG % value)
    facts, why = read_model(str(tmp_path))
    assert facts is None
    assert "num_attention_heads" in why and shown in why and str(tmp_path / "config.json") in why, why
    assert "\n" not in why


def test_a_good_config_still_reads(tmp_path):
    (tmp_path / "config.json").write_text(CONFIG % "14.0")
    facts, why = read_model(str(tmp_path))
    assert facts is not None and facts.heads == 14 and facts.kv_heads == 2, why


@CRASH
@pytest.mark.parametrize("doc,key", [('{"a": NaN}', "'a'"), ('{"b": {"c": Infinity}}', "'c'"),
                                     ('{"d": [1, -Infinity]}', "'d'"), ('{"e": 1e999}', "'e'"),
                                     ("[NaN]", None), ("NaN", None)])
def test_the_reader_refuses_non_finite_numbers(doc, key):
    assert json.loads(doc) is not None  # Python's own json takes them
    with pytest.raises(ValueError) as e:
        loads_json(doc, "/x/f.json")
    msg = str(e.value)
    assert msg.startswith("/x/f.json: ") and "\n" not in msg and (key is None or "key %s" % key in msg), msg
    assert loads_json(b'{"a": 1.5, "b": [1e300]}', "f") == {"a": 1.5, "b": [1e300]}


@CRASH
@pytest.mark.parametrize("value", ["NaN", "1e400", '"32"'])
def test_config_cli_with_a_hostile_model_config_is_a_row(tmp_path, value):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(CONFIG % value)
    out = tmp_path / "c.json"
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "preflight", "config", "--verl", "0.9.1", "--timeout", "5", "--json",
                        str(out), "--", "actor_rollout_ref.model.path=%s" % d], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert "Traceback" not in p.stderr and "crashed" not in p.stderr + p.stdout, p.stderr[-2000:]
    text = out.read_text()
    assert "crashed" not in text and "num_attention_heads" in text, text[-2000:]
    assert time.monotonic() - t < 30
