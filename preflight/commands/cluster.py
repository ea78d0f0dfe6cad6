"""``preflight cluster``: is a whole Ray cluster ready for verl, and where is it not.

Everything Ray-related runs in one subprocess of the target interpreter with its own Ray
(``target/ray_cluster.py``) under a deadline; this module prepares its arguments (the zipapp,
the node check's command line, verl's resource pool from a launch) and turns its events into
the report (:mod:`preflight.cluster`).
"""

import argparse
import dataclasses
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from .. import __version__
from ..errors import UsageError
from ..probes import child
from ..result import Status
from ..stages import STAGE_NAMES
from .argtypes import positive_int, positive_seconds, verl_release
from .output import add_output_options, check_outputs, console_stream, emit
from .stack import resolve_python

NAME = "cluster"
HELP = "check every node of a Ray cluster, drift between them, the job's resources, cross-node NCCL"
EPILOG = """examples:
  python3 preflight.pyz cluster                          attach as verl would (RAY_ADDRESS, else the last `ray start`)
  python3 preflight.pyz cluster --address 10.0.0.1:6379 --python ~/venvs/verl/bin/python --json cluster.json
  python3 preflight.pyz cluster -- trainer.nnodes=2 trainer.n_gpus_per_node=8
  python3 preflight.pyz cluster --launch "python3 -m verl.trainer.main_ppo trainer.nnodes=4" --skip nccl,vllm
  python3 preflight.pyz cluster --collective gloo --stage host,python,packages --backend none   (CPU-only cluster)

Each alive node runs the zipapp's stages (default: host, python, packages, imports, gpu) in its own
Python as a Ray task pinned to it; the zipapp travels through Ray's object store.
exit codes: 0 ready (warnings allowed), 1 not ready, 2 usage error or checker failure
"""

_NODE_STAGES = ("host", "python", "packages", "imports", "gpu")
_ADDR = re.compile(r"^(ray://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})$")


def _stages_arg(text: str) -> List[str]:

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in STAGE_NAMES or n == "config"]
    if bad:
        raise argparse.ArgumentTypeError("unknown node stage %s (stages: %s)" % (
            ", ".join(bad), ", ".join(s for s in STAGE_NAMES if s != "config")))
    return names


def _address_arg(text: str) -> str:
    if text in ("auto",) or _ADDR.match(text):
        return text
    raise argparse.ArgumentTypeError("%r is not auto, HOST:PORT or ray://HOST:PORT (the head's GCS address, e.g. "
                                     "10.0.0.1:6379)" % text)


def register(p: argparse.ArgumentParser) -> None:
    """Add ``cluster``'s options to its parser."""
    p.add_argument("--address", type=_address_arg, default=None, metavar="auto|HOST:PORT|ray://HOST:PORT",
                   help="the cluster to attach to (default: as verl's ray.init() does: RAY_ADDRESS, else the address "
                        "the last `ray start` on this machine recorded)")
    p.add_argument("--python", metavar="PATH", default=None,
                   help="interpreter whose Ray attaches (the trainer's; default: the one running this)")
    p.add_argument("--launch", metavar="COMMAND", default=None,
                   help="the verl launch command, quoted: its trainer.nnodes x trainer.n_gpus_per_node are checked "
                        "against the cluster")
    p.add_argument("--timeout", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="limit for each check on the nodes and for attaching (default 120)")
    p.add_argument("--node-timeout", type=positive_seconds, default=None, metavar="SECONDS",
                   help="limit for one node's whole check; a node that has not answered by then is reported "
                        "(default: 5 x --timeout)")
    p.add_argument("--stage", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="stages each node runs (default: %s)" % ",".join(_NODE_STAGES))
    p.add_argument("--skip", type=_stages_arg, action="append", default=None, metavar="NAMES",
                   help="leave out these node stages")
    p.add_argument("--verl", metavar="VERSION", default=None, type=verl_release, help="verl release the nodes are checked against")
    p.add_argument("--backend", choices=("vllm", "sglang", "none"), default=None,
                   help="rollout backend every node must have (default: each node's installed one)")
    p.add_argument("--collective", choices=("auto", "nccl", "gloo", "none"), default="auto",
                   help="cross-node all_reduce: nccl (one rank per GPU), gloo (one rank per node, on CPUs), none; "
                        "auto: nccl when the cluster has 2 or more GPUs, else gloo")
    p.add_argument("--world", type=positive_int, default=None, metavar="N",
                   help="ranks of the cross-node all_reduce (default: every GPU; with gloo: one per node)")
    p.add_argument("--pyz", metavar="FILE", default=None,
                   help="the zipapp sent to the nodes (default: the one running this)")
    p.add_argument("-v", "--verbose", action="store_true", help="show evidence under every row")
    p.add_argument("overrides", nargs="*", metavar="-- OVERRIDES", help="the launch's overrides, after --")

    add_output_options(p, "the cluster report")


