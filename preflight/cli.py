"""Command line: ``preflight [COMMAND] [options]``; ``check`` is the default command.

:func:`main` takes argv and returns the exit code; it is the only place where errors become
text and exit codes (0 ready, 1 not ready, 2 usage error or the checker's own failure).
Subcommands live in :mod:`preflight.commands`.
"""

import argparse
import difflib
import os
import pkgutil
import signal
import sys
from typing import Optional, Sequence

from . import __version__
from .commands import COMMANDS
from .commands.argtypes import Parser, refuse_empty
from .errors import UsageError
from .limits import access_message, limit_message
from .redact import redact_text
from .report import EXIT_USAGE

__all__ = ["main", "build_parser", "UsageError"]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for every command."""
    p = Parser(prog="preflight", description="Tells whether this machine can run verl, and why not.",
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=COMMANDS[0].EPILOG)
    p.add_argument("--version", action="store_true", help="print the tool and matrix versions and exit")
    p.add_argument("--completion", choices=("bash", "zsh"), default=None,
                   help="print the shell completion script (generated when the zipapp is built) and exit")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    for mod in COMMANDS:
        sp = sub.add_parser(mod.NAME, help=mod.HELP, epilog=mod.EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.register(sp)
        sp.add_argument("--allow-shared-output", action="store_true",
                        help="write outputs even where another user owns the file or can write the directory "
                             "(links owned by other users stay refused; see SECURITY.md)")
        sp.set_defaults(_run=mod.run)
    return p


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str], implicit: bool) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that arguments nobody took are a UsageError naming the
    subcommand that refused them (``preflight check: unrecognized arguments: --bogus (see
    'preflight check --help')``), or, when the first word was taken for a command (``check`` was
    ``implicit``), ``unknown command 'chek' (did you mean 'check'?)``."""

    args, extras = parser.parse_known_args(argv)
    if not extras:
        return args
    names = [m.NAME for m in COMMANDS]
    word = argv[1] if implicit and len(argv) > 1 else None
    if word is not None and not word.startswith("-") and word in extras:
        from .report.invocation import invocation

        near = difflib.get_close_matches(word, names, n=1)
        raise UsageError("unknown command '%s' (%s see '%s --help')" % (
            word, "did you mean '%s'?" % near[0] if near else "commands: %s;" % ", ".join(names), invocation()))
    sub = None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, "command", None) or "")
    (sub or parser).error("unrecognized arguments: %s" % " ".join(extras))
    return args  # not reached: error() raises


def _normalise(argv: Sequence[str]) -> list:
    argv = list(argv)
    names = {m.NAME for m in COMMANDS}
    if not argv or (argv[0] not in names and argv[0] not in ("-h", "--help", "--version", "--completion")):
        argv.insert(0, COMMANDS[0].NAME)
    return argv


