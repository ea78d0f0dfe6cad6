"""``preflight config``: a verl launch checked before it starts.

Composes the effective config (Hydra in the target when it has verl, else the release's stored
defaults), explains the batch pipeline with the user's numbers, and reports every rule of verl's
that the launch would break later (after Ray started and the models loaded) and the known silent
failures, each with the smallest fix.
"""

import argparse
import re
import time
from typing import List, Optional, Union

from ..errors import UsageError
from ..launch.facts.wrapper import split_words
from ..paths import file_problem
from ..redact import redact
from .argtypes import NO_STARTUP_HELP, positive_int, positive_seconds, refuse_bare_key, verl_release
from .output import add_output_options, check_outputs, emit
from .stack import resolve_python

NAME = "config"
HELP = "check a verl launch command or saved config before it starts"
EPILOG = """examples:
  python3 preflight.pyz config -- python3 -m verl.trainer.main_ppo data.train_batch_size=60 \\
      actor_rollout_ref.rollout.n=12 trainer.n_gpus_per_node=6
  python3 preflight.pyz config --python ~/venvs/verl/bin/python --gpus 8 -- data.train_batch_size=1024
  python3 preflight.pyz config --file outputs/.hydra/config.yaml --print
  python3 preflight.pyz config --verl 0.9.1 --json launch.json -- actor_rollout_ref.rollout.tensor_model_parallel_size=4

Everything after '--' is the launch command or just its overrides (key=value, +key=value,
++key=value, ~key), as Hydra reads them; leading VAR=value words (CUDA_VISIBLE_DEVICES) are kept.
exit codes: 0 the launch passes verl's rules (warnings allowed), 1 it would fail, 2 usage error
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``config``'s options to its parser."""
    p.add_argument("--python", metavar="PATH", default=None,
                   help="interpreter of the verl environment (composes with its Hydra; default: the one running this)")
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release,
                   help="verl release whose defaults and rules apply when the target has no verl")
    p.add_argument("--gpus", type=positive_int, default=None, metavar="N",
                   help="GPUs per node for the job (sets trainer.n_gpus_per_node)")
    p.add_argument("--nnodes", type=positive_int, default=None, metavar="M", help="nodes (sets trainer.nnodes)")
    p.add_argument("--file", "--config", dest="file", metavar="CONFIG", default=None,
                   help="a saved config (YAML or JSON) applied over the defaults, before the overrides")
    p.add_argument("--print", dest="print_all", action="store_true", help="print every config value, not only "
                   "the ones that matter")

    add_output_options(p, "the findings")
    p.add_argument("--no-startup", action="store_true", help=NO_STARTUP_HELP)
    p.add_argument("--timeout", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="limit for composing in the target interpreter (default 120)")
    p.add_argument("-v", "--verbose", action="store_true", help="show where verl checks each passing rule")
    p.add_argument("launch", nargs="*", metavar="-- COMMAND", help="the launch command or its overrides, after --")


_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: A Hydra override word: [+|++|~]key.path=value (a value may be empty).
_OVERRIDE = re.compile(r"^(?:\+\+|\+|~)?[A-Za-z_][\w-]*(?:\.[\w-]+)*(?:@[\w.:-]+)?=")


def one_string_launch(words: List[str]) -> Optional[str]:
    """The launch given as one quoted word (``config -- "python3 -m verl.trainer.main_ppo a=1"``), as
    ``check --launch`` takes it: the string when ``words`` is one word that reads as a command (its
    first shell word is a program or a ``VAR=value``, and a later one runs ``-m`` or names verl's
    entry point); else None (one override whose value holds a space, ``trainer.experiment_name=a b``)."""
    if len(words) != 1 or not words[0].split() or len(words[0].split()) < 2:
        return None
    try:
        ws = split_words(words[0])
    except ValueError:
        return None
    head = ws[0] if ws else ""
    if len(ws) > 1 and all(_OVERRIDE.match(w) for w in ws):  # overrides only: each word one, as --launch reads
        return words[0]
    if "=" in head and not _ENV_WORD.match(head):
        return None
    return words[0] if any(w == "-m" or "verl.trainer" in w for w in ws[1:]) else None


