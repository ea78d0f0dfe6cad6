#!/usr/bin/env python3
"""Time of the launch rules with and without re-checking every fix, and of the data smoke.

Prints figures; asserts nothing. Usage (from the repository root):

    python3 bench/config_rules.py [--python PATH_WITH_PYARROW_AND_JINJA2] [--repeat N]

Cases: the reference inputs of failure_cases_2.md #34 and #42 and a launch with six failures
(every fix re-checked, the one-line fix built). With ``--python``, the chat template and reward
smoke of :mod:`preflight.launch.smoke` runs on a 4-row parquet written in a temporary directory.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.compose import compose_stored, flatten, get_path  # noqa: E402
from preflight.launch.model import read_model  # noqa: E402
from preflight.launch.overrides import parse_launch  # noqa: E402
from preflight.launch.rules import evaluate, mandatory_keys  # noqa: E402

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "max_position_embeddings": 131072, "vocab_size": 128256}
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560, "num_hidden_layers": 36,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
         "vocab_size": 151936}
CASES = {
    "case 34 (token budget)": (QWEN3, [
        "actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "data.train_batch_size=8",
        "data.max_prompt_length=8192", "data.max_response_length=32768", "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.rollout.n=4", "trainer.n_gpus_per_node=8"]),
    "six failures": (LLAMA, [
        "actor_rollout_ref.rollout.name=vllm", "trainer.n_gpus_per_node=6", "data.train_batch_size=61",
        "actor_rollout_ref.rollout.n=12", "actor_rollout_ref.actor.ppo_mini_batch_size=7",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4", "algorithm.adv_estimator=gae",
        "critic.ppo_mini_batch_size=7", "critic.ppo_micro_batch_size_per_gpu=9",
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"]),
}


def bench_rules(repeat: int) -> None:
    tmp = tempfile.mkdtemp()
    for name, (cfg, words) in CASES.items():
        d = os.path.join(tmp, name.replace(" ", "_"))
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        model, _ = read_model(d)
        c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + words +
                                        ["actor_rollout_ref.model.path=%s" % d]), None, "0.9.1", env={})
        raw = lambda k, dflt=None, c=c: get_path(c.raw, k, dflt)  # noqa: E731
        miss = mandatory_keys(flatten(c.resolved), c.get)
        for verify in (False, True):
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                _p, found, _n = evaluate(c.get, "0.9.1", None, model, "bench", miss, raw=raw, verify=verify)
                times.append(time.perf_counter() - t0)
            fails = sum(1 for f in found if f.status == "fail")
            print("%-24s verify=%-5s median %6.1f ms (min %5.1f, %d runs), %d findings, %d failing" % (
                name, verify, 1000 * statistics.median(times), 1000 * min(times), repeat, len(found), fails))


def bench_smoke(python: str, repeat: int) -> None:
    from preflight.launch.smoke import run_smoke

    tmp = tempfile.mkdtemp()
    rows = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": [{"type": "text", "text": "q%d" % i}]}],
             "reward_model": {"style": "rule", "ground_truth": str(i)}} for i in range(4)]
    f = os.path.join(tmp, "train.parquet")
    subprocess.run([python, "-c", "import json,sys,pyarrow as pa,pyarrow.parquet as pq;"
                    "pq.write_table(pa.Table.from_pylist(json.loads(sys.argv[2])), sys.argv[1])", f, json.dumps(rows)],
                   check=True)
    d = os.path.join(tmp, "m")
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(QWEN3, fh)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as fh:
        json.dump({"chat_template": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] }}"
                                    "{% endfor %}"}, fh)
    rf = os.path.join(tmp, "reward.py")
    with open(rf, "w") as fh:
        fh.write("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    model, _ = read_model(d)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = run_smoke(python, [f], "prompt", "data_source", model,
                        {"path": rf, "name": "compute_score", "kwargs": {}, "budget_s": 1.0})
        times.append(time.perf_counter() - t0)
    calls = [e for e in res["events"] if e.get("event") == "reward"]
    print("data smoke (4 rows: template + reward) median %.2f s (min %.2f, %d runs); reward %.2f ms per call" % (
        statistics.median(times), min(times), repeat, 1000 * statistics.mean(c["seconds"] for c in calls)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=None, help="an interpreter with pyarrow and jinja2 for the data smoke")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    bench_rules(a.repeat)
    if a.python:
        bench_smoke(a.python, max(1, a.repeat // 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
