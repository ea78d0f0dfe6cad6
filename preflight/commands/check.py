"""``preflight check``: run the staged checks against a target interpreter and report."""

import argparse
import time
from typing import List

from .. import __version__
from ..errors import UsageError
from ..paths import check_output_dir, file_problem
from ..result import Result, Status
from ..stages import STAGE_NAMES
from .argtypes import NO_STARTUP_HELP, positive_int, positive_seconds, refuse_bare_key, verl_release
from .output import add_output_options, check_outputs, console_stream, emit
from .stack import resolve_python

NAME = "check"
HELP = "run the staged checks (the default command)"
EPILOG = """examples:
  python3 preflight.pyz                              check the interpreter running it
  python3 preflight.pyz check --python ~/venvs/verl/bin/python --json report.json
  python3 preflight.pyz check --format junit --output preflight.xml      CI test report
  python3 preflight.pyz check --format markdown --skip nccl,vllm         paste into an issue
  python3 preflight.pyz check --status-dir /run/verl-preflight -q        per-stage files to wait on
  python3 preflight.pyz check --verl 0.9.1 --stage host,python,packages
  python3 preflight.pyz check --skip nccl,vllm --timeout 60
  python3 preflight.pyz check --stage config --launch "python3 -m verl.trainer.main_ppo data.train_batch_size=60"

stages, in order (each gated on the ones before): host, python, packages, imports, gpu, nccl, vllm, config
exit codes: 0 ready (warnings allowed), 1 not ready (a check failed), 2 usage error or checker failure
"""


def _stages_arg(text: str):

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in STAGE_NAMES]
    if bad:
        raise argparse.ArgumentTypeError("unknown stage %s (stages: %s)" % (", ".join(bad), ", ".join(STAGE_NAMES)))
    return names


def _faults() -> tuple:
    from ..checks.nccl import INJECTABLE_FAULTS

    return INJECTABLE_FAULTS


def _nccl_fault(text: str) -> dict:
    """``RANK:FAULT`` of --nccl-inject as the rank script's ``inject`` ({"rank": int, "fault": str})."""
    rank, _, fault = text.partition(":")
    if not rank.strip().isdigit() or fault not in _faults():
        raise argparse.ArgumentTypeError("%r is not RANK:FAULT (a rank number, then one of %s)" % (
            text, ", ".join(_faults())))
    return {"rank": int(rank), "fault": fault}


def register(p: argparse.ArgumentParser) -> None:
    """Add ``check``'s options to its parser."""
    p.add_argument("--python", metavar="PATH", default=None,
                   help="interpreter to check (a venv's or conda env's python); default: the one running this")
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release,
                   help="verl release to check against when verl is not installed (default: the installed one, "
                        "else the newest in the matrix)")
    p.add_argument("--backend", choices=("vllm", "sglang", "none"), default=None,
                   help="rollout backend to require (default: the installed one; 'none': no rollout engine "
                        "expected, e.g. SFT-only or CPU test environments)")
    p.add_argument("--stage", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="only these stages (comma-separated, repeatable)")
    p.add_argument("--skip", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="leave out these stages")

    add_output_options(p)
    p.add_argument("--status-dir", metavar="DIR", default=None,
                   help="write DIR/<stage> (ready, failed or skipped) as each stage ends, and DIR/verdict at the end")
    p.add_argument("--timeout", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="limit for each subprocess check before its process group is killed (default 120)")
    p.add_argument("--nccl-world-size", type=positive_int, default=None, metavar="N",
                   help="ranks for the nccl stage (default: every visible GPU)")
    p.add_argument("--nccl-backend", choices=("nccl", "gloo"), default="nccl",
                   help="collective backend of the nccl stage (gloo runs on CPU, for testing)")
    p.add_argument("--nccl-inject", type=_nccl_fault, default=None, metavar="RANK:FAULT",
                   help="testing: make one rank simulate a fault (%s), e.g. 1:hang_p2p, a hang only while NCCL's P2P "
                        "is on; with --nccl-backend gloo it runs without GPUs" % ", ".join(_faults()))
    p.add_argument("--vllm-tp", type=positive_int, default=1, metavar="N",
                   help="tensor_parallel_size of the vllm stage's generation (default 1)")
    p.add_argument("--vllm-compile", action="store_true",
                   help="also run the generation on the compile path verl's rollout takes (CUDA graphs, "
                        "torch.compile), reported as vllm.compile")
    p.add_argument("--launch", metavar="COMMAND", default=None,
                   help="a verl launch command or its overrides, quoted, for the config stage")
    p.add_argument("--config", metavar="FILE", default=None, help="a saved verl config (YAML/JSON) for the config stage")
    p.add_argument("--no-startup", action="store_true", help=NO_STARTUP_HELP)
    p.add_argument("--rehearse", action="store_true",
                   help="after the stages, rehearse the --launch for two steps with a small model of its architecture "
                        "(see 'preflight rehearse --help'); rows in the rehearse stage")
    from .rehearse import add_rehearse_options

    add_rehearse_options(p, prefix="rehearse-")
    p.add_argument("-v", "--verbose", action="store_true", help="show evidence under every row")


