# Renders the first dataset rows through the model's chat template and calls the custom reward
# function on them, in the target interpreter (verl's own pyarrow and jinja2), each step bounded.
# ARGS: {"files": [...], "prompt_key": "prompt", "source_key": "data_source", "rows": 4,
#        "template": str|null, "bos_token": str, "eos_token": str,
#        "reward": {"path", "name", "kwargs": {}, "budget_s": 1.0, "cwd"}|null}
# Events: "no_pyarrow" {error}; "rows" {count, error?}; "no_jinja" {error};
#   "template" {row, ok, error_type?, error?, structured, stringified, chars};
#   "reward_load" {ok, error_type?, error?}; "reward" {row, data_source, ok, kind, value?, error_type?,
#   error?, seconds}
# The template runs in jinja2.sandbox.ImmutableSandboxedEnvironment with trim_blocks and
# lstrip_blocks, the loopcontrols extension and a raise_exception global, as transformers'
# apply_chat_template renders it. Reward calls run in this process's main thread with an alarm
# (SIGALRM) as the per-call budget; the checker's deadline bounds the whole script.
import importlib.util
import math
import os
import signal
import sys
import time
import traceback


def _rows(files, keys, limit):
    out = []
    for path in files:
        if len(out) >= limit:
            break
        pf = parquet_file(path)
        cols = [k for k in keys if k in pf.schema_arrow.names]
        for rb in pf.iter_batches(batch_size=max(1, limit), columns=cols):
            for row in rb.to_pylist():
                out.append(row)
                if len(out) >= limit:
                    break
            break
    return out


def _structured(messages):
    return isinstance(messages, list) and any(isinstance(m, dict) and isinstance(m.get("content"), list)
                                              for m in messages)


def _templates(rows, pk):
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except Exception as exc:
        emit("no_jinja", error="%s: %s" % (type(exc).__name__, exc))
        return

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    try:
        tmpl = env.from_string(ARGS["template"])
    except Exception as exc:
        emit("template", row=None, ok=False, error_type=type(exc).__name__, error=str(exc)[:500], structured=False,
             stringified=False, chars=0)
        return
    for i, row in enumerate(rows):
        msgs = row.get(pk)
        structured = _structured(msgs)
        try:
            text = tmpl.render(messages=msgs, add_generation_prompt=True, bos_token=ARGS.get("bos_token") or "",
                               eos_token=ARGS.get("eos_token") or "", tools=None)
        except Exception as exc:
            emit("template", row=i, ok=False, error_type=type(exc).__name__, error=str(exc)[:500],
                 structured=structured, stringified=False, chars=0)
            continue
        # a template that prints content with {{ }} turns a list of parts into its Python repr
        stringified = structured and ("'type': '" in text or '"type": "' in text or any(
            repr(m.get("content")) in text for m in msgs if isinstance(m, dict) and isinstance(m.get("content"), list)))
        emit("template", row=i, ok=True, structured=structured, stringified=stringified, chars=len(text))


class _Slow(Exception):
    pass


def _alarm(_sig, _frm):
    raise _Slow()


def _kind(value):
    if isinstance(value, bool):
        return "number", float(value)
    if isinstance(value, (int, float)):
        return ("number", float(value)) if math.isfinite(value) else ("not_finite", repr(value))
    if isinstance(value, dict):
        if "score" not in value:
            return "dict_without_score", sorted(str(k) for k in value)[:10]
        return _kind(value["score"])
    if value is None:
        return "none", None
    if isinstance(value, str):
        return "str", value[:80]
    try:  # numpy / torch scalars
        f = float(value)
        return ("number", f) if math.isfinite(f) else ("not_finite", repr(value))
    except Exception:
        return "other", type(value).__name__


def _reward(rows, sk):
    spec = ARGS["reward"]
    path = spec["path"]
    if spec.get("cwd") and not os.path.isabs(path):
        path = os.path.join(spec["cwd"], path)
    try:
        # loaded as verl loads it (spec_from_file_location; its directory is not put on sys.path,
        # where a module another user adds beside it would be imported by name)
        ms = importlib.util.spec_from_file_location("custom_reward_module", path)
        mod = importlib.util.module_from_spec(ms)
        sys.modules["custom_reward_module"] = mod
        ms.loader.exec_module(mod)
        fn = getattr(mod, spec["name"])
    except BaseException as exc:
        emit("reward_load", ok=False, error_type=type(exc).__name__, error=str(exc)[:500],
             traceback=traceback.format_exc()[-1500:])
        return
    emit("reward_load", ok=True)
    budget = float(spec.get("budget_s") or 1.0)
    kwargs = spec.get("kwargs") or {}
    use_alarm = hasattr(signal, "setitimer")
    if use_alarm:
        signal.signal(signal.SIGALRM, _alarm)
    for i, row in enumerate(rows):
        rm = row.get("reward_model") or {}
        gt = rm.get("ground_truth") if isinstance(rm, dict) else None
        ds = row.get(sk)
        t0 = time.monotonic()
        ev = {"row": i, "data_source": ds}
        try:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, budget * 5)
            value = fn(data_source=ds, solution_str=str(gt), ground_truth=gt, extra_info=row.get("extra_info"),
                       **kwargs)
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
            kind, shown = _kind(value)
            ev.update(ok=kind == "number", kind=kind, value=shown)
        except _Slow:
            ev.update(ok=False, kind="hangs", error="still running after %.1f s" % (budget * 5))
        except BaseException as exc:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
            ev.update(ok=False, kind="raises", error_type=type(exc).__name__, error=str(exc)[:300],
                      traceback=traceback.format_exc()[-1200:])
        ev["seconds"] = round(time.monotonic() - t0, 4)
        if ev.get("ok") and ev["seconds"] > budget:
            ev.update(ok=False, kind="too_slow")
        emit("reward", **ev)


def main():
    try:
        import pyarrow.parquet  # noqa: F401
    except Exception as exc:
        emit("no_pyarrow", error="%s: %s" % (type(exc).__name__, exc))
        return
    pk, sk = ARGS.get("prompt_key") or "prompt", ARGS.get("source_key") or "data_source"
    try:
        rows = _rows(ARGS.get("files") or [], [pk, sk, "reward_model", "extra_info"], int(ARGS.get("rows") or 4))
    except Exception as exc:
        emit("rows", count=0, error="%s: %s" % (type(exc).__name__, str(exc)[:500]))
        return
    emit("rows", count=len(rows))
    if ARGS.get("template") and rows:
        _templates(rows, pk)
    if ARGS.get("reward") and rows:
        _reward(rows, sk)


main()
