"""Host facts: OS, kernel, glibc, CPUs, memory, /dev/shm, disk, limits, container.

Each fact has a pure parser (``parse_*``, tested on captured text) and a thin reader that takes
the filesystem root it inspects (``root="/"``), so tests point it at a fake tree. Readers return
None for what they cannot read instead of raising. psutil is used when importable (it is
optional: the zipapp carries only pure-Python code), else /proc and os.
"""

import os
import platform
from typing import Any, Dict, Optional, Tuple

__all__ = ["parse_os_release", "parse_meminfo", "parse_cpu_max", "parse_cgroup_memory",
           "detect_container", "read_host", "free_bytes", "nearest_existing"]


def parse_os_release(text: str) -> Dict[str, str]:
    """Key/value pairs of an os-release file (quotes removed)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip().strip('"').strip("'")
    return out


def parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo fields in bytes (``MemTotal``, ``MemAvailable``...)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            try:
                n = int(parts[1])
            except ValueError:
                continue
            unit = parts[2].lower() if len(parts) > 2 else ""
            out[parts[0][:-1]] = n * 1024 if unit == "kb" else n
    return out


def parse_cpu_max(text: str) -> Optional[float]:
    """CPUs allowed by a cgroup v2 ``cpu.max`` (``"200000 100000"`` -> 2.0); None if unlimited."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return int(parts[0]) / int(parts[1])
    except (ValueError, ZeroDivisionError):
        return None


def parse_cgroup_memory(text: str) -> Optional[int]:
    """Bytes allowed by cgroup ``memory.max`` / ``memory.limit_in_bytes``; None if unlimited."""
    t = text.strip()
    if not t or t == "max":
        return None
    try:
        n = int(t)
    except ValueError:
        return None
    return None if n >= (1 << 60) else n  # v1 writes a huge number for "no limit"


def detect_container(root: str = "/", environ: Optional[Dict[str, str]] = None) -> Optional[str]:
    """Name of the container runtime this process runs in (docker, podman, kubernetes, lxc,
    a generic 'container'), or None on bare metal / a VM."""
    env = environ if environ is not None else dict(os.environ)
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    if env.get("container"):
        return env["container"]
    try:
        with open(os.path.join(root, "proc/1/cgroup")) as fh:
            cg = fh.read()
        for name in ("docker", "kubepods", "containerd", "lxc", "podman"):
            if name in cg:
                return "kubernetes" if name == "kubepods" else name
    except OSError:
        pass
    return None


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def nearest_existing(path: str) -> str:
    """``path`` or its closest existing ancestor (where a cache dir will be created)."""
    p = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return p


def free_bytes(path: str) -> Tuple[Optional[int], Optional[int]]:
    """(free bytes for an unprivileged user, total bytes) of the filesystem holding ``path``."""
    try:
        st = os.statvfs(nearest_existing(path))
    except OSError:
        return None, None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def unusable_dir(path: str) -> Optional[str]:
    """None when ``path`` is a directory this process can write to, or can be created as one;
    else why not, one line. Proven by creating (and removing) a temporary entry: file modes are
    not enough (root ignores them; a read-only mount or a full quota does not show in them)."""
    import tempfile

    p = os.path.abspath(os.path.expanduser(path))
    base = nearest_existing(p)
    if not os.path.isdir(base):
        if base == p:
            return "%s is not a directory" % p
        return "%s cannot be created: %s is not a directory" % (p, base)
    try:
        made = tempfile.mkdtemp(prefix=".preflight-write-test-", dir=base)
        os.rmdir(made)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if base == p:
            return "%s is not writable (%s)" % (p, why)
        return "%s cannot be created: %s is not writable (%s)" % (p, base, why)
    return None


def _cpu_count(root: str) -> Dict[str, Any]:
    logical = os.cpu_count()
    try:
        affinity = len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        affinity = None
    quota = None
    text = _read(os.path.join(root, "sys/fs/cgroup/cpu.max"))
    if text is not None:
        quota = parse_cpu_max(text)
    else:
        q = _read(os.path.join(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
        p = _read(os.path.join(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us"))
        if q and p:
            try:
                if int(q) > 0:
                    quota = int(q) / int(p)
            except (ValueError, ZeroDivisionError):
                quota = None
    usable = min(x for x in (logical, affinity, quota) if x is not None) if logical else None
    return {"logical": logical, "affinity": affinity, "cgroup_quota": quota,
            "usable": max(1, int(usable)) if usable is not None else None}  # a 0.5-CPU quota still runs


def _memory(root: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    try:
        import psutil  # optional

        vm = psutil.virtual_memory()
        out.update(total=int(vm.total), available=int(vm.available), via="psutil")
    except Exception:
        mi = parse_meminfo(_read(os.path.join(root, "proc/meminfo")) or "")
        if mi:
            out.update(total=mi.get("MemTotal"), available=mi.get("MemAvailable"), via="/proc/meminfo")
    limit = None
    for rel in ("sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read(os.path.join(root, rel))
        if text is not None:
            limit = parse_cgroup_memory(text)
            break
    out["cgroup_limit"] = limit
    return out


def _limits() -> Dict[str, Any]:
    try:
        import resource
    except ImportError:  # pragma: no cover - non-Unix
        return {}

    def pair(which: int) -> Dict[str, Optional[int]]:
        soft, hard = resource.getrlimit(which)
        inf = resource.RLIM_INFINITY
        return {"soft": None if soft == inf else soft, "hard": None if hard == inf else hard}

    return {"nofile": pair(resource.RLIMIT_NOFILE), "memlock": pair(resource.RLIMIT_MEMLOCK)}


def cache_dir(environ: Optional[Dict[str, str]] = None) -> Tuple[str, str]:
    """(directory where Hugging Face models and caches go, which variable decided it)."""
    env = environ if environ is not None else dict(os.environ)
    for var in ("HF_HUB_CACHE", "HF_HOME"):
        if env.get(var):
            return env[var], var
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "huggingface"), "XDG_CACHE_HOME"
    return os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "default (~/.cache/huggingface)"


def read_host(root: str = "/", environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """All host facts as one JSON-ready dict (sizes in bytes). Never raises."""
    env = environ if environ is not None else dict(os.environ)
    osr = parse_os_release(_read(os.path.join(root, "etc/os-release")) or
                           _read(os.path.join(root, "usr/lib/os-release")) or "")
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.39"
    except (AttributeError, ValueError, OSError):
        glibc = None
    if not glibc:
        lib, ver = platform.libc_ver()
        glibc = ("%s %s" % (lib, ver)).strip() or None
    shm_free, shm_total = free_bytes(os.path.join(root, "dev/shm")) if os.path.isdir(
        os.path.join(root, "dev/shm")) else (None, None)
    cdir, cvar = cache_dir(env)
    disk_free, disk_total = free_bytes(cdir)
    return {
        "os": {"system": platform.system(), "name": osr.get("PRETTY_NAME") or osr.get("NAME"),
               "id": osr.get("ID"), "version_id": osr.get("VERSION_ID")},
        "kernel": platform.release(),
        "arch": platform.machine(),
        "glibc": glibc,
        "cpu": _cpu_count(root),
        "memory": _memory(root),
        "shm": {"path": "/dev/shm", "total": shm_total, "free": shm_free},
        "disk": {"path": cdir, "decided_by": cvar, "checked": nearest_existing(cdir),
                 "free": disk_free, "total": disk_total, "unusable": unusable_dir(cdir)},
        "limits": _limits(),
        "container": detect_container(root, env),
    }
