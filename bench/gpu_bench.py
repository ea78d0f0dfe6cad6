#!/usr/bin/env python3
"""GPU benchmark of a full ``check``: prints figures, asserts nothing.

Runs ``check --python PY --json`` twice with the same fresh cache directories for vLLM, torch
inductor, Triton, FlashInfer and the CUDA JIT (``cold``: empty; ``warm``: what the first run left),
then prints for each run: the wall time, every stage's time (the sum of its checks' durations), the
vLLM split (import, engine start, generate) and the engine settings; then the nccl stage's sweep
beside an anchor measured in the same call: nccl-tests' ``all_reduce_perf`` when ``--nccl-tests``
names a binary built on this machine, else ``bench/allreduce_loop.py`` (a bare torch.distributed
loop timed with CUDA events and a CUDA graph), which the output says.

Usage: python3 bench/gpu_bench.py --python PY --out DIR [--nccl-tests BIN] [--preflight "CMD"]
       [-- more check options, e.g. --vllm-tp 2]
Writes DIR/cold.json, DIR/warm.json, DIR/bench.json and DIR/bench.txt.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_check(pf, python, out_json, caches, extra, more_env=None):
    env = dict(os.environ)
    env.update(more_env or {})
    env.update({"XDG_CACHE_HOME": os.path.join(caches, "xdg"), "VLLM_CACHE_ROOT": os.path.join(caches, "vllm"),
                "TORCHINDUCTOR_CACHE_DIR": os.path.join(caches, "inductor"),
                "TRITON_CACHE_DIR": os.path.join(caches, "triton"),
                "FLASHINFER_WORKSPACE_BASE": os.path.join(caches, "flashinfer"),
                "CUDA_CACHE_PATH": os.path.join(caches, "nv")})
    t0 = time.monotonic()
    proc = subprocess.run(pf + ["check", "--python", python, "--json", out_json] + extra, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    wall = time.monotonic() - t0
    with open(out_json) as fh:
        data = json.load(fh)
    return wall, proc.returncode, data, proc.stdout


def cache_inventory(caches):
    """{cache name: (files, bytes, Triton kernels)} under the bench's cache root: what a run compiled
    (a Triton kernel is a directory holding a .cubin)."""
    inv = {}
    for name in sorted(os.listdir(caches)):
        files = size = kernels = 0
        for d, _, names in os.walk(os.path.join(caches, name)):
            files += len(names)
            size += sum(os.path.getsize(os.path.join(d, n)) for n in names if os.path.isfile(os.path.join(d, n)))
            kernels += any(n.endswith(".cubin") for n in names)
        inv[name] = (files, size, kernels)
    return inv


def inventory_line(caches):
    """:func:`cache_inventory` as one line: ``name N files X MB (K Triton kernels)``, comma-separated."""
    return ", ".join("%s %d files %.1f MB%s" % (k, f, b / 1e6, " (%d Triton kernels)" % n if n else "")
                     for k, (f, b, n) in cache_inventory(caches).items())


def stage_times(data):
    """Each stage's (start, end) in seconds from the run's start: the report's stage_timings
    (stages overlap where vLLM's import ran beside the gpu and nccl stages); for reports without
    them, (0, the sum of the stage's check durations)."""
    if data.get("stage_timings"):
        return {k: (v["start_s"], v["end_s"]) for k, v in data["stage_timings"].items()}
    per = {}
    for r in data["results"]:
        per[r["stage"]] = per.get(r["stage"], 0.0) + float(r.get("duration_s") or 0.0)
    return {k: (0.0, v) for k, v in per.items()}


def result(data, rid):
    return next((r for r in data["results"] if r["id"] == rid), None)


def nccl_tests(binary, world):
    """(size MiB -> (time us, busbw GB/s)) from all_reduce_perf's out-of-place columns."""
    cmd = [binary, "-b", "1M", "-e", "1G", "-f", "4", "-g", str(world), "-d", "bfloat16", "-n", "20", "-w", "5"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300)
    rows = {}
    for line in proc.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and f[2] == "bfloat16":
            size, t_us, bus = int(f[0]), float(f[5]), float(f[7])
            rows[size >> 20] = (t_us, bus)
    return rows, " ".join(cmd), proc.stdout[-3000:]


def bare_loop(python, world):
    """(how -> size MiB -> (time us, busbw GB/s)) from bench/allreduce_loop.py run by ``python``."""
    cmd = [python, os.path.join(ROOT, "bench", "allreduce_loop.py"), "--world", str(world)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=300)
    rows = {}
    for m in re.finditer(r"bare loop \((.+?)\s*\):\s+(\d+) MiB\s+([\d.]+) us.*busbw\s+([\d.]+)", proc.stdout):
        rows.setdefault(m.group(1), {})[int(m.group(2))] = (float(m.group(3)), float(m.group(4)))
    return rows, " ".join(cmd), proc.stdout[-3000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="the interpreter to check (vLLM installed)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--nccl-tests", help="all_reduce_perf built on this machine")
    ap.add_argument("--preflight", default="%s -I -S %s" % (sys.executable, os.path.join(ROOT, "dist", "preflight.pyz")),
                    help="how to run the checker (default: dist/preflight.pyz)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=VALUE",
                    help="after the cold and warm runs, one more cold run (fresh caches) with this environment "
                         "variable set, e.g. VLLM_USE_V2_MODEL_RUNNER=1 (repeatable: one run each)")
    ap.add_argument("extra", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    extra = [x for x in a.extra if x != "--"]
    pf = shlex.split(a.preflight)
    os.makedirs(a.out, exist_ok=True)
    caches = tempfile.mkdtemp(prefix="preflight-bench-caches-")
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    runs = {}
    for label in ("cold", "warm"):
        wall, rc, data, text = run_check(pf, a.python, os.path.join(a.out, "%s.json" % label), caches, extra)
        runs[label] = {"wall_s": round(wall, 2), "exit": rc, "stages": stage_times(data), "data": data}
        with open(os.path.join(a.out, "%s.txt" % label), "w") as fh:
            fh.write(text)
        say("check (%s caches): %.1f s wall, exit %d, %s" % (label, wall, rc, data.get("summary")))
        say("    caches after it: %s" % inventory_line(caches))
    for var in a.variant:
        name, _, value = var.partition("=")
        fresh = tempfile.mkdtemp(prefix="preflight-bench-caches-")
        label = "cold, %s=%s" % (name, value)
        wall, rc, data, text = run_check(pf, a.python, os.path.join(a.out, "variant-%s.json" % name), fresh, extra,
                                         {name: value})
        runs[label] = {"wall_s": round(wall, 2), "exit": rc, "stages": stage_times(data), "data": data}
        say("check (%s): %.1f s wall, exit %d, %s" % (label, wall, rc, data.get("summary")))
        say("    caches after it: %s" % inventory_line(fresh))
    say()
    say("%-10s %22s %22s" % ("stage", "cold: start-end (wall)", "warm: start-end (wall)"))

    def span(label, st):
        b, e = runs[label]["stages"].get(st, (0.0, 0.0))
        return "%6.1f-%6.1f (%5.1f s)" % (b, e, e - b)
    for st in runs["cold"]["data"]["stages"]:
        say("%-10s %22s %22s" % (st, span("cold", st), span("warm", st)))
    say()
    for label in runs:
        for rid in ("vllm.generate", "vllm.compile", "imports.vllm"):
            r = result(runs[label]["data"], rid)
            if not r:
                continue
            e = r.get("evidence") or {}
            if rid.startswith("vllm."):
                say("%s %s: %s; import %s s, engine start %s s, generate %s s, %s tokens/s, attention %s" % (
                    label, rid, r["status"], e.get("import_s"), e.get("engine_start_s"), e.get("generate_s"),
                    e.get("tokens_per_s"), e.get("attention_backend")))
                say("    tokens %s/%s, deterministic %s, settings %s%s" % (
                    e.get("tokens_generated"), e.get("tokens_expected"), e.get("deterministic"),
                    json.dumps(e.get("engine_settings")), " REJECTED %s" % e["settings_rejected"]
                    if e.get("settings_rejected") else ""))
            else:
                say("%s %s: %s, %.1f s" % (label, rid, r["status"], r.get("duration_s") or 0))
    nccl = result(runs["warm"]["data"], "nccl.allreduce")
    bench = {"runs": {k: {x: v[x] for x in ("wall_s", "exit", "stages")} for k, v in runs.items()}}
    if nccl and (nccl.get("evidence") or {}).get("sizes"):
        ev = nccl["evidence"]
        world = int(ev.get("world_size") or 1)
        say()
        if a.nccl_tests and world > 1:
            anchor, cmd, raw = nccl_tests(a.nccl_tests, world)
            anchors = {"nccl-tests": anchor}
        elif world > 1:
            anchors, cmd, raw = bare_loop(a.python, world)
            say("nccl-tests not available here: the anchor is bench/allreduce_loop.py (a bare torch.distributed "
                "loop; CUDA events, and a CUDA graph of the loop)")
        else:
            anchors, cmd, raw = {}, "", ""
        with open(os.path.join(a.out, "anchor.txt"), "w") as fh:
            fh.write(cmd + "\n" + raw)
        say("nccl stage (warm run, %d ranks, %s) beside %s, same call:" % (
            world, (ev["sizes"][0].get("timing") or "?"), ", ".join(anchors) or "nothing (1 rank)"))
        head = "%8s %12s %12s" % ("size", "stage us", "stage GB/s")
        for name in anchors:
            head += " %22s" % ("%s us / GB/s" % name[:12])
        say(head)
        for row in ev["sizes"]:
            line = "%5d MiB %12.1f %12.1f" % (row["size_mib"], row["time_us"], row["busbw_gbps"])
            for name, tab in anchors.items():
                t = tab.get(row["size_mib"])
                line += " %22s" % ("%.1f / %.1f (%.0f%%)" % (t[0], t[1], 100.0 * row["busbw_gbps"] / t[1])
                                   if t and t[1] else "-")
            say(line)
        bench["nccl"] = {"stage": ev["sizes"], "anchors": {k: {str(s): v for s, v in t.items()} for k, t in
                                                          anchors.items()}, "anchor_command": cmd}
    with open(os.path.join(a.out, "bench.json"), "w") as fh:
        json.dump(bench, fh, indent=1)
    with open(os.path.join(a.out, "bench.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
