# The cluster run, with the target's own Ray: attach the way verl's ray.init() would, list the
# nodes and Ray's resource numbers, run the checker's zipapp on every alive node as a Ray task
# pinned to it (the zipapp travels through the object store), try the placement groups verl
# would build, and run one collective rank per GPU (or per node with gloo) in a placement group
# spread over the nodes. Standard library + ray only (Ray >= 2.x).
# ARGS: {address (None: as verl's ray.init() with no address | "auto" | "HOST:PORT" | "ray://..."),
#        connect_timeout_s, ray_init (verl's extra ray.init kwargs: num_cpus), pyz (path of the zipapp on
#        this machine, or None: no node checks), node_argv (the check command line for each node),
#        node_timeout_s, pools ([{"name", "groups": [[{res: n}, ...], ...], "strategy"}]: verl's placement
#        groups to try), pg_timeout_s, collective ({"backend": "auto"|"nccl"|"gloo", "world" (None: every
#        GPU, or one rank per node with gloo), "rank_script", "loader" (the -c program that runs it), "timeout_s", "nccl"/"gloo": {"sizes",
#        "warmup", "iters", "min_timed_s", "max_iters"}} or None)}
# Events: "address", "local_cpus", "gcs_probe", "step", "init_error", "init_kwargs_refused",
#         "init_timeout", "attached", "nodes", "resources", "pool" (one per pool), "node_result" (one per alive node),
#         "collective", "done".
import os
import socket
import sys
import time
import traceback

T0 = time.time()


def _dists():
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {}
    out = {}
    for d in metadata.distributions():
        try:
            name = d.metadata["Name"]
        except Exception:
            name = None
        if name:
            out[name.lower().replace("_", "-")] = d.version
    return out