def _print_completion(shell: str) -> int:

    name = {"bash": "preflight.bash", "zsh": "_preflight"}[shell]
    try:
        data = pkgutil.get_data("preflight", "completion/" + name)
    except OSError:
        data = None
    if data is None:
        raise UsageError("--completion %s: this copy was not built with tools/build_pyz.py, which generates the "
                         "completion scripts; run python3 tools/build_pyz.py and use dist/preflight.pyz" % shell)
    sys.stdout.write(data.decode("utf-8"))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code.

    A closed stdout or stderr (``check | head -1``) changes neither the run nor its exit code;
    a stdout that could not be written (ENOSPC, EIO: the report is lost) makes it 2, with one
    line on stderr (see :mod:`preflight.pipes`).
    """
    from .interrupts import stopped
    from .pipes import guard
    from .probes.orphans import become_reaper, end_orphans

    if argv is None:  # the process is the command line: what a probe orphans comes back here to be ended
        become_reaper()
    with guard() as out:
        try:
            code = _main(argv)
        finally:
            end_orphans()
    code = EXIT_USAGE if out is not None and out.error is not None else code
    if argv is None and (_AT_A_LIMIT or stopped()):
        _end_process(code, exit_funcs=not _AT_A_LIMIT)
    return code


def _end_process(code: int, exit_funcs: bool) -> None:
    """End the process now with ``code``, the output flushed (and the ``atexit`` functions run
    first when ``exit_funcs``), without the interpreter's own shutdown:

    * at a limit, worker threads may not even exit cleanly (ulimit -n: no fd for libgcc_s);
    * after a stop signal, the interpreter would replace ``code`` with death by SIGINT: the signal's
      KeyboardInterrupt may have left code compiled from a string (``exec``/``eval``, which
      dataclasses and namedtuple use to build their methods) before it was handled here, and
      CPython then takes the run for one ended by an unhandled Ctrl-C whenever it runs a module
      (the zipapp, ``python -m preflight``), however the run ended."""
    if exit_funcs:
        import atexit

        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


_AT_A_LIMIT: list = []


def _main(argv: Optional[Sequence[str]]) -> int:
    from .matrix import MatrixError

    raw = list(sys.argv[1:] if argv is None else argv)
    argv = _normalise(raw)
    from .interrupts import arm, disarm, handle, is_early
    from .probes.process import kill_all

    # SIGTERM (a scheduler), SIGHUP (an ssh drop), SIGINT (Ctrl-C): recorded until the command is
    # ready to be stopped, then a KeyboardInterrupt that stops it, probes included (interrupts.arm)
    old_handlers = {}
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is None:  # no SIGHUP on Windows
            continue
        try:
            if name != "SIGINT" or is_early(signal.getsignal(sig)):  # SIGINT: Python's own handler otherwise
                old_handlers[sig] = signal.signal(sig, handle)
        except ValueError:  # not the main thread (tests calling main() from a worker)
            pass
    try:
        parser = build_parser()
        args = _parse(parser, argv, implicit=len(argv) > len(raw))
        refuse_empty(parser, args, argv)
        if args.version:
            from . import matrix as matrix_mod

            print("verl-preflight %s (matrix %s)" % (__version__, matrix_mod.load().version))
            return 0
        if args.completion:
            return _print_completion(args.completion)
        if getattr(args, "allow_shared_output", False):
            from .atomic import allow_shared_output

            allow_shared_output()
        from .temproot import use_safe_temp_root

        warn = use_safe_temp_root()  # before any private directory: one another user cannot swap
        if warn:
            from .report.text import one_line

            print(one_line(warn), file=sys.stderr)
        if not getattr(args, "status_dir", None):
            arm()  # a signal recorded until now is raised here (check --status-dir: once its files can say so)
        return args._run(args)
    except (UsageError, MatrixError) as exc:
        from .report.invocation import localise_commands
        from .report.text import one_line

        print("error: %s" % one_line(localise_commands(redact_text(str(exc)))), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        n = kill_all()
        print("error: interrupted%s" % (" (%d running probe(s) killed)" % n if n else ""), file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # argparse --help
        return int(exc.code or 0)
    except (MemoryError, RecursionError, OSError, RuntimeError) as exc:  # ulimit -v/-u/-n, deep input
        msg = limit_message(exc)
        if msg is None:
            msg = access_message(exc)
            if msg is not None:  # a path this user cannot use: one line naming it, not a crash
                from .report.text import one_line

                print("error: %s" % one_line(redact_text(msg)), file=sys.stderr)
                return EXIT_USAGE
            return _crash(exc)
        _AT_A_LIMIT.append(msg)
        from .report.text import one_line

        print("error: %s" % one_line(redact_text(msg)), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # the checker's own failure: one line plus where to look
        return _crash(exc)
    finally:
        kill_all()
        disarm()
        for sig, old in old_handlers.items():
            signal.signal(sig, old)


def _crash(exc: BaseException) -> int:
    """The checker's own failure: one line naming the exception and where it was raised."""
    import traceback

    from .report.text import one_line

    tb = traceback.extract_tb(exc.__traceback__)
    where = "%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno) if tb else "?"
    print("error: verl-preflight failed: %s: %s (at %s; please report it)" % (type(exc).__name__,
                                                                              one_line(redact_text(str(exc))), where),
          file=sys.stderr)
    return EXIT_USAGE
