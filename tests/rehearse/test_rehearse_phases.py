"""The phase and error parser against the logs of real rehearsals on 1 x H200 (verl 0.9.1, vLLM
0.24.0, 2026-12-01, bench/h200_rehearse.sh), and the console logger's step lines in the format of
verl 0.9.1's verl/utils/logger/aggregate_logger.py:26-31 (``concat_dict_to_str``) filled with the
step metrics that run printed."""

import gzip
import json
import os
import pprint
import re

from preflight.rehearse import phases
from preflight.rehearse.rehearsal import prompt_column_problem
from preflight.rehearse.supervise import read_log

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "rehearse")


def _log(name, tmp_path):
    raw = gzip.open(os.path.join(DATA, name), "rb").read()
    p = tmp_path / name.replace(".gz", "")
    p.write_bytes(raw)
    return read_log(str(p)), raw.decode("utf-8", "replace").splitlines()


def _first_time(raw, needle):
    """Arrival time of the first raw log line holding ``needle`` (independent of the parser)."""
    for line in raw:
        if needle in line:
            return float(line.split(" ", 1)[0])
    raise AssertionError(needle)


def test_flash_attn_missing_is_the_first_error(tmp_path):
    lines, raw = _log("h200-flashattn-missing.run.log.gz", tmp_path)
    err = phases.first_error(lines)
    assert err.type == "ImportError"
    assert err.message.startswith("FlashAttention2 has been toggled on, but it cannot be used")
    # the warnings quoting ModuleNotFoundError('torchtitan'...) earlier in the log are not errors
    assert "torchtitan" not in err.line
    table = phases.phase_table(lines)
    assert phases.phase_at(table, err.at).id == "worker_init"
    row = {p.id: p for p in table}
    ray_init, runner = _first_time(raw, "ray init kwargs: "), _first_time(raw, "(TaskRunnerV1 pid=")
    assert abs(row["ray_start"].seconds - (runner - ray_init)) < 1e-6 and row["ray_start"].reached
    assert row["worker_init"].reached is False and row["worker_init"].window[0] == runner


def test_lora_noshard_failure_and_startup_phases(tmp_path):
    lines, raw = _log("h200-lora-noshard.run.log.gz", tmp_path)
    err = phases.first_error(lines)
    assert err.line == "NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet"
    row = {p.id: p for p in phases.phase_table(lines)}
    a = _first_time(raw, "reward loop manager initialized")
    b = _first_time(raw, "checkpoint engine manager initialized")
    assert abs(row["rollout_start"].seconds - (b - a)) < 1e-6
    assert row["rollout_start"].reached and not row["weight_sync"].reached
    assert phases.phase_at(list(row.values()), err.at).id == "weight_sync"


def test_reward_module_import_error_names_the_users_file(tmp_path):
    lines, _ = _log("h200-plant2-reward-import.run.log.gz", tmp_path)
    err = phases.first_error(lines)
    assert err.line == "ModuleNotFoundError: No module named 'preflight_planted_missing_package'"
    assert err.actor == "RewardLoopWorker"
    assert err.where == "/tmp/rhfx/reward_missing_import.py:1"


def test_attention_backend_error_beats_rays_wrapper(tmp_path):
    lines, raw = _log("h200-plant3-attention-backend.run.log.gz", tmp_path)
    err = phases.first_error(lines)
    assert err.type == "ValueError"
    assert err.message.startswith("Unknown attention backend: 'NOT_A_BACKEND'. Valid options are: FLASH_ATTN")
    assert any("RayTaskError(ValueError)" in line for line in raw)  # what a naive parser would have taken


def _verl_step_line(step, metrics):
    # verl/utils/logger/aggregate_logger.py:26-31 at 0.9.1 (concat_dict_to_str), numbers only
    return " - ".join(["step:%d" % step] + ["%s:%s" % (k, pprint.pformat(v)) for k, v in metrics.items()])


def test_step_timers_and_windows():
    doc = json.load(open(os.path.join(DATA, "h200-pass.json")))
    m1, m2 = doc["steps"]["1"], doc["steps"]["2"]
    t1, t2 = 300.0, 310.0
    lines = [(1.0, "ray init kwargs: {}"), (t1, "(TaskRunnerV1 pid=7) " + _verl_step_line(1, m1)),
             (t2, "(TaskRunnerV1 pid=7) " + _verl_step_line(2, m2))]
    steps = phases.parse_steps(lines)
    assert steps[1]["metrics"]["timing_s/gen"] == m1["timing_s/gen"]
    assert steps[2]["metrics"]["timing_s/step"] == m2["timing_s/step"]
    gpu = [(t1 - m1["timing_s/step"] + 0.1, 0, 5000), (t1 - 0.05, 0, 7000), (t2 - 1.0, 0, 9000)]
    row = {p.id: p for p in phases.phase_table(lines, gpu)}
    assert row["rollout"].seconds == m1["timing_s/gen"]
    assert abs(row["log_prob"].seconds - (m1["timing_s/old_log_prob"] + m1.get("timing_s/ref", 0.0))) < 1e-9
    assert row["rollout"].window[0] == t1 - m1["timing_s/step"]
    assert row["rollout"].peak_mib == {0: 5000}
    assert row["step2"].seconds == m2["timing_s/step"] and row["step2"].peak_mib == {0: 9000}
    assert "timing_s/reward" not in m1 and row["reward"].reached  # scored inside the rollout in 0.9.1's v1 trainer
    # the H200 run's own table agrees with verl's timers
    h = {p["id"]: p for p in doc["phases"]}
    assert h["rollout"]["seconds"] == round(m1["timing_s/gen"], 3)
    assert all(h[k]["reached"] for k in ("ray_start", "worker_init", "rollout_start", "weight_sync", "rollout",
                                         "log_prob", "actor_update", "step2"))


def test_ray_prefix_and_colours():
    assert phases.strip_prefix("\x1b[36m(WorkerDict pid=3335)\x1b[0m hello") == ("WorkerDict", "hello")
    assert phases.strip_prefix("(TaskRunnerV1 pid=1, ip=10.0.0.2) x") == ("TaskRunnerV1", "x")
    assert phases.strip_prefix("plain") == (None, "plain")


def test_prompt_column_types_read_on_the_h200():
    doc = json.load(open(os.path.join(DATA, "h200-pass.json")))
    bad, good = doc["plant4_slices"]
    assert re.search("not a list of", prompt_column_problem(bad["columns"], "prompt"))
    assert prompt_column_problem(good["columns"], "prompt") is None
    assert "no column 'question'" in prompt_column_problem(good["columns"], "question")
