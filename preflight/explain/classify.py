"""Root cause of a log: the first real error event, classified.

Data: ``[[wrapper]]`` and ``[[explain]]`` rows of matrices/signatures.toml (then its older
``[[signature]]`` rows, through :func:`preflight.diagnose.classify`), ``[[bad]]`` rows of
matrices/known_bad.toml and ``[rule.<id>]`` rows of matrices/verl_rules.toml for the facts.
"""

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Pattern, Tuple

from ..diagnose import bounded
from .events import Event, split_events

__all__ = ["Explanation", "explain_text", "compiled_rows"]


@dataclass
class Explanation:
    """What :func:`explain_text` found.

    Attributes:
        root: the root-cause event (None: no error in the log).
        id: the signature that classified it (None: an error no signature knows).
        layer: verl, hydra, ray, vllm, nccl, torch, cuda, transformers, pip or python.
        cause, fix: filled from the row and the error's own values (key names, sizes).
        facts: release and package facts behind the cause, each with its source in brackets.
        source, confidence: of the row.
        verl_rule: the preflight config rule that catches this before a launch, if any.
        groups: values read from the error text.
        chain: every event, in log order, as {line, text, wrapper, id}.
        cases: handed failure cases with this error text.
    """

    root: Optional[Event]
    id: Optional[str] = None
    layer: str = ""
    cause: str = ""
    fix: str = ""
    facts: List[str] = field(default_factory=list)
    source: str = ""
    confidence: str = ""
    verl_rule: Optional[str] = None
    groups: Dict[str, str] = field(default_factory=dict)
    chain: List[Dict[str, Any]] = field(default_factory=list)
    cases: List[str] = field(default_factory=list)


class _Safe(dict):
    def __missing__(self, key: str) -> str:
        return "{%s}" % key


_CACHE: Dict[int, Tuple[List[Tuple[Dict[str, Any], Pattern]], List[Tuple[Dict[str, Any], Pattern]]]] = {}


def compiled_rows(matrix: Any) -> Tuple[List[Tuple[Dict[str, Any], Pattern]], List[Tuple[Dict[str, Any], Pattern]]]:
    """(wrapper rows, explain rows) of the matrix's signatures.toml, each with its compiled
    pattern (multi-line: ``^`` anchors at any line). Raises re.error for a bad pattern."""
    key = id(matrix)
    if key not in _CACHE:
        sig = matrix.curated.get("signatures", {})
        wrappers = [(r, re.compile(r["pattern"], re.M)) for r in sig.get("wrapper", [])]
        rows = [(r, re.compile(r["pattern"], re.M)) for r in sig.get("explain", [])]
        _CACHE[key] = (wrappers, rows)
    return _CACHE[key]


def _wrapper(e: Event, wrappers: List[Tuple[Dict[str, Any], Pattern]]) -> Optional[str]:
    head = bounded(e.headline)
    for r, p in wrappers:
        if p.search(head):
            return str(r["id"])
    return None


def _classify(e: Event, rows: List[Tuple[Dict[str, Any], Pattern]], matrix: Any
              ) -> Optional[Tuple[Dict[str, Any], Dict[str, str]]]:
    ctx = bounded(e.context)
    for r, p in rows:
        m = p.search(ctx)
        if m:
            return r, {k: v for k, v in m.groupdict().items() if v}
    from ..diagnose import classify

    d = classify(matrix, ctx, dist=_dist_in(ctx), torch=_torch_in(ctx))
    if d is None:
        return None
    row = {"id": d.id, "layer": _layer_of(d.id), "cause": d.cause, "fix": d.fix, "source": d.source,
           "confidence": d.confidence, "facts": []}
    return row, dict(d.groups)


_EXT_PATH = re.compile(r"(?:site|dist)-packages/([A-Za-z_][A-Za-z0-9_]*)/|/([A-Za-z_][A-Za-z0-9_]*)/_C[^/\s]*\.so")
_IMPORT_TO_DIST = {"flash_attn": "flash-attn", "sgl_kernel": "sgl-kernel", "flashinfer": "flashinfer-python",
                   "vllm_flash_attn": "vllm", "transformer_engine": "transformer-engine", "apex": "apex"}
_TORCH_IN_LOG = re.compile(r"\btorch[ =_-]+v?(\d+\.\d+(?:\.\d+)?(?:\+\w+)?)")


def _dist_in(text: str) -> str:
    """The distribution whose file the log names (``.../site-packages/vllm/_C.abi3.so`` -> ``vllm``),
    else a phrase that sends the reader to the error's own path."""
    m = _EXT_PATH.search(text)
    if m:
        name = m.group(1) or m.group(2)
        return _IMPORT_TO_DIST.get(name, name.replace("_", "-"))
    return "the package whose extension the error names"