def own_pyz() -> Optional[str]:
    """Path of the zipapp this code runs from, or None when it runs from a source checkout."""
    import zipfile

    from .. import __file__ as pkg_file

    p = os.path.abspath(pkg_file)
    while p and p != os.path.dirname(p):
        if os.path.isfile(p):
            return p if zipfile.is_zipfile(p) else None
        p = os.path.dirname(p)
    return None


def _pyz(path: Optional[str], tmp: str) -> str:
    if path:
        if not os.path.isfile(path):
            raise UsageError("--pyz %s: no such file; pass the preflight.pyz to send to the nodes" % path)
        return os.path.abspath(path)  # the probe runs in a directory of its own
    found = own_pyz()
    if found:
        return found
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tool = os.path.join(root, "tools", "build_pyz.py")
    if not os.path.isfile(tool):
        raise UsageError("cannot find the zipapp to send to the nodes; run this from preflight.pyz or pass --pyz")
    import subprocess

    out = os.path.join(tmp, "preflight.pyz")
    proc = child.run([sys.executable, tool, "-o", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    if proc.returncode != 0:
        raise UsageError("building the zipapp for the nodes failed (%s); pass --pyz" % proc.stdout.strip()[-200:])
    return out


def _launch(args: argparse.Namespace, python: str, mx) -> Tuple[Optional[Dict[str, Any]], List[Any]]:
    """The launch's resource request: ({nnodes, n_gpus_per_node, num_cpus, num_cpus_key}, rows)
    or (None, []) without a launch. Composed like ``preflight config`` (Hydra in the target when
    verl is installed, else the stored defaults)."""
    from ..checks.base import failed, passed
    from ..checks.config import launch_facts
    from ..context import Context, LaunchOptions, Options

    words: Any = args.launch if args.launch else list(args.overrides or [])
    if words and not isinstance(words, str) and words[0] == "--":
        words = words[1:]
    if not words:
        return None, []
    ctx = Context(Options(python=python, verl=args.verl, timeout=args.timeout, launch=LaunchOptions(words=words)), mx)
    facts = launch_facts(ctx) or {}
    comp = facts.get("composed")
    err = facts.get("error") or (comp.error if comp is not None else None)
    if err is not None or comp is None:
        why = err.message if err is not None else str(facts.get("unsupported") or facts.get("skip") or "not composed")
        fix = err.fix if err is not None else "check the launch with `preflight config -- ...`"
        return None, [failed("the launch could not be composed: %s" % why, fix)]
    nn, per = comp.get("trainer.nnodes"), comp.get("trainer.n_gpus_per_node")
    key = "ray_kwargs.ray_init.num_cpus" if comp.has("ray_kwargs.ray_init") else "ray_init.num_cpus"
    try:
        nn, per = int(nn), int(per)
    except (TypeError, ValueError):
        return None, [failed("trainer.nnodes=%r and trainer.n_gpus_per_node=%r are not whole numbers" % (nn, per),
                             "set both to whole numbers >= 1")]
    if nn < 1 or per < 1:
        return None, [failed("trainer.nnodes=%d x trainer.n_gpus_per_node=%d asks for no GPU" % (nn, per),
                             "set both to whole numbers >= 1")]
    info = {"nnodes": nn, "n_gpus_per_node": per, "num_cpus": comp.get(key), "num_cpus_key": key,
            "composed_by": comp.method, "verl_version": comp.verl_version,
            "reserve": _reserve(comp, comp.verl_version)}
    return info, [passed("launch: trainer.nnodes=%d x trainer.n_gpus_per_node=%d = %d GPUs, %s=%s (composed by %s, "
                         "verl %s)" % (nn, per, nn * per, key, "null" if comp.get(key) is None else comp.get(key),
                                       comp.method, comp.verl_version), info)]


def _reserve(comp: Any, release: Optional[str]) -> Optional[Dict[str, Any]]:
    """What the launch reserves in Ray besides GPUs, from the ``[[ray_reserve]]`` row of verl_rules.toml
    covering ``release`` and the composed config (TransferQueue on, its unit count); None when no
    row covers the release."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from ..launch.rules import load_rules
    from ..matrix import parse_version

    pv = parse_version(release) if release else None
    if pv is None:
        return None
    row = next((r for r in load_rules().get("ray_reserve", [])
                if SpecifierSet(r["versions"]).contains(Version(pv.base_version), prereleases=True)), None)
    if row is None:
        return None
    tq = str(comp.get("transfer_queue.enable")).lower() == "true" and "transfer_queue_units" in row
    units = comp.get("transfer_queue.backend.SimpleStorage.num_data_storage_units") if tq else None
    try:
        units = int(units) if units is not None else row.get("transfer_queue_units")
    except (TypeError, ValueError):
        units = row.get("transfer_queue_units")
    return {"bundle_cpus": int(row["bundle_cpus"]), "task_runner_cpus": int(row.get("task_runner_cpus", 0)),
            "transfer_queue": tq, "units": units if tq else None,
            "controller_cpus": int(row.get("transfer_queue_controller_cpus", 0)) if tq else None,
            "release": release, "source": row["source"]}


def run(args: argparse.Namespace) -> int:
    """Attach, check every node, compare them, fit the launch, run the collective; return the exit
    code (0 ready, 1 not ready)."""
    from .. import cluster as cl
    from .. import matrix as matrix_mod
    from ..probes.process import LOADER, load_script, run_script
    from ..report.console import SafeConsole as Console

    check_outputs(args)
    if args.launch and args.overrides:
        raise UsageError("give the launch either as --launch \"...\" or after --, not both")
    python = resolve_python(args.python)
    mx = matrix_mod.load()
    if args.verl:
        mx.require_verl(args.verl)
    selected = [s for g in (args.stage or [list(_NODE_STAGES)]) for s in g]
    skipped_st = {s for g in (args.skip or []) for s in g}
    stages = [s for s in STAGE_NAMES if s in selected and s not in skipped_st]
    if not stages:
        raise UsageError("no node stage left to run after --stage/--skip")
    node_timeout = args.node_timeout or 5 * args.timeout
    t0 = time.time()
    stream = console_stream(args)
    console = Console(file=stream, highlight=False) if stream is not None else None
    launch, launch_rows = _launch(args, python, mx)
    with child.scratch("preflight-cluster-") as tmp:
        pyz = _pyz(args.pyz, tmp)
        node_argv = ["check", "--stage", ",".join(stages), "--timeout", "%g" % args.timeout]
        if args.backend:
            node_argv += ["--backend", args.backend]
        if args.verl:
            node_argv += ["--verl", args.verl]
        pools = cl.verl_pools(launch["nnodes"], launch["n_gpus_per_node"],
                              (launch.get("reserve") or {}).get("bundle_cpus", 1)) if launch else []
        m = mx.curated.get("nccl", {}).get("measure", {})
        coll = None
        if args.collective != "none":
            coll = {"backend": args.collective, "world": args.world, "rank_script": load_script("nccl_rank"), "loader": LOADER,
                    "timeout_s": args.timeout,
                    "nccl": {"sizes": [s << 20 for s in m.get("sizes_mib", [1, 64])], "warmup": m.get("warmup", 5),
                             "iters": m.get("iters", 20), "min_timed_s": m.get("min_timed_ms", 0) / 1000.0,
                             "max_iters": m.get("max_iters", 1000)},
                    "gloo": {"sizes": [s << 20 for s in m.get("gloo_sizes_mib", [1])], "warmup": m.get("gloo_warmup", 1),
                             "iters": m.get("gloo_iters", 3), "min_timed_s": 0.0, "max_iters": m.get("gloo_iters", 3)}}
        ray_init = {}
        if launch and launch.get("num_cpus") is not None:
            ray_init["num_cpus"] = launch["num_cpus"]
        targs = {"address": args.address, "connect_timeout_s": args.timeout, "pyz": pyz, "node_argv": node_argv,
                 "node_timeout_s": node_timeout, "pools": pools, "pg_timeout_s": min(30.0, args.timeout),
                 "collective": coll, "ray_init": ray_init}
        budget = args.timeout + node_timeout + (3 * args.timeout + 60 if coll else 0) + (60 if pools else 0) + 60
        spin = console is not None and console.is_terminal
        with console.status("checking the Ray cluster...") if spin else _Nothing():
            out = run_script(python, "ray_cluster", targs, timeout=budget)
    report, extra = build_report(out, launch, launch_rows, pools, node_timeout, args.timeout, python, mx, t0)
    report.sections = extra
    report.view = view
    return emit(report, args)


def view(report, console, verbose: bool) -> None:
    """The console view: every cluster row, and a node's own rows only when they are not PASS
    (all of them with ``verbose``); the other formats keep every row."""

    from ..report.console import render

    shown = [r for r in report.results if verbose or r.stage == "cluster" or r.status != Status.PASS]
    render(dataclasses.replace(report, results=shown), console, verbose)
    hidden = len(report.results) - len(shown)
    if hidden:
        console.print("(%d passing rows of the nodes' own reports not shown, nor counted above: -v shows them, "
                      "--json has them)" % hidden, style="dim", highlight=False)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def build_report(out, launch, launch_rows, pools, node_timeout: float, timeout: float, python: str, mx,
                 t0: float):
    """The report and the JSON ``cluster`` section from the cluster probe's output ``out``
    (:class:`~preflight.probes.process.ProbeOutput`)."""
    from .. import cluster as cl
    from ..checks.base import errored
    from ..report import Report

    events: Dict[str, Any] = {}
    node_out: Dict[str, Dict[str, Any]] = {}
    for e in out.events:
        kind = e.get("event")
        if kind == "node_result":
            node_out[e.get("node_id")] = e
        elif kind == "pool":
            events["pool:%s" % e.get("name")] = e
        else:
            events[kind] = e
    rows = []
    rows += cl.to_results("attach", cl.attach_outcomes(events, out.describe(), out.stderr_tail))
    nodes = cl.label_nodes((events.get("nodes") or {}).get("nodes") or [])
    rows += cl.to_results("cpus", cl.cpu_outcomes(events, nodes, node_out, launch))
    rows += cl.to_results("launch", launch_rows)
    node_rows: List[Any] = []
    stages = ["cluster"]
    if "attached" in events:
        alive = [n for n in nodes if n.get("alive")]
        dead = [n for n in nodes if not n.get("alive")]
        summ = []
        ev_nodes = {"nodes": [{"label": n["label"], "node_id": n["node_id"], "ip": n.get("ip"), "head": n.get("head"),
                               "alive": n.get("alive"), "resources": n.get("resources")} for n in nodes]}
        from ..checks.base import passed, warned

        summ.append(passed("%d alive node(s): %s" % (len(alive), "; ".join(
            "%s %s" % (n.name, _res(n.get("resources") or {})) for n in alive)), ev_nodes))
        for n in dead:
            summ.append(warned("%s is registered but not alive (%s)" % (n.name, n.get("death_reason") or "dead"),
                               "restart its raylet (`ray start --address=HEAD:PORT` on it) or remove it; Ray will not "
                               "schedule anything there", {"node_id": n["node_id"]}, item=n["label"]))
        for n in alive:
            got, o = cl.node_results(n, node_out.get(n["node_id"]), node_timeout)
            summ.append(o)
            node_rows += got
            if got:
                stages.append(got[0].stage)
        rows += cl.to_results("nodes", summ)
        rows += cl.to_results("drift", cl.drift_outcomes(alive, node_out))
        if launch:
            rows += cl.to_results("resources", cl.resource_outcomes(events, nodes, launch, pools)
                                  + cl.cpu_reserve_outcomes(events, launch))
        if "collective" in events or (events.get("step") or {}).get("name") == "collective":
            rows += cl.to_results("collective", [cl.collective_outcome(events.get("collective"), nodes, timeout)])
        if "done" not in events:
            rows += cl.to_results("run", [errored("the cluster run %s in step %r; the rows above are what it "
                                                  "reported before" % (out.describe(),
                                                                       (events.get("step") or {}).get("name")),
                                                  out.evidence())])
    report = Report(results=rows + node_rows, stages=stages,
                    target={"python": python, "version": (events.get("address") or {}).get("python"),
                            "ray": (events.get("address") or {}).get("ray_version")},
                    verl={"version": (launch or {}).get("verl_version"), "chosen_by": "launch" if launch else "-"},
                    machine={}, tool_version=__version__, matrix_version=mx.version, started_at=t0,
                    duration_s=time.time() - t0, command=NAME)
    extra = {"cluster": {"address": events.get("address"), "attached": events.get("attached"),
                         "resources": events.get("resources"),
                         "nodes": [dict(n, name=n.name) for n in nodes], "launch": launch,
                         "collective": _coll_summary(events.get("collective"))}}
    return report, extra


def _res(r: Dict[str, Any]) -> str:
    parts = ["%g CPU" % r.get("CPU", 0), "%g GPU" % r.get("GPU", 0)]
    custom = sorted(k for k in r if k not in ("CPU", "GPU", "memory", "object_store_memory")
                    and not k.startswith("node:") and not k.startswith("accelerator_type"))
    parts += ["%s %g" % (k, r[k]) for k in custom]
    return "[%s]" % ", ".join(parts)


def _coll_summary(c: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not c:
        return None
    return {k: c.get(k) for k in ("ok", "backend", "world", "where", "env", "stage")}
