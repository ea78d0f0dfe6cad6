"""``preflight rehearse -- <launch>``: the user's own verl launch, run for real for two steps on
this node with a small random-weight model of the same architecture (see
:mod:`preflight.rehearse`)."""

import argparse
import time
from typing import Any, List, Optional

from ..errors import UsageError
from .argtypes import positive_int, positive_seconds, verl_release

NAME = "rehearse"
HELP = "run the launch for two steps with a small model of its architecture"
EPILOG = """examples:
  python3 preflight.pyz rehearse --python ~/venvs/verl/bin/python -- python3 -m verl.trainer.main_ppo \\
      algorithm.adv_estimator=grpo data.train_files=$HOME/data/gsm8k/train.parquet ...
  python3 preflight.pyz rehearse --gpus 1 --json rehearsal.json -- bash -c "$(cat run_qwen2_5.sh)"
  python3 preflight.pyz check --launch "$(cat my_launch.sh)" --rehearse

What runs: the launch's overrides and variables, with trainer.total_training_steps=2, no validation
and no checkpoint (unless asked), console logging, a short response length, the model path and data
files pointed at a small random-weight copy of the model's architecture and the first rows of the
data, all in a private directory; Ray is a private head on 127.0.0.1 (or --address). Nothing of the
user's is changed; every process is gone at the end.
exit codes: 0 the rehearsal passed, 1 it failed (the report names the phase, the error and the fix),
2 usage error
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``rehearse``'s options to its parser."""
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- LAUNCH",
                   help="the launch command (python3 -m verl.trainer.main_ppo OVERRIDES...) after --")
    add_rehearse_options(p)
    p.add_argument("--python", metavar="PATH", default=None,
                   help="the verl environment's interpreter (default: the one running this)")
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release,
                   help="verl release whose config tree composes the launch when the target has no verl")
    from .output import add_output_options

    add_output_options(p, "the rehearsal")
    p.add_argument("-v", "--verbose", action="store_true", help="show evidence under every row")


