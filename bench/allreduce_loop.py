#!/usr/bin/env python3
"""A bare all_reduce loop, the baseline the nccl stage's figures are compared with.

One process per GPU (torch.multiprocessing.spawn), TCP rendezvous on 127.0.0.1, bf16, for each
size: 5 warm-up ops, then 20 timed ops three ways: host wall clock between two cuda.synchronize()
calls, CUDA events around the eager loop, and CUDA events around one replay of a CUDA graph of the
20 ops (no Python launch cost per op, nearest to nccl-tests' C loop); prints time per op, algbw and
busbw (nccl-tests convention) for rank 0. No checks, no timeouts: a benchmark, and the anchor the
nccl stage is compared with where nccl-tests cannot be built.

Usage: python3 bench/allreduce_loop.py [--world N] [--sizes-mib 1,4,16,64,256,1024]
"""

import argparse
import datetime
import os
import socket
import time


def worker(rank, world, port, sizes_mib, graphs=True):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    x = torch.ones(1, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    for mib in sizes_mib:
        buf = torch.ones((mib << 20) // 2, dtype=torch.bfloat16, device="cuda")
        for _ in range(5):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        figures = {"wall clock": (time.perf_counter() - t0) / 20}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            dist.all_reduce(buf)
        end.record()
        end.synchronize()
        figures["cuda events"] = start.elapsed_time(end) / 1000.0 / 20
        if graphs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(20):
                    dist.all_reduce(buf)
            g.replay()
            dist.barrier()
            torch.cuda.synchronize()
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            figures["cuda graph"] = start.elapsed_time(end) / 1000.0 / 20
        if rank == 0:
            for how, dt in figures.items():
                alg = (mib << 20) / dt / 1e9
                print("bare loop (%-11s): %5d MiB  %9.1f us  algbw %7.2f GB/s  busbw %7.2f GB/s" % (
                    how, mib, dt * 1e6, alg, alg * 2 * (world - 1) / world), flush=True)
    dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=torch.cuda.device_count())
    ap.add_argument("--sizes-mib", default="1,4,16,64,256,1024")
    args = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    sizes = [int(x) for x in args.sizes_mib.split(",")]
    mp.spawn(worker, args=(args.world, port, sizes), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
