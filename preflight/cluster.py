"""``preflight cluster``: the findings of one run of ``target/ray_cluster.py``, as report rows.

The target script does the work with the target's own Ray (attach, nodes, resources, node checks,
placement groups, collective ranks) and reports events; this module only reads them:

- :func:`attach_outcomes`: the address Ray resolved and where it came from, and why attaching
  failed (GCS unreachable, a dead ``RAY_ADDRESS`` or stale state file, Ray/Python version
  mismatch, no local raylet, verl's ``ray.init`` arguments refused);
- :func:`cpu_outcomes`: CPUs Ray advertises vs CPUs the cgroup and affinity allow (verl#523);
- :func:`node_results`: every node's own report, its rows renamed ``<node label>.<row id>``;
- :func:`drift_outcomes`: Python, torch/CUDA/NCCL/driver, GPU models and every distribution
  compared across nodes;
- :func:`resource_outcomes`: a launch's ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` against
  Ray's own numbers, and verl's resource pool tried as placement groups;
- :func:`cpu_reserve_outcomes`: the CPUs the launch reserves (pool bundles, TaskRunner,
  TransferQueue) against the CPUs Ray has available (verl#7398, #7656);
- :func:`collective_outcome`: the cross-node all_reduce (sum checked, busbw per size, NCCL's
  interface/transport lines).

Sources: verl's ResourcePoolManager/RayResourcePool (one STRICT_PACK placement group per node,
bundles ``{"CPU": max_colocate_count, "GPU": 1}``: 1 before verl 0.7.1, 3 from it, with the TaskRunner
and TransferQueue actors beside them, matrices/verl_rules.toml ``[[ray_reserve]]``; its message "Total available GPUs
... is less than total desired GPUs ..."); Ray's ``canonicalize_bootstrap_address`` (RAY_ADDRESS,
then ``<ray temp dir>/ray_current_cluster``, else a new local instance); reference cases 16
(verl#659) and 21 (verl#523) in shared/reference.
"""

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .checks.base import Outcome, errored, failed, passed, skipped, warned
from .result import Result, Status

__all__ = ["NodeInfo", "label_nodes", "best_fit", "attach_outcomes", "cpu_outcomes", "node_results", "node_facts",
           "drift_outcomes", "verl_pools", "resource_outcomes", "cpu_reserve_outcomes", "collective_outcome", "to_results"]

#: Facts compared across nodes besides the distributions: (key, label).
FACT_LABELS = (("python", "Python"), ("torch", "torch"), ("torch_cuda", "torch's CUDA"), ("nccl", "NCCL"),
               ("cudnn", "cuDNN"), ("driver", "NVIDIA driver"), ("gpus", "GPU models"))
#: Distributions named first in drift messages (the rest are compared too).
KEY_DISTS = ("torch", "verl", "vllm", "sglang", "transformers", "ray", "flash-attn", "tensordict", "nvidia-nccl-cu12",
             "nvidia-nccl-cu13")


class NodeInfo(dict):
    """One node of ``ray.nodes()`` plus its label: keys ``node_id``, ``ip``, ``hostname``, ``alive``,
    ``resources`` (Ray's numbers: CPU, GPU, memory in bytes...), ``head``, ``label`` (``n0``...)."""

    @property
    def name(self) -> str:
        """``n1 (10.0.0.2, head)``: the label, the address, head or not."""
        return "%s (%s%s)" % (self["label"], self.get("ip"), ", head" if self.get("head") else "")


def label_nodes(nodes: Sequence[Dict[str, Any]]) -> List[NodeInfo]:
    """Nodes in a stable order (alive first, the head first, then by address and node id), labelled
    ``n0``, ``n1``...: an address alone does not name a node (several raylets may share one host)."""
    order = sorted(nodes, key=lambda n: (not n.get("alive"), not n.get("head"), str(n.get("ip")),
                                         str(n.get("node_id"))))
    return [NodeInfo(dict(n, label="n%d" % i)) for i, n in enumerate(order)]


def _first_line(text: str, n: int = 300) -> str:
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return (lines[0] if lines else "")[:n]


def _where(addr_ev: Dict[str, Any]) -> str:
    src = addr_ev.get("source") or ""
    if src == "RAY_ADDRESS":
        return "RAY_ADDRESS"
    if src == "state file":
        return "the Ray state file %s (written by the last `ray start` on this machine)" % addr_ev.get("state_file")
    if src == "--address":
        return "--address"
    return src or "?"


def _gcs_fix(addr_ev: Dict[str, Any], host: str, port: Any) -> str:
    src = addr_ev.get("source")
    if src == "RAY_ADDRESS":
        return ("RAY_ADDRESS=%s points at no running cluster: `unset RAY_ADDRESS`, or set it to the head's GCS "
                "address (`ray status` on the head prints it)" % addr_ev.get("ray_address_env"))
    if src == "state file":
        return ("the state file is stale (its cluster is gone): run `ray stop` on this machine (it removes %s), then "
                "start the cluster or pass --address HEAD:PORT" % addr_ev.get("state_file"))
    return ("check that the head runs (`ray status` on it) and that TCP port %s on %s is open from this machine "
            "(firewall, security group, Kubernetes service)" % (port, host))


