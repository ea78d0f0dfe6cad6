# Shared prelude of every target script (prepended by preflight.probes.process.load_script).
# Runs on the target interpreter: standard library only, Python 3.6+ syntax.
import json as _json
import os as _os
import sys as _sys



def _load_args():
    """The script's arguments: JSON in the private file named by $PREFLIGHT_ARGS (written 0600 by
    the checker in a 0700 directory it made), never the command line, so nothing in them (a secret
    reward kwarg, a model path, 20 000 dataset shards) shows in /proc/PID/cmdline or meets the
    kernel's argument-length limit. The variable is taken out of the environment and the file is
    removed once read, so the processes this script starts see neither. Without it: {}."""
    path = _os.environ.pop("PREFLIGHT_ARGS", None)
    if not path:
        return {}
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        _os.unlink(path)
    except OSError:
        pass
    return _json.loads(data.decode("utf-8"))


ARGS = _load_args()
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


def parquet_file(path):
    """pyarrow's ParquetFile of ``path``. A path that is not UTF-8 (its bad bytes held as surrogates,
    as Python decodes file names) is opened by Python and handed over as a file, since pyarrow's own
    opening refuses it while verl's reader (datasets) opens it fine."""
    import pyarrow.parquet as pq

    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return pq.ParquetFile(open(path, "rb"))
    return pq.ParquetFile(path)
