"""``--status-dir DIR``: one file per stage, written as each stage ends, for an init container,
an operator or a Slurm prolog to wait on (the way NVIDIA's gpu-operator validator leaves
``/run/nvidia/validations/<component>-ready``).

At the start of a run every stage's file (and ``verdict``) is removed, so a waiter never reads a
previous run's answer. When a stage ends, ``DIR/<stage>`` is written atomically with one word and
a newline: ``ready`` (no check failed), ``failed`` (a check failed or could not run) or
``skipped`` (every check was skipped, e.g. gated on an earlier stage). Stages not selected
(``--stage``/``--skip``) get ``skipped`` when the run ends, so a waiter on any stage's file gets a
word. At the end, ``DIR/verdict`` holds ``ready`` or ``not_ready``. When the run is stopped
(SIGTERM, SIGINT, SIGHUP) or crashes, every selected stage without a file and ``verdict`` get
``interrupted`` (``failed`` after a crash), so a waiter always gets a final word. Example wait:
``until [ -s DIR/gpu ]; do sleep 5; done; grep -qx ready DIR/gpu``.

Nothing of the user's is lost: the files this tool wrote are recorded in the directory's
manifest (:data:`preflight.outputs.owned.MANIFEST`, as for ``spec -o``); a file named after a
stage or ``verdict`` that is not recorded there (and does not hold just one status word, as an
older verl-preflight wrote) is the user's, and the run refuses before any work, listing it.
"""

import contextlib
import os
from typing import Dict, Iterable, Iterator, List, Optional

from ..atomic import OutputError, absolute, make_dirs, remove_file
from ..errors import UsageError
from ..paths import read_regular
from ..result import Result, Status
from ..stages import STAGE_NAMES

__all__ = ["StatusDir", "stage_word", "VERDICT_FILE"]

#: The file holding the run's overall verdict.
VERDICT_FILE = "verdict"

#: Every word a status file can hold (stages: ready/failed/skipped/interrupted; verdict:
#: ready/not_ready/interrupted).
WORDS = ("ready", "failed", "skipped", "not_ready", "interrupted")


def stage_word(rows: List[Result]) -> str:
    """``ready``, ``failed`` or ``skipped`` for the rows of one stage (no rows: skipped)."""
    if any(r.status.blocks for r in rows):
        return "failed"
    if all(r.status == Status.SKIP for r in rows):
        return "skipped"
    return "ready"


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGTERM, SIGHUP and SIGINT back while the final words are written (delivered after)."""
    import signal

    from ..interrupts import SIGNALS

    old = None
    if hasattr(signal, "pthread_sigmask"):
        try:
            old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        except (OSError, ValueError):
            old = None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


class StatusDir:
    """The status files of one run in ``path`` (created if missing); use :meth:`progress` as the
    runner's progress callback (events ``result`` and ``end:<stage>``), :meth:`finish` at the end
    and :meth:`interrupted` when the run stops early.

    Args:
        path: the directory.
        option: how the user named it, for messages.
        stages: the selected stages (given an interruption, the ones without a file get one).

    Raises:
        UsageError: a file named after a stage or ``verdict`` is the user's (not in the manifest);
            nothing was changed.
        OutputError (a UsageError) naming ``--status-dir`` when a file cannot be written.
    """

    def __init__(self, path: str, option: str = "--status-dir", stages: Iterable[str] = ()) -> None:
        from ..outputs.owned import OutputDir

        self.path = absolute(path)  # '..' resolved by the kernel's walk, never on the text
        self.option = option
        self.stages = list(stages)
        self.done: List[str] = []
        self.finished = False
        self.rows: Dict[str, List[Result]] = {}
        self.owned = OutputDir(self.path, option)
        names = list(STAGE_NAMES) + [VERDICT_FILE]
        theirs = [p for p in self.owned.foreign(names) if not self._holds_a_word(p)]
        if theirs:
            raise UsageError("%s %s: %s not written by verl-preflight: %s; move %s away or choose another "
                             "directory (nothing was changed)"
                             % (option, path, "a file named after a stage is" if len(theirs) == 1
                                else "files named after stages are", ", ".join(theirs),
                                "it" if len(theirs) == 1 else "them"))
        try:
            make_dirs(self.path, option)
            for name in names:
                remove_file(os.path.join(self.path, name), option)
        except OSError as exc:
            raise OutputError("%s %s: %s" % (option, path, exc.strerror or exc))

    @staticmethod
    def _holds_a_word(p: str) -> bool:
        """A regular file holding one status word: written by this tool (before the manifest)."""
        if os.path.islink(p) or not os.path.isfile(p):
            return False
        try:
            return read_regular(p, 63).decode("ascii", "replace").strip() in WORDS
        except OSError:
            return False

    def _write(self, name: str, word: str) -> None:
        self.owned.write(name, word + "\n")
        if name != VERDICT_FILE:
            self.done.append(name)

    def progress(self, event: str, result: Optional[Result]) -> None:
        """The runner's callback: collects rows and writes a stage's file when it ends."""
        if result is not None:
            self.rows.setdefault(result.stage, []).append(result)
        elif event.startswith("end:"):
            stage = event[4:]
            self._write(stage, stage_word(self.rows.get(stage, [])))

    def finish(self, ready: bool) -> None:
        """Write ``verdict`` (``ready`` / ``not_ready``)."""
        with _signals_held():
            for name in STAGE_NAMES:  # not selected: a waiter on its file gets a word too
                if name not in self.done and self.stages and name not in self.stages:
                    self._write(name, "skipped")
            self._write(VERDICT_FILE, "ready" if ready else "not_ready")
            self.finished = True

    def interrupted(self, word: str = "interrupted") -> None:
        """The run stopped early: write ``word`` (``interrupted``; ``failed`` after a crash) for
        every selected stage that has no file yet and for ``verdict``. Best effort: a file that
        cannot be written is left out, the others are still written. A second signal waits until
        they are written."""
        with _signals_held():
            for name in [s for s in self.stages if s not in self.done] + [VERDICT_FILE]:
                try:
                    self._write(name, word)
                except (OSError, UsageError):
                    pass
            self.finished = True