_MISMATCH = re.compile(r"cluster was started with:\s*Ray:\s*(\S+)\s*Python:\s*(\S+).*?started with:\s*Ray:\s*(\S+)"
                       r"\s*Python:\s*(\S+)", re.S)


def classify_init_error(message: str) -> Tuple[str, str, str]:
    """(kind, message, fix) for the text of an exception ``ray.init(address=...)`` raised.

    kinds: ``version_mismatch``, ``raylet_not_registered``, ``no_local_raylet``, ``gcs_unreachable``,
    ``other``.
    """
    m = _MISMATCH.search(message)
    if "Version mismatch" in message or m:
        if m:
            cr, cp, mr, mp = m.groups()
            what = "the cluster runs Ray %s on Python %s, the target has Ray %s on Python %s" % (cr, cp, mr, mp)
            fix = ("install ray==%s in the target (and use Python %s, as the cluster does), or restart the cluster "
                   "with Ray %s" % (cr, cp, mr)) if cr != mr else (
                "use Python %s in the target, as the cluster does (Ray compares the patch version)" % cp)
        else:
            what, fix = _first_line(message), "use the cluster's Ray and Python versions in the target"
        return "version_mismatch", "Ray version mismatch between this interpreter and the cluster: %s" % what, fix
    low = message.lower()
    if "register" in low and "raylet" in low:
        return ("raylet_not_registered", "a worker could not register with the raylet: %s" % _first_line(message),
                "the raylet is overloaded or started more workers than the CPUs allow: start it with `ray start "
                "--num-cpus=<usable CPUs>` (or set ray_kwargs.ray_init.num_cpus for a local instance); its log is "
                "<ray temp dir>/session_latest/logs/raylet.out")
    if ("local raylet" in low or "this node has an ip address" in low or "node to start" in low
            or "failed to get the node info" in low or "timed out while waiting for node" in low
            or "resolve node to connect to" in low or "no node info found" in low):
        return ("no_local_raylet", "this machine runs no raylet of the cluster: %s" % _first_line(message),
                "a driver (verl's trainer) must run on a node of the cluster: run `ray start --address=HEAD:PORT` "
                "here first, or run on the head node, or use a Ray Client address (ray://HEAD:10001)")
    if "gcs" in low:
        return ("gcs_unreachable", "the GCS did not answer: %s" % _first_line(message),
                "check that the head runs (`ray status` on it) and that its GCS port is open from this machine")
    return "other", "ray.init failed: %s" % _first_line(message), "see the evidence (the exception ray.init raised)"


