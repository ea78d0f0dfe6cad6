"""nccl stage: init_process_group and all_reduce on localhost, one process per GPU.

World size = the GPUs torch sees (``--nccl-world-size`` chooses fewer). Each rank is a process
of the target interpreter (``target/nccl_rank.py``) in its own process group; they meet on a
TCP rendezvous at 127.0.0.1 on a free port. The sweep (sizes, iterations) and the expected
bandwidth come from matrices/nccl.toml. A rank that does not finish in time: every rank is
killed and the row names the step each one was in. When ranks hang in a collective on the P2P
path (:func:`p2p_rerun_blocker` says when), the ranks run once more with NCCL's P2P transport off:
if that run passes, the row blames the P2P path (ACS/IOMMU on the PCIe bridges, NVIDIA/nccl#2079).
The gloo backend runs the same code on CPUs (``--nccl-backend gloo``), which is how CI tests it
with real processes; an injected collective hang (``--nccl-inject``) stands for an NCCL one there.
"""

import os
import re
import shutil
import socket
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..hw import visible_devices
from ..probes.process import collect, spawn_script
from .base import CheckResult, Context, check, failed, passed, skipped, warned

MIB = 1 << 20
HINT = ("rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL to see where it stops; check that no firewall "
        "blocks 127.0.0.1, that /dev/shm is large enough, and that no GPU is in a bad state (gpu.health)")


#: What the re-run after a hang in a collective sets: NCCL's P2P transport off, so NCCL moves the
#: data through host memory (shared memory or sockets) instead of GPU-to-GPU over PCIe/NVLink.
P2P_OFF_ENV = {"NCCL_P2P_DISABLE": "1"}
#: Backends whose collectives use a GPU-to-GPU P2P transport that NCCL_P2P_DISABLE turns off.
P2P_BACKENDS = ("nccl",)
#: Faults ``target/nccl_rank.py`` can simulate in one rank (``--nccl-inject RANK:FAULT``, for tests).
INJECTABLE_FAULTS = ("hang_init", "hang_allreduce", "hang_p2p", "wrong_sum")
#: Faults the rank script injects (``target/nccl_rank.py``) that stand for an NCCL collective hang:
#: with one of them the gloo ranks take the same re-run path NCCL ranks take (hang_p2p hangs only
#: while P2P is on, hang_allreduce whatever NCCL_P2P_DISABLE says).
SIMULATED_P2P_FAULTS = ("hang_p2p", "hang_allreduce")
#: nvidia-smi topo -m's legend for NVML's common-ancestor levels (``probes/nvml.py`` ``path``).
_TOPO_CODE = {"internal": "PIX", "single_switch": "PIX", "multiple_switches": "PXB", "host_bridge": "PHB",
              "numa_node": "NODE", "system": "SYS"}
P2P_FIX = ("disable ACS on the PCIe bridges between the GPUs: now, as root, for each bridge that has it "
           "(lspci -vvv shows ACSCtl): setpci -v -s <BDF> ECAP_ACS+0x6.w=0000; for good: ACS off in the BIOS, or "
           "the kernel parameter pci=noacs (upstream Linux: pci=disable_acs_redir=<BDFs>); with the IOMMU on, also "
           "iommu=pt. Until then NCCL_P2P_DISABLE=1 in the job's environment works around it, slower (NCCL copies "
           "through host memory). NCCL troubleshooting guide, 'PCI Access Control Services (ACS)'")

#: NCCL_DEBUG levels that would hide NCCL's own error lines; the ranks run with WARN instead.
_QUIET_NCCL_DEBUG = ("", "NONE", "VERSION")
_NCCL_WARN = re.compile(r"\bNCCL WARN\b.*")


def nccl_log_env(logdir: str, rank: int) -> Dict[str, str]:
    """Environment for one rank so that NCCL's warnings are kept: NCCL_DEBUG=WARN unless the user
    asked for as much or more, and NCCL_DEBUG_FILE a file of ``logdir`` unless the user named one."""
    env = {}
    if os.environ.get("NCCL_DEBUG", "").strip().upper() in _QUIET_NCCL_DEBUG:
        env["NCCL_DEBUG"] = "WARN"
    if not os.environ.get("NCCL_DEBUG_FILE"):
        env["NCCL_DEBUG_FILE"] = os.path.join(logdir, "rank%d.log" % rank)
    return env


