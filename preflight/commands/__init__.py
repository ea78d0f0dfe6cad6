"""Subcommands. Each module defines ``NAME``, ``HELP``, ``register(parser)`` (adds its options to
its own sub-parser) and ``run(args) -> int``; :data:`COMMANDS` lists them in help order. Modules
raise :class:`preflight.errors.UsageError` for bad input; cli.main turns it into one line, exit 2.
"""

from . import check, cluster, config, data, explain, image, install, matrix, resolve, spec, wheelhouse

#: Every subcommand module; the first is the default when no command is given.
COMMANDS = (check, config, data, cluster, explain, resolve, spec, install, image, matrix, wheelhouse)