def attach_outcomes(events: Dict[str, Any], probe_desc: str, stderr_tail: str = "") -> List[Outcome]:
    """Rows ``attach`` (and ``verl-attach``, ``ray-init-args``) from the target's events.

    ``events``: event name -> the last event of that name; ``probe_desc``: how the target process
    ended (ProbeOutput.describe()).
    """
    addr = events.get("address") or {}
    ev = {k: addr.get(k) for k in ("given", "resolved", "source", "ray_address_env", "state_file",
                                   "state_file_address", "verl_resolved", "verl_source")}
    out: List[Outcome] = []
    if not addr:
        return [errored("the cluster probe %s before reporting an address" % probe_desc,
                        dict(ev, stderr_tail=stderr_tail[-1500:]))]
    if addr.get("ray_import_error"):
        ev["error"] = addr["ray_import_error"]
        return [failed("ray cannot be imported in the target (Python %s): %s" % (addr.get("python"),
                                                                                addr["ray_import_error"]),
                       "install the Ray version the cluster runs in the trainer's environment (verl[...] pulls "
                       "ray[default]), or pass --python with the trainer's interpreter", ev)]
    if addr.get("resolved") is None:
        src = addr.get("source") or ""
        if src.startswith("error:"):
            return [failed("the Ray address is invalid: %s" % src[6:].strip(),
                           "set RAY_ADDRESS (or --address) to HOST:PORT of the head's GCS, or ray://HOST:10001", ev)]
        return [failed("no Ray cluster to attach to: RAY_ADDRESS is unset and no `ray start` on this machine left an "
                       "address (%s); verl's ray.init() would start a new local Ray instance with only this "
                       "machine's resources" % addr.get("state_file"),
                       "start the cluster (`ray start --head` on one node, `ray start --address=HEAD:6379` on the "
                       "others), then export RAY_ADDRESS=HEAD:6379 or pass --address", ev)]
    if addr.get("foreign"):
        ev["foreign"] = addr["foreign"]
        return [failed("not attached to %s (from %s): the cluster is another user's (%s); attaching would run "
                       "what its workers send back as this user" % (addr["resolved"], _where(addr), addr["foreign"]),
                       "pass --address HEAD:PORT of a cluster you started (or export RAY_ADDRESS), or start your own "
                       "(`ray start --head` with RAY_TMPDIR set to a directory of yours)", ev)]
    probe = events.get("gcs_probe") or {}
    if probe and not probe.get("reachable"):
        ev["gcs_probe"] = probe
        return [failed("the GCS at %s (from %s) is not reachable: %s" % (addr["resolved"], _where(addr),
                                                                          probe.get("error")),
                       _gcs_fix(addr, probe.get("host"), probe.get("port")), ev)]
    init = events.get("init_error")
    if init:
        kind, msg, fix = classify_init_error(init.get("message") or "")
        ev.update(kind=kind, error=init.get("message"), exception=init.get("type"))
        return [failed(msg, fix, ev)]
    if events.get("init_timeout"):
        ev["init_timeout_s"] = events["init_timeout"].get("seconds")
        return [failed("ray.init(address=%r) (from %s) did not return within %.0f s" % (
            addr["resolved"], _where(addr), events["init_timeout"].get("seconds") or 0),
            "ray.init waits when this machine runs no raylet of the cluster (a driver must run on a node of it: "
            "`ray start --address=HEAD:PORT` here first, or use ray://HEAD:10001); else check the head (`ray "
            "status` on it) and its GCS port, or give a busy cluster a longer --timeout", ev)]
    att = events.get("attached")
    if not att:
        step = (events.get("step") or {}).get("name")
        ev["stderr_tail"] = stderr_tail[-1500:]
        return [failed("attaching to %s (from %s) %s%s" % (addr["resolved"], _where(addr), probe_desc,
                                                          " in %s" % step if step else ""),
                       "ray.init waits when this machine runs no raylet of the cluster (a driver must run on a "
                       "node of it: `ray start --address=HEAD:PORT` here first, or use ray://HEAD:10001); else check "
                       "the head (`ray status` on it) and rerun with a longer --timeout if the cluster is busy", ev)]
    ev.update(ray_version=att.get("ray_version"), python=att.get("python"), gcs_address=att.get("gcs_address"))
    out.append(passed("attached to %s (from %s): Ray %s, Python %s" % (addr["resolved"], _where(addr),
                                                                       att.get("ray_version"), att.get("python")), ev))
    given = addr.get("given")
    if given not in (None, "auto"):
        vr = addr.get("verl_resolved")
        if vr is None:
            out.append(failed("verl's ray.init() on this machine would not attach to this cluster: RAY_ADDRESS is "
                              "unset and no state file names it, so it would start a new local Ray instance",
                              "export RAY_ADDRESS=%s in the job's environment before launching verl" % given, ev,
                              item="verl"))
        elif _norm(vr) != _norm(addr["resolved"]):
            out.append(failed("verl's ray.init() on this machine would attach to %s (from %s), not to the cluster "
                              "checked (%s)" % (vr, addr.get("verl_source"), addr["resolved"]),
                              "export RAY_ADDRESS=%s in the job's environment before launching verl" % given, ev,
                              item="verl"))
        else:
            out.append(passed("verl's ray.init() on this machine attaches to the same cluster (from %s)" %
                              addr.get("verl_source"), ev, item="verl"))
    refused = events.get("init_kwargs_refused")
    if refused:
        keys = ", ".join("ray_kwargs.ray_init.%s=%s" % kv for kv in sorted(refused.get("kwargs", {}).items()))
        out.append(failed("Ray refuses verl's ray.init arguments when attaching to a running cluster (%s): %s" % (
            keys, refused.get("message")), "leave ray_kwargs.ray_init.num_cpus null when the job attaches to a "
            "running cluster; set each node's CPUs with `ray start --num-cpus=N` instead", refused, item="ray-init"))
    return out


def _norm(addr: Optional[str]) -> str:
    return (addr or "").replace("ray://", "").replace("localhost", "127.0.0.1")