def _cpus():
    """Logical CPUs, the affinity mask and the cgroup quota, as the host stage reads them."""
    out = {"logical": os.cpu_count(), "affinity": None, "cgroup_quota": None}
    try:
        out["affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            q, p = fh.read().split()[:2]
            if q != "max":
                out["cgroup_quota"] = float(q) / float(p)
    except (OSError, ValueError):
        try:
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as fh:
                q = int(fh.read().strip())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as fh:
                p = int(fh.read().strip())
            if q > 0:
                out["cgroup_quota"] = q / float(p)
        except (OSError, ValueError, ZeroDivisionError):
            pass
    vals = [v for v in (out["logical"], out["affinity"], out["cgroup_quota"]) if v]
    out["usable"] = max(1, int(min(vals))) if vals else None
    return out


def _pdeathsig():
    """In the child before exec: die with SIGKILL when the parent (a Ray worker) dies."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _run_child(argv, timeout, env=None, cwd=None):
    """Run argv in its own session with stdout+stderr to a file; kill the group at the deadline.
    Returns (returncode or None, timed_out, output text)."""
    import signal
    import subprocess
    import tempfile

    with tempfile.TemporaryFile(mode="w+", errors="replace") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=cwd, start_new_session=True, preexec_fn=_pdeathsig, universal_newlines=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        out.seek(0)
        text = out.read()
    return (None if timed_out else proc.returncode), timed_out, text


def node_check(pyz_bytes, argv, timeout, node_id):
    """Runs in a Ray task on one node: the zipapp's check in this node's Python."""
    import json
    import shutil
    import tempfile

    import ray

    t0 = time.time()
    d = tempfile.mkdtemp(prefix="preflight-node-%s-" % node_id[:8])
    try:
        pyz = os.path.join(d, "preflight.pyz")
        with open(pyz, "wb") as fh:
            fh.write(pyz_bytes)
        report = os.path.join(d, "report.json")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # Ray's worker path must not shadow the node's packages
        env.setdefault("NO_COLOR", "1")
        rc, timed_out, text = _run_child([sys.executable, pyz] + list(argv) + ["--json", report], timeout, env=env,
                                         cwd=d)
        doc = None
        try:
            with open(report) as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            pass
    finally:
        shutil.rmtree(d, ignore_errors=True)
    ctx = ray.get_runtime_context()
    return {"node_id": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
            "python": sys.executable, "python_version": "%d.%d.%d" % sys.version_info[:3],
            "cpus": _cpus(), "dists": _dists(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "rc": rc, "timed_out": timed_out,
            "output_tail": text[-3000:], "report": doc, "seconds": round(time.time() - t0, 2), "pyz": pyz}


class RankActor(object):
    """One collective rank, on the node and GPU its placement-group bundle gave it."""

    def where(self):
        import ray

        ip = ray.util.get_node_ip_address()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((ip, 0))
        port = s.getsockname()[1]
        s.close()
        return {"ip": ip, "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}, "node_id": ray.get_runtime_context().get_node_id(),
                "hostname": socket.gethostname(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "free_port": port,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def run(self, script, args, extra_env, timeout, loader):
        import json

        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.update(extra_env)
        import tempfile

        # code and arguments in private files (0600 in a 0700 directory), named through the
        # environment, as the checker does for every target script: never on a command line
        d = tempfile.mkdtemp(prefix="preflight-rank-")
        try:
            for var, name, data in (("PREFLIGHT_SCRIPT", "target_rank.py", script),
                                    ("PREFLIGHT_ARGS", "args.json", json.dumps(args))):
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(data)
                env[var] = os.path.join(d, name)
            env.pop("PREFLIGHT_EVENTS", None)  # events on stdout, read below
            rc, timed_out, text = _run_child([sys.executable, "-c", loader], timeout, env=env)
        finally:
            import shutil

            shutil.rmtree(d, ignore_errors=True)
        events, other = [], []
        for line in text.splitlines():
            if line.startswith("@@PREFLIGHT@@ "):
                try:
                    events.append(json.loads(line[len("@@PREFLIGHT@@ "):]))
                    continue
                except ValueError:
                    pass
            other.append(line)
        nccl = [l.strip() for l in other if " NCCL " in l or l.startswith("NCCL ")]
        plain = [l for l in other if " NCCL INFO " not in l]
        return {"rc": rc, "timed_out": timed_out, "events": events, "nccl_lines": nccl[-200:],
                "tail": "\n".join(plain)[-3000:]}


def _address():
    given = ARGS.get("address")
    env_addr = os.environ.get("RAY_ADDRESS") or None
    info = {"given": given, "ray_address_env": env_addr, "python": "%d.%d.%d" % sys.version_info[:3]}
    try:
        import ray

        info["ray_version"] = ray.__version__
    except ImportError as exc:
        info["ray_version"] = None
        info["ray_import_error"] = str(exc)
    try:
        from ray._common.utils import get_ray_address_file
    except ImportError:
        try:
            from ray._private.utils import get_ray_address_file
        except ImportError:
            get_ray_address_file = None
    state_file = None
    if get_ray_address_file is not None:
        try:
            state_file = get_ray_address_file(None)
        except Exception:
            state_file = None
    if state_file is None:
        base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        state_file = os.path.join(base, "ray", "ray_current_cluster")
    info["state_file"] = state_file
    try:
        with open(state_file) as fh:
            info["state_file_address"] = fh.read().strip() or None
    except OSError:
        info["state_file_address"] = None

    def resolve(addr):
        """What ray.init(address=addr) resolves, with Ray's own function; (address, source)."""
        if addr and addr.startswith("ray://"):
            return addr, "--address"
        try:
            from ray._private.services import canonicalize_bootstrap_address

            got = canonicalize_bootstrap_address(addr)
        except ConnectionError as exc:
            return None, "none: %s" % exc
        except Exception as exc:  # an invalid address
            return None, "error: %s" % exc
        if got is None:
            return None, "none"
        if addr not in (None, "auto"):
            return got, "--address"
        if env_addr and env_addr != "auto":
            return got, "RAY_ADDRESS"
        if info["state_file_address"]:
            return got, "state file"
        return got, "running GCS process"

    info["resolved"], info["source"] = resolve(given)
    if info["source"] in ("state file", "running GCS process"):
        info["foreign"] = _foreign_cluster(info)
    # what verl's own ray.init() (no address argument) would attach to from this machine
    if given is None:
        info["verl_resolved"], info["verl_source"] = info["resolved"], info["source"]
    else:
        info["verl_resolved"], info["verl_source"] = resolve(None)
    return info


def _foreign_cluster(info):
    """Why the cluster Ray found by itself (the state file, a running GCS) is not this user's or
    root's, or None: attaching runs this process's code on its workers and unpickles what they send
    back, so another user's cluster is their code run as this user. The state file must be owned by
    this user or root (its directory is not judged: Ray makes it 0777, and a file another user put
    in place of ours is theirs); a GCS process of this machine on the address's port must run as
    this user or root."""
    me = os.geteuid()
    if info["source"] == "state file":
        try:  # whoever replaces it (Ray makes its directory 0777) makes it theirs
            uid = os.stat(info.get("state_file") or "").st_uid
        except OSError:
            uid = me
        if uid not in (me, 0):
            return "%s is uid %d's" % (info.get("state_file"), uid)
    port = str(info.get("resolved") or "").rpartition(":")[2]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                argv = fh.read().split(b"\0")
            uid = os.stat("/proc/%s" % pid).st_uid
        except OSError:
            continue
        if argv and argv[0].endswith(b"gcs_server") and ("--gcs_server_port=%s" % port).encode() in argv \
                and uid not in (me, 0):
            return "its GCS (pid %s) runs as uid %d" % (pid, uid)
    return None


def _gcs_probe(addr, timeout):
    host, _, port = addr.replace("ray://", "").rpartition(":")
    host = host.strip("[]")
    t0 = time.time()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
        s.close()
        return {"host": host, "port": int(port), "reachable": True, "seconds": round(time.time() - t0, 3)}
    except (OSError, ValueError) as exc:
        return {"host": host, "port": port, "reachable": False, "error": "%s: %s" % (type(exc).__name__, exc),
                "seconds": round(time.time() - t0, 3)}


def _local_cpus():
    out = {"machine": _cpus()}
    try:
        from ray._private.utils import get_num_cpus

        out["ray_num_cpus"] = get_num_cpus(override_docker_cpu_warning=True)
    except Exception as exc:
        out["ray_num_cpus"] = None
        out["ray_num_cpus_error"] = str(exc)
    return out


def _node_rows(ray):
    rows = []
    for n in ray.nodes():
        rows.append({"node_id": n.get("NodeID"), "alive": bool(n.get("Alive")), "ip": n.get("NodeManagerAddress"),
                     "hostname": n.get("NodeManagerHostname"), "resources": n.get("Resources") or {},
                     "labels": n.get("Labels") or {}, "head": "node:__internal_head__" in (n.get("Resources") or {}),
                     "death_reason": n.get("DeathReasonMessage") or n.get("DeathReason") or None})
    return rows


def _available_per_node(ray):
    try:
        from ray._private.state import available_resources_per_node

        return {k: dict(v) for k, v in available_resources_per_node().items()}
    except Exception:
        return None


def run_nodes(ray, alive):
    """One node_check task per alive node (pinned: NodeAffinitySchedulingStrategy, soft=False; the
    node's GPUs requested; no CPU, so a busy node still runs it), all at once; a "node_result"
    event per node as it answers; those not done by node_timeout_s are cancelled and reported."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    with open(ARGS["pyz"], "rb") as fh:
        ref = ray.put(fh.read())
    timeout = float(ARGS["node_timeout_s"])
    task = ray.remote(node_check)
    pending = {}
    for n in alive:
        gpus = float(n["resources"].get("GPU", 0) or 0)
        opts = {"num_cpus": 0, "num_gpus": gpus, "max_retries": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=n["node_id"], soft=False)}
        ref_n = task.options(**opts).remote(ref, ARGS["node_argv"], max(1.0, timeout - 5.0), n["node_id"])
        pending[ref_n] = n
        emit("step", name="node check scheduled", node_id=n["node_id"])
    deadline = time.time() + timeout
    while pending:
        left = deadline - time.time()
        if left <= 0:
            break
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, 5.0))
        for r in ready:
            n = pending.pop(r)
            try:
                emit("node_result", node_id=n["node_id"], ok=True, result=ray.get(r))
            except Exception as exc:
                emit("node_result", node_id=n["node_id"], ok=False, error_type=type(exc).__name__,
                     error=str(exc)[-2000:])
    for r, n in pending.items():
        try:
            ray.cancel(r, force=True)
        except Exception:
            pass
        emit("node_result", node_id=n["node_id"], ok=False, timed_out=True, seconds=timeout)


def try_pools(ray):
    """verl's resource pools as placement groups, all of a pool's groups at once (one per node,
    as verl's RayResourcePool creates them); each is removed again."""
    from ray.util.placement_group import placement_group, remove_placement_group

    for pool in ARGS.get("pools") or []:
        pgs = [placement_group(b, strategy=pool.get("strategy", "STRICT_PACK")) for b in pool["groups"]]
        ready, _ = ray.wait([pg.ready() for pg in pgs], num_returns=len(pgs), timeout=float(ARGS.get("pg_timeout_s", 10)))
        emit("pool", name=pool["name"], fits=len(ready) == len(pgs), placed=len(ready), groups=len(pgs),
             strategy=pool.get("strategy"))
        for pg in pgs:
            remove_placement_group(pg)


def run_collective(ray, alive):
    """One RankActor per GPU (nccl) or per alive node (gloo) in a SPREAD placement group; rank 0's
    node address and a free port there are the rendezvous; every rank runs the rank script with
    the same deadline; one "collective" event with where each rank ran and what it reported."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    c = ARGS["collective"]
    backend = c["backend"]
    gpus = int(float(ray.cluster_resources().get("GPU", 0) or 0))
    if backend == "auto":
        backend = "nccl" if gpus >= 2 else "gloo"
    world = int(c.get("world") or (gpus if backend == "nccl" else len(alive)))
    if world < 2:
        emit("collective", ok=False, stage="world", backend=backend, world=world, gpus=gpus, nodes=len(alive))
        return
    c = dict(c, **c[backend])
    bundle = {"GPU": 1, "CPU": 0} if backend == "nccl" else {"CPU": 1}
    pg = placement_group([dict(bundle) for _ in range(world)], strategy="SPREAD")
    ready, _ = ray.wait([pg.ready()], timeout=float(ARGS.get("pg_timeout_s", 10)))
    if not ready:
        remove_placement_group(pg)
        emit("collective", ok=False, stage="placement_group", backend=backend, world=world, bundle=bundle)
        return
    actor_cls = ray.remote(RankActor)
    actors = []
    for i in range(world):
        actors.append(actor_cls.options(
            num_cpus=bundle.get("CPU", 0), num_gpus=bundle.get("GPU", 0), max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg,
                                                                 placement_group_bundle_index=i)).remote())
    timeout = float(c["timeout_s"])
    try:
        got, _ = ray.wait([a.where.remote() for a in actors], num_returns=world, timeout=timeout)
        if len(got) < world:
            emit("collective", ok=False, stage="actors", backend=backend, world=world, started=len(got))
            return
        where = ray.get([a.where.remote() for a in actors])
        master = where[0]
        env = {"MASTER_ADDR": master["ip"], "MASTER_PORT": str(master["free_port"])}
        if backend == "nccl" and not os.environ.get("NCCL_DEBUG"):
            env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET")
        for k, v in os.environ.items():  # the driver's NCCL settings travel to every rank
            if k.startswith("NCCL_") and k not in env:
                env[k] = v
        refs = []
        for i, a in enumerate(actors):
            args = {"rank": i, "world_size": world, "port": master["free_port"], "master_addr": master["ip"],
                    "device": 0, "backend": backend, "sizes": c["sizes"], "warmup": c["warmup"],
                    "iters": c["iters"], "min_timed_s": c.get("min_timed_s", 0.0),
                    "max_iters": c.get("max_iters", 1000), "init_timeout_s": max(10.0, timeout * 0.8),
                    "inject": c.get("inject")}
            refs.append(a.run.remote(c["rank_script"], args, env, timeout, c["loader"]))
        ranks = []
        for r in refs:
            try:
                ranks.append(ray.get(r, timeout=timeout + 30))
            except Exception as exc:
                ranks.append({"rc": None, "timed_out": True, "events": [], "nccl_lines": [],
                              "tail": "%s: %s" % (type(exc).__name__, str(exc)[-1000:])})
        env_shown = {k: v for k, v in sorted(env.items()) if k.startswith("NCCL_")}
        emit("collective", ok=True, backend=backend, world=world, where=where, ranks=ranks, env=env_shown)
    finally:
        for a in actors:
            try:
                ray.kill(a)
            except Exception:
                pass
        remove_placement_group(pg)


def main():
    info = _address()
    emit("address", **info)
    if info.get("ray_version") is None:
        emit("done", attached=False)
        return
    emit("local_cpus", **_local_cpus())
    addr = info["resolved"]
    if addr is None or info.get("foreign"):
        emit("done", attached=False)
        return
    probe = _gcs_probe(addr, min(5.0, float(ARGS.get("connect_timeout_s", 30))))
    emit("gcs_probe", **probe)
    if not probe["reachable"]:
        emit("done", attached=False)
        return
    emit("step", name="import ray")
    import ray

    emit("step", name="ray.init(address=%r)" % addr)
    kwargs = dict(address=addr, log_to_driver=False, logging_level="ERROR", namespace="verl-preflight")
    failure = []

    def attach():
        try:
            try:
                ray.init(**dict(kwargs, **(ARGS.get("ray_init") or {})))  # verl's own ray.init arguments first
            except ValueError as exc:
                if not ARGS.get("ray_init") or "existing cluster" not in str(exc):
                    raise
                emit("init_kwargs_refused", kwargs=ARGS["ray_init"], message=str(exc))
                ray.init(**kwargs)
        except BaseException as exc:
            failure.append(exc)
            emit("init_error", type=type(exc).__name__, message=str(exc)[-3000:],
                 traceback=traceback.format_exc()[-3000:])

    import threading

    limit = float(ARGS.get("connect_timeout_s", 60))
    th = threading.Thread(target=attach, name="ray.init")
    th.daemon = True
    th.start()
    th.join(limit)
    if th.is_alive():  # ray.init waits, e.g. for a raylet that never appears on this machine
        emit("init_timeout", seconds=limit)
        emit("done", attached=False)
        sys.stdout.flush()
        os._exit(0)
    if failure:
        emit("done", attached=False)
        return
    try:
        try:
            ctx = ray.get_runtime_context()
            gcs, driver_node = getattr(ctx, "gcs_address", None), ctx.get_node_id()
        except Exception:  # Ray Client: no local node
            gcs, driver_node = None, None
        emit("attached", ray_version=ray.__version__, python="%d.%d.%d" % sys.version_info[:3],
             gcs_address=gcs, driver_node_id=driver_node, seconds=round(time.time() - T0, 2))
        nodes = _node_rows(ray)
        emit("nodes", nodes=nodes)
        emit("resources", cluster=ray.cluster_resources(), available=ray.available_resources(),
             available_per_node=_available_per_node(ray))
        alive = [n for n in nodes if n["alive"]]
        if ARGS.get("pools"):
            emit("step", name="placement groups")
            try_pools(ray)
        if ARGS.get("pyz"):
            emit("step", name="node checks")
            run_nodes(ray, alive)
        if ARGS.get("collective"):
            emit("step", name="collective")
            run_collective(ray, alive)
    finally:
        try:
            ray.shutdown()
        except Exception:
            pass
    emit("done", attached=True, seconds=round(time.time() - T0, 2))


main()
