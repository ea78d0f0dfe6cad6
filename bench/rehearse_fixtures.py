#!/usr/bin/env python3
"""Inputs for the rehearsal's proof (bench/h200_rehearse.sh), written under DIR:

* ``data/train.parquet``, ``data/test.parquet``: GSM8K-shaped rows as verl's own preprocessing
  (examples/data_preprocess/gsm8k.py) writes them: data_source ``openai/gsm8k``, ``prompt`` a list of
  chat messages ending with the instruction to answer after ``####``, ``ability``, ``reward_model``
  {style: rule, ground_truth}, ``extra_info`` {split, index}; the questions are small additions made
  here (no data set is downloaded).
* ``model/``: a "user's model": the Qwen2.5-0.5B-Instruct layout's config.json (FALLBACK of
  preflight/rehearse/shrink.py) with vocab_size set to the size of a byte-level BPE tokenizer
  trained here on the questions (ChatML template); no weights: the rehearsal never reads them.
* the planted failures: ``data/bad_type.parquet`` (``prompt`` a plain string, not chat messages),
  ``model_small_vocab/`` (the same tokenizer, config vocab_size 256), ``reward_raises.py`` (a
  compute_score that raises on real rollout outputs), ``reward_missing_import.py`` (imports a package
  that is not installed).

usage: python3 bench/rehearse_fixtures.py DIR   (needs pyarrow, tokenizers and transformers)
"""

import json
import os
import random
import sys

sys.path.insert(0, os.environ.get("PYZ") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from preflight.rehearse.shrink import fallback_config  # noqa: E402

INSTRUCTION = "Let's think step by step and output the final answer after \"####\"."

REWARD_RAISES = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """Planted failure: assumes every response has a '####' answer, so real outputs of an untrained
    model raise IndexError."""
    answer = solution_str.split("####")[1]
    return float(answer.strip() == ground_truth)
'''

REWARD_MISSING = '''
import preflight_planted_missing_package  # planted failure: not installed anywhere


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return 0.0
'''


def rows(n, split, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rnd.randint(1, 99), rnd.randint(1, 99)
        q = "Tom has %d apples and buys %d more. How many apples does he have?" % (a, b)
        out.append({"data_source": "openai/gsm8k",
                    "prompt": [{"role": "user", "content": q + " " + INSTRUCTION}],
                    "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                    "extra_info": {"split": split, "index": i, "answer": "%d + %d = %d #### %d" % (a, b, a + b, a + b),
                                   "question": q}})
    return out


def tokenizer(texts, out_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=1024, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast.save_pretrained(out_dir)
    return fast


def main(root):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = os.path.join(root, "data")
    os.makedirs(data, exist_ok=True)
    train, test = rows(512, "train", 1), rows(64, "test", 2)
    pq.write_table(pa.Table.from_pylist(train), os.path.join(data, "train.parquet"))
    pq.write_table(pa.Table.from_pylist(test), os.path.join(data, "test.parquet"))
    bad = [dict(r, prompt=r["prompt"][0]["content"]) for r in train]
    pq.write_table(pa.Table.from_pylist(bad), os.path.join(data, "bad_type.parquet"))
    texts = [r["prompt"][0]["content"] for r in train] + [r["extra_info"]["answer"] for r in train]
    model = os.path.join(root, "model")
    os.makedirs(model, exist_ok=True)
    tok = tokenizer(texts, model)
    cfg = fallback_config()
    # vocab_size = the tokenizer's size: a random-weight model samples every id of its vocabulary, and an id
    # the tokenizer cannot decode is not what the proof is about (the real Qwen2.5 pads 151665 to 151936)
    cfg.update({"eos_token_id": tok.eos_token_id, "bos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id,
                "vocab_size": len(tok)})
    with open(os.path.join(model, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=1)
    small = os.path.join(root, "model_small_vocab")
    os.makedirs(small, exist_ok=True)
    tok.save_pretrained(small)
    with open(os.path.join(small, "config.json"), "w") as fh:
        json.dump(dict(cfg, vocab_size=256), fh, indent=1)
    for name, text in (("reward_raises.py", REWARD_RAISES), ("reward_missing_import.py", REWARD_MISSING)):
        with open(os.path.join(root, name), "w") as fh:
            fh.write(text.lstrip())
    print("fixtures in %s: %d train rows, tokenizer %d tokens" % (root, len(train), len(tok)))


if __name__ == "__main__":
    main(sys.argv[1])
