"""``preflight data``: RL parquet files checked the way verl will read them.

Each file must have the chat messages verl's RL dataset reads (``prompt``: a list of
``{role, content}``), ``data_source`` (which picks the reward function), ``reward_model`` with
``ground_truth`` for every row, and optionally ``extra_info``. Bad rows are counted with the first
examples; a data_source without a default reward function in the release is named with how to
give a custom one. Files are read with the target interpreter's pyarrow (verl depends on it).
"""

import argparse
import os
import time
from typing import List, Tuple

from ..errors import UsageError
from ..paths import dir_files, file_problem
from .argtypes import non_negative_int, positive_seconds, verl_release
from .output import add_output_options, check_outputs, emit
from .stack import resolve_python

NAME = "data"
HELP = "check RL parquet files for the columns verl reads"
EPILOG = """examples:
  python3 preflight.pyz data ~/data/gsm8k/train.parquet ~/data/gsm8k/test.parquet
  python3 preflight.pyz data --python ~/venvs/verl/bin/python --prompt-key question raw.parquet
  python3 preflight.pyz data --custom-reward my_reward.py --json data.json train.parquet
  python3 preflight.pyz data --model ~/models/Qwen2.5-7B-Instruct --custom-reward my_reward.py train.parquet

exit codes: 0 verl can read the files (warnings allowed), 1 it cannot, 2 usage error
"""


def register(p: argparse.ArgumentParser) -> None:
    """Add ``data``'s options to its parser."""
    p.add_argument("files", nargs="+", metavar="FILE.parquet", help="parquet files (data.train_files / val_files), "
                   "or a directory: its *.parquet files")
    p.add_argument("--python", metavar="PATH", default=None,
                   help="interpreter whose pyarrow reads the files (the verl environment's; default: this one)")
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release,
                   help="verl release whose default reward functions apply (default: the installed one)")
    p.add_argument("--prompt-key", default="prompt", help="data.prompt_key (default prompt)")
    p.add_argument("--reward-fn-key", default="data_source", help="data.reward_fn_key (default data_source)")
    p.add_argument("--custom-reward", metavar="PATH", default=None,
                   help="the custom reward function file you will configure (then any data_source is fine)")
    p.add_argument("--reward-name", default="compute_score", metavar="NAME",
                   help="the function in --custom-reward (custom_reward_function.name; default compute_score); "
                   "it is called on the first rows with their ground truth as the response")
    p.add_argument("--model", metavar="PATH", default=None,
                   help="actor_rollout_ref.model.path (a local directory or a cached Hugging Face repo): the first "
                   "rows are rendered through its chat template")
    p.add_argument("--examples", type=non_negative_int, default=3, metavar="N", help="bad rows to show per column (default 3)")

    add_output_options(p, "the findings")
    p.add_argument("--timeout", type=positive_seconds, default=300.0, metavar="SECONDS", help="limit for reading (default 300)")


def run(args: argparse.Namespace) -> int:
    """Check the files; return 0 (readable by verl) or 1."""
    from rich.text import Text

    from .. import matrix as matrix_mod
    from ..checks.base import to_result
    from ..checks.config import outcome_of
    from ..context import Context, Options
    from ..launch.dataset import NoPyarrow, check_files
    from ..report import Report
    from ..report.text import one_line
    from ..report import launch as render

    check_outputs(args)
    python = resolve_python(args.python)
    files, dirs = expand_files(args.files)
    if args.examples < 0 or args.timeout <= 0:
        raise UsageError("--examples must be >= 0 and --timeout > 0")
    mx = matrix_mod.load()
    if args.verl:
        mx.require_verl(args.verl)
    ctx = Context(Options(python=python, verl=args.verl, timeout=args.timeout), mx)
    t0 = time.time()
    release, how = ctx.verl_release()
    try:
        found, info = check_files(python, files, args.prompt_key, args.reward_fn_key, release,
                                  args.custom_reward, args.examples, args.timeout)
    except NoPyarrow as exc:
        raise UsageError("--python %s cannot import pyarrow (%s); point --python at the verl environment (verl "
                         "depends on pyarrow)" % (python, exc))
    except RuntimeError as exc:
        raise UsageError(str(exc))
    results = [to_result("data.files", outcome_of(f, f.item), time.time() - t0) for f in found]
    results += [to_result("data.smoke", o, time.time() - t0) for o in _smoke(args, python, files, found, release)]
    tinfo = ctx.target() or {}

    def view(rep: Report, console, verbose: bool) -> None:
        render.header(console, python, tinfo.get("version_string"), release, how)
        # file names are the user's (or another user's, in a shared directory): one line, no markup
        console.print(Text(one_line("pyarrow %s; %s" % (info["pyarrow"], ", ".join(
            "%s: %s rows" % (os.path.basename(s["path"]), s.get("num_rows", "?")) for s in info["files"]))),
            style="dim"))
        for d, inside in dirs:
            console.print(Text(one_line("note: %s is a directory: checked its %d *.parquet file(s); verl's "
                                        "data.train_files / data.val_files take files, not a directory (0.9.1: "
                                        "ValueError 'Unsupported file format'), so list them: [%s]" % (
                                            d, len(inside), ",".join(inside[:3]) + (
                                                ",..." if len(inside) > 3 else ""))), style="yellow"))
        console.print()
        console.print(Text("Findings", style="bold cyan"))
        console.print(render.results_table(rep.results))
        console.print()
        console.print(render.verdict(rep))

    report = Report(results=results, stages=["data"], target={"python": python,
                                                              "version": tinfo.get("version_string")},
                    verl={"version": release, "chosen_by": how}, tool_version=_version(), matrix_version=mx.version,
                    started_at=t0, duration_s=time.time() - t0, command=NAME,
                    sections={"data": {"pyarrow": info["pyarrow"], "files": info["files"]}}, view=view)
    return emit(report, args)


