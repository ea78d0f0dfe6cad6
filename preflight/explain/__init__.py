"""A failed run's log or traceback -> its root cause, the facts behind it and the fix.

:func:`explain_text` splits a log into error *events* (:mod:`.events`: each Python exception line
with its traceback frames and continuation lines, and each log line that matches a known error
text), looks past the events that only wrap another error (Ray's ``RayTaskError(...)``, Hydra's
"Error executing job", vLLM's "Engine core initialization failed", torchrun's ChildFailedError:
``[[wrapper]]`` rows of matrices/signatures.toml), and classifies the first real error with the
``[[explain]]`` rows (then the older ``[[signature]]`` rows) of the same file.
:func:`read_log` reads the input bounded, from a regular file or a pipe.
"""

from .classify import Explanation, explain_text
from .reader import LogInput, read_log

__all__ = ["Explanation", "explain_text", "LogInput", "read_log"]