def _stages(args: argparse.Namespace) -> list:
    selected = [s for group in (args.stage or [list(STAGE_NAMES)]) for s in group]
    skipped = {s for group in (args.skip or []) for s in group}
    return [s for s in STAGE_NAMES if s in selected and s not in skipped]


def nothing_judged(results: List[Result], asked: List[str]) -> List[Result]:
    """FAIL rows (``<stage>.judged``) for each stage named with ``--stage`` (``asked``) whose every row
    was skipped, in a run that has no failure of its own: nothing of what the caller asked about was
    judged, so the run must not say ready (a provisioning script that runs ``--stage nccl`` on a node
    whose GPUs are gone). Stages gated off by an earlier failure already make the run not ready, and a
    default run (no ``--stage``) shows its skipped stages as rows beside the stages that were judged."""
    if any(r.status.blocks for r in results):
        return []
    out: List[Result] = []
    for stage in asked:
        rows = [r for r in results if r.stage == stage]
        if rows and all(r.status is Status.SKIP for r in rows):
            out.append(Result(id="%s.judged" % stage, stage=stage, status=Status.FAIL,
                              message="nothing of the %s stage was judged: all %d of its checks were skipped (%s)" % (
                                  stage, len(rows), rows[0].message),
                              fix="run it where its checks apply (see the skipped rows' reasons), or leave "
                                  "--stage %s out" % stage, evidence={"skipped": [r.id for r in rows]}))
    return out


def run(args: argparse.Namespace) -> int:
    """Run the checks; return the exit code (0 ready, 1 not ready).

    With ``--status-dir``, a run stopped at any point after the zipapp's first line (a signal in
    its first milliseconds included, see :mod:`preflight.interrupts`) leaves ``interrupted`` in
    ``verdict`` and in every selected stage without a file; a crash leaves ``failed``. A usage
    error found before the status directory was touched leaves it as it was."""
    held: dict = {}
    try:
        return _run(args, held)
    except BaseException as exc:
        status = held.get("status")
        if args.status_dir and not (status is not None and status.finished):
            stopped = isinstance(exc, (KeyboardInterrupt, SystemExit))
            if status is None and stopped:
                from ..report.status import StatusDir

                try:
                    status = StatusDir(args.status_dir, stages=_stages(args))
                except (UsageError, OSError):
                    status = None
            if status is not None:  # a waiter on DIR/<stage> or DIR/verdict gets a final word
                status.interrupted("interrupted" if stopped else "failed")
        raise


