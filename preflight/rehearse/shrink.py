"""A small model of the user's architecture: the user's ``config.json`` with fewer layers and
narrower widths, keeping everything that picks the code path verl, FSDP and vLLM take.

Kept as they are: ``model_type``, ``architectures``, the vocabulary size, ``head_dim``, the ratio
of attention heads to KV heads, every rope setting (``rope_theta``, ``rope_scaling``,
``rope_parameters``, ``partial_rotary_factor``), ``tie_word_embeddings``, the dtype, sliding-window
settings, the MoE router settings (``num_experts_per_tok``, ``norm_topk_prob``...) and
``max_position_embeddings``. Reduced: the layer count (at least the pipeline-parallel size and
two), the number of KV heads (to the tensor-parallel size, so vLLM can split them), the attention
heads with them (same ratio), ``hidden_size`` (heads x head_dim), the MLP and expert widths (same
ratio to the hidden size), and the number of experts (at least ``num_experts_per_tok``, the
expert-parallel size and 4). A nested ``text_config`` (vision-language models) is reduced the same
way and a ``vision_config``'s depth to 1. ``quantization_config`` is dropped: random weights are
written in the model's dtype. Pure functions on dicts; the weights are written by the target
(``target/rehearse_model.py``) with the target's transformers.
"""

import copy
import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["shrink_config", "FALLBACK_NAME", "fallback_config", "TOKENIZER_FILES", "tokenizer_files",
           "copy_tokenizer", "read_config", "head_dim"]

#: The architecture used when the user's config.json is not on this machine (never downloaded):
#: Qwen2.5-0.5B-Instruct's published layout (model_type qwen2, 14 heads, 2 KV heads, head_dim 64,
#: vocab 151936, tied embeddings, rope_theta 1e6), before shrinking.
FALLBACK_NAME = "qwen2 (the Qwen2.5-0.5B-Instruct layout)"

_FALLBACK: Dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": True,
    "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
    "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 21, "attention_dropout": 0.0,
}

#: Tokenizer and chat-template files copied next to the small model (whichever exist), plus any
#: ``*.py`` (remote code named by ``auto_map``).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                   "tokenizer.model", "added_tokens.json", "chat_template.jinja", "chat_template.json",
                   "generation_config.json", "preprocessor_config.json", "processor_config.json", "vocab.txt",
                   "spiece.model", "sentencepiece.bpe.model")

_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_WIDTH_KEYS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size",
               "n_inner")
_PER_LAYER_LISTS = ("layer_types", "mlp_only_layers_mask", "sliding_window_pattern_list")


def fallback_config() -> Dict[str, Any]:
    """A copy of the fallback architecture's full-size config (see :data:`FALLBACK_NAME`)."""
    return copy.deepcopy(_FALLBACK)


