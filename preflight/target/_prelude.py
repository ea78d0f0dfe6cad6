# Shared prelude of every target script (prepended by preflight.probes.process.load_script).
# Runs on the target interpreter: standard library only, Python 3.6+ syntax.
import json as _json
import os as _os
import sys as _sys

ARGS = _json.loads(_sys.argv[1]) if len(_sys.argv) > 1 else {}
# Events go to a private file the checker names (so stdout noise, a banner printed without a
# newline, or a daemon keeping stdout open cannot break them); taken out of the environment so
# the processes this script starts do not write there. Without it (run by hand): stdout.
_EVENTS = _os.environ.pop("PREFLIGHT_EVENTS", None)


def emit(event, **fields):
    """Report one JSON event to the checker (one marker line, appended whole)."""
    fields["event"] = event
    line = "@@PREFLIGHT@@ " + _json.dumps(fields, default=str) + "\n"
    if _EVENTS:
        fd = _os.open(_EVENTS, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o600)
        try:
            _os.write(fd, line.encode("utf-8"))
        finally:
            _os.close(fd)
        return
    _sys.stdout.write("\n" + line)
    _sys.stdout.flush()


def _tail(text, n=2000):
    text = text or ""
    return text[-n:]