def _smoke(args: argparse.Namespace, python: str, files: List[str], found: list, release: str) -> list:
    """Outcomes of the chat template (with --model) and custom reward (with --custom-reward) smoke."""
    from ..checks.config import outcome_of
    from ..launch.model import read_model
    from ..launch.rules import ruleset
    from ..launch.smoke import reward_findings, run_smoke, template_findings

    if any(f.status == "fail" and f.item and f.item.endswith((".file", ".rows", ".prompt")) for f in found):
        return []
    model = None
    if args.model:
        model, why = read_model(args.model)
        if model is None:
            raise UsageError("--model %s: %s; pass a local model directory or a cached Hugging Face repo id" % (
                args.model, why))
    reward = None
    refused = []
    if args.custom_reward and os.path.isfile(args.custom_reward):
        from ..checks.base import failed
        from ..paths import CODE_FIX, code_problem, not_run

        why = code_problem(args.custom_reward)
        if why:  # importing it would run another user's code as this user (root)
            refused.append(failed(not_run("the reward function %s" % args.custom_reward, why), CODE_FIX,
                                  {"path": os.path.abspath(args.custom_reward)}, item="reward_function"))
        else:
            reward = {"path": os.path.abspath(args.custom_reward), "name": args.reward_name, "kwargs": {},
                      "budget_s": 1.0}
    if model is None and reward is None:
        return refused
    res = run_smoke(python, files, args.prompt_key, args.reward_fn_key, model, reward, timeout=min(args.timeout, 120))
    out = [outcome_of(f, "chat_template") for f in template_findings(res, model, args.prompt_key)] if model else []
    if reward is not None:
        key = ruleset(release)[0].get("custom_reward_key", "reward.custom_reward_function")
        out += [outcome_of(f, "reward_function") for f in reward_findings(res, reward, key)]
    return out + refused


def expand_files(paths: List[str]) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """(the files to read, [(directory, its *.parquet files)]): a directory stands for the
    ``*.parquet`` files directly in it, sorted.

    Raises UsageError naming a path that does not exist, or a directory with no parquet file.
    """
    files: List[str] = []
    dirs: List[Tuple[str, List[str]]] = []
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise UsageError("%s: no such file; pass the parquet files of data.train_files / data.val_files" %
                         ", ".join(missing))

    odd = ["%s: %s" % (p, file_problem(p)) for p in paths if not os.path.isdir(p) and file_problem(p)]
    if odd:
        raise UsageError("%s; pass the parquet files of data.train_files / data.val_files" % "; ".join(odd))
    for p in paths:
        if os.path.isdir(p):  # the directory and every file in it judged as a named file is, before any read
            why, inside, refused = dir_files(p, ".parquet")
            if why or refused:
                raise UsageError("%s; pass the parquet files of data.train_files / data.val_files (files of yours, "
                                 "or readable by their owner)" % ("%s: %s" % (p, why) if why else "; ".join(refused)))
            if not inside:
                raise UsageError("%s is a directory with no *.parquet file in it; pass the parquet files of "
                                 "data.train_files / data.val_files" % p)
            dirs.append((p, inside))
            files.extend(f for f in inside if f not in files)
        elif p not in files:
            files.append(p)
    return files, dirs


def _version() -> str:
    from .. import __version__

    return __version__