def read_config(path: str, limit: int = 4 << 20) -> Dict[str, Any]:
    """The JSON object in ``path`` (a config.json); raises ValueError naming the file when it is
    not a regular file under ``limit`` bytes or not a JSON object."""
    if not os.path.isfile(path):
        raise ValueError("%s is not a regular file" % path)
    if os.path.getsize(path) > limit:
        raise ValueError("%s is larger than %d bytes; not a model config" % (path, limit))
    with open(path, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except ValueError as exc:
            raise ValueError("%s is not valid JSON (%s)" % (path, exc))
    if not isinstance(data, dict):
        raise ValueError("%s holds no JSON object" % path)
    return data


def head_dim(cfg: Dict[str, Any]) -> Optional[int]:
    """Per-head width: ``head_dim`` when given, else hidden_size // num_attention_heads; None when
    neither can be read."""
    hd = cfg.get("head_dim")
    if isinstance(hd, int) and hd > 0:
        return hd
    h, n = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    if isinstance(h, int) and isinstance(n, int) and n > 0:
        return h // n
    return None


def _int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _round_up(x: float, step: int) -> int:
    return max(step, int(math.ceil(x / step)) * step)


def _shrink_text(cfg: Dict[str, Any], pp: int, tp: int, ep: int, notes: List[str], where: str) -> Dict[str, Any]:
    out = copy.deepcopy(cfg)
    layers_key = next((k for k in _LAYER_KEYS if _int(cfg.get(k))), None)
    old_layers = _int(cfg.get(layers_key)) if layers_key else None
    first_dense = _int(cfg.get("first_k_dense_replace")) or 0
    new_layers = None
    if layers_key and old_layers:
        want = max(2, pp, min(first_dense, 1) + 1)
        new_layers = min(old_layers, want)
        out[layers_key] = new_layers
        notes.append("%s%s %d -> %d" % (where, layers_key, old_layers, new_layers))
    if first_dense:
        out["first_k_dense_replace"] = min(first_dense, 1)
    for key in _PER_LAYER_LISTS:
        if isinstance(cfg.get(key), list) and new_layers:
            out[key] = cfg[key][:new_layers]
    if isinstance(cfg.get("max_window_layers"), int) and new_layers:
        out["max_window_layers"] = min(cfg["max_window_layers"], new_layers)
    if isinstance(cfg.get("mlp_only_layers"), list) and new_layers:
        out["mlp_only_layers"] = [i for i in cfg["mlp_only_layers"] if isinstance(i, int) and i < new_layers]

    heads, kv = _int(cfg.get("num_attention_heads")), _int(cfg.get("num_key_value_heads"))
    hd = head_dim(cfg)
    hidden = _int(cfg.get("hidden_size"))
    if heads and hd and hidden:
        kv = kv or heads
        ratio = max(1, heads // kv) if heads % kv == 0 else None
        new_kv = min(kv, max(1, tp))
        new_heads = new_kv * ratio if ratio else min(heads, max(2, tp))
        explicit_hd = "head_dim" in cfg or hidden != heads * hd
        new_hidden = new_heads * hd
        if new_hidden < 64:  # very narrow heads: keep the hidden size a usable width
            new_hidden = _round_up(64, hd)
            explicit_hd = True
        out["num_attention_heads"] = new_heads
        if "num_key_value_heads" in cfg:
            out["num_key_value_heads"] = new_kv
        if explicit_hd:
            out["head_dim"] = hd
        out["hidden_size"] = new_hidden
        notes.append("%sattention heads %d/%d KV -> %d/%d (ratio %s kept), head_dim %d kept, hidden_size %d -> %d" % (
            where, heads, kv, new_heads, new_kv, ratio or "-", hd, hidden, new_hidden))
        scale = new_hidden / float(hidden)
        for key in _WIDTH_KEYS:
            w = _int(cfg.get(key))
            if w:
                out[key] = min(w, _round_up(w * scale, 64))
        if _int(cfg.get("kv_lora_rank")) or _int(cfg.get("q_lora_rank")):
            notes.append("%sMLA ranks and head dims kept (kv_lora_rank, q_lora_rank, qk_*_head_dim)" % where)
    experts_key = next((k for k in _EXPERT_KEYS if _int(cfg.get(k))), None)
    if experts_key:
        n = cfg[experts_key]
        top_k = _int(cfg.get("num_experts_per_tok")) or _int(cfg.get("moe_topk")) or 1
        groups = _int(cfg.get("n_group")) or 1
        want = max(4, top_k, ep)
        want = _round_up(want, groups) if groups > 1 else want
        new = min(n, want)
        out[experts_key] = new
        if _int(cfg.get("topk_group")) and groups > 1:
            out["topk_group"] = min(cfg["topk_group"], groups)
        notes.append("%s%s %d -> %d (num_experts_per_tok %d kept)" % (where, experts_key, n, new, top_k))
    return out


def shrink_config(cfg: Dict[str, Any], pipeline_size: int = 1, tensor_size: int = 1,
                  expert_size: int = 1) -> Tuple[Dict[str, Any], List[str]]:
    """(small config, notes saying what changed) for the full-size ``cfg`` (a config.json dict).

    Args:
        cfg: the user's config.json as a dict (not modified).
        pipeline_size: the largest pipeline-parallel size of the launch: the small model keeps at
            least that many layers (and two).
        tensor_size: the largest tensor-parallel size (rollout or actor): KV heads are reduced to
            it, not below, so the heads still split across the ranks.
        expert_size: the expert-parallel size: at least that many experts are kept.
    Raises:
        ValueError: ``cfg`` has no ``model_type`` (not a transformers config).
    """
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model_type"), str):
        raise ValueError("the config has no model_type; it is not a Hugging Face transformers config.json")
    pp, tp, ep = max(1, int(pipeline_size)), max(1, int(tensor_size)), max(1, int(expert_size))
    notes: List[str] = []
    text = cfg.get("text_config")
    if isinstance(text, dict):
        out = copy.deepcopy(cfg)
        out["text_config"] = _shrink_text(text, pp, tp, ep, notes, "text_config.")
        for key in _LAYER_KEYS + ("hidden_size",):  # some VL configs mirror text sizes at the top level
            if key in cfg and key in out["text_config"]:
                out[key] = out["text_config"][key]
    else:
        out = _shrink_text(cfg, pp, tp, ep, notes, "")
    vis = cfg.get("vision_config")
    if isinstance(vis, dict):
        v = copy.deepcopy(vis)
        for key in ("depth", "num_hidden_layers", "num_layers"):
            if _int(vis.get(key)) and vis[key] > 1:
                v[key] = 1
                notes.append("vision_config.%s %d -> 1" % (key, vis[key]))
        for key in ("fullatt_block_indexes", "deepstack_visual_indexes"):
            if isinstance(vis.get(key), list):
                v[key] = [i for i in vis[key] if isinstance(i, int) and i < 1]
        out["vision_config"] = v
    if "quantization_config" in out:
        out.pop("quantization_config")
        notes.append("quantization_config dropped (random weights are written in the model's dtype)")
    for key in ("_name_or_path", "transformers_version"):
        out.pop(key, None)
    return out, notes


def tokenizer_files(model_dir: str) -> List[str]:
    """Names of the tokenizer/chat-template files (and remote-code ``*.py``) in ``model_dir``."""
    try:
        names = sorted(os.listdir(model_dir))
    except OSError:
        return []
    return [n for n in names if (n in TOKENIZER_FILES or n.endswith(".py")) and os.path.isfile(os.path.join(model_dir, n))]


def copy_tokenizer(model_dir: str, dest: str) -> List[str]:
    """Copy :func:`tokenizer_files` of ``model_dir`` into ``dest`` (created); returns the names."""
    from ..atomic import copy_file, make_dirs

    make_dirs(dest, "the rehearsal's model directory")
    names = tokenizer_files(model_dir)
    for n in names:  # read as regular files only (a FIFO in a shared model directory never blocks)
        copy_file(os.path.join(model_dir, n), os.path.join(dest, n), "the rehearsal's model directory")
    return names
