# Target script: writes the rehearsal's small model (random weights, safetensors) with the
# target's own transformers, on CPU, from the config.json the checker already shrank.
# ARGS: out_dir (holds config.json and the copied tokenizer files), seed, trust_remote_code,
#       full_config (the user's full-size config, instantiated on the meta device to compare the
#       module tree; optional), corpus (texts to train a fallback tokenizer on when out_dir has no
#       tokenizer), probe_texts (prompts tokenized to find the largest token id), chat (bool: the
#       prompts are chat messages).
# Events: model (params, module patterns, class), full (its module patterns), tokenizer (size,
#         max id, made), error.
import re
import time
import traceback

_DIGITS = re.compile(r"\.\d+(?=\.|$)")


def _patterns(model):
    pats = {}
    for name, mod in model.named_modules():
        key = _DIGITS.sub(".N", name)
        pats.setdefault(key, type(mod).__name__)
    return pats


def _fallback_tokenizer(out_dir, corpus, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    size = max(300, min(int(vocab), 2048))
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(corpus) or ["hello world"], trainer=trainer)
    template = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = template
    fast.save_pretrained(out_dir)
    return fast


def _vllm_env(names):
    """Which of ``names`` (VLLM_* variables set for the run) the installed vLLM's envs.py defines,
    read as text (importing vLLM takes seconds and touches CUDA)."""
    import importlib.util
    import os

    if not names:
        return
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return
    root = os.path.dirname(spec.origin)
    try:
        with open(os.path.join(root, "envs.py"), encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return
    version = None
    try:
        with open(os.path.join(root, "_version.py"), encoding="utf-8") as fh:
            m = re.search(r"version = ['\"]([^'\"]+)", fh.read())
            version = m.group(1) if m else None
    except OSError:
        pass
    known = set(re.findall(r"[\"'](VLLM_[A-Z0-9_]+)[\"']", text))
    emit("vllm_env", version=version, unknown=[n for n in names if n not in known], checked=list(names))


def main():
    t0 = time.time()
    _vllm_env(ARGS.get("vllm_env") or [])
    import torch
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    out_dir = ARGS["out_dir"]
    trust = bool(ARGS.get("trust_remote_code"))
    torch.manual_seed(int(ARGS.get("seed", 0)))
    cfg = AutoConfig.from_pretrained(out_dir, trust_remote_code=trust)
    text_cfg = getattr(cfg, "text_config", None) or cfg
    vocab = int(getattr(text_cfg, "vocab_size", 0) or 0)

    import os
    have_tok = any(os.path.exists(os.path.join(out_dir, n)) for n in
                   ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json"))
    made = False
    if have_tok:
        tok = AutoTokenizer.from_pretrained(out_dir, trust_remote_code=trust)
    else:
        tok = _fallback_tokenizer(out_dir, ARGS.get("corpus") or [], vocab or 2048)
        made = True
        # the small model's special ids follow the tokenizer it will be run with
        ids = {"eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id, "bos_token_id": tok.eos_token_id}
        for k, v in ids.items():
            if hasattr(text_cfg, k):
                setattr(text_cfg, k, v)
            if hasattr(cfg, k):
                setattr(cfg, k, v)
    max_id = -1
    for t in ARGS.get("probe_texts") or []:
        try:
            if ARGS.get("chat") and isinstance(t, list):
                ids = tok.apply_chat_template(t, add_generation_prompt=True, tokenize=True)
                if isinstance(ids, dict) or hasattr(ids, "keys"):
                    ids = ids["input_ids"]
            else:
                ids = tok(t if isinstance(t, str) else str(t))["input_ids"]
        except Exception as exc:
            emit("tokenizer_error", message="%s: %s" % (type(exc).__name__, exc))
            break
        if ids:
            max_id = max(max_id, max(int(i) for i in ids))
    emit("tokenizer", size=len(tok), max_id=max_id, made=made, cls=type(tok).__name__,
         has_chat_template=bool(getattr(tok, "chat_template", None)))

    arch = (getattr(cfg, "architectures", None) or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    if cls is None:
        from transformers import AutoModelForCausalLM as cls
        model = cls.from_config(cfg, trust_remote_code=trust)
    else:
        model = cls._from_config(cfg)
    dtype = getattr(cfg, "torch_dtype", None) or getattr(cfg, "dtype", None) or "bfloat16"
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, torch.bfloat16)
    model = model.to(dtype)
    model.save_pretrained(out_dir, safe_serialization=True)
    if made:
        cfg.save_pretrained(out_dir)
    params = sum(p.numel() for p in model.parameters())
    emit("model", params=params, cls=type(model).__name__, patterns=_patterns(model), dtype=str(dtype),
         seconds=round(time.time() - t0, 3), files=sorted(os.listdir(out_dir)))

    full = ARGS.get("full_config")
    if full:
        try:
            fcfg = type(cfg).from_dict(full) if not trust else AutoConfig.for_model(**full)
            with torch.device("meta"):
                fm = cls._from_config(fcfg) if hasattr(cls, "_from_config") else cls.from_config(fcfg)
            emit("full", params=sum(p.numel() for p in fm.parameters()), patterns=_patterns(fm),
                 cls=type(fm).__name__)
        except Exception as exc:
            emit("full_error", message="%s: %s" % (type(exc).__name__, exc))


try:
    main()
except Exception as exc:
    emit("error", type=type(exc).__name__, message=str(exc)[:2000], traceback=_tail(traceback.format_exc(), 4000))
    raise SystemExit(1)
