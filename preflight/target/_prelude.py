# Shared prelude of every target script (prepended by preflight.probes.process.load_script).
# Runs on the target interpreter: standard library only, Python 3.6+ syntax.
import json as _json
import sys as _sys

ARGS = _json.loads(_sys.argv[1]) if len(_sys.argv) > 1 else {}


def emit(event, **fields):
    """Report one JSON event to the checker (a marker line on stdout)."""
    fields["event"] = event
    _sys.stdout.write("@@PREFLIGHT@@ " + _json.dumps(fields, default=str) + "\n")
    _sys.stdout.flush()


def _tail(text, n=2000):
    text = text or ""
    return text[-n:]
