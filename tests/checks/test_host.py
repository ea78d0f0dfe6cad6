"""host stage: pure parsers on captured text, readers on a fake root, thresholds from the matrix."""

import os

from helpers import rows

from preflight.probes import host as h
from preflight.result import Status

MEMINFO = """MemTotal:       24576000 kB
MemFree:        20000000 kB
MemAvailable:   22000000 kB
"""


def test_parsers():
    assert h.parse_os_release('NAME="Ubuntu"\nVERSION_ID="24.04"\n# c\nPRETTY_NAME="Ubuntu 24.04.3 LTS"\n') == {
        "NAME": "Ubuntu", "VERSION_ID": "24.04", "PRETTY_NAME": "Ubuntu 24.04.3 LTS"}
    assert h.parse_meminfo(MEMINFO)["MemTotal"] == 24576000 * 1024
    assert h.parse_cpu_max("200000 100000") == 2.0
    assert h.parse_cpu_max("max 100000") is None
    assert h.parse_cgroup_memory("max\n") is None
    assert h.parse_cgroup_memory("9223372036854771712") is None
    assert h.parse_cgroup_memory("17179869184") == 16 << 30


def test_container_detection(tmp_path):
    assert h.detect_container(str(tmp_path), {}) is None
    (tmp_path / ".dockerenv").write_text("")
    assert h.detect_container(str(tmp_path), {}) == "docker"
    assert h.detect_container(str(tmp_path), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    os.remove(str(tmp_path / ".dockerenv"))
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/kubepods/besteffort/pod1\n")
    assert h.detect_container(str(tmp_path), {}) == "kubernetes"


def test_read_host_on_fake_root(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text('PRETTY_NAME="Test OS 1"\nID=test\n')
    (tmp_path / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "cpu.max").write_text("100000 100000\n")
    (tmp_path / "sys" / "fs" / "cgroup" / "memory.max").write_text("8589934592\n")
    facts = h.read_host(str(tmp_path), {"HF_HOME": str(tmp_path / "hf")})
    assert facts["os"]["name"] == "Test OS 1"
    assert facts["cpu"]["usable"] == 1 and facts["cpu"]["cgroup_quota"] == 1.0
    assert facts["memory"]["cgroup_limit"] == 8 << 30
    assert facts["disk"]["decided_by"] == "HF_HOME" and facts["disk"]["checked"] == str(tmp_path)
    assert facts["shm"]["total"] is None  # no dev/shm under the fake root


def host_facts(**over):
    f = {"os": {"system": "Linux", "name": "Ubuntu 24.04", "id": "ubuntu", "version_id": "24.04"},
         "kernel": "6.8", "arch": "x86_64", "glibc": "glibc 2.39",
         "cpu": {"logical": 32, "affinity": 32, "cgroup_quota": None, "usable": 32},
         "memory": {"total": 256 << 30, "available": 200 << 30, "cgroup_limit": None},
         "shm": {"path": "/dev/shm", "total": 128 << 30, "free": 128 << 30},
         "disk": {"path": "/data/hf", "decided_by": "HF_HOME", "checked": "/data", "free": 800 << 30,
                  "total": 1000 << 30},
         "limits": {"nofile": {"soft": 1048576, "hard": 1048576}, "memlock": {"soft": None, "hard": None}},
         "container": None}
    f.update(over)
    return f


def test_docker_default_shm_fails(ctx_factory):
    r = rows(ctx_factory(host=host_facts(shm={"path": "/dev/shm", "total": 64 << 20, "free": 64 << 20})),
             ["host"])["host.shm"]
    assert r.status == Status.FAIL and "64 MiB (Docker's default)" in r.message
    assert "--ipc=host" in r.fix and "--shm-size" in r.fix


def test_healthy_host_passes(ctx_factory):
    got = rows(ctx_factory(host=host_facts()), ["host"])
    assert all(r.status == Status.PASS for r in got.values()), {k: r.message for k, r in got.items()}


def test_host_warnings(ctx_factory):
    got = rows(ctx_factory(host=host_facts(
        glibc="glibc 2.17", cpu={"logical": 64, "affinity": 64, "cgroup_quota": 2.0, "usable": 2},
        disk={"path": "/root/.cache/huggingface", "decided_by": "default", "checked": "/root", "free": 2 << 30,
              "total": 50 << 30},
        limits={"nofile": {"soft": 1024, "hard": 4096}, "memlock": {"soft": 65536, "hard": 65536}})), ["host"])
    assert got["host.glibc"].status == Status.FAIL and "2.28" in got["host.glibc"].message
    assert got["host.cpu"].status == Status.WARN and "cgroup quota" in got["host.cpu"].message
    assert got["host.disk"].status == Status.FAIL
    assert got["host.limits"].status == Status.WARN and "1024" in got["host.limits"].message


def test_fractional_cpu_quota_counts_as_one(tmp_path):
    (tmp_path / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "cpu.max").write_text("50000 100000\n")
    cpu = h.read_host(str(tmp_path), {})["cpu"]
    assert cpu["cgroup_quota"] == 0.5 and cpu["usable"] == 1
