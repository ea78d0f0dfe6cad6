"""A stop signal (SIGTERM, SIGHUP, SIGINT) at a given moment of a command-line run: the run ends
with exit code 2 and, with ``check --status-dir``, a final word in every file. The process runs
the way the zipapp runs it (a directory holding ``__main__.py``, through runpy), with the moment
chosen by wrapping one of the tool's functions in that ``__main__.py``."""

import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAIN = """import os, signal, sys
sys.path.insert(0, %(root)r)
from preflight.interrupts import install_early
install_early()
import preflight.cli as cli
%(patch)s
sys.exit(cli.main())
"""


def _run(tmp_path, patch, *args):
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text(MAIN % {"root": ROOT, "patch": patch})
    return subprocess.run([sys.executable, str(app)] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def test_a_signal_while_the_command_line_is_read_still_leaves_verdicts(tmp_path):
    # before: the handler raised at once, outside check, and --status-dir stayed empty
    patch = ("real = cli._parse\n"
             "def _parse(*a, **k):\n"
             "    os.kill(os.getpid(), signal.SIGTERM)\n"
             "    return real(*a, **k)\n"
             "cli._parse = _parse\n")
    d = tmp_path / "status"
    p = _run(tmp_path, patch, "check", "--stage", "host,python", "-q", "--status-dir", str(d))
    assert p.returncode == 2, p.stderr
    assert p.stderr == "error: interrupted\n"
    assert {f: (d / f).read_text() for f in ("host", "python", "verdict")} == dict.fromkeys(
        ("host", "python", "verdict"), "interrupted\n")


def test_a_signal_inside_code_compiled_from_a_string_still_exits_2(tmp_path):
    # dataclasses and namedtuple build their methods with exec/eval of a string: a KeyboardInterrupt
    # leaving such code marks CPython's run as ended by an unhandled Ctrl-C, even though the tool
    # handles it, and Python then killed itself with SIGINT at exit (-2) instead of exiting 2
    patch = ("import preflight.commands.check as check\n"
             "def _run(args, held):\n"
             "    exec('import os, signal\\nos.kill(os.getpid(), signal.SIGTERM)\\nfor _ in range(9): pass')\n"
             "check._run = _run\n")
    p = _run(tmp_path, patch, "check", "--stage", "host", "-q")
    assert (p.returncode, p.stderr) == (2, "error: interrupted\n")


def test_a_second_signal_while_the_run_stops_changes_nothing(tmp_path):
    # a scheduler's SIGTERM twice, Ctrl-C pressed again: the first stops the run, the others wait
    patch = ("import preflight.probes.process as process\n"
             "real = process.kill_all\n"
             "def kill_all():\n"
             "    os.kill(os.getpid(), signal.SIGTERM)\n"
             "    return real()\n"
             "process.kill_all = kill_all\n"
             "real_parse = cli._parse\n"
             "def _parse(*a, **k):\n"
             "    os.kill(os.getpid(), signal.SIGTERM)\n"
             "    return real_parse(*a, **k)\n"
             "cli._parse = _parse\n")
    d = tmp_path / "status"
    p = _run(tmp_path, patch, "check", "--stage", "host", "-q", "--status-dir", str(d))
    assert (p.returncode, p.stderr) == (2, "error: interrupted\n")
    assert (d / "verdict").read_text() == "interrupted\n"