def nccl_warnings(*texts: str) -> List[str]:
    """NCCL's own ``NCCL WARN ...`` lines in ``texts`` (the ``host:pid:tid [dev]`` prefix dropped),
    in order, without repeats."""
    out: List[str] = []
    for text in texts:
        for line in (text or "").splitlines():
            m = _NCCL_WARN.search(line)
            if m and m.group(0).strip() not in out:
                out.append(m.group(0).strip())
    return out


def _read_tail(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


_ERROR_LINE = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b:? ?")


def rank_error(out) -> str:
    """The real cause of one rank's failure, one line: NCCL's first WARN line; else the line after
    "Last error:" in the exception torch raised (NCCL's own text); else that exception's first line;
    else the last Error/Exception line of stderr; else how the process ended."""
    warns = out.logs.get("nccl_warn") or []
    if warns:
        return warns[0][:300]
    err = out.last("error")
    if err:
        lines = [ln.strip() for ln in str(err.get("message") or "").splitlines() if ln.strip()]
        for i, ln in enumerate(lines[:-1]):
            if ln.rstrip(":").lower() == "last error":
                return ("%s: %s (NCCL: %s)" % (err.get("type"), lines[0], lines[i + 1]))[:300]
        return ("%s: %s" % (err.get("type"), lines[0] if lines else ""))[:300]
    lines = [ln.strip() for ln in out.stderr_tail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _ERROR_LINE.search(ln)
        if m and "Warning" not in m.group(0):
            return ln[m.start():][:300]
    return (lines[-1] if lines else out.describe())[:300]


def busbw(nbytes: int, seconds: float, world: int) -> Tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes/s) of an all_reduce of ``nbytes`` taking ``seconds`` on
    ``world`` ranks: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (nccl-tests)."""
    alg = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    return alg, alg * 2.0 * (world - 1) / world if world > 1 else 0.0


def expected_peak(mx, snap: Dict[str, Any], world: int) -> Tuple[Optional[float], str]:
    """Peak per-direction bandwidth in GB/s between the first ``world`` GPUs, from NVML topology
    (NVLink count x per-link speed of the GPU's NVLink generation, else PCIe generation x width),
    and how it was derived. (None, reason) when it cannot be told."""
    data = mx.curated.get("nccl", {})
    devs = visible_devices(snap.get("devices", []), os.environ.get("CUDA_VISIBLE_DEVICES"))[:world]
    if len(devs) < 2:
        return None, "fewer than 2 GPUs"
    links = [d.get("nvlinks_active") or 0 for d in devs]
    idx = {d.get("index") for d in devs}
    pairs = [p for p in snap.get("pairs", []) if p.get("a") in idx and p.get("b") in idx]
    p2p = [p.get("p2p_read") for p in pairs]
    kinds = [p.get("nvlink", "unknown") for p in pairs]
    # a pair NVML shows without NVLink between them (e.g. PCIe cards bridged two by two) puts PCIe
    # in the ring: the expectation is then the PCIe one
    if all(links) and all(x is not False for x in p2p) and None not in kinds:
        cc = devs[0].get("capability") or ""
        if kinds and all(k == "switch" for k in kinds):
            sw = [r for r in data.get("nvswitch", []) if r["cc"] == cc]
            per_gpu = min((d.get("nvlink_remote") or {}).get("switch", 0) for d in devs)
            gen = [r for r in data.get("nvlink", []) if r["cc"] == cc]
            if sw and gen:
                return min(per_gpu * gen[0]["gb_per_s_per_link"], sw[0]["gb_per_s_per_gpu"]), \
                    "%d NVLink%d links per GPU to NVSwitch x %.0f GB/s, every pair at full speed (%s)" % (
                        per_gpu, gen[0]["generation"], gen[0]["gb_per_s_per_link"], sw[0]["source"])
        rows = [r for r in data.get("nvlink", []) if r["cc"] == cc] or \
            [r for r in data.get("nvlink", []) if cc and r["cc"].split(".")[0] == cc.split(".")[0]]
        if rows:
            r = rows[0]
            return min(links) * r["gb_per_s_per_link"], "%d NVLink%d links x %.0f GB/s (%s)" % (
                min(links), r["generation"], r["gb_per_s_per_link"], r["source"])
        return None, "NVLink speed of compute capability %s not in the matrix" % cc
    lanes: List[Tuple[float, Any, Any]] = []
    for d in devs:
        pcie = d.get("pcie") or {}
        gen, width = pcie.get("gen_max") or pcie.get("gen"), pcie.get("width")
        row = [r for r in data.get("pcie", []) if r["gen"] == gen]
        if not row or not width:
            return None, "PCIe generation/width of GPU %s unknown" % d.get("index")
        lanes.append((width * row[0]["gb_per_s_per_lane"], gen, width))
    bw, slow_gen, slow_width = min(lanes)
    return bw, "PCIe gen%d x%d (%s)" % (slow_gen, slow_width, "no P2P: through host memory" if False in p2p else "P2P")


def below_expectation(busbw_gbps: float, peak_gbps: Optional[float], fraction: float) -> bool:
    """True when a measured busbw is under ``fraction`` of the links' peak (both GB/s)."""
    return bool(peak_gbps) and busbw_gbps < fraction * peak_gbps


def _free_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def run_ranks(python: str, world: int, backend: str, sizes: List[int], warmup: int, iters: int, timeout: float,
              inject: Any = None, min_timed_s: float = 0.0, max_iters: int = 1000,
              extra_env: Optional[Mapping[str, str]] = None) -> Tuple[List[Any], bool, List[int], float]:
    """Start ``world`` ranks of ``target/nccl_rank.py`` and wait for all of them (one shared
    deadline of ``timeout`` seconds); ``extra_env`` is set in every rank's environment (the P2P
    re-run's :data:`P2P_OFF_ENV`). If any rank fails or the deadline passes, every rank's process
    group is killed. Returns (ProbeOutput per rank, timed out?, ranks still running when the run
    was stopped, wall seconds)."""
    port = _free_port()
    env = dict(extra_env or {}, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    t0 = time.monotonic()
    logdir = tempfile.mkdtemp(prefix="preflight-nccl-")  # NCCL_DEBUG_FILE of each rank
    procs = []
    for rank in range(world):
        args = {"rank": rank, "world_size": world, "port": port, "backend": backend, "sizes": sizes,
                "warmup": warmup, "iters": iters, "min_timed_s": min_timed_s, "max_iters": max_iters,
                "init_timeout_s": max(10.0, timeout * 0.8), "inject": inject}
        procs.append(spawn_script(python, "nccl_rank", args, env=dict(env, **nccl_log_env(logdir, rank)), timeout=timeout))
    deadline = t0 + timeout
    timed_out = False
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c not in (None, 0) for c in codes):
            time.sleep(2.0)  # let the others report their error, then stop them
            break
        if time.monotonic() > deadline:
            timed_out = True
            break
        time.sleep(0.05)
    alive = [i for i, p in enumerate(procs) if p.poll() is None]
    outs = [collect(p, 0.5 if i in alive else 5, ["rank %d" % i]) for i, p in enumerate(procs)]
    for i, o in enumerate(outs):  # NCCL's own words: its log file (NCCL_DEBUG_FILE), else what it printed
        o.logs["nccl_warn"] = nccl_warnings(_read_tail(os.path.join(logdir, "rank%d.log" % i)), o.stdout_tail,
                                            o.stderr_tail)[:10]
    shutil.rmtree(logdir, ignore_errors=True)
    return outs, timed_out, alive, time.monotonic() - t0


def p2p_disabled(env: Mapping[str, str]) -> Optional[str]:
    """The variable of ``env`` that turns NCCL's P2P transport off (``NCCL_P2P_DISABLE=<non-zero
    integer>``, or ``NCCL_P2P_LEVEL=LOC``: never P2P), as ``NAME=value``; None when P2P is on."""
    raw = (env.get("NCCL_P2P_DISABLE") or "").strip()
    try:
        if raw and int(raw) != 0:
            return "NCCL_P2P_DISABLE=%s" % raw
    except ValueError:
        pass
    if (env.get("NCCL_P2P_LEVEL") or "").strip().upper() == "LOC":
        return "NCCL_P2P_LEVEL=%s" % env["NCCL_P2P_LEVEL"]
    return None


def _in_collective(step: Optional[str]) -> bool:
    return bool(step) and ("all_reduce" in str(step) or step == "barrier")


def p2p_rerun_blocker(backend: str, world: int, timed_out: bool, hung: Sequence[int], steps: Mapping[int, Any],
                      inject: Any, env: Mapping[str, str]) -> Optional[str]:
    """Why a run whose ranks ``hung`` (still running at the deadline) is not re-run with P2P off,
    or None when it is: the deadline passed, world size > 1, P2P was not already off in ``env``,
    a hung rank is in a collective (``steps``: rank -> last step name), and the backend has a P2P
    transport (:data:`P2P_BACKENDS`), or the run is the injected stand-in of one
    (:data:`SIMULATED_P2P_FAULTS`)."""
    if not timed_out or not hung:
        return "no rank hung"
    if world < 2:
        return "world size 1: no peer, so no P2P path to blame"
    off = p2p_disabled(env)
    if off:
        return "P2P was already off (%s)" % off
    if not any(_in_collective(steps.get(i)) for i in hung):
        return "the hang is in %s, before any collective" % ", ".join(sorted({str(steps.get(i) or "startup")
                                                                              for i in hung}))
    fault = inject.get("fault") if isinstance(inject, dict) else None
    if backend not in P2P_BACKENDS and fault not in SIMULATED_P2P_FAULTS:
        return "the %s backend has no P2P transport" % backend
    return None


def topo_code(pair: Mapping[str, Any], links: Optional[Mapping[Any, int]] = None) -> str:
    """nvidia-smi topo -m's code of one NVML pair (``probes/nvml.py``: path, nvlink, p2p_read):
    NV<n> for n direct NVLinks, NV<n> through NVSwitch (n: the fewer active links of the two GPUs,
    from ``links``: GPU index -> active NVLinks; plain NV without it), else the PCIe level (PIX,
    PXB, PHB, NODE, SYS); "(no P2P)" appended where NVML says P2P reads are not supported."""
    link = str(pair.get("nvlink") or "")
    if link.startswith("direct:"):
        code = "NV%s" % link.split(":", 1)[1]
    elif link == "switch":
        n = min((links or {}).get(pair["a"]) or 0, (links or {}).get(pair["b"]) or 0)
        code = "NV%d" % n if n else "NV"
    else:
        code = _TOPO_CODE.get(str(pair.get("path")), str(pair.get("path") or "?"))
    return code + ("(no P2P)" if pair.get("p2p_read") is False else "")


def topo_matrix(pairs: Sequence[Mapping[str, Any]], links: Optional[Mapping[Any, int]] = None) -> List[str]:
    """``nvidia-smi topo -m``'s GPU matrix drawn from NVML pairs (``probes/nvml.py``: a, b, path,
    nvlink; cells from :func:`topo_code`); one string per line, [] without pairs."""
    idx = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})
    if not idx:
        return []
    cell: Dict[Tuple[int, int], str] = {}
    for p in pairs:
        cell[(p["a"], p["b"])] = cell[(p["b"], p["a"])] = topo_code(p, links)
    width = max([6] + [len(c) + 2 for c in cell.values()])
    lines = ["".ljust(6) + "".join(("GPU%d" % j).ljust(width) for j in idx)]
    for i in idx:
        lines.append(("GPU%d" % i).ljust(6) + "".join(("X" if i == j else cell.get((i, j), "?")).ljust(width)
                                                     for j in idx))
    return [ln.rstrip() for ln in lines]


