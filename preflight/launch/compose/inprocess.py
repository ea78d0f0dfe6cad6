"""Target scripts run in the checker's own process (vendored Hydra), with the events of a probe."""

import json
import os
from typing import Any, Dict, Optional


def _script_code(name: str) -> Any:
    """The compiled script ``preflight/target/<name>.py`` alone (run_here gives it ARGS and emit,
    which the prelude defines in a child)."""
    if name not in _CODE:
        from ... import target as pkg

        path = os.path.join(os.path.dirname(pkg.__file__), name + ".py")
        loader = getattr(pkg, "__loader__", None)
        if loader is not None and hasattr(loader, "get_data"):
            src = loader.get_data(path).decode("utf-8")
        else:  # pragma: no cover - plain file loaders have get_data
            with open(path, encoding="utf-8") as fh:
                src = fh.read()
        _CODE[name] = compile(src, path, "exec")
    return _CODE[name]


_CODE: Dict[str, Any] = {}


def run_here(name: str, args: Dict[str, Any], env: Optional[Dict[str, str]] = None) -> Any:
    """Run target script ``name`` in this process (the checker's own, vendored Hydra): the same
    code and events as :func:`preflight.probes.process.run_script`, without a process start and a
    Hydra import per call. ``env`` is set in os.environ while it runs (``${oc.env:...}``), then
    restored. Returns a ProbeOutput (returncode 1 and the traceback as stderr when it raised)."""
    import time
    import traceback
    import warnings

    from ...probes.process import ProbeOutput

    out = ProbeOutput(argv=["<in-process %s>" % name])
    t0 = time.monotonic()

    def emit(event: str, **fields: Any) -> None:
        fields["event"] = event
        out.events.append(json.loads(json.dumps(fields, default=str)))
    saved = {k: os.environ.get(k) for k in (env or {})}
    try:
        os.environ.update(env or {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(_script_code(name), {"ARGS": json.loads(json.dumps(args)), "emit": emit, "__name__": "__main__"})
        out.returncode = 0
    except BaseException as exc:  # noqa: BLE001 - reported like a crashed probe
        if isinstance(exc, KeyboardInterrupt):
            raise
        out.returncode = 1
        out.stderr_tail = traceback.format_exc()[-2000:]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        out.duration_s = time.monotonic() - t0
    return out
