"""Tiny local inputs for verl's dry start-up: a model directory (config.json and a word-level
tokenizer built with the env's own ``tokenizers``/``transformers``, no hub) and an RL parquet file.

Built by running a small script under the target interpreter (which has transformers, pyarrow),
so the files are what that release's libraries write and read.
"""

import json
import os
import subprocess
import textwrap

_SCRIPT = textwrap.dedent('''
    import json, os, sys
    out, rows, long_rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = ["<pad>", "<s>", "</s>", "<unk>", "user", "assistant", "system", ":", "\\n"] + \\
        ["w%d" % i for i in range(200)] + [str(i) for i in range(100)] + ["what", "is", "plus", "?", "answer"]
    vocab = dict((w, i) for i, w in enumerate(words))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} \\n {% endfor %}"
                          "{% if add_generation_prompt %}assistant : {% endif %}")
    model = os.path.join(out, "model")
    fast.save_pretrained(model)
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
           "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "vocab_size": len(vocab), "max_position_embeddings": 2048, "torch_dtype": "float32",
           "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": True}
    with open(os.path.join(model, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    import pyarrow as pa, pyarrow.parquet as pq
    recs = []
    for i in range(rows):
        n = 600 if i < long_rows else 3
        q = " ".join(["w%d" % (j % 200) for j in range(n)]) + " what is %d plus %d ?" % (i % 50, 1)
        recs.append({"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": q}],
                     "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(i % 50 + 1)},
                     "extra_info": {"index": i, "split": "train"}})
    table = pa.Table.from_pylist(recs)
    for name in ("train", "test"):
        pq.write_table(table, os.path.join(out, name + ".parquet"))
    print(json.dumps({"model": model, "train": os.path.join(out, "train.parquet"),
                      "test": os.path.join(out, "test.parquet")}))
''')


def tiny_inputs(python: str, out: str, rows: int = 32, long_rows: int = 0) -> dict:
    """Model dir and parquet files under ``out`` made by ``python``; returns their paths
    (``{"model", "train", "test"}``). ``long_rows`` rows have prompts of about 600 tokens."""
    os.makedirs(out, exist_ok=True)
    proc = subprocess.run([python, "-c", _SCRIPT, out, str(rows), str(long_rows)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                          env=dict(os.environ, HF_HUB_OFFLINE="1"))
    if proc.returncode != 0:
        raise RuntimeError("tiny_inputs failed: %s" % proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])
