"""A model's ``config.json``, read from disk only: a local directory, or the local Hugging Face
cache for a repo id. Never the network.

The cache is ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub's order);
a repo ``org/name`` lives in ``models--org--name/snapshots/<revision>/`` with ``refs/main``
naming the revision.
"""

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["ModelFacts", "hf_cache_dir", "find_config", "read_model"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


@dataclass
class ModelFacts:
    """What the launch checks need from a model's config.json.

    Attributes:
        path: the config.json read.
        heads, kv_heads: attention and key/value heads (``text_config`` of multimodal models).
        max_position_embeddings: the context the model was built for (what verl compares with).
        params: parameter count: from model.safetensors.index.json's total_size and dtype when
            present, else estimated from the dimensions (``params_from`` says which).
        model_type: ``qwen2``, ``llama``...
    """

    path: str
    heads: Optional[int]
    kv_heads: Optional[int]
    max_position_embeddings: Optional[int]
    params: Optional[int]
    params_from: str
    model_type: Optional[str]
    raw: Dict[str, Any]


def hf_cache_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """The Hugging Face hub cache directory (see module doc)."""
    e = os.environ if env is None else env
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if e.get(key):
            return os.path.expanduser(e[key])
    if e.get("HF_HOME"):
        return os.path.join(os.path.expanduser(e["HF_HOME"]), "hub")
    base = e.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "huggingface", "hub")


def find_config(model_path: Any, env: Optional[Mapping[str, str]] = None) -> Tuple[Optional[str], str]:
    """(path of config.json or None, how it was found or why not)."""
    if not isinstance(model_path, str) or not model_path or model_path == "???":
        return None, "actor_rollout_ref.model.path is not set"
    p = os.path.expanduser(model_path)
    if "://" in p:
        return None, "%s is a remote path; it is not read (no network)" % model_path
    if os.path.isdir(p):
        cfg = os.path.join(p, "config.json")
        return (cfg, "local directory") if os.path.isfile(cfg) else (None, "%s has no config.json" % model_path)
    if os.path.isfile(p) and os.path.basename(p) == "config.json":
        return p, "local file"
    if _REPO_ID.match(model_path):
        root = os.path.join(hf_cache_dir(env), "models--" + model_path.replace("/", "--"))
        snaps = os.path.join(root, "snapshots")
        if not os.path.isdir(snaps):
            return None, "%s is not in the local Hugging Face cache (%s); not downloaded (no network)" % (
                model_path, hf_cache_dir(env))
        rev = None
        try:
            with open(os.path.join(root, "refs", "main"), encoding="utf-8") as fh:
                rev = fh.read().strip()
        except OSError:
            pass
        cands = [rev] if rev else []
        cands += sorted(os.listdir(snaps), key=lambda d: -os.path.getmtime(os.path.join(snaps, d)))
        for c in cands:
            cfg = os.path.join(snaps, c, "config.json")
            if os.path.isfile(cfg):
                return cfg, "Hugging Face cache (revision %s)" % c[:12]
        return None, "%s is in the Hugging Face cache without a config.json" % model_path
    return None, "%s is neither a local directory nor a cached Hugging Face repo" % model_path


_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "float8_e4m3fn": 1}


def _estimate(c: Dict[str, Any]) -> Optional[int]:
    try:
        h, layers = int(c["hidden_size"]), int(c["num_hidden_layers"])
        vocab, inter = int(c["vocab_size"]), int(c.get("intermediate_size") or 4 * h)
        heads = int(c.get("num_attention_heads") or 1)
        kv = int(c.get("num_key_value_heads") or heads)
        hd = int(c.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError):
        return None
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    mlp = 3 * h * inter
    emb = vocab * h * (1 if c.get("tie_word_embeddings") else 2)
    return layers * (attn + mlp + 2 * h) + emb + h


def read_model(model_path: Any, env: Optional[Mapping[str, str]] = None) -> Tuple[Optional[ModelFacts], str]:
    """(facts or None, how found / why not). A malformed config.json gives None and the reason."""
    cfg, how = find_config(model_path, env)
    if cfg is None:
        return None, how
    try:
        with open(cfg, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError) as exc:
        return None, "%s could not be read: %s" % (cfg, exc)
    if not isinstance(raw, dict):
        return None, "%s is not a JSON object" % cfg
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}

    def pick(key: str) -> Optional[int]:
        v = raw.get(key, text.get(key))
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    heads = pick("num_attention_heads")
    kv = pick("num_key_value_heads") or heads
    params, src = None, "unknown"
    idx = os.path.join(os.path.dirname(cfg), "model.safetensors.index.json")
    dtype = str(raw.get("torch_dtype") or raw.get("dtype") or text.get("torch_dtype") or "")
    try:
        with open(idx, encoding="utf-8") as fh:
            total = int(json.load(fh)["metadata"]["total_size"])
        if dtype in _DTYPE_BYTES:
            params, src = total // _DTYPE_BYTES[dtype], "model.safetensors.index.json total_size / %s" % dtype
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if params is None:
        est = _estimate(dict({k: v for k, v in raw.items() if k != "text_config"}, **text) if text else raw)
        if est:
            params, src = est, "estimated from config.json dimensions"
    return ModelFacts(cfg, heads, kv, pick("max_position_embeddings"), params, src, raw.get("model_type"), raw), how
