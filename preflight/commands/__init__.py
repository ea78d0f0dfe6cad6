"""Subcommands. Each module defines ``NAME``, ``HELP``, ``register(parser)`` (adds its options to
its own sub-parser) and ``run(args) -> int``; :data:`COMMANDS` lists them in help order. Modules
raise :class:`preflight.errors.UsageError` for bad input; cli.main turns it into one line, exit 2.
Shared by several commands: :mod:`.output` (the output options and :func:`~.output.emit`),
:mod:`.stack` (the interpreter, the stack options and the spec), :mod:`.argtypes`.
"""

from ..report.invocation import COMMAND_NAMES
from . import check, cluster, config, data, explain, image, install, matrix, rehearse, resolve, spec, wheelhouse

#: Every subcommand module; the first is the default when no command is given.
COMMANDS = (check, config, data, rehearse, cluster, explain, resolve, spec, install, image, matrix, wheelhouse)

if tuple(m.NAME for m in COMMANDS) != COMMAND_NAMES:  # the report layer spells fixes with these names
    raise ImportError("preflight.commands.COMMANDS (%s) and preflight.report.invocation.COMMAND_NAMES (%s) differ; "
                      "keep them the same" % (", ".join(m.NAME for m in COMMANDS), ", ".join(COMMAND_NAMES)))
