#!/usr/bin/env python3
"""Time of verl's dry start-up (preflight/target/verl_startup.py) for one launch.

Prints figures; asserts nothing. Target (issue 23): under 10 s on 2 cores for a verl 0.9.1 launch
with a local tokenizer. Usage (from the repository root):

    python3 bench/verl_startup.py --python VERL_ENV/bin/python [--repeat 3] [--rows 64]

The model directory (config.json and a word-level tokenizer made with the env's own tokenizers and
transformers, no hub) and the parquet files are written to a temporary directory first
(tests/verl_fixtures.py). Each run is a fresh target process: verl's import is in the figure.
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from preflight.launch.startup import run_startup  # noqa: E402
from verl_fixtures import tiny_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="an interpreter with verl installed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-verl-startup-") as d:
        i = tiny_inputs(args.python, d, args.rows, 0)
        ovs = ["data.train_files=%s" % i["train"], "data.val_files=%s" % i["test"],
               "actor_rollout_ref.model.path=%s" % i["model"], "data.train_batch_size=8",
               "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
               "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
               "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "algorithm.adv_estimator=grpo",
               "trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.name=vllm"]
        walls, imports, cpus = [], [], []
        for n in range(args.repeat):
            t0 = time.monotonic()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            st = run_startup(args.python, ovs, timeout=300)
            walls.append(time.monotonic() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            imports.append(st.import_seconds or 0.0)
            print("run %d: %.2f s wall, %.2f s CPU of the target (entry import %.2f s), %s, verl %s, cores %s, "
                  "load %.1f" % (n + 1, walls[-1], cpus[-1], imports[-1], "accepted, stopped at %s" % st.stopped_at if st.accepted else
                "NOT accepted: %s" % (st.error or st.probe), st.verl_version, os.cpu_count(), os.getloadavg()[0]))
        print("dry start-up: median %.2f s wall, min %.2f s, median %.2f s CPU over %d runs; target < 10 s on 2 "
              "idle cores (the CPU figure is what a quiet machine's wall time approaches)" % (
                  statistics.median(walls), min(walls), statistics.median(cpus), len(walls)))


if __name__ == "__main__":
    main()
