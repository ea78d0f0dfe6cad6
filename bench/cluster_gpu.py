#!/usr/bin/env python3
"""Cross-node NCCL through ``preflight cluster`` on one 2-GPU machine: two Ray nodes on 127.0.0.1,
each raylet owning one GPU (CUDA_VISIBLE_DEVICES=0 and =1, --num-gpus 1 each), then
``preflight.pyz cluster --collective nccl`` with a launch of 2 nodes x 1 GPU; prints the
cluster rows and the busbw per size, writes the JSON report, and stops both nodes (also on
failure). Figures are printed, not asserted.

Usage (bench/cluster_gpu.sh prepares Ray first): python3 bench/cluster_gpu.py RAY_PYTHON [OUT_DIR]
RAY_PYTHON is an interpreter with ray and torch (CUDA); the checker runs under python3.
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from raycluster import RayCluster  # noqa: E402


def main() -> int:
    ray_py = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("OUT") or "."
    pyz = os.path.join(ROOT, "dist", "preflight.pyz")
    if not os.path.isfile(pyz):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_pyz.py")], check=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    c = RayCluster()
    c.env["NCCL_NVLS_ENABLE"] = os.environ["NCCL_NVLS_ENABLE"]
    report = os.path.join(out_dir, "cluster_gpu.json")
    try:
        t0 = time.monotonic()
        for gpu in ("0", "1"):
            info = c.add(ray_py, num_cpus=4, num_gpus=1, env={"CUDA_VISIBLE_DEVICES": gpu})
            print("node GPU %s: %s (%.1f s)" % (gpu, info["node_id"], time.monotonic() - t0), flush=True)
        cmd = [sys.executable, pyz, "cluster", "--python", ray_py, "--address", c.address, "--collective", "nccl",
               "--stage", "host,python,packages,imports,gpu", "--backend", "none", "--timeout", "120",
               "--node-timeout", "240",
               "--json", report, "-v", "--", "trainer.nnodes=2", "trainer.n_gpus_per_node=1"]
        print("$ " + " ".join(cmd), flush=True)
        t1 = time.monotonic()
        proc = subprocess.run(cmd, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=480)
        print(proc.stdout[-20000:])
        print("preflight cluster: exit %d in %.1f s" % (proc.returncode, time.monotonic() - t1))
        with open(report) as fh:
            doc = json.load(fh)
        rows = {r["id"]: r for r in doc["results"]}
        for rid in sorted(rows):
            if rid.startswith("cluster."):
                r = rows[rid]
                print("%-6s %-28s %s" % (r["status"].upper(), rid, r["message"][:200]))
        coll = rows.get("cluster.collective") or {}
        ev = coll.get("evidence") or {}
        print("\ncross-node all_reduce: backend %s, world %s, NCCL %s, init %s s" % (
            ev.get("backend"), ev.get("world_size"), ev.get("nccl_version"), ev.get("init_s")))
        print("%10s %12s %12s %12s %8s" % ("size MiB", "time us", "algbw GB/s", "busbw GB/s", "iters"))
        for s in ev.get("sizes") or []:
            print("%10g %12.1f %12.2f %12.2f %8s" % (s["size_mib"], s["time_us"], s["algbw_gbps"], s["busbw_gbps"],
                                                    s.get("iters")))
        for r in ev.get("ranks") or []:
            print("rank %s: node %s ip %s GPU %s NCCL env %s" % (r["rank"], r["node"], r["ip"], r["gpu_ids"],
                                                                 r.get("nccl_env")))
        for line in (ev.get("nccl_lines") or [])[:30]:
            print("  " + line)
        return 0 if coll.get("status") == "pass" else 1
    finally:
        c.stop()
        print("cluster stopped")


if __name__ == "__main__":
    sys.exit(main())