def _run(args: argparse.Namespace, held: dict) -> int:
    from .. import matrix as matrix_mod
    from ..interrupts import arm
    from ..context import Context, LaunchOptions, NcclOptions, Options, VllmOptions
    from ..report import Report
    from ..report.console import LiveProgress
    from ..report.console import SafeConsole as Console
    from ..runner import run

    check_outputs(args)
    if args.status_dir:
        check_output_dir(args.status_dir, "--status-dir")
    if args.launch is not None and not args.launch.strip():
        raise UsageError("--launch is empty (an unset variable in a script?); pass the launch command or its "
                         "overrides, quoted, or leave --launch out")
    if args.config is not None and not args.config.strip():
        raise UsageError("--config is empty (an unset variable in a script?); pass a saved verl config file or "
                         "leave --config out")
    if args.launch:
        refuse_bare_key(args.launch.split()[:1], "--launch")
    if args.rehearse and not args.launch:
        raise UsageError("--rehearse needs --launch (the launch command to rehearse, quoted)")
    python = resolve_python(args.python)

    why = file_problem(args.config) if args.config else None
    if why is not None:
        raise UsageError("--config %s: %s; pass a saved verl config (YAML or JSON)" % (args.config, why))
    mx = matrix_mod.load()
    if args.verl:
        mx.require_verl(args.verl)
    stages = _stages(args)
    if not stages:
        raise UsageError("no stage left to run after --stage/--skip")
    stream = console_stream(args)
    opts = Options(python=python, verl=args.verl, timeout=args.timeout, nccl_world_size=args.nccl_world_size,
                   backend=args.backend, vllm_tp=args.vllm_tp,
                   nccl=NcclOptions(backend=args.nccl_backend, inject=args.nccl_inject),
                   vllm=VllmOptions(compile=args.vllm_compile, session="imports" in stages and "vllm" in stages),
                   launch=LaunchOptions(words=args.launch, config_file=args.config,
                                        startup=not args.no_startup))
    ctx = Context(opts, mx)
    status = None
    if args.status_dir:
        from ..report.status import StatusDir

        status = StatusDir(args.status_dir, stages=stages)  # a usage error here: nothing started yet
        held["status"] = status
    arm()  # from here a signal stops the run; one recorded before is raised now: the status files say "interrupted"
    # the target's info probe and the NVML snapshot run beside each other and the host stage
    ctx.prefetch([k for k, want in (("target_probe", set(stages) - {"host", "gpu"}),
                                    ("nvml", set(stages) & {"packages", "gpu", "nccl", "vllm"}),
                                    ("bytecode", "packages" in stages)) if want])
    t0 = time.time()
    with LiveProgress(Console(file=stream, highlight=False) if stream is not None else None) as live:
        def progress(event, result):
            live(event, result)
            if status is not None:
                status.progress(event, result)

        results = run(ctx, stages, progress)  # SIGTERM/SIGHUP arrive as KeyboardInterrupt (cli.py): see run()
    results = list(results) + nothing_judged(results, stages if args.stage else [])
    sections = {}
    if args.rehearse:  # the rehearsal's rows and section join the report (issue 25)
        from .rehearse import options_from, run_rehearsal

        rh = run_rehearsal(python, args.launch, args.verl, options_from(args))[0]
        results = list(results) + rh.results
        stages = list(stages) + ["rehearse"]
        sections["rehearsal"] = rh.section()
    info = ctx.target() or {}
    verl_v, how = ctx.verl_release()
    machine = {"host": ctx.host()}
    if "gpu" in stages or "nccl" in stages:
        machine["nvml"] = ctx.nvml()
    report = Report(results=results, stages=stages,
                    target={"python": python, "version": info.get("version_string"), "prefix": info.get("prefix"),
                            "executable": info.get("executable")},
                    verl={"version": verl_v, "chosen_by": how}, machine=machine,
                    tool_version=__version__, matrix_version=mx.version, started_at=t0,
                    duration_s=time.time() - t0, stage_timings=dict(ctx.peek("stage_timings") or {}), command=NAME,
                    sections=sections)
    if status is not None:
        status.finish(report.ready)
    return emit(report, args)
