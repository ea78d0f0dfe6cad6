# Part of verl_startup.py (named on its "# parts:" line; preflight.probes.process.load_script puts it
# after the prelude and before the script, in the one module the child runs): the search for the
# user's keys that no source file of the installed verl reads. Standard library only.
import os
import time


# ---- keys verl never reads -----------------------------------------------------------------------
# A user override whose name appears nowhere in the installed verl's sources (as a name or inside a
# string literal, read with tokenize; or inside a ${...} interpolation of verl's YAML) is a key no
# code of that release reads: Hydra accepts a "+"-added key silently. Names under a node that verl's
# own config leaves empty ({} or null: engine_kwargs, override_config...) are passed on to another
# library and are not judged, nor are names under a node whose name ends in "kwargs" or starts with
# "override_" (verl hands such a node on whole: engine_kwargs.vllm becomes vLLM's own arguments,
# override_transformer_config Megatron's).
_IDENT = None  # {"files": n, "found": {name: True|False}} memo, one per process
_WORD = __import__("re").compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _source_files(roots):
    out = []
    for root in roots:
        if os.path.isfile(root):
            out.append(root)
            continue
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                if f.endswith((".py", ".yaml", ".yml")):
                    out.append(os.path.join(d, f))
    return out


def _reads(path, names):
    """The ``names`` that ``path`` reads: NAME tokens or words of string literals (.py), words of
    ${...} interpolations (.yaml)."""
    import io
    import re
    import tokenize

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return set()
    text = raw.decode("utf-8", "replace")
    hits = set(n for n in names if n in text)
    if not hits:
        return set()
    found = set()
    if not path.endswith(".py"):
        for m in re.finditer(r"\$\{[^}]*\}", text):
            found.update(w for w in _WORD.findall(m.group(0)) if w in hits)
        return found
    try:
        for tok in tokenize.tokenize(io.BytesIO(raw).readline):
            if tok.type == tokenize.NAME and tok.string in hits:
                found.add(tok.string)
            elif tok.type == tokenize.STRING:
                found.update(w for w in _WORD.findall(tok.string) if w in hits)
            if found == hits:
                break
    except (tokenize.TokenError, SyntaxError, IndentationError):
        found.update(w for w in _WORD.findall(text) if w in hits)  # unreadable: count any mention
    return found


def _select(cfg, key):
    from omegaconf import OmegaConf

    miss = object()
    try:
        v = OmegaConf.select(cfg, key, default=miss, throw_on_missing=False)
    except Exception:
        return miss, miss
    return v, miss


def _candidates(cfg, base, overrides):
    """[(override key, the name to look for, its parent path)] for the user's keys."""
    from omegaconf import DictConfig

    out = []
    for o in overrides:
        k, eq, _v = str(o).partition("=")
        if not eq or k.startswith("~") or "@" in k or "/" in k:
            continue
        added = k.startswith("+")
        key = k.lstrip("+")
        parts = key.split(".")
        if parts[0] == "hydra" or not all(_WORD.fullmatch(p) for p in parts):
            continue
        v, miss = _select(cfg, key)
        if v is miss:  # a config group choice, not a value
            continue
        ref = base if (added and base is not None) else cfg
        depth = len(parts)
        while depth > 0 and _select(ref, ".".join(parts[:depth]))[0] is miss:
            depth -= 1
        if depth == len(parts):  # the key is in verl's own config: its leaf is the name
            depth -= 1
        parent = ".".join(parts[:depth])
        node = _select(ref, parent)[0] if parent else ref
        if node is None or (isinstance(node, DictConfig) and len(node) == 0):
            continue  # a free-form node verl passes on (override_config, reward_kwargs...)
        if any(p.endswith("kwargs") or p.startswith("override_") for p in parts[:depth]):
            continue  # a node verl hands on whole (engine_kwargs.vllm -> vLLM's LLM(**...),
            # megatron.override_transformer_config -> Megatron's TransformerConfig)
        out.append((k, parts[depth], parent))
    return out


def _closest(name, parent, cfg):
    import difflib

    from omegaconf import DictConfig, OmegaConf

    node = _select(cfg, parent)[0] if parent else cfg
    pool = {}
    if isinstance(node, DictConfig):
        for k in node.keys():
            pool[str(k)] = ("%s.%s" % (parent, k)) if parent else str(k)
    best = difflib.get_close_matches(name, list(pool), n=1, cutoff=0.7)
    if best:
        return pool[best[0]]
    flat = {}

    def walk(n, pre):
        if isinstance(n, dict):
            for k, v in n.items():
                path = "%s.%s" % (pre, k) if pre else str(k)
                flat.setdefault(str(k), path)
                walk(v, path)
    try:
        walk(OmegaConf.to_container(cfg, resolve=False), "")
    except Exception:
        pass
    best = difflib.get_close_matches(name, list(flat), n=1, cutoff=0.75)
    return flat[best[0]] if best else None


def _ignored(cfg, overrides, verl_root, entry_file):
    """The "ignored" event: the user's keys no file of the installed verl reads."""
    global _IDENT
    t0 = time.monotonic()
    base = None
    if any(str(o).startswith("+") for o in overrides):
        try:  # verl's own config without the user's additions: where the added keys hang
            base = _compose(ARGS.get("_cfg_dir"), ARGS.get("config_dir"), ARGS.get("config_name") or "ppo_trainer",
                            [o for o in overrides if not str(o).startswith("+")])
        except Exception:
            base = None
    cands = _candidates(cfg, base, overrides)
    if _IDENT is None:
        roots = [verl_root]
        if entry_file and not os.path.abspath(entry_file).startswith(verl_root + os.sep):
            roots.append(os.path.dirname(os.path.abspath(entry_file)))
        _IDENT = {"files": _source_files(roots), "found": {}}
    extra = []
    from omegaconf import OmegaConf

    try:
        flat = OmegaConf.to_container(cfg, resolve=False)
    except Exception:
        flat = {}

    def py_values(n):
        if isinstance(n, dict):
            for v in n.values():
                py_values(v)
        elif isinstance(n, list):
            for v in n:
                py_values(v)
        elif isinstance(n, str) and n.endswith(".py") and os.path.isfile(os.path.expanduser(n)):
            extra.append(os.path.expanduser(n))  # the user's own reward function or dataset class
    py_values(flat)
    found = _IDENT["found"]
    todo = set(n for _k, n, _p in cands if n not in found)
    if todo:
        seen = set()
        for f in _IDENT["files"]:
            seen |= _reads(f, todo - seen)
            if seen == todo:
                break
        for n in todo:
            found[n] = n in seen
    user_seen = set()
    missing = [c for c in cands if not found.get(c[1])]
    if missing and extra:
        for f in extra:
            user_seen |= _reads(f, set(c[1] for c in missing))
    keys = []
    for k, name, parent in missing:
        if name in user_seen:
            continue
        keys.append({"override": k, "name": name, "parent": parent, "closest": _closest(name, parent, base or cfg)})
    emit("ignored", keys=keys, checked=len(cands), files=len(_IDENT["files"]) + len(extra),
         seconds=round(time.monotonic() - t0, 3))
