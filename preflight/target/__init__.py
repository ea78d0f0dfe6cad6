"""Scripts that run inside the *target* interpreter (stdlib only, CPython 3.6+).

They are not imported by the checker: :func:`preflight.probes.process.load_script` reads their
source and runs it with ``python -c``. Each reports JSON events through ``emit`` (``_prelude.py``).
"""
