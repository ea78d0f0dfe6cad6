# One rank of the nccl stage: init_process_group on a localhost TCP rendezvous, all_reduce over a
# range of sizes with a check of the sum, a barrier, a clean destroy.
# ARGS: {rank, world_size, port, backend ("nccl"|"gloo"), sizes (bytes), warmup, iters (at least),
#        min_timed_s and max_iters (more iterations for fast sizes: at least min_timed_s of timed work),
#        graph (default true: also time a CUDA graph of the ops on GPUs), replays (timed passes per size
#        and way of timing, default 3),
#        init_timeout_s, inject ({"rank", "fault": "hang_init"|"hang_allreduce"|"hang_p2p"|"wrong_sum"} or null;
#        hang_p2p hangs the first all_reduce only while NCCL's P2P transport is on, i.e. unless
#        NCCL_P2P_DISABLE is a non-zero integer or NCCL_P2P_LEVEL is LOC: the ACS/IOMMU hang of
#        NVIDIA/nccl#2079, simulated for CPU ranks),
#        master_addr (rendezvous host, default 127.0.0.1), device (CUDA index, default the rank; 0 in a Ray
#        actor, whose CUDA_VISIBLE_DEVICES holds its one GPU)}
# Events: "step" {name} before each step (the checker reports the last one of a rank that hung),
#         "init" {seconds}, "size" {bytes, seconds_per_op (this rank's faster median), ok, got, want, iters,
#         timing, replays, spread [fastest, slowest pass], eager [passes, s/op, sorted], graph [the same, or
#         null]}, "done" {},
#         "error" {type, message} when the rank fails with an exception.
import datetime
import os
import time


def p2p_enabled():
    """False when NCCL's environment turns its P2P transport off (NCCL_P2P_DISABLE=<non-zero
    integer>, or NCCL_P2P_LEVEL=LOC: P2P never used)."""
    try:
        if int(os.environ.get("NCCL_P2P_DISABLE", "0").strip() or "0") != 0:
            return False
    except ValueError:
        pass
    return os.environ.get("NCCL_P2P_LEVEL", "").strip().upper() != "LOC"


def timed(torch, dist, buf, on_gpu, count):
    """Seconds per all_reduce of ``buf`` over ``count`` eager ops: CUDA events on the rank's
    stream on GPUs (device time, no host sync inside the window), wall time on CPU."""
    if not on_gpu:
        t = time.perf_counter()
        for _ in range(count):
            dist.all_reduce(buf)
        return (time.perf_counter() - t) / count
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(count):
        dist.all_reduce(buf)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / count


def capture(torch, dist, buf, on_gpu, count):
    """A CUDA graph of ``count`` all_reduces of ``buf`` (no collective runs while capturing),
    or None when this torch/NCCL cannot capture them. Replaying it times NCCL's kernels
    without the Python launch cost of each op, as nccl-tests' C loop does."""
    if not on_gpu or not ARGS.get("graph", True) or not hasattr(torch.cuda, "CUDAGraph"):
        return None
    try:
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(count):
                dist.all_reduce(buf)
        return graph
    except Exception as exc:  # noqa: BLE001 - any capture failure means: time eagerly
        emit("graph_unavailable", error="%s: %s" % (type(exc).__name__, str(exc)[:300]))
        return None


