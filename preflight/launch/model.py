"""A model's ``config.json``, read from disk only: a local directory, or the local Hugging Face
cache for a repo id. Never the network.

Multimodal layouts keep the language model's numbers in a sub-config: ``text_config``
(Qwen2-VL, Llava, Gemma 3), ``llm_config`` (InternVL chat models) or ``language_config``
(DeepSeek-VL2); the first of these that is a mapping is read, the top level first. Beside
``config.json`` the directory may hold ``tokenizer_config.json`` (``auto_map`` of a custom
tokenizer, ``chat_template``), ``chat_template.jinja`` / ``chat_template.json`` (newer
transformers and processors store the template there) and ``model.safetensors.index.json``
(``weight_map``: every parameter name, so the module names).

The cache is ``$HF_HUB_CACHE``, else ``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub's order);
a repo ``org/name`` lives in ``models--org--name/snapshots/<revision>/`` with ``refs/main``
naming the revision.
"""

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..paths import loads_json

__all__ = ["ModelFacts", "remote_code_problem", "hf_cache_dir", "find_config", "read_model", "SUBCONFIG_KEYS", "model_file", "read_head",
           "UnreadableModelFile", "MODEL_FILE_MAX"]

#: Keys under which multimodal configs keep the language model's config (transformers' names).
SUBCONFIG_KEYS = ("text_config", "llm_config", "language_config")

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
        model_type: ``qwen2``, ``llama``... (the top level's; ``text_model_type`` is the
            language model's when it sits in a sub-config).
        text_key: the sub-config that holds the language model (``llm_config``...), or None.
        auto_map: ``{file: {AutoClass: "module.Class"}}`` for config.json and
            tokenizer_config.json when they map classes to Python files of the model (custom code:
            transformers needs ``trust_remote_code=True``).
        architectures: config.json ``architectures`` (e.g. ``["Qwen2ForCausalLM"]``).
        weight_names: parameter names from model.safetensors.index.json ``weight_map`` (None when
            there is no index), ``weights_from`` names the file.
        chat_template: the tokenizer's Jinja chat template (a string; the ``default`` one when
            several are named), ``template_from`` says which file; None when none is stored.
        torch_dtype: config.json ``torch_dtype`` / ``dtype`` (``bfloat16``...).
    """

    path: str
    heads: Optional[int]
    kv_heads: Optional[int]
    max_position_embeddings: Optional[int]
    params: Optional[int]
    params_from: str
    model_type: Optional[str]
    raw: Dict[str, Any]
    text_key: Optional[str] = None
    text_model_type: Optional[str] = None
    auto_map: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    architectures: List[str] = field(default_factory=list)
    weight_names: Optional[List[str]] = None
    weights_from: str = ""
    chat_template: Optional[str] = None
    template_from: str = ""
    torch_dtype: Optional[str] = None

    @property
    def directory(self) -> str:
        """The directory that holds config.json."""
        return os.path.dirname(self.path)


def remote_code_problem(model: Optional["ModelFacts"], trust: Any) -> Optional[str]:
    """Why loading ``model`` with ``trust_remote_code`` (``trust``) would run Python files of the
    model directory that another user can change (``paths.model_code_problem``), or None: no
    ``auto_map`` (no code of the model's is imported), trust off, or the code is safe."""
    if model is None or not model.auto_map or str(trust).lower() != "true":
        return None
    from ..paths import model_code_problem

    return model_code_problem(model.directory)


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
        if os.path.lexists(cfg) and not os.path.isfile(cfg):
            from ..paths import file_problem

            return None, "%s: %s (model files are read only as regular files)" % (cfg, file_problem(cfg))
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
            ref = model_file(os.path.join(root, "refs", "main"), REF_MAX)
            rev = ref.decode("utf-8", "replace").strip() if ref is not None else None
        except UnreadableModelFile:
            pass
        if rev and (os.sep in rev or rev.startswith(".")):
            rev = None  # a revision is a hash or a name, never a path
        cands = [rev] if rev else []
        cands += sorted(os.listdir(snaps), key=lambda d: -os.path.getmtime(os.path.join(snaps, d)))
        for c in cands:
            cfg = os.path.join(snaps, c, "config.json")
            if os.path.isfile(cfg):
                return cfg, "Hugging Face cache (revision %s)" % c[:12]
        return None, "%s is in the Hugging Face cache without a config.json" % model_path
    return None, "%s is neither a local directory nor a cached Hugging Face repo" % model_path


_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "float8_e4m3fn": 1}