def run(args: argparse.Namespace) -> int:
    """Check the launch; return 0 (passes), 1 (would fail)."""
    from rich.text import Text

    from .. import matrix as matrix_mod
    from ..checks.config import evaluation, launch_facts
    from ..context import Context, LaunchOptions, Options
    from ..report import Report, jsonreport
    from ..report import launch as render
    from ..runner import run as run_stages

    check_outputs(args)
    python = resolve_python(args.python)

    why = file_problem(args.file) if args.file else None
    if why is not None:
        raise UsageError("--file %s: %s; pass a saved verl config (YAML or JSON)" % (args.file, why))
    if args.timeout <= 0:
        raise UsageError("--timeout must be > 0")
    mx = matrix_mod.load()
    if args.verl:
        mx.require_verl(args.verl)
    words = list(args.launch or [])
    if words and words[0] == "--":
        words = words[1:]
    refuse_bare_key(words, "--")
    given: Union[str, List[str]] = one_string_launch(words) or words
    opts = Options(python=python, verl=args.verl, timeout=args.timeout,
                   launch=LaunchOptions(words=given, config_file=args.file, gpus=args.gpus, nnodes=args.nnodes,
                                        startup=not args.no_startup,
                                        given=True))
    ctx = Context(opts, mx)
    t0 = time.time()
    results = run_stages(ctx, ["config"])
    info = ctx.target() or {}
    verl_v, how = ctx.verl_release()
    facts = launch_facts(ctx) or {}
    if facts.get("usage") is not None:
        raise facts["usage"]
    comp = facts.get("composed")
    hydra = comp is not None and comp.method == "hydra"
    release = comp.verl_version if hydra else verl_v
    ev = None
    if comp is not None and comp.error is None and "config.batch" in ctx.results and \
            ctx.results["config.batch"].status.value == "pass":
        ev = evaluation(ctx)

    def view(rep: Report, console, verbose: bool) -> None:
        render.header(console, python, info.get("version_string"), release, "installed, Hydra in the target" if hydra
                      else how)
        if comp is not None:
            console.print("config: %s from %s" % (comp.config_name, comp.source), style="dim", highlight=False)
            for n in comp.notes:
                console.print(Text("note: %s" % redact(n), style="yellow"))
            console.print()
            console.print(Text("Effective values" + (" (all)" if args.print_all else " that matter"), style="bold cyan"))
            console.print(render.values_table(comp, args.print_all))
            if ev is not None:
                console.print()
                console.print(Text("Batch pipeline: %s" % ev["note"], style="bold cyan"))
                console.print(render.plan_table(ev["plan"]))
        console.print()
        console.print(Text("Findings", style="bold cyan"))
        # the batch row is the table above when it passed; any other outcome is a finding to show
        shown = [r for r in rep.results if not (r.id == "config.batch" and ev is not None)]
        console.print(render.results_table(shown, verbose))
        console.print()
        console.print(render.verdict(rep))
        line = next((r for r in rep.results if r.id == "config.rules.fix_line"), None)
        if line is not None and line.fix:  # every fix together, re-checked against every rule
            left = (line.evidence or {}).get("left")
            console.print(Text("%s: %s%s" % ("fix all at once" if not left else "fix these at once", line.fix,
                                             "" if not left else " (not fixed by any override: %s)" % ", ".join(left)),
                               style="bold"))

    spec = facts.get("spec")
    launch = {
        "spec": None if spec is None else {
            "overrides": jsonreport.Redacted(comp.shown_overrides(spec.overrides)) if comp is not None
            else spec.override_texts,
            "config_name": spec.config_name, "config_path": spec.config_path, "entry": spec.entry,
            "env": spec.env},
        "config": jsonreport.Redacted(comp.to_dict(full=True)) if comp is not None else None,
        "batch": ev["plan"].to_dict() if ev and ev.get("plan") else None,
        "rules": ev["note"] if ev else None,
    }
    report = Report(results=results, stages=["config"],
                    target={"python": python, "version": info.get("version_string"), "prefix": info.get("prefix"),
                            "executable": info.get("executable")},
                    verl={"version": release, "chosen_by": "installed" if hydra else how},
                    machine={}, tool_version=_tool_version(), matrix_version=mx.version, started_at=t0,
                    duration_s=time.time() - t0, stage_timings=dict(ctx.peek("stage_timings") or {}), command=NAME,
                    sections={"launch": launch}, view=view)
    return emit(report, args)


def _tool_version() -> str:
    from .. import __version__

    return __version__