def replay(torch, graph, count):
    """Seconds per all_reduce of one replay of ``graph`` (``count`` all_reduces), by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / count


def main():
    rank = int(ARGS["rank"])
    world = int(ARGS["world_size"])
    backend = ARGS.get("backend", "nccl")
    inject = ARGS.get("inject") or {}
    faulty = inject.get("rank") == rank
    emit("step", name="import torch")
    import torch
    import torch.distributed as dist

    on_gpu = backend == "nccl"
    if on_gpu:
        emit("step", name="set device")
        index = int(ARGS.get("device", rank))
        torch.cuda.set_device(index)
        dtype = torch.bfloat16
        device = torch.device("cuda", index)
    else:
        dtype = torch.float32
        device = torch.device("cpu")
    elem = torch.tensor([], dtype=dtype).element_size()
    emit("step", name="init_process_group")
    if faulty and inject.get("fault") == "hang_init":
        while True:
            time.sleep(1)
    t0 = time.time()
    kwargs = {}
    if on_gpu:
        try:  # torch >= 2.3: bind the communicator to this rank's device eagerly
            import inspect

            if "device_id" in inspect.signature(dist.init_process_group).parameters:
                kwargs["device_id"] = device
        except (TypeError, ValueError):
            pass
    master = ARGS.get("master_addr") or "127.0.0.1"
    dist.init_process_group(backend=backend, init_method="tcp://%s:%d" % (master, int(ARGS["port"])), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=float(ARGS.get("init_timeout_s", 60))),
                            **kwargs)
    # the first collective creates the NCCL communicator: count it in init
    emit("step", name="first all_reduce (communicator setup)")
    if faulty and inject.get("fault") == "hang_p2p" and p2p_enabled():
        while True:
            time.sleep(1)
    warm = torch.ones(1, dtype=dtype, device=device)
    dist.all_reduce(warm)
    if on_gpu:
        torch.cuda.synchronize()
    emit("init", seconds=round(time.time() - t0, 4), nccl=(".".join(str(x) for x in torch.cuda.nccl.version())
                                                           if on_gpu else None), torch=torch.__version__)
    want = world * (world + 1) / 2.0

    for nbytes in ARGS.get("sizes", []):
        n = max(1, int(nbytes) // elem)
        label = "all_reduce %d MiB" % (nbytes >> 20) if nbytes >= (1 << 20) else "all_reduce %d B" % nbytes
        emit("step", name=label)
        if faulty and inject.get("fault") == "hang_allreduce":
            while True:
                time.sleep(1)
        buf = torch.empty(n, dtype=dtype, device=device)
        buf.fill_(rank + 1)
        warmup = max(1, int(ARGS.get("warmup", 3)))
        per_op = timed(torch, dist, buf, on_gpu, warmup)
        # enough timed ops for at least min_timed_s of work, so the ranks' start skew (tens of
        # microseconds) does not swamp small, latency-bound sizes; every rank must run the same
        # count, so they agree on the largest
        iters = int(ARGS.get("iters", 10))
        want_iters = max(iters, min(int(ARGS.get("max_iters", 1000)),
                                    int(float(ARGS.get("min_timed_s", 0.0)) / max(per_op, 1e-6)) + 1))
        agree = torch.tensor([float(want_iters)], device=device)
        dist.all_reduce(agree, op=dist.ReduceOp.MAX)
        iters = int(agree.item())
        # the ranks agree on graph timing (a rank whose capture failed would leave the others'
        # replayed all_reduces without a partner)
        graph = capture(torch, dist, buf, on_gpu, iters)
        ok_graph = torch.tensor([1.0 if graph is not None else 0.0], device=device)
        dist.all_reduce(ok_graph, op=dist.ReduceOp.MIN)
        # both ways of timing, each `replays` times (every pass after a barrier, so the ranks start
        # together), sorted: eager ops between CUDA events, and replays of the graph after one
        # untimed replay. The checker takes each way's median (slowest rank) and reports the faster
        # way: on one 2 x H200 node the graph was slower from 4 MiB up (NCCL 2.28.9) and eager ops
        # paid their launch cost at 1 MiB, so neither alone is the figure nccl-tests would give.
        replays = max(1, int(ARGS.get("replays", 3)))

        def passes(fn):
            out = []
            for _ in range(replays):
                dist.barrier()
                out.append(fn())
            return sorted(out)

        eager = passes(lambda: timed(torch, dist, buf, on_gpu, iters))
        graphed = None
        if graph is not None and ok_graph.item() == 1.0:
            dist.barrier()
            replay(torch, graph, iters)
            graphed = passes(lambda: replay(torch, graph, iters))
        runs = graphed if graphed is not None and graphed[len(graphed) // 2] < eager[len(eager) // 2] else eager
        dt = runs[len(runs) // 2]
        method = ("cuda graph + cuda events" if runs is graphed else "cuda events") if on_gpu else "wall clock"
        del graph
        # correctness on a fresh buffer: every element must be 1 + 2 + ... + world
        buf.fill_(rank + 1)
        if faulty and inject.get("fault") == "wrong_sum":
            buf.fill_(rank + 2)
        dist.all_reduce(buf)
        lo = float(buf.min().item())
        hi = float(buf.max().item())
        ok = lo == want and hi == want
        emit("size", bytes=n * elem, seconds_per_op=dt, ok=ok, got=[lo, hi], want=want, iters=iters, timing=method,
             replays=len(runs), spread=[runs[0], runs[-1]], eager=eager, graph=graphed)
        del buf
    emit("step", name="barrier")
    dist.barrier()
    emit("step", name="destroy_process_group")
    dist.destroy_process_group()
    emit("done")


try:
    main()
except BaseException as _exc:  # the exception itself, for the checker's row (the traceback stays on stderr)
    emit("error", type=type(_exc).__name__, message=str(_exc)[-3000:])
    raise
