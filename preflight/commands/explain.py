"""``preflight explain [LOG|-]``: a failed run's log or traceback -> root cause, facts, fix.

Reads the log bounded (a file, or standard input with ``-``), finds the first real error (past
Ray's RayTaskError wrappers, Hydra's "Error executing job", vLLM's "see root cause above",
Python's exception chains) and classifies it with matrices/signatures.toml
(:mod:`preflight.explain`). The report goes through the shared report layer (every format,
redacted once).
"""

import argparse
import time

from ..errors import UsageError
from .output import add_output_options, check_outputs, emit

NAME = "explain"
HELP = "explain a failed run's log or traceback: root cause, facts, fix"
EPILOG = """examples:
  python3 preflight.pyz explain job.log
  ray job logs raysubmit_XXXX 2>&1 | python3 preflight.pyz explain -
  python3 -m verl.trainer.main_ppo ... 2>&1 | tail -n 2000 | python3 preflight.pyz explain - --format markdown

exit codes: 0 no error found in the log, 1 an error was found (explained or not), 2 usage error
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``explain``'s options to its parser."""
    p.add_argument("log", nargs="?", default="-", metavar="LOG", help="the log file, or - for standard input "
                   "(default)")
    p.add_argument("--max-mib", type=int, default=32, metavar="MIB",
                   help="MiB of a large log to read (its head and tail; default 32)")
    add_output_options(p, "the explanation")
    p.add_argument("-v", "--verbose", action="store_true", help="show every error event of the log")


def run(args: argparse.Namespace) -> int:
    """Explain the log; return 0 (no error in it) or 1."""
    from .. import matrix as matrix_mod
    from ..checks.base import failed, passed, to_result
    from ..explain import explain_text, read_log
    from ..report import Report

    check_outputs(args)
    if args.max_mib <= 0 or args.max_mib > 4096:
        raise UsageError("--max-mib must be between 1 and 4096")
    t0 = time.time()
    try:
        log = read_log(args.log, args.max_mib << 20)
    except ValueError as exc:
        raise UsageError(str(exc))
    mx = matrix_mod.load()
    ex = explain_text(log.text, mx)
    outs = []
    lines = len(log.text.splitlines())  # a final newline ends the last line, it starts none
    wrappers = [c for c in ex.chain if c["wrapper"]]
    if ex.root is None:
        outs.append(("explain.root", passed("no error found in %d line(s) of %s" % (lines, log.source),
                                            {"lines": lines, "source": log.source})))
    else:
        e = ex.root
        ev = {"line": e.lineno, "error": e.headline, "message": e.message, "type": e.type or None,
              "where": e.where, "signature": ex.id, "layer": ex.layer or None, "facts": ex.facts,
              "source": ex.source or None, "confidence": ex.confidence or None, "values": ex.groups,
              "preflight_rule": ex.verl_rule, "cases": ex.cases, "log": log.source}
        if ex.id is not None:
            outs.append(("explain.root", failed("%s%s (line %d: %s)" % (
                "%s: " % ex.layer if ex.layer else "", ex.cause, e.lineno, e.headline[:240]), ex.fix, ev)))
        else:
            outs.append(("explain.root", failed(
                "no known cause for the first error (line %d%s: %s)" % (e.lineno, ", " + e.where if e.where else "",
                                                                        e.headline[:240]),
                "read the traceback at line %d; rerun with HYDRA_FULL_ERROR=1 (Hydra), NCCL_DEBUG=INFO (NCCL) or "
                "CUDA_LAUNCH_BLOCKING=1 (CUDA) for the whole error, and check the stack and the launch first: "
                "preflight check --launch \"<launch>\"" % e.lineno, ev)))
        if ex.facts:
            outs.append(("explain.facts", passed("; ".join(ex.facts), {"facts": ex.facts, "source": ex.source})))
        if ex.verl_rule:
            outs.append(("explain.before", passed(
                "preflight config checks this before a launch (rule %s): preflight config -- <launch>" % ex.verl_rule,
                {"rule": ex.verl_rule})))
    if wrappers:
        outs.append(("explain.wrappers", passed("looked past %d wrapper(s): %s" % (len(wrappers), "; ".join(
            "line %d %s" % (c["line"], c["wrapper"]) for c in wrappers[:5])), {"wrappers": wrappers[:20]})))
    results = [to_result(cid, o, time.time() - t0) for cid, o in outs]

    def view(rep: Report, console, verbose: bool) -> None:
        from rich.text import Text

        from ..report import launch as render

        console.print(Text("explain %s: %d line(s)%s" % (log.source, lines, ", %d bytes of the middle not read" %
                                                          log.truncated if log.truncated else ""), style="dim"))
        console.print(render.results_table(rep.results, verbose))
        if verbose:
            for c in (rep.sections.get("explain") or {}).get("events", []):
                console.print(Text("  line %d %s%s" % (c["line"], c["text"], " [%s]" % (c["wrapper"] or c["id"] or "")
                                                         if (c["wrapper"] or c["id"]) else ""), style="dim"))
        console.print(render.verdict(rep))
    report = Report(results=results, stages=["explain"], tool_version=_version(), matrix_version=mx.version,
                    started_at=t0, duration_s=time.time() - t0, command=NAME,
                    sections={"explain": {"source": log.source, "bytes": log.size, "truncated_bytes": log.truncated,
                                          "signature": ex.id, "layer": ex.layer or None,
                                          "events": ex.chain[:50]}}, view=view)
    return emit(report, args)


def _version() -> str:
    from .. import __version__

    return __version__