def gpu_topology(ctx: Context, backend: str) -> Dict[str, Any]:
    """The GPU topology the gpu stage collected: gpu.topology's pairs when that row exists, else
    NVML's snapshot (read for the nccl backend, only peeked for gloo); as {"from", "matrix" (lines,
    :func:`topo_matrix`), "codes" ("a-b CODE" per pair), "pairs", "nvlink_only" (every pair
    joined by NVLink)}, or {"from": None, "why"} when there is none."""
    row = ctx.results.get("gpu.topology")
    ev = (row.evidence or {}) if row is not None else {}
    pairs, links, source = ev.get("pairs"), ev.get("nvlinks_active"), "gpu.topology"
    if not pairs:
        snap = ctx.nvml() if backend == "nccl" else (ctx.peek("nvml") or {})
        pairs, source = snap.get("pairs") or [], "NVML"
        links = {d["index"]: d.get("nvlinks_active") or 0 for d in snap.get("devices") or [] if "index" in d}
    if not pairs:
        return {"from": None, "why": "NVML gave no GPU pairs; run nvidia-smi topo -m"}
    return {"from": source, "matrix": topo_matrix(pairs, links),
            "codes": ["%d-%d %s" % (p["a"], p["b"], topo_code(p, links)) for p in pairs],
            "nvlink_only": all(topo_code(p).startswith("NV") for p in pairs), "pairs": pairs}


