"""``--status-dir DIR``: one file per stage, written as each stage ends, for an init container,
an operator or a Slurm prolog to wait on (the way NVIDIA's gpu-operator validator leaves
``/run/nvidia/validations/<component>-ready``).

At the start of a run every stage's file (and ``verdict``) is removed, so a waiter never reads a
previous run's answer. When a stage ends, ``DIR/<stage>`` is written atomically with one word and
a newline: ``ready`` (no check failed), ``failed`` (a check failed or could not run) or
``skipped`` (every check was skipped, e.g. gated on an earlier stage). Stages not selected get no
file. At the end, ``DIR/verdict`` holds ``ready`` or ``not_ready``. Example wait:
``until grep -qx ready DIR/gpu; do sleep 5; done``.
"""

import os
from typing import Dict, List, Optional

from ..atomic import write_atomic
from ..result import Result, Status
from ..stages import STAGE_NAMES

__all__ = ["StatusDir", "stage_word", "VERDICT_FILE"]

#: The file holding the run's overall verdict.
VERDICT_FILE = "verdict"


def stage_word(rows: List[Result]) -> str:
    """``ready``, ``failed`` or ``skipped`` for the rows of one stage (no rows: skipped)."""
    if any(r.status.blocks for r in rows):
        return "failed"
    if all(r.status == Status.SKIP for r in rows):
        return "skipped"
    return "ready"


class StatusDir:
    """The status files of one run in ``path`` (created if missing); use :meth:`progress` as the
    runner's progress callback (events ``result`` and ``end:<stage>``).

    Raises OutputError (a UsageError) naming ``--status-dir`` when a file cannot be written.
    """

    def __init__(self, path: str, option: str = "--status-dir") -> None:
        self.path = os.path.abspath(os.path.expanduser(path))
        self.option = option
        self.rows: Dict[str, List[Result]] = {}
        try:
            os.makedirs(self.path, exist_ok=True)
            for name in list(STAGE_NAMES) + [VERDICT_FILE]:
                f = os.path.join(self.path, name)
                if os.path.isfile(f) or os.path.islink(f):
                    os.unlink(f)
        except OSError as exc:
            from ..atomic import OutputError

            raise OutputError("%s %s: %s" % (option, path, exc.strerror or exc))

    def _write(self, name: str, word: str) -> None:
        write_atomic(os.path.join(self.path, name), word + "\n", self.option)

    def progress(self, event: str, result: Optional[Result]) -> None:
        """The runner's callback: collects rows and writes a stage's file when it ends."""
        if result is not None:
            self.rows.setdefault(result.stage, []).append(result)
        elif event.startswith("end:"):
            stage = event[4:]
            self._write(stage, stage_word(self.rows.get(stage, [])))

    def finish(self, ready: bool) -> None:
        """Write ``verdict`` (``ready`` / ``not_ready``)."""
        self._write(VERDICT_FILE, "ready" if ready else "not_ready")
