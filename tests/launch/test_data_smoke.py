"""The first dataset rows through the model's chat template and the custom reward function, run in
a real target interpreter (a cached venv with pyarrow and jinja2, as verl's environment has them):
real parquet files, real jinja2 sandbox rendering, real Python reward modules that misbehave.

Case: failure_cases_2.md #41 (structured message content with a text-only template, verl#2814).
The Qwen2.5 template below is the one Qwen2.5-Math-1.5B-Instruct ships (tokenizer_config.json
chat_template), shortened to its message loop; the Qwen2-VL one iterates content parts.
"""

import json
import os
import subprocess
import sys

import pytest

from envs import real_env
from preflight.launch.model import read_model
from preflight.launch.smoke import reward_findings, run_smoke, template_findings

pytestmark = pytest.mark.realenv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TEXT_ONLY = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
             "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# Qwen2-VL-7B-Instruct's chat_template.json: content may be a string or a list of {type, text|image} parts.
PARTS = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
         "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
         "{% if content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}"
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PRINTS = "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "num_hidden_layers": 28,
         "num_attention_heads": 12, "num_key_value_heads": 2, "max_position_embeddings": 4096, "vocab_size": 151936}


def rows(structured):
    qs = ["A baker has 2 trays of 6 rolls. How many rolls?", "A box holds 4 rows of 5 eggs. How many eggs?",
          "Tom reads 7 pages a day for 3 days. How many pages?", "A farm has 9 hens and 8 cows. How many animals?"]
    ans = ["12", "20", "21", "17"]
    out = []
    for i, (q, a) in enumerate(zip(qs, ans)):
        content = [{"type": "text", "text": q}] if structured else q
        out.append({"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": content}], "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": a}, "extra_info": {"split": "train", "index": i}})
    return out


@pytest.fixture(scope="module")
def py():
    return real_env("data-jinja", ["pyarrow==19.0.1", "jinja2==3.1.6"])


def write_parquet(py, path, data):
    code = "import json,sys; import pyarrow as pa, pyarrow.parquet as pq; " \
           "pq.write_table(pa.Table.from_pylist(json.loads(sys.argv[2])), sys.argv[1])"
    subprocess.run([py, "-c", code, str(path), json.dumps(data)], check=True)
    return str(path)


def model(tmp_path, template, name="m", where="tokenizer_config.json"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(QWEN2))
    if where == "tokenizer_config.json":
        (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "eos_token": "<|im_end|>"}))
    elif where == "chat_template.json":
        (d / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    facts, _ = read_model(str(d))
    return facts


def test_fc41_structured_content_with_text_only_template(py, tmp_path):
    f = write_parquet(py, tmp_path / "train.parquet", rows(True))
    m = model(tmp_path, TEXT_ONLY)
    res = run_smoke(py, [f], "prompt", "data_source", m, None)
    [out] = template_findings(res, m, "prompt")
    assert out.status == "fail" and "TypeError" in out.message and "structured content" in out.message
    assert "4 of 4 rows" in out.message and "flatten content to strings" in out.fix
    # plain string content renders with the same template
    g = write_parquet(py, tmp_path / "plain.parquet", rows(False))
    [ok] = template_findings(run_smoke(py, [g], "prompt", "data_source", m, None), m, "prompt")
    assert ok.status == "pass"


def test_parts_template_takes_structured_content_and_a_printing_template_warns(py, tmp_path):
    f = write_parquet(py, tmp_path / "train.parquet", rows(True))
    vl = model(tmp_path, PARTS, "vl", where="chat_template.json")
    assert vl.template_from == "chat_template.json"
    [ok] = template_findings(run_smoke(py, [f], "prompt", "data_source", vl, None), vl, "prompt")
    assert ok.status == "pass"
    pr = model(tmp_path, PRINTS, "pr")
    [w] = template_findings(run_smoke(py, [f], "prompt", "data_source", pr, None), pr, "prompt")
    assert w.status == "warn" and "Python list" in w.message


REWARDS = {
    "good": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    return 1.0 if solution_str.strip() == str(ground_truth) else 0.0\n",
    "dict": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    return {'score': 1.0, 'acc': True}\n",
    "raises": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
              "    return float(solution_str.split('####')[1])\n",
    "none": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    if solution_str == 'never':\n        return 1.0\n",
    "str": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 'correct'\n",
    "nan": "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
           "    return float('nan')\n",
    "slow": "import time\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    time.sleep(1.5)\n    return 0.0\n",
    "hang": "import time\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
            "    while True:\n        time.sleep(0.1)\n",
    "import_error": "import not_a_module_anywhere\n",
}


@pytest.mark.parametrize("kind,status,words", [
    ("good", "pass", ["returns a finite score for the first 4 rows", "ms per call"]),
    ("dict", "pass", ["finite score"]),
    ("raises", "fail", ["raises (4)", "IndexError"]),
    ("none", "fail", ["returns None (4)"]),
    ("str", "fail", ["returns a string (4)", "'correct'"]),
    ("nan", "fail", ["returns NaN/inf (4)"]),
    ("slow", "warn", ["is too slow (4)"]),
    ("hang", "fail", ["does not return (4)"]),
    ("import_error", "fail", ["cannot be loaded", "ModuleNotFoundError"]),
])
def test_reward_function_smoke(py, tmp_path, kind, status, words):
    f = write_parquet(py, tmp_path / "train.parquet", rows(False))
    mod = tmp_path / ("r_%s.py" % kind)
    mod.write_text(REWARDS[kind])
    reward = {"path": str(mod), "name": "compute_score", "kwargs": {}, "budget_s": 1.0 if kind != "hang" else 0.2}
    res = run_smoke(py, [f], "prompt", "data_source", None, reward, timeout=60)
    [out] = reward_findings(res, reward, "reward.custom_reward_function")
    assert out.status == status, out.message
    for w in words:
        assert w in out.message, (w, out.message)
    if status != "pass":
        assert out.fix
    assert "mean_s" in out.evidence or kind == "import_error"


def test_config_and_data_commands_fail_case_41(py, tmp_path):
    f = write_parquet(py, tmp_path / "train.parquet", rows(True))
    m = model(tmp_path, TEXT_ONLY)
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "preflight", "data", "--python", py, "--verl", "0.9.1", "--model",
                          m.directory, f], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "structured content" in out.stdout and "flatten content to strings" in out.stdout
    # config: the same file as train and val is read and reported once
    out = subprocess.run([sys.executable, "-m", "preflight", "config", "--python", py, "--verl", "0.9.1", "--json", "-",
                          "--", "data.train_files=%s" % f, "data.val_files=%s" % f,
                          "actor_rollout_ref.model.path=%s" % m.directory, "actor_rollout_ref.rollout.name=vllm",
                          "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "trainer.n_gpus_per_node=8",
                          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1"],
                         capture_output=True, text=True, env=env, timeout=300)
    rep = json.loads(out.stdout)
    ids = [r["id"] for r in rep["results"]]
    assert len([i for i in ids if i.endswith("train.parquet.prompt")]) == 1, ids
    tmpl = [r for r in rep["results"] if r["id"].endswith("chat_template")]
    assert [r["status"] for r in tmpl] == ["fail"], tmpl
    assert out.returncode == 1