def add_rehearse_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The rehearsal's own options (shared with ``check --rehearse``; ``prefix`` names them
    ``--rehearse-...`` there)."""
    p.add_argument("--%stimeout" % prefix, dest="rehearse_timeout", type=positive_seconds, default=900.0,
                   metavar="SECONDS", help="limit for the run itself (default 900)")
    p.add_argument("--%sgpus" % prefix, dest="rehearse_gpus", type=positive_int, default=None, metavar="N",
                   help="run on N GPUs of this node (trainer.n_gpus_per_node=N, trainer.nnodes=1, the rollout's "
                        "tensor-parallel size capped at N); default: the launch's own")
    p.add_argument("--address", dest="rehearse_address", default=None, metavar="HOST:PORT",
                   help="join this Ray cluster instead of starting a private head on 127.0.0.1")
    p.add_argument("--keep-loggers", dest="rehearse_keep_loggers", action="store_true",
                   help="keep trainer.logger (default: console only)")
    p.add_argument("--validate", dest="rehearse_validate", action="store_true",
                   help="keep the launch's validation (val_before_train, test_freq)")
    p.add_argument("--keep-checkpoints", dest="rehearse_keep_checkpoints", action="store_true",
                   help="keep trainer.save_freq (checkpoints go to the rehearsal's private directory)")
    p.add_argument("--response-length", dest="rehearse_response_length", type=positive_int, default=None,
                   metavar="TOKENS", help="the rehearsal's data.max_response_length (default 32, at most the launch's)")
    p.add_argument("--keep-workdir", dest="rehearse_keep_workdir", action="store_true",
                   help="leave the private directory (small model, data slices, run.log) and print its path")


def options_from(args: argparse.Namespace) -> Any:
    """The :class:`preflight.rehearse.rehearsal.Options` of parsed ``args``."""
    from ..rehearse.rehearsal import Options

    return Options(timeout=args.rehearse_timeout, address=args.rehearse_address,
                   keep_loggers=args.rehearse_keep_loggers, validate=args.rehearse_validate,
                   keep_checkpoints=args.rehearse_keep_checkpoints, response_length=args.rehearse_response_length,
                   gpus=args.rehearse_gpus, keep_workdir=args.rehearse_keep_workdir)


def run_rehearsal(python: str, words: Any, verl: Optional[str], opts: Any) -> Any:
    """Parse and compose the launch ``words`` (a string or argv words), then rehearse it; returns
    (Rehearsal, the composed config, the release, how it was chosen). Raises UsageError for a
    launch that cannot be read or composed."""
    from .. import matrix as matrix_mod
    from ..context import Context, Options
    from ..launch.compose import ComposeUnsupported, compose
    from ..launch.overrides import parse_launch
    from ..probes.nvml import snapshot
    from ..rehearse.rehearsal import rehearse

    try:
        spec = parse_launch(words)
    except ValueError as exc:
        raise UsageError("the launch: %s" % exc)
    if not spec.overrides and not spec.entry:
        raise UsageError("give the launch after --: python3 -m verl.trainer.main_ppo OVERRIDES...")
    mx = matrix_mod.load()
    if verl:
        mx.require_verl(verl)
    ctx = Context(Options(python=python, verl=verl), mx)
    release, how = ctx.verl_release()
    try:
        comp = compose(python, spec, release=release)
    except ComposeUnsupported as exc:
        raise UsageError("the launch could not be composed: %s" % exc)
    if comp.error is not None:
        raise UsageError("the launch does not compose: %s (fix: %s)" % (comp.error.message, comp.error.fix))
    gpu_gib = None
    try:
        snap = snapshot(timeout=30.0)
        devs = (snap or {}).get("devices") or []
        if devs and devs[0].get("memory_total_mib"):
            gpu_gib = devs[0]["memory_total_mib"] / 1024.0
    except Exception:
        gpu_gib = None
    rh = rehearse(python, spec, comp, release, opts, gpu_total_gib=gpu_gib)
    return rh, comp, release, how


def run(args: argparse.Namespace) -> int:
    """Rehearse the launch; return 0 (passed) or 1."""
    from rich.text import Text

    from .. import __version__
    from .. import matrix as matrix_mod
    from ..report import launch as render
    from ..report import Report
    from .output import check_outputs, emit
    from .stack import resolve_python

    check_outputs(args)
    words: List[str] = list(args.launch or [])
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UsageError("give the launch after --: preflight rehearse -- python3 -m verl.trainer.main_ppo ...")
    python = resolve_python(args.python)
    t0 = time.time()
    launch: Any = words[0] if len(words) == 1 else words  # one quoted word: a whole script's command line
    rh, comp, release, how = run_rehearsal(python, launch, args.verl, options_from(args))

    def view(rep: Report, console: Any, verbose: bool) -> None:
        render.header(console, python, None, release, how)
        if rh.model.get("fallback"):
            console.print(Text("model: fallback architecture %s (%s)" % (rh.model["fallback"], rh.model.get("found")),
                               style="yellow"))
        console.print(render.results_table(rep.results))
        if rh.error:
            console.print(Text("first error (%s):" % (rh.error.get("actor") or "driver"), style="bold red"))
            console.print(Text(rh.error.get("tail") or ""))
        if rh.workdir:
            console.print(Text("kept: %s" % rh.workdir, style="dim"))
        console.print()
        console.print(render.verdict(rep))

    report = Report(results=rh.results, stages=["rehearse"], target={"python": python},
                    verl={"version": release, "chosen_by": how}, tool_version=__version__,
                    matrix_version=matrix_mod.load().version, started_at=t0, duration_s=time.time() - t0,
                    command=NAME, sections={"rehearsal": rh.section()}, view=view)
    return emit(report, args)