#: config.json fields that must be positive whole numbers when present (null is "not given")
DIMENSIONS = ("num_attention_heads", "num_key_value_heads", "max_position_embeddings", "hidden_size",
              "num_hidden_layers", "vocab_size", "intermediate_size", "head_dim")


def _bad_dimension(raw: Dict[str, Any], text: Dict[str, Any]) -> Optional[str]:
    """Why one of :data:`DIMENSIONS` in ``raw`` (or its text sub-config ``text``) is not a
    positive whole number (a phrase naming the key), or None. 32.0 counts as 32; a string, a
    bool, 0, a negative or a fraction does not."""
    for where, doc in (("", raw), ("text config ", text)):
        for key in DIMENSIONS:
            v = doc.get(key)
            if v is None:
                continue
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and \
                v not in (float("inf"), float("-inf")) and v > 0 and float(v).is_integer()
            if not ok:
                return "%s%s is %s, not a positive whole number; fix the model's config.json" % (
                    where, key, json.dumps(v)[:40])
    return None


def _estimate(c: Dict[str, Any]) -> Optional[int]:
    try:
        h, layers = int(c["hidden_size"]), int(c["num_hidden_layers"])
        vocab, inter = int(c["vocab_size"]), int(c.get("intermediate_size") or 4 * h)
        heads = int(c.get("num_attention_heads") or 1)
        kv = int(c.get("num_key_value_heads") or heads)
        hd = int(c.get("head_dim") or h // heads)
    except (KeyError, TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    mlp = 3 * h * inter
    emb = vocab * h * (1 if c.get("tie_word_embeddings") else 2)
    return layers * (attn + mlp + 2 * h) + emb + h


#: Most bytes read from one model or tokenizer file (the largest tokenizer_config.json and
#: safetensors indexes of public models are a few MiB; refs/main is a 40-character revision).
MODEL_FILE_MAX = 64 * 1024 * 1024
REF_MAX = 4096


class UnreadableModelFile(Exception):
    """A model or tokenizer file that is there but not a regular file of a sane size (a FIFO,
    /dev/zero, a directory, a 2 GB config.json); ``str()`` is one line naming it and why."""


def model_file(path: str, limit: int = MODEL_FILE_MAX) -> Optional[bytes]:
    """The bytes of a model or tokenizer file, read only as a regular file of at most ``limit``
    bytes (:func:`preflight.paths.read_regular`: opened non-blocking, so a FIFO or a device is
    never waited on); None when there is no such file. Raises :class:`UnreadableModelFile`
    when it exists and is anything else."""
    from ..paths import read_regular

    if not os.path.lexists(path):
        return None
    try:
        return read_regular(path, limit)
    except OSError as exc:
        if not os.path.lexists(path):
            return None
        raise UnreadableModelFile("%s: %s" % (path, exc.strerror or exc))


def read_head(path: str, n: int) -> bytes:
    """At most the first ``n`` bytes of the regular file ``path`` (a safetensors header), opened
    non-blocking and checked with fstat: a FIFO or device raises OSError, never blocks."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        chunks, got = [], 0
        while got < n:
            b = os.read(fd, min(n - got, 1 << 20))
            if not b:
                break
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _json(path: str) -> Optional[Any]:
    """The JSON in ``path`` (bounded, see :func:`model_file`); None when absent or not JSON
    (a deep or malformed file included). Raises :class:`UnreadableModelFile`."""
    data = model_file(path)
    if data is None:
        return None
    try:
        return loads_json(data, path)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _template(d: str) -> Tuple[Optional[str], str]:
    """(the chat template stored in directory ``d``, the file it came from)."""
    tok = _json(os.path.join(d, "tokenizer_config.json"))
    cands: List[Tuple[Any, str]] = []
    if isinstance(tok, dict):
        cands.append((tok.get("chat_template"), "tokenizer_config.json"))
    jinja = model_file(os.path.join(d, "chat_template.jinja"))
    if jinja is not None:
        cands.append((jinja.decode("utf-8", "replace"), "chat_template.jinja"))
    proc = _json(os.path.join(d, "chat_template.json"))
    if isinstance(proc, dict):
        cands.append((proc.get("chat_template"), "chat_template.json"))
    for t, src in cands:
        if isinstance(t, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
            named = {x.get("name"): x.get("template") for x in t if isinstance(x, dict)}
            t = named.get("default") or next((v for v in named.values() if isinstance(v, str)), None)
        if isinstance(t, str) and t.strip():
            return t, src
    return None, ""


def read_model(model_path: Any, env: Optional[Mapping[str, str]] = None) -> Tuple[Optional[ModelFacts], str]:
    """(facts or None, how found / why not). A malformed config.json gives None and the reason."""
    cfg, how = find_config(model_path, env)
    if cfg is None:
        return None, how
    try:
        return _read_model(cfg, how)
    except UnreadableModelFile as exc:  # a FIFO or /dev/zero as tokenizer_config.json: one line, never a hang
        return None, "%s (model files are read only as regular files)" % exc


def _read_model(cfg: str, how: str) -> Tuple[Optional[ModelFacts], str]:
    try:
        data = model_file(cfg)
        raw = loads_json(data or b"", cfg)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return None, "%s could not be read: %s" % (cfg, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if not isinstance(raw, dict):
        return None, "%s is not a JSON object" % cfg
    text_key = next((k for k in SUBCONFIG_KEYS if isinstance(raw.get(k), dict)), None)
    text: Dict[str, Any] = raw[text_key] if text_key else {}

    bad = _bad_dimension(raw, text)
    if bad:
        return None, "%s: %s" % (cfg, bad)

    def pick(key: str) -> Optional[int]:
        v = raw.get(key, text.get(key))
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    heads = pick("num_attention_heads")
    kv = pick("num_key_value_heads") or heads
    d = os.path.dirname(cfg)
    params, src = None, "unknown"
    dtype = str(raw.get("torch_dtype") or raw.get("dtype") or text.get("torch_dtype") or text.get("dtype") or "")
    index = _json(os.path.join(d, "model.safetensors.index.json"))
    names: Optional[List[str]] = None
    if isinstance(index, dict):
        try:
            total = int(index["metadata"]["total_size"])
            if dtype in _DTYPE_BYTES:
                params, src = total // _DTYPE_BYTES[dtype], "model.safetensors.index.json total_size / %s" % dtype
        except (KeyError, TypeError, ValueError):
            pass
        if isinstance(index.get("weight_map"), dict):
            names = sorted(str(k) for k in index["weight_map"])
    if params is None:
        est = _estimate(dict({k: v for k, v in raw.items() if k not in SUBCONFIG_KEYS}, **text) if text else raw)
        if est:
            params, src = est, "estimated from config.json dimensions"
    auto: Dict[str, Dict[str, Any]] = {}
    if isinstance(raw.get("auto_map"), dict) and raw["auto_map"]:
        auto["config.json"] = raw["auto_map"]
    tok = _json(os.path.join(d, "tokenizer_config.json"))
    if isinstance(tok, dict) and isinstance(tok.get("auto_map"), (dict, list)) and tok["auto_map"]:
        am = tok["auto_map"]
        auto["tokenizer_config.json"] = am if isinstance(am, dict) else {"AutoTokenizer": am}
    tmpl, tmpl_from = _template(d)
    arch = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    return ModelFacts(cfg, heads, kv, pick("max_position_embeddings"), params, src, raw.get("model_type"), raw,
                      text_key=text_key, text_model_type=text.get("model_type") if text_key else None,
                      auto_map=auto, architectures=[str(a) for a in arch], weight_names=names,
                      weights_from="model.safetensors.index.json" if names is not None else "",
                      chat_template=tmpl, template_from=tmpl_from, torch_dtype=dtype or None), how