def _world(ctx: Context) -> Tuple[int, str]:
    if ctx.options.nccl_world_size:
        return int(ctx.options.nccl_world_size), "--nccl-world-size"
    if ctx.options.nccl.backend == "gloo":
        return 2, "gloo default"
    info = ctx.torch_cuda().last("torch_cuda") or {}
    return int(info.get("device_count") or 0), "GPUs torch sees"


def gloo_rank_cap() -> int:
    """Most gloo ranks the stage starts on this host: twice its CPUs, at least 8."""
    return max(8, 2 * (os.cpu_count() or 1))


def _median(xs: List[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def _op_time(per_rank: List[Dict[str, Any]]) -> Tuple[float, Optional[str], List[List[float]]]:
    """Seconds per all_reduce of one size from every rank's ``size`` event: for each way of timing
    (eager ops between CUDA events; replays of a CUDA graph) the slowest rank's median pass, then
    the faster way. Returns (seconds, the way's name, each rank's sorted passes of that way);
    events of an older rank script (no passes) give the slowest ``seconds_per_op``."""
    eager_name = "wall clock" if per_rank[0].get("timing") == "wall clock" else "cuda events"
    ways = []
    for way, name in (("graph", "cuda graph + cuda events"), ("eager", eager_name)):
        passes = [e.get(way) for e in per_rank]
        if all(isinstance(p, list) and p for p in passes):
            ways.append((max(_median(p) for p in passes), name, passes))
    if not ways:
        return max(e["seconds_per_op"] for e in per_rank), per_rank[0].get("timing"), []
    return min(ways, key=lambda w: w[0])


def _hint(backend: str) -> str:
    """The fix of a failed run: a wrong socket-interface variable first, when there is one."""
    from ..netif import check_ifname

    var = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    why = check_ifname(var, os.environ[var]) if os.environ.get(var) else None
    if why:
        return "%s: unset it or name an interface of this host (gpu.env); then %s" % (why, HINT)
    return HINT


def _failure_hint(backend: str, python: str, steps: Dict[int, Any], crashed: List[int], outs) -> Optional[Tuple[str, str]]:
    """(message, fix) when the ranks failed for a reason that is not about the collective: torch
    could not be imported (gloo needs it as much as NCCL does)."""
    for i in crashed:
        if steps.get(i) == "import torch":
            return ("torch cannot be imported by %s, so no %s rank could start: %s" % (
                python, backend, rank_error(outs[i])),
                "install torch into that environment (preflight install, or pip install torch), or pass --python "
                "of an environment that has it")
    return None


def _steps(outs) -> Dict[int, Any]:
    return {i: (o.last("step") or {}).get("name") for i, o in enumerate(outs)}


def _generic_failure(backend: str, timeout: float, outs, timed_out: bool, alive: List[int]) -> str:
    """The message of a failed run: which ranks hung where, or which rank failed and NCCL's (or
    the exception's) words."""
    steps = _steps(outs)
    done = [o.last("done") is not None for o in outs]
    crashed = [i for i, d in enumerate(done) if not d and i not in alive]
    if alive:
        what = ", ".join("rank %d in %s" % (i, steps[i] or "startup") for i in alive)
        msg = "%s: %s did not finish%s (every rank killed)" % (
            backend.upper(), what, " within %.0f s" % timeout if timed_out else "")
        if crashed:
            msg += "; meanwhile " + "; ".join("rank %d stopped in %s: %s" % (i, steps[i] or "startup",
                                                                            rank_error(outs[i])) for i in crashed[:2])
        else:
            warns = [w for o in outs for w in (o.logs.get("nccl_warn") or [])]
            if warns:
                msg += "; %s" % warns[0][:300]
        return msg
    # the rank whose failure NCCL explained, else the first that stopped
    first = next((i for i in crashed if outs[i].logs.get("nccl_warn")), crashed[0])
    return "rank %d failed in %s: %s" % (first, steps[first] or "startup", rank_error(outs[first]))


def _ranks_evidence(outs) -> Dict[str, Any]:
    steps = _steps(outs)
    return {str(i): {"last_step": steps[i], "exit": o.describe(), "nccl_warn": o.logs.get("nccl_warn") or [],
                     "stderr_tail": o.stderr_tail.strip()[-600:]} for i, o in enumerate(outs)}


_WAIT_TIMEOUT = re.compile(r"[Tt]imed out|[Tt]imeout|TIMEOUT|DistBackendError: .*[Ww]atchdog")


def _timed_out_waiting(out: Any) -> bool:
    """The rank ended on a timeout of its own collective or rendezvous (gloo's 'Timed out waiting
    ... for recv', NCCL's watchdog), the mark a hung peer leaves on the ranks waiting for it."""
    err = out.last("error") or {}
    return bool(_WAIT_TIMEOUT.search("%s %s %s" % (err.get("error") or "", err.get("message") or "", out.stderr_tail)))


def _hung(outs: List[Any], timed_out: bool, alive: List[int]) -> bool:
    """Whether a run hung: the deadline came, or it was seen from both sides: ranks still in a
    collective (``alive``) while every other unfinished rank ended on its own collective timeout
    (the process group's, a little under the deadline: :func:`_timed_out_waiting`)."""
    crashed = [i for i, o in enumerate(outs) if o.last("done") is None and i not in alive]
    return timed_out or (bool(alive) and bool(crashed) and all(_timed_out_waiting(outs[i]) for i in crashed))


def _failed_run(ctx: Context, backend: str, world: int, sizes: List[int], ev: Dict[str, Any], first: Tuple[Any, ...],
                run: Callable[..., Tuple[List[Any], bool, List[int], float]]) -> CheckResult:
    """The row of a run that hung or failed (``first``: run_ranks' result). A hang in a collective
    that :func:`p2p_rerun_blocker` lets through is run once more through ``run`` with
    :data:`P2P_OFF_ENV` (same deadline, every rank killed at its end): passing then blames the P2P
    path, with the fix and the GPU topology; failing again gives the generic row and says so."""
    outs, timed_out, alive, _ = first
    steps = _steps(outs)
    done = [o.last("done") is not None for o in outs]
    ev["ranks"] = _ranks_evidence(outs)
    crashed = [i for i, d in enumerate(done) if not d and i not in alive]
    hint = _failure_hint(backend, ctx.options.python, steps, crashed, outs)
    if hint is not None:
        return failed(hint[0], hint[1], ev)
    msg = _generic_failure(backend, ctx.options.timeout, outs, timed_out, alive)
    hung = _hung(outs, timed_out, alive)
    blocker = p2p_rerun_blocker(backend, world, hung, alive, steps, ctx.options.nccl.inject, os.environ)
    if blocker is not None:
        if hung and alive:
            ev["p2p_rerun"] = {"tried": False, "why": blocker}
        return failed(msg, _hint(backend), ev)
    outs2, timed_out2, alive2, wall2 = run(P2P_OFF_ENV)
    rerun: Dict[str, Any] = {"tried": True, "env": dict(P2P_OFF_ENV), "wall_s": round(wall2, 2),
                             "ranks": _ranks_evidence(outs2)}
    ev["p2p_rerun"] = rerun
    env_words = " ".join("%s=%s" % kv for kv in sorted(P2P_OFF_ENV.items()))
    if not timed_out2 and all(o.last("done") is not None for o in outs2):
        table, bad = _measure(outs2, sizes, world)
        rerun["sizes"] = table
        if not bad:
            rerun["outcome"] = "passed"
            ev["topology"] = topo = gpu_topology(ctx, backend)
            what = ", ".join("rank %d in %s" % (i, steps[i] or "startup") for i in alive)
            last = table[-1]
            fix = P2P_FIX
            if topo.get("matrix"):
                fix += ". GPU pairs (%s; this row's evidence has the nvidia-smi topo -m matrix): %s" % (
                    topo["from"], ", ".join(topo["codes"][:6]))
            if topo.get("nvlink_only"):
                fix += ". These GPUs are joined by NVLink, not PCIe: also check nvidia-smi nvlink --status and, on " \
                       "NVSwitch boards, that nvidia-fabricmanager runs"
            return failed("%s: the all_reduce hangs with P2P on (%s, killed after %.0f s) and passes with %s "
                          "(%.1f s, %d MiB busbw %.2f GB/s): the P2P path hangs (likely ACS/IOMMU on the PCIe "
                          "bridges)" % (backend.upper(), what, ctx.options.timeout, env_words, wall2,
                                        last["size_mib"], last["busbw_gbps"]), fix, ev)
        rerun["outcome"] = "wrong sums"
        note = "with %s it ran but returned wrong sums (%s)" % (env_words, "; ".join(bad[:2]))
    else:
        hung2 = _hung(outs2, timed_out2, alive2)  # the re-run is judged as the first run was
        rerun["outcome"] = "hung" if hung2 else "failed"
        note = "with %s it %s too: %s" % (env_words, "hung" if hung2 else "failed",
                                          _generic_failure(backend, ctx.options.timeout, outs2, timed_out2, alive2))
    return failed("%s; P2P off did not help (%s)" % (msg, note), _hint(backend), ev)


def _measure(outs, sizes: List[int], world: int) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The table of a run whose every rank finished (one row per size: time, algbw and busbw in
    GB/s, how it was timed) and the wrong sums it saw ("rank R, S MiB: got .., expected ..")."""
    table: List[Dict[str, Any]] = []
    bad: List[str] = []
    for idx, nbytes in enumerate(sizes):
        per_rank = [[e for e in o.events if e.get("event") == "size"][idx] for o in outs]
        t, timing, runs = _op_time(per_rank)
        alg, bus = busbw(per_rank[0]["bytes"], t, world)
        row = {"size_mib": nbytes // MIB, "time_us": round(t * 1e6, 1), "algbw_gbps": round(alg, 2),
               "busbw_gbps": round(bus, 2), "iters": per_rank[0].get("iters"), "timing": timing}
        if runs:
            row["replays"] = len(runs[0])
            row["time_us_range"] = [round(max(r[0] for r in runs) * 1e6, 1), round(max(r[-1] for r in runs) * 1e6, 1)]
        for way in ("eager", "graph"):
            ways = [e.get(way) for e in per_rank]
            if all(isinstance(w, list) and w for w in ways):
                row["time_us_%s" % way] = round(max(_median(w) for w in ways) * 1e6, 1)
        table.append(row)
        for r, e in enumerate(per_rank):
            if not e["ok"]:
                bad.append("rank %d, %d MiB: got %s, expected %s" % (r, nbytes // MIB, e["got"], e["want"]))
    return table, bad


@check("nccl.allreduce")
def allreduce(ctx: Context) -> CheckResult:  # noqa: C901  TODO(issue 22): split
    """One rank per GPU: init_process_group and an all_reduce sweep with a sum check, busbw against the links."""
    backend = ctx.options.nccl.backend or "nccl"
    world, why = _world(ctx)
    data = ctx.matrix.curated.get("nccl", {})
    m = data.get("measure", {})
    ev: Dict[str, Any] = {"backend": backend, "world_size": world, "world_size_from": why}
    if world < 1:
        return skipped("no GPU visible to torch", ["gpu.torch"], ev)
    cap = gloo_rank_cap()
    if backend != "nccl" and world > cap:  # each rank is a process importing torch: not thousands of them
        return failed("--nccl-world-size %d with gloo: more ranks than this host can run (at most %d here, twice "
                      "its %d CPUs or 8)" % (world, cap, os.cpu_count() or 1), "use --nccl-world-size <= %d" % cap, ev)
    if backend == "nccl":
        info = ctx.torch_cuda().last("torch_cuda") or {}
        if world > int(info.get("device_count") or 0):
            return failed("--nccl-world-size %d but torch sees %d GPU(s)" % (world, info.get("device_count") or 0),
                          "use --nccl-world-size <= %d" % (info.get("device_count") or 0), ev)
        sizes_mib = list(m.get("sizes_mib", [1, 64]))
        snap = ctx.nvml()
        free = [((d.get("memory_total_mib") or 0) - (d.get("memory_used_mib") or 0)) for d in snap.get("devices", [])
                if not d.get("error")][:world]
        if free and min(free) > 0:
            sizes_mib = [s for s in sizes_mib if s <= min(free) / 4] or sizes_mib[:1]
        warmup, iters = int(m.get("warmup", 5)), int(m.get("iters", 20))
        min_timed_s, max_iters = float(m.get("min_timed_ms", 0)) / 1000.0, int(m.get("max_iters", 1000))
    else:
        min_timed_s, max_iters = 0.0, int(m.get("gloo_iters", 3))
        sizes_mib = list(m.get("gloo_sizes_mib", [1]))
        warmup, iters = int(m.get("gloo_warmup", 1)), int(m.get("gloo_iters", 3))
    sizes = [s * MIB for s in sizes_mib]
    ev["nccl_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
    run = lambda extra_env=None: run_ranks(ctx.options.python, world, backend, sizes, warmup, iters,  # noqa: E731
                                          ctx.options.timeout, ctx.options.nccl.inject, min_timed_s, max_iters,
                                          extra_env)
    outs, timed_out, alive, wall = run()
    ev["wall_s"] = round(wall, 2)
    if timed_out or not all(o.last("done") is not None for o in outs):
        return _failed_run(ctx, backend, world, sizes, ev, (outs, timed_out, alive, wall), run)
    init = max((o.last("init") or {}).get("seconds", 0) for o in outs)
    ev["init_s"] = round(init, 3)
    ev["nccl_version"] = (outs[0].last("init") or {}).get("nccl")
    table, bad = _measure(outs, sizes, world)
    ev["sizes"] = table
    if bad:
        return failed("all_reduce returned wrong sums: %s" % "; ".join(bad[:3]),
                      "a wrong result with no error means bad hardware or a broken NCCL/driver install: drain the node "
                      "and run nccl-tests (all_reduce_perf -c 1) to confirm", ev)
    last = table[-1]
    summary = "init %.2f s; %d MiB all_reduce %.0f us, busbw %.1f GB/s" % (
        init, last["size_mib"], last["time_us"], last["busbw_gbps"])
    if len(table) > 1:  # the smallest size is latency-bound: its time per op is the latency
        summary += "; %d MiB latency %.1f us (busbw %.1f GB/s)" % (table[0]["size_mib"], table[0]["time_us"],
                                                                  table[0]["busbw_gbps"])
    if world == 1:
        return passed("world size 1 (%s, NCCL %s): init %.2f s, all_reduce correct on every size (no peer traffic "
                      "to measure)" % (backend, ev["nccl_version"], init), ev)
    if backend != "nccl":
        return passed("%d gloo ranks: init and all_reduce correct on every size; %s" % (world, summary), ev)
    peak, how = expected_peak(ctx.matrix, ctx.nvml(), world)
    ev.update(expected_peak_gbps=peak, expected_from=how, warn_below_fraction=data.get("expect", {}).get("warn_below_fraction"))
    frac = data.get("expect", {}).get("warn_below_fraction", 0.25)
    if below_expectation(last["busbw_gbps"], peak, frac):
        causes = []
        for var in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_P2P_LEVEL", "NCCL_ALGO", "NCCL_PROTO"):
            if os.environ.get(var):
                causes.append("%s=%s is set" % (var, os.environ[var]))
        causes += ["P2P blocked by ACS/IOMMU (check gpu.topology, 'nvidia-smi topo -p2p r')",
                   "a degraded PCIe link (gpu.health)", "another job using the GPUs or links"]
        ev["likely_causes"] = causes
        return warned("%d ranks: busbw %.1f GB/s at %d MiB is %.0f%% of the %.0f GB/s the links allow (%s)" % (
            world, last["busbw_gbps"], last["size_mib"], 100 * last["busbw_gbps"] / peak, peak, how.split(" (")[0]),
            "likely: %s" % "; ".join(causes[:3]), ev)
    extra = " (%.0f%% of %.0f GB/s %s)" % (100 * last["busbw_gbps"] / peak, peak, how.split(" (")[0]) if peak else ""
    return passed("%d ranks, NCCL %s: %s%s" % (world, ev["nccl_version"], summary, extra), ev)
