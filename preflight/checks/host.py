"""host stage: OS, glibc, CPUs, RAM, /dev/shm, disk for models and caches, limits, container.

Reads the machine the checker runs on (the target interpreter runs on the same machine).
Thresholds come from matrices/host.toml.
"""

from .base import CheckResult, Context, check, failed, passed, warned

GIB = 1 << 30
MIB = 1 << 20


def _gib(n):
    return None if n is None else round(n / GIB, 1)


@check("host.os")
def os_info(ctx: Context) -> CheckResult:
    """Linux, its distribution, kernel, architecture, C library and container."""
    h = ctx.host()
    ev = {"os": h["os"], "kernel": h["kernel"], "arch": h["arch"], "glibc": h["glibc"],
          "container": h["container"]}
    if h["os"]["system"] != "Linux":
        return failed("%s is not Linux: verl, NCCL and vLLM's CUDA builds run on Linux only" % h["os"]["system"],
                      "run verl on a Linux machine (or WSL2 with the NVIDIA driver)", ev)
    name = h["os"]["name"] or "Linux"
    where = " in a %s container" % h["container"] if h["container"] else ""
    return passed("%s, kernel %s, %s, %s%s" % (name, h["kernel"], h["arch"], h["glibc"] or "libc unknown", where), ev)


@check("host.glibc")
def glibc(ctx: Context) -> CheckResult:
    """glibc new enough for the manylinux wheels of torch and vLLM (matrices/host.toml)."""
    h = ctx.host()
    g = h["glibc"] or ""
    ev = {"glibc": g}
    parts = g.split()
    if len(parts) != 2 or parts[0] != "glibc":
        return warned("C library is %r, not glibc: the manylinux wheels of torch and vLLM need glibc" % (g or "unknown"),
                      "use a glibc-based distribution or image (Ubuntu, Debian, RHEL), not Alpine/musl", ev)
    try:
        ver = tuple(int(x) for x in parts[1].split(".")[:2])
    except ValueError:  # a version that cannot be read is not known to be new enough
        return warned("glibc version %r cannot be read, so it is not known to meet manylinux" % parts[1],
                      "check it with: ldd --version", ev)
    th = ctx.matrix.host()["glibc"]
    ev.update(glibc_version=parts[1], min=th["min"], source=th["source"])
    need = tuple(int(x) for x in str(th["min"]).split("."))
    if ver < need:
        return failed("glibc %s is older than %s, which current torch wheels (manylinux_%s) require" % (
            parts[1], th["min"], str(th["min"]).replace(".", "_")),
            "upgrade the OS (Ubuntu 20.04+, RHEL 8+) or run inside a newer container image", ev)
    return passed("glibc %s (manylinux_%s wheels install)" % (parts[1], str(th["min"]).replace(".", "_")), ev)


@check("host.cpu")
def cpu(ctx: Context) -> CheckResult:
    """Usable CPUs (affinity and cgroup quota applied)."""
    c = ctx.host()["cpu"]
    ev = dict(c)
    usable = c.get("usable")
    if usable is None:  # a fact that cannot be read is not a pass
        return warned("CPU count unknown: affinity, cgroup quota and the CPU count could not be read",
                      "check that /proc and /sys/fs/cgroup are visible to this process (nproc shows the count)", ev)
    limited = usable < (c.get("logical") or usable)
    msg = "%d usable CPUs" % usable + (" (of %d: limited by %s)" % (
        c["logical"], "cgroup quota" if c.get("cgroup_quota") and c["cgroup_quota"] < c["logical"] else "affinity")
        if limited else "")
    if usable < 4:
        return warned(msg + ": Ray, dataloaders and the vLLM engine each want cores; expect slow steps",
                      "give the job more CPUs (e.g. docker --cpus, Slurm --cpus-per-task >= 8 per GPU)", ev)
    return passed(msg, ev)


@check("host.memory")
def memory(ctx: Context) -> CheckResult:
    """RAM (or the cgroup memory limit) against the floor in matrices/host.toml."""
    m = ctx.host()["memory"]
    th = ctx.matrix.host()["ram"]
    total = m.get("total")
    limit = m.get("cgroup_limit")
    eff = min(x for x in (total, limit) if x) if (total or limit) else None
    ev = {"total_gib": _gib(total), "available_gib": _gib(m.get("available")),
          "cgroup_limit_gib": _gib(limit), "via": m.get("via"), "threshold_gib": th["warn_below_gib"]}
    if eff is None:  # /proc hidden or unreadable: not known to be enough
        return warned("RAM size unknown: neither /proc/meminfo nor the cgroup memory limit could be read",
                      "check that /proc is mounted and readable here (free -g shows the size)", ev)
    msg = "%.1f GiB RAM" % (eff / GIB) + (" (cgroup limit)" if limit and limit == eff else "")
    if eff < th["warn_below_gib"] * GIB:
        return warned(msg + ", below %d GiB: model, optimizer offload and Ray's object store live here" % th["warn_below_gib"],
                      "use a host with more memory or raise the container's memory limit", ev)
    return passed(msg, ev)