def _torch_in(text: str) -> str:
    """The torch version the log states, else ``installed`` (the fixes read "built for torch installed")."""
    m = _TORCH_IN_LOG.search(text)
    return m.group(1) if m else "installed"


def _layer_of(sig_id: str) -> str:
    if sig_id.startswith(("vllm", "spawn", "tvm", "flashinfer")):
        return "vllm"
    if sig_id.startswith(("cuda", "no-", "driver", "forward", "fabric", "cudnn")):
        return "cuda"
    if sig_id.startswith(("torch", "flash", "undefined", "missing-custom", "forkingpickler")):
        return "torch"
    return "python"


def _facts(row: Dict[str, Any], matrix: Any, groups: Dict[str, str]) -> List[str]:
    out = [str(f).format_map(_Safe(groups)) for f in row.get("facts", [])]
    bad = {str(b.get("id")): b for b in matrix.curated.get("known_bad", {}).get("bad", [])}
    for kid in row.get("known_bad", []):
        b = bad.get(kid)
        if b is not None:
            out.append("known-bad %s (%s %s): %s [%s]" % (kid, b.get("package"), b.get("versions"), b.get("reason"),
                                                           b.get("source")))
    rule = row.get("verl_rule")
    if rule:
        try:
            from ..launch.rules import load_rules

            r = load_rules().get("rule", {}).get(rule, {})
        except Exception:  # the facts are extra; a broken rules file is reported by config
            r = {}
        if r.get("check"):
            out.append("verl checks: %s [matrices/verl_rules.toml rule.%s%s]" % (
                r["check"], rule, "; " + r["source"] if r.get("source") else ""))
    code = groups.get("code")
    if code and code.isdigit():
        out.append("found version %s means the driver supports CUDA up to %d.%d" % (
            code, int(code) // 1000, int(code) % 1000 // 10))
    return out


#: a text this short with no exception line is a pasted message: each of its lines is classified
_PASTE_LINES = 50
_DRIVER_CODE = re.compile(r"too old \(found version (\d{4,6})\)")


def explain_text(text: str, matrix: Any) -> Explanation:
    """The root cause of the error(s) in ``text`` (a log or a traceback).

    Events that only wrap another error are skipped; the root is the first remaining event (in
    log order) that a signature classifies and that is not a logger warning; failing that, the
    first classified warning, then the first unclassified exception. Never raises on odd text.
    """
    wrappers, rows = compiled_rows(matrix)
    text = bounded(text or "", max_lines=1 << 62)  # every line the events' own regexes see is capped too
    standalone = [p for r, p in rows if r.get("standalone")]
    events = split_events(text or "", standalone)
    chain: List[Dict[str, Any]] = []
    classified: List[Tuple[Event, Dict[str, Any], Dict[str, str]]] = []
    for e in events:
        w = _wrapper(e, wrappers)
        c = None if w else _classify(e, rows, matrix)
        chain.append({"line": e.lineno, "text": e.headline[:300], "wrapper": w, "id": c[0]["id"] if c else None,
                      "level": e.level})
        if w is None and c is not None:
            classified.append((e, c[0], c[1]))
    if not classified and len(text.splitlines()) <= _PASTE_LINES:
        # a pasted message without its traceback: every line may carry the error text
        for idx, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            e = Event("line", line.strip(), lineno=idx + 1)
            if _wrapper(e, wrappers):
                continue
            c = _classify(e, rows, matrix)
            if c is not None:
                classified.append((e, c[0], c[1]))
                chain.append({"line": e.lineno, "text": e.headline[:300], "wrapper": None, "id": c[0]["id"],
                              "level": e.level})
                events.append(e)
                break
    pick = next((x for x in classified if x[0].level != "warning"), None) or (classified[0] if classified else None)
    if pick is None:
        real = [e for e, link in zip(events, chain) if not link["wrapper"] and e.kind == "exception"]
        root = next((e for e in real if e.level != "warning"), real[0] if real else None)
        if root is None and events:
            root = events[0]
        return Explanation(root, chain=chain)
    e, row, groups = pick
    dm = _DRIVER_CODE.search(bounded(e.context))
    if dm:
        groups = dict(groups, code=dm.group(1))
    vals = _Safe(groups)
    return Explanation(e, str(row["id"]), str(row.get("layer", "")), str(row["cause"]).format_map(vals),
                       str(row["fix"]).format_map(vals), _facts(row, matrix, groups), str(row.get("source", "")),
                       str(row.get("confidence", "")), row.get("verl_rule"), groups, chain,
                       [str(c) for c in row.get("cases", [])])