def cpu_outcomes(events: Dict[str, Any], nodes: Sequence[NodeInfo], node_out: Dict[str, Dict[str, Any]],
                 launch: Optional[Dict[str, Any]]) -> List[Outcome]:
    """CPUs Ray advertises vs the CPUs the cgroup quota and affinity mask allow (reference case 21,
    verl#523: more Ray workers than usable CPUs fail with "Unable to register worker with raylet").

    Without a cluster (verl's ray.init() would start a local instance), Ray's own CPU count on this
    machine and the launch's ``ray_kwargs.ray_init.num_cpus`` are compared with the usable CPUs; on
    a cluster, each node's advertised ``CPU`` resource with what its task measured.
    """
    out: List[Outcome] = []
    key = (launch or {}).get("num_cpus_key") or "ray_kwargs.ray_init.num_cpus"
    attached = "attached" in events
    local = events.get("local_cpus") or {}
    mach = local.get("machine") or {}
    if not attached and local and (events.get("address") or {}).get("resolved") is None:
        ray_n, usable = local.get("ray_num_cpus"), mach.get("usable")
        set_n = (launch or {}).get("num_cpus")
        ev = {"ray_num_cpus": ray_n, "machine": mach, key: set_n}
        if ray_n and usable:
            if set_n is None and ray_n > usable:
                out.append(failed("a local Ray instance would advertise %s CPUs but only %d are usable here (%s); "
                                  "workers beyond them fail to register with the raylet" % (
                                      ray_n, usable, _limited_by(mach)), "%s=%d" % (key, usable), ev, item="local"))
            elif set_n is not None and float(set_n) > usable:
                out.append(failed("%s=%s but only %d CPUs are usable here (%s)" % (key, set_n, usable, _limited_by(mach)),
                                  "%s=%d" % (key, usable), ev, item="local"))
            else:
                out.append(passed("a local Ray instance would use %s CPUs; %d usable" % (set_n or ray_n, usable), ev,
                                  item="local"))
    for n in nodes:
        res = node_out.get(n["node_id"]) or {}
        cpus = ((res.get("result") or {}).get("cpus")) or {}
        adv = (n.get("resources") or {}).get("CPU")
        usable = cpus.get("usable")
        if not res.get("ok") or not usable or adv is None:
            continue
        ev = {"advertised_cpus": adv, "cpus": cpus}
        if adv > usable:
            out.append(warned("%s advertises %g CPUs to Ray but its cgroup/affinity allow %d (%s): Ray starts more "
                              "workers than can run, and workers may fail to register with the raylet" % (
                                  n.name, adv, usable, _limited_by(cpus)),
                              "restart that node's raylet with `ray start --num-cpus=%d ...`" % usable, ev,
                              item=n["label"]))
    return out


def _limited_by(c: Dict[str, Any]) -> str:
    parts = ["%s logical" % c.get("logical")]
    if c.get("affinity") is not None:
        parts.append("affinity %s" % c["affinity"])
    if c.get("cgroup_quota") is not None:
        parts.append("cgroup quota %g" % c["cgroup_quota"])
    return ", ".join(parts)


def node_facts(res: Dict[str, Any]) -> Dict[str, Any]:
    """The facts compared across nodes, from one node task's result: ``python``, ``torch``,
    ``torch_cuda``, ``nccl``, ``cudnn`` (from the node report's gpu.torch row), ``driver`` and
    ``gpus`` (its NVML snapshot), and ``dists`` (name -> version of every distribution)."""
    r = res.get("result") or {}
    doc = r.get("report") or {}
    facts: Dict[str, Any] = {"python": r.get("python_version"), "dists": dict(r.get("dists") or {})}
    facts["torch"] = facts["dists"].get("torch")
    for row in doc.get("results") or []:
        if row.get("id") == "gpu.torch":
            e = row.get("evidence") or {}
            facts.update(torch=e.get("torch") or facts["torch"], torch_cuda=e.get("cuda"), nccl=e.get("nccl"),
                         cudnn=e.get("cudnn"))
    nvml = (doc.get("machine") or {}).get("nvml") or {}
    if nvml.get("driver"):
        facts["driver"] = nvml.get("driver")
    names = [d.get("name") for d in nvml.get("devices") or [] if d.get("name")]
    if names:
        facts["gpus"] = ", ".join("%dx %s" % (names.count(x), x) for x in sorted(set(names)))
    return facts


def drift_outcomes(nodes: Sequence[NodeInfo], node_out: Dict[str, Dict[str, Any]]) -> List[Outcome]:
    """Every fact and distribution that differs between the nodes that answered: one FAIL each,
    naming the nodes that hold each value (``absent`` where a node lacks the distribution)."""
    facts = {}
    for n in nodes:
        res = node_out.get(n["node_id"]) or {}
        if res.get("ok"):
            facts[n["label"]] = node_facts(res)
    if len(facts) < 2:
        return [skipped("fewer than 2 nodes answered: nothing to compare", ["cluster.nodes"])]
    out: List[Outcome] = []
    labels = sorted(facts)

    def differ(item: str, what: str, values: Dict[str, Any], fix: str) -> None:
        groups: Dict[str, List[str]] = {}
        for lab in labels:
            groups.setdefault("absent" if values.get(lab) is None else str(values[lab]), []).append(lab)
        if len(groups) < 2:
            return
        shown = "; ".join("%s on %s" % (v, ", ".join(ls)) for v, ls in sorted(groups.items(), key=lambda g: -len(g[1])))
        out.append(failed("%s differs between nodes: %s" % (what, shown), fix, {"values": groups}, item=item))

    for key, what in FACT_LABELS:
        if key == "torch":
            continue  # compared as a distribution (its version carries the build: +cpu, +cu126)
        vals = {lab: facts[lab].get(key) for lab in labels}
        if all(v is None for v in vals.values()):
            continue
        fix = {"driver": "install the same driver branch on every node (the job's CUDA needs the oldest one)",
               "gpus": "use one GPU model per job, or split the nodes into separate clusters; verl shards "
                       "evenly, so the slowest/smallest GPU sets the pace and the memory limit",
               "python": "build every node's environment from one lock (preflight spec / install)"}.get(
            key, "install the same torch build on every node (preflight spec writes one lock for all)")
        differ(key, what, vals, fix)
    names = sorted(set(k for lab in labels for k in facts[lab]["dists"]),
                   key=lambda k: (k not in KEY_DISTS, KEY_DISTS.index(k) if k in KEY_DISTS else 0, k))
    for name in names:
        vals = {lab: facts[lab]["dists"].get(name) for lab in labels}
        differ(name, "%s" % name, vals, "install %s from one lock on every node (preflight spec, then preflight "
                                        "install with the same lock)" % name)
    if not out:
        out.append(passed("%d nodes: same Python, packages (%d distributions)%s" % (
            len(labels), len(facts[labels[0]]["dists"]),
            ", GPUs and driver" if facts[labels[0]].get("driver") else ""), {"nodes": labels}))
    return out