@check("host.shm")
def shm(ctx: Context) -> CheckResult:
    """/dev/shm size and free space (Docker's 64 MiB default breaks NCCL and vLLM)."""
    s = ctx.host()["shm"]
    th = ctx.matrix.host()["shm"]
    ev = {"path": s["path"], "total_mib": None if s["total"] is None else s["total"] // MIB,
          "free_mib": None if s["free"] is None else s["free"] // MIB,
          "fail_below_mib": th["fail_below_mib"], "warn_below_mib": th["warn_below_mib"], "source": th["source"]}
    fix = ("start the container with --ipc=host or --shm-size=16g (Kubernetes: mount an emptyDir with "
           "medium: Memory at /dev/shm)")
    if s["total"] is None:
        return failed("/dev/shm is missing: NCCL's shared-memory transport and vLLM need it", fix, ev)
    total_mib = s["total"] // MIB
    if total_mib < th["fail_below_mib"]:
        what = " (Docker's default)" if total_mib <= th["docker_default_mib"] else ""
        return failed("/dev/shm is %d MiB%s: NCCL fails with 'Error while creating shared memory segment' "
                      "and vLLM workers crash" % (total_mib, what), fix, ev)
    if s["free"] is not None and s["free"] // MIB < th["fail_below_mib"]:
        return failed("/dev/shm has only %d MiB free of %d MiB" % (s["free"] // MIB, total_mib),
                      "remove stale files from /dev/shm (leftover nccl-* or torch_* segments) or enlarge it: " + fix, ev)
    if total_mib < th["warn_below_mib"]:
        return warned("/dev/shm is %d MiB: enough to start, tight for several GPUs" % total_mib, fix, ev)
    return passed("/dev/shm %.1f GiB" % (s["total"] / GIB), ev)


@check("host.disk")
def disk(ctx: Context) -> CheckResult:
    """Free space where models and caches go (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or ~/.cache/huggingface),
    and that it is a directory this user can write (or create)."""
    d = ctx.host()["disk"]
    th = ctx.matrix.host()["disk"]
    ev = {"cache_dir": d["path"], "decided_by": d["decided_by"], "filesystem_of": d["checked"],
          "free_gib": _gib(d["free"]), "total_gib": _gib(d["total"]),
          "warn_below_gib": th["warn_below_gib"], "fail_below_gib": th["fail_below_gib"]}
    if d.get("unusable"):
        return failed("the model cache cannot be used: %s (chosen by %s)" % (d["unusable"], d["decided_by"]),
                      "set HF_HOME (or HF_HUB_CACHE) to a directory you can write on a large disk, e.g. "
                      "export HF_HOME=/data/$USER/hf", ev)
    if d["free"] is None:
        return warned("cannot read free space for %s" % d["path"],
                      "set HF_HOME to a writable directory on a large disk", ev)
    free = d["free"] / GIB
    fix = "free space there or point HF_HOME (models, datasets) at a larger disk"
    if free < th["fail_below_gib"]:
        return failed("only %.1f GiB free where models and caches go (%s)" % (free, d["path"]), fix, ev)
    if free < th["warn_below_gib"]:
        return warned("%.1f GiB free where models and caches go (%s): a 7B checkpoint with optimizer state "
                      "needs far more" % (free, d["path"]), fix, ev)
    return passed("%.0f GiB free for models and caches (%s)" % (free, d["path"]), ev)


@check("host.limits")
def limits(ctx: Context) -> CheckResult:
    """Open-files and locked-memory limits."""
    lim = ctx.host()["limits"]
    th = ctx.matrix.host()["limits"]
    ev = dict(lim)
    ev["source"] = th["source"]
    problems, fixes = [], []
    if not lim.get("nofile") or not lim.get("memlock"):  # not read (no resource module): not "unlimited"
        return warned("open-files and locked-memory limits could not be read", "check them with: ulimit -n; ulimit -l", ev)
    nofile = (lim.get("nofile") or {}).get("soft")
    if nofile is not None and nofile < th["nofile_warn_below"]:
        problems.append("open files limit %d < %d" % (nofile, th["nofile_warn_below"]))
        fixes.append("ulimit -n 65536 (or LimitNOFILE / docker --ulimit nofile=65536:65536)")
    memlock = (lim.get("memlock") or {}).get("soft")
    if memlock is not None and memlock < th["memlock_warn_below_kib"] * 1024:
        problems.append("locked-memory limit %d KiB (RDMA/NCCL pin memory)" % (memlock // 1024))
        fixes.append("ulimit -l unlimited (docker --ulimit memlock=-1)")
    if problems:
        return warned("; ".join(problems), "; ".join(fixes), ev)
    return passed("open files %s, locked memory %s" % (
        nofile if nofile is not None else "unlimited",
        "unlimited" if memlock is None else "%d KiB" % (memlock // 1024)), ev)
