"""Model and tokenizer files are read only as regular files with a size limit (issue 21,
fault_cases_3.md x07): a FIFO or /dev/zero as any of them is one line, never a hang.

Every file the checker reads from a model directory or the Hugging Face cache is tried as
{FIFO, link to /dev/zero, directory}, through ``config`` (the launch's model) and ``data
--model``, each under a wall-clock limit far below the time a blocked read would take.
"""

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HANG = pytest.mark.fault("HANG")
CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "num_attention_heads": 14,
          "num_key_value_heads": 2, "num_hidden_layers": 24, "vocab_size": 151936, "intermediate_size": 4864,
          "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
FILES = ["config.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
         "model.safetensors.index.json", "model.safetensors"]
KINDS = ["fifo", "devzero", "dir"]


def model_dir(base, bad, kind):
    d = base / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0]['content'] }}"}))
    path = d / bad
    if path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "devzero":
        os.symlink("/dev/zero", str(path))
    else:
        path.mkdir()
    return d


def run(args, timeout=60, env=None):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "preflight"] + args, cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout,
                       env=dict(os.environ, COLUMNS="300", **(env or {})))
    return p, time.monotonic() - t0


@HANG
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", FILES)
def test_config_reads_model_files_bounded(tmp_path, bad, kind):
    d = model_dir(tmp_path, bad, kind)
    out = tmp_path / "c.json"
    p, took = run(["config", "--verl", "0.9.1", "--timeout", "5", "--json", str(out), "--",
                   "actor_rollout_ref.model.path=%s" % d])
    assert took < 30, took
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    doc = json.loads(out.read_text())
    text = json.dumps(doc)
    if bad in ("config.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
               "model.safetensors.index.json"):
        assert "not a regular file" in text or "larger than" in text, text[-3000:]


@HANG
@pytest.mark.parametrize("kind", ["fifo", "devzero"])
@pytest.mark.parametrize("bad", ["config.json", "tokenizer_config.json", "chat_template.jinja"])
def test_data_model_reads_bounded(tmp_path, bad, kind):
    """``data --model DIR`` (x07's second half): one line naming the file, exit 2, never a hang."""
    d = model_dir(tmp_path, bad, kind)
    train = tmp_path / "t.parquet"
    train.write_bytes(b"PAR1" + b"\0" * 16 + b"PAR1")
    p, took = run(["data", "--python", sys.executable, "--model", str(d), str(train)])
    assert took < 30, took
    assert "Traceback" not in p.stderr, p.stderr[-2000:]


@HANG
@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_hf_cache_refs_main_is_read_bounded(tmp_path, kind):
    """The cache's ``refs/main`` as a FIFO or /dev/zero: the snapshot is still found by listing."""
    from preflight.launch.model import read_model

    root = tmp_path / "hub" / "models--org--tiny"
    snap = root / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(CONFIG))
    (root / "refs").mkdir()
    if kind == "fifo":
        os.mkfifo(str(root / "refs" / "main"))
    else:
        os.symlink("/dev/zero", str(root / "refs" / "main"))
    t0 = time.monotonic()
    facts, how = read_model("org/tiny", {"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert time.monotonic() - t0 < 5
    assert facts is not None and facts.heads == 14 and "abc123" in how, how


def test_unreadable_model_file_is_named_in_one_line(tmp_path):
    from preflight.launch.model import read_model

    d = model_dir(tmp_path, "tokenizer_config.json", "fifo")
    facts, why = read_model(str(d))
    assert facts is None and why == "%s: not a regular file (a FIFO) (model files are read only as regular " \
                                     "files)" % (d / "tokenizer_config.json")