def verl_pools(nnodes: int, n_gpus_per_node: int, bundle_cpus: int = 1) -> List[Dict[str, Any]]:
    """verl's global resource pool as placement groups: ``nnodes`` groups of ``n_gpus_per_node``
    bundles ``{"CPU": bundle_cpus, "GPU": 1}``, strategy STRICT_PACK (verl's RayResourcePool; its
    max_colocate_count is the bundle's CPUs: 1 before verl 0.7.1, 3 from it, matrices/verl_rules.toml
    ``[[ray_reserve]]``)."""
    bundle = {"CPU": bundle_cpus, "GPU": 1}
    return [{"name": "global_pool", "strategy": "STRICT_PACK",
             "groups": [[dict(bundle) for _ in range(n_gpus_per_node)] for _ in range(nnodes)]}]


def best_fit(gpus_of: Dict[str, float], nnodes: int, per: int) -> Optional[Tuple[int, int]]:
    """The launch (nodes, GPUs per node) that Ray can place on nodes offering ``gpus_of`` (label ->
    available GPUs) with the most GPUs, never more GPUs per node than asked; ties keep
    ``n_gpus_per_node``, then the node count nearest the one asked. None when no node has a GPU."""
    best = None
    for k in range(1, per + 1):
        m = sum(1 for g in gpus_of.values() if g >= k)
        if m < 1:
            continue
        key = (m * k, k == per, -abs(m - nnodes))
        if best is None or key > best[0]:
            best = (key, (m, k))
    return best[1] if best else None


