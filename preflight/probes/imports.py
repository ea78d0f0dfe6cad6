"""Import probing with crash isolation.

:func:`run_imports` imports a list of modules in one target process. When the process dies
inside an import (segfault, abort, ``os._exit``) or hangs, that item is recorded as crashed or
hung with the process evidence, and the items after it run again in a fresh process. One bad
extension therefore costs one row, not the stage.
"""

from typing import Any, Dict, List

from .process import run_script

__all__ = ["run_imports"]


def run_imports(python: str, items: List[Dict[str, Any]], timeout: float) -> Dict[str, Any]:
    """Import each item (``{"id", "module", "attr"?, "facts"?}``) under ``python``.

    Returns id -> result dict. Every result has ``state``: ``ok``, ``failed`` (an exception;
    ``error_type``, ``error``, ``traceback``), ``crashed`` (``exit`` says how), ``hung``
    (killed after ``timeout`` s) or ``not_run`` (the interpreter could not start). Failed
    ``ModuleNotFoundError`` items also get ``missing_modules``: every missing module found by
    stubbing the first one and importing again (evidence only).
    """
    results: Dict[str, Any] = {}
    pending = list(items)
    rounds = 0
    while pending and rounds <= len(items):
        rounds += 1
        out = run_script(python, "imports", {"items": pending, "discover_missing": True}, timeout=timeout)
        started = None
        for ev in out.events:
            kind = ev.get("event")
            if kind == "start":
                started = ev.get("id")
            elif kind == "done":
                ev = dict(ev)
                ev.pop("event", None)
                ev["state"] = "ok" if ev.get("ok") else "failed"
                results[ev["id"]] = ev
                started = None
            elif kind == "missing" and ev.get("id") in results:
                results[ev["id"]]["missing_modules"] = ev.get("modules")
                results[ev["id"]]["missing_stopped"] = ev.get("stopped")
        if out.launch_error:
            for it in pending:
                results[it["id"]] = {"id": it["id"], "module": it["module"], "state": "not_run",
                                     "error": out.describe()}
            break
        if out.timed_out and started is None and not any(it["id"] in results for it in pending):
            # hung before the first import (interpreter start-up, a .pth file): retrying each item
            # would cost the whole timeout again per item
            for it in pending:
                results[it["id"]] = {"id": it["id"], "module": it["module"], "state": "hung",
                                     "error": out.describe() + " before the first import", "process": out.evidence()}
            break
        if started is not None:
            state = "hung" if out.timed_out else "crashed"
            item = next(it for it in pending if it["id"] == started)
            results[started] = {"id": started, "module": item["module"], "attr": item.get("attr"),
                                "state": state, "error": out.describe(), "process": out.evidence()}
        elif not out.ok and not out.timed_out and not any(it["id"] in results for it in pending):
            # died before the first import (e.g. a broken sitecustomize)
            for it in pending:
                results[it["id"]] = {"id": it["id"], "module": it["module"], "state": "crashed",
                                     "error": out.describe(), "process": out.evidence()}
            break
        pending = [it for it in pending if it["id"] not in results]
    return results