def resource_outcomes(events: Dict[str, Any], nodes: Sequence[NodeInfo], launch: Dict[str, Any],
                      pools: Sequence[Dict[str, Any]]) -> List[Outcome]:
    """A launch's GPUs against Ray's numbers: the total (verl's own check and message), the nodes
    that each offer ``n_gpus_per_node``, and verl's pool placed by Ray. Each FAIL has the smallest
    change of the launch that fits, or the nodes to add."""
    res = events.get("resources") or {}
    nn, per = int(launch["nnodes"]), int(launch["n_gpus_per_node"])
    want = nn * per
    avail = float((res.get("available") or {}).get("GPU", 0) or 0)
    total = float((res.get("cluster") or {}).get("GPU", 0) or 0)
    per_node = res.get("available_per_node") or {}
    alive = [n for n in nodes if n.get("alive")]
    gpus_of = {n["label"]: float((per_node.get(n["node_id"]) or n.get("resources") or {}).get("GPU", 0) or 0)
               for n in alive}
    ev = {"trainer.nnodes": nn, "trainer.n_gpus_per_node": per, "desired_gpus": want,
          "ray_available_gpus": avail, "ray_cluster_gpus": total, "available_gpus_per_node": gpus_of}
    out: List[Outcome] = []
    fit = best_fit(gpus_of, nn, per)
    nodes_short = max(0, nn - sum(1 for g in gpus_of.values() if g >= per))
    change = ("trainer.nnodes=%d trainer.n_gpus_per_node=%d (%d GPUs, the most this cluster places that way)" % (
        fit[0], fit[1], fit[0] * fit[1]) if fit else "no launch fits: the cluster offers no GPU")
    grow = "or keep the launch and add %d node(s) with %d free GPUs each (`ray start --address=HEAD:PORT " \
           "--num-gpus=%d`)" % (max(nodes_short, -(-int(want - avail) // per) if avail < want else 0), per, per)
    if avail < want:
        out.append(failed("Total available GPUs %g is less than total desired GPUs %d (trainer.nnodes=%d x "
                          "trainer.n_gpus_per_node=%d; Ray: %g GPUs in the cluster, %g available)" % (
                              avail, want, nn, per, total, avail), "%s; %s" % (change, grow), ev, item="gpus"))
    else:
        out.append(passed("%d GPUs wanted (%d x %d), Ray has %g available of %g" % (want, nn, per, avail, total), ev,
                          item="gpus"))
    enough = sorted([lab for lab, g in gpus_of.items() if g >= per])
    if len(enough) < nn:
        out.append(failed("%d node(s) offer trainer.n_gpus_per_node=%d GPUs, trainer.nnodes=%d needs %d (available "
                          "GPUs per node: %s; %d alive node(s))" % (
                              len(enough), per, nn, nn, ", ".join("%s %g" % kv for kv in sorted(gpus_of.items())),
                              len(alive)), "%s; %s" % (change, grow), ev, item="nodes"))
    else:
        out.append(passed("%d node(s) offer %d GPUs each: %s" % (len(enough), per, ", ".join(enough)), ev,
                          item="nodes"))
    got = {p.get("name"): p for p in [events[k] for k in events if k.startswith("pool:")]}
    for pool in pools:
        p = got.get(pool["name"])
        pev = dict(ev, strategy=pool["strategy"], bundles_per_group=len(pool["groups"][0]) if pool["groups"] else 0,
                   groups=len(pool["groups"]), bundle=pool["groups"][0][0] if pool["groups"] and pool["groups"][0] else {})
        if p is None:
            out.append(skipped("verl's resource pool was not tried (the cluster run stopped before it)", (), pev,
                               item="pool"))
        elif p.get("fits"):
            out.append(passed("verl's resource pool fits: Ray placed %d STRICT_PACK placement group(s) of %d bundles "
                              "%s" % (len(pool["groups"]), per, _bundle(pev["bundle"])), pev, item="pool"))
        else:
            bc = int(pev["bundle"].get("CPU", 1) or 0)
            out.append(failed("Ray could not place verl's resource pool: %d of %d STRICT_PACK placement group(s) of "
                              "%d bundles %s (one per node) within the wait; verl would hang in "
                              "'Waiting for creating a placement group'" % (p.get("placed", 0), len(pool["groups"]), per,
                                                                            _bundle(pev["bundle"])),
                              "make every node offer %d GPUs and %d CPUs free (`ray status` shows what is used), or "
                              "lower trainer.n_gpus_per_node / trainer.nnodes" % (per, per * bc), pev, item="pool"))
    return out


def _bundle(b: Dict[str, Any]) -> str:
    return "{%s}" % ", ".join("%s: %g" % (k, v) for k, v in sorted(b.items()))


def cpu_reserve_outcomes(events: Dict[str, Any], launch: Dict[str, Any]) -> List[Outcome]:
    """The CPUs the launch reserves in Ray against the CPUs Ray has available (verl#7398, #7656):
    ``launch["reserve"]`` is {bundle_cpus, task_runner_cpus, transfer_queue (bool), units,
    controller_cpus, release, source}; the count is the pool's bundles x bundle_cpus, the TaskRunner
    and, with TransferQueue on, its storage units and controller (1 CPU each). Above what Ray
    offers, the placement groups or actors stay PENDING with no error. [] without that data."""
    rv = launch.get("reserve")
    res = (events.get("resources") or {})
    if not rv or "available" not in res:
        return []
    avail = float((res.get("available") or {}).get("CPU", 0) or 0)
    bundles = int(launch["nnodes"]) * int(launch["n_gpus_per_node"])
    bc = int(rv.get("bundle_cpus") or 1)
    parts = [("TaskRunner %d" % int(rv.get("task_runner_cpus") or 0), int(rv.get("task_runner_cpus") or 0))]
    units_key = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
    tq = 0
    if rv.get("transfer_queue"):
        units, ctl = int(rv.get("units") or 0), int(rv.get("controller_cpus") or 0)
        tq = units + ctl
        parts.append(("TransferQueue %d (SimpleStorage %d + controller %d)" % (tq, units, ctl), tq))
    parts.append(("%d GPU bundle(s) x %d = %d" % (bundles, bc, bundles * bc), bundles * bc))
    need = sum(n for _w, n in parts)
    ev = {"reserved_cpus": need, "ray_available_cpus": avail, "parts": [w for w, _n in parts],
          "release": rv.get("release"), "source": rv.get("source")}
    what = ", ".join(w for w, _n in parts)
    if need <= avail:
        return [passed("the launch reserves %d CPUs in Ray (%s); Ray has %g available" % (need, what, avail), ev,
                       item="cpus")]
    fixes = []
    if tq and rv.get("units"):
        room = int(avail) - (need - int(rv.get("units") or 0))
        if room >= 1:
            fixes.append("set %s=%d (1 CPU each)" % (units_key, room))
        else:
            fixes.append("set transfer_queue.enable=False (it reserves %d CPUs)" % tq)
    fixes.append("start Ray with at least %d CPUs (`ray start --num-cpus=%d`, or %s)" % (
        need, need, launch.get("num_cpus_key") or "ray_kwargs.ray_init.num_cpus"))
    return [failed("the launch reserves at least %d CPUs in Ray (%s; verl %s) but Ray has %g CPU(s) available: the "
                   "placement groups or actors stay PENDING with no error" % (need, what, rv.get("release"), avail),
                   ", or ".join(fixes), ev, item="cpus")]


def collective_outcome(ev_c: Optional[Dict[str, Any]], nodes: Sequence[NodeInfo], timeout: float) -> Outcome:
    """The cross-node all_reduce: one rank per GPU (per node with gloo), ranks placed by a SPREAD
    placement group; the sum checked, algbw/busbw per size (nccl-tests convention), the NCCL
    lines that name the interface and transport, the NCCL variables in effect on each rank."""
    from .checks.nccl import busbw

    if ev_c is None:
        return errored("the collective run did not report (the cluster run ended before it)")
    by_id = {n["node_id"]: n for n in nodes}
    backend, world = ev_c.get("backend"), ev_c.get("world")
    ev: Dict[str, Any] = {"backend": backend, "world_size": world}
    if not ev_c.get("ok"):
        if ev_c.get("stage") == "world":
            return skipped("no cross-node all_reduce: %s rank(s) possible (%s GPU(s), %s alive node(s) for gloo)" % (
                world, ev_c.get("gpus"), ev_c.get("nodes")), ["cluster.nodes"], ev)
        if ev_c.get("stage") == "placement_group":
            return failed("Ray could not place %d collective ranks (bundle %s, SPREAD) in time" % (
                world, ev_c.get("bundle")), "free the GPUs (`ray status`), or pass --world with fewer ranks", ev)
        return failed("only %s of %d collective rank actors started" % (ev_c.get("started"), world),
                      "check the nodes' raylet logs (<ray temp dir>/session_latest/logs)", ev)
    where = ev_c.get("where") or []
    ranks = ev_c.get("ranks") or []

    def who(i: int) -> str:
        w = where[i] if i < len(where) else {}
        n = by_id.get(w.get("node_id"))
        gpu = (" GPU %s" % ",".join(w.get("gpu_ids"))) if w.get("gpu_ids") else ""
        return "rank %d on %s%s" % (i, n.name if n else w.get("ip"), gpu)

    ev["ranks"] = [{"rank": i, "node": (by_id.get(w.get("node_id")) or NodeInfo()).get("label"), "ip": w.get("ip"),
                    "gpu_ids": w.get("gpu_ids"), "nccl_env": w.get("nccl_env")} for i, w in enumerate(where)]
    ev["nccl_env_driver"] = ev_c.get("env")
    lines = []
    for i, r in enumerate(ranks):
        for l in r.get("nccl_lines") or []:
            if any(s in l for s in ("NET/", " via ", "Using network", "IFNAME", "NCCL_IB", " WARN ", "Bootstrap")):
                lines.append("[rank %d] %s" % (i, l))
    ev["nccl_lines"] = lines[:60]
    ev["nodes_used"] = sorted(set(x["node"] for x in ev["ranks"] if x.get("node")))
    steps = {i: ([e for e in r.get("events") or [] if e.get("event") == "step"] or [{}])[-1].get("name")
             for i, r in enumerate(ranks)}
    done = [any(e.get("event") == "done" for e in r.get("events") or []) for r in ranks]
    if not all(done):
        stuck = [i for i, d in enumerate(done) if not d]
        hung = [i for i in stuck if ranks[i].get("timed_out")]
        ev["failed_ranks"] = {str(i): {"last_step": steps[i], "tail": (ranks[i].get("tail") or "")[-600:]}
                              for i in stuck}
        if hung:
            msg = "%s: %s did not finish within %.0f s (killed)" % (
                backend.upper(), "; ".join("%s in %s" % (who(i), steps[i] or "startup") for i in hung), timeout)
            crashed = [i for i in stuck if i not in hung]
            if crashed:
                msg += "; meanwhile %s failed" % ", ".join(who(i) for i in crashed)
        else:
            i = stuck[0]
            tail = [l for l in (ranks[i].get("tail") or "").splitlines() if l.strip()]
            msg = "%s failed in %s: %s" % (who(i), steps[i] or "startup", (tail[-1] if tail else "no output")[:300])
        return failed(msg, "the ranks must reach each other's addresses (%s) on the rendezvous port and NCCL's "
                           "ports: check firewalls between the nodes, and NCCL_SOCKET_IFNAME (the interface NCCL "
                           "picks is in the NCCL lines); rerun with NCCL_DEBUG=INFO" % ", ".join(
                               sorted(set(w.get("ip") or "?" for w in where))), ev)
    sizes: List[Dict[str, Any]] = []
    bad = []
    init = max((([e for e in r["events"] if e.get("event") == "init"] or [{}])[-1].get("seconds") or 0) for r in ranks)
    per_rank = [[e for e in r["events"] if e.get("event") == "size"] for r in ranks]
    for idx in range(min(len(p) for p in per_rank)):
        row = [p[idx] for p in per_rank]
        t = max(e["seconds_per_op"] for e in row)
        alg, bus = busbw(row[0]["bytes"], t, world)
        sizes.append({"size_mib": row[0]["bytes"] / float(1 << 20), "time_us": round(t * 1e6, 1),
                      "algbw_gbps": round(alg, 3), "busbw_gbps": round(bus, 3), "iters": row[0].get("iters")})
        bad += ["%s at %d bytes: got %s, expected %s" % (who(r), e["bytes"], e["got"], e["want"])
                for r, e in enumerate(row) if not e.get("ok")]
    ev.update(init_s=round(init, 3), sizes=sizes,
              nccl_version=([e for e in ranks[0]["events"] if e.get("event") == "init"] or [{}])[-1].get("nccl"))
    if bad:
        return failed("cross-node all_reduce returned wrong sums: %s" % "; ".join(bad[:3]),
                      "a wrong result with no error means bad hardware or a broken NCCL/driver install: drain the "
                      "nodes and run nccl-tests (all_reduce_perf -c 1) between them", ev)
    last = sizes[-1] if sizes else {}
    transport = _transport(lines)
    return passed("%d %s ranks on %d node(s) (%s): sums correct; init %.2f s; %g MiB busbw %.2f GB/s%s" % (
        world, backend, len(ev["nodes_used"]), ", ".join(ev["nodes_used"]), init, last.get("size_mib", 0),
        last.get("busbw_gbps", 0), "; " + transport if transport else ""), ev)


def _transport(lines: Sequence[str]) -> str:
    for l in lines:
        m = re.search(r"NET/(\w+)\s*:\s*Using\s*(.*)", l)
        if m:
            return "NCCL NET/%s %s" % (m.group(1), m.group(2)[:80])
    for l in lines:
        m = re.search(r" via (\S+)", l)
        if m:
            return "NCCL via %s" % m.group(1)
    return ""


def node_results(n: NodeInfo, res: Optional[Dict[str, Any]], timeout: float) -> Tuple[List[Result], Outcome]:
    """The node's own report rows, ids prefixed with its label (``n1.host.cpu``), and one summary
    outcome for the cluster stage (ready, not ready, no answer, died)."""
    stage = "node %s" % n.name
    if res is None or res.get("timed_out"):
        return [], failed("%s did not answer within %.0f s (its task was cancelled)" % (n.name, timeout),
                          "check the node (`ray status`; its raylet log); a node that answers slowly needs a "
                          "longer --node-timeout", {"node_id": n["node_id"]}, item=n["label"])
    if not res.get("ok"):
        return [], failed("%s failed during its check: %s: %s" % (n.name, res.get("error_type"),
                                                                   _first_line(res.get("error") or "", 240)),
                          "the node or its worker died (NodeDiedError, WorkerCrashedError): check its raylet log and "
                          "`ray status`; restart the node's raylet",
                          {"node_id": n["node_id"], "error": (res.get("error") or "")[-1500:]}, item=n["label"])
    r = res["result"]
    doc = r.get("report")
    ev = {"node_id": n["node_id"], "python": r.get("python"), "hostname": r.get("hostname"),
          "gpu_ids": r.get("gpu_ids"), "seconds": r.get("seconds")}
    if not doc:
        ev["output_tail"] = r.get("output_tail")
        return [], failed("%s: the checker %s and wrote no report" % (
            n.name, "ran out of time" if r.get("timed_out") else "exited with %s" % r.get("rc")),
            "run `python3 preflight.pyz check` on that node to see the error", ev, item=n["label"])
    tmp_pyz = r.get("pyz")

    def here(text: Optional[str]) -> Optional[str]:  # the node's copy of the zipapp is gone after the run
        return text.replace(tmp_pyz, "preflight.pyz") if text and tmp_pyz else text

    rows = []
    for row in doc.get("results") or []:
        rows.append(Result(id="%s.%s" % (n["label"], row["id"]), stage=stage, status=Status(row["status"]),
                           message=here(row.get("message")) or "", evidence=row.get("evidence") or {},
                           fix=here(row.get("fix")), caused_by=["%s.%s" % (n["label"], c) for c in
                                                                 row.get("caused_by") or []],
                           duration_s=float(row.get("duration_s") or 0)))
    c = doc.get("summary") or {}
    ev["summary"] = c
    if doc.get("ready"):
        return rows, passed("%s ready: %d passed, %d warnings (%s, %.0f s)" % (
            n.name, c.get("pass", 0), c.get("warn", 0), r.get("python"), r.get("seconds") or 0), ev, item=n["label"])
    bad = [row for row in rows if row.status.blocks]
    return rows, failed("%s not ready: %d row(s) failed: %s" % (n.name, len(bad), ", ".join(b.id for b in bad[:6])
                                                                + (", ..." if len(bad) > 6 else "")),
                        "see the rows of %s below" % n["label"], ev, item=n["label"])


def to_results(check_id: str, outcomes: Sequence[Outcome], stage: str = "cluster") -> List[Result]:
    """Outcomes of one cluster check as report rows ``cluster.<check>[.<item>]``."""
    rows = []
    for o in outcomes:
        rid = "%s.%s%s" % (stage, check_id, "." + o.item if o.item else "")
        rows.append(Result(id=rid, stage=stage, status=o.status, message=o.message, evidence=o.evidence, fix=o.fix,
                           caused_by=list(o.caused_by)))
    return rows
