"""preflight cluster against a real Ray cluster on this machine (several raylets on 127.0.0.1),
through the built zipapp: every node reported, drift from a node started in another venv, a
launch's GPUs against Ray's own numbers, gloo standing in for NCCL across the nodes, a node
killed mid-check, and the attach failures (a dead RAY_ADDRESS, a stale state file, no cluster,
CPUs limited by affinity)."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from envs import real_env
from raycluster import RayCluster, closed_port, ray_env

RAY = ["ray==2.60.0", "torch==2.13.0"]
pytestmark = pytest.mark.realenv


@pytest.fixture(scope="session")
def pyz(pyz_file):
    """The archive itself: the cluster command sends the zipapp it runs from to every node."""
    return pyz_file


@pytest.fixture(scope="module")
def ray_py():
    return real_env("ray-cluster", RAY)


@pytest.fixture(scope="module")
def drift_py():
    # the same Ray and Python, one distribution at another version
    return real_env("ray-cluster-drift", RAY + ["filelock==3.16.1"])


def dist_version(python, name):
    """The installed version of ``name`` in ``python``, read by that interpreter itself."""
    return subprocess.check_output([python, "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
                                    name], universal_newlines=True).strip()


def ray_truth(python, env, address):
    """Ray's own view of the cluster from a separate driver: resources and the alive nodes."""
    code = ("import json, ray; ray.init(address=%r, logging_level='ERROR'); "
            "print(json.dumps({'cluster': ray.cluster_resources(), 'available': ray.available_resources(), "
            "'nodes': [n['NodeID'] for n in ray.nodes() if n['Alive']]}))" % address)
    out = subprocess.check_output([python, "-c", code], env=env, universal_newlines=True, timeout=120)
    # Ray may print warnings (lagging heartbeats...) on stdout around the document
    return json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])


def cluster_cmd(pyz, python, env, *args, timeout=400):
    """Run ``preflight cluster`` from the zipapp; returns (exit code, JSON document, seconds)."""
    out = os.path.join(env["RAY_TMPDIR"], "report-%d.json" % time.monotonic_ns())
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, pyz, "cluster", "--python", python, "--json", out] + list(args),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=timeout)
    dt = time.monotonic() - t0
    assert os.path.exists(out), proc.stdout[-3000:]
    with open(out) as fh:
        return proc.returncode, json.load(fh), dt, proc.stdout


def rows(doc):
    return {r["id"]: r for r in doc["results"]}


@pytest.fixture(scope="module")
def cluster(ray_py, drift_py):
    c = RayCluster()
    try:
        c.add(ray_py, num_cpus=1, num_gpus=2, resources={"pf_head": 1})
        c.add(ray_py, num_cpus=4, num_gpus=1)  # more CPUs than this machine allows: verl#523's situation
        c.add(drift_py, num_cpus=1, num_gpus=1)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def big_launch(pyz, ray_py, cluster):
    """One full run: node checks, gloo across the nodes, a launch asking for 3 nodes x 2 GPUs."""
    return cluster_cmd(pyz, ray_py, cluster.env, "--collective", "gloo", "--stage", "host,python,packages",
                       "--backend", "none", "--timeout", "60", "--", "trainer.nnodes=3", "trainer.n_gpus_per_node=2")


def test_every_node_reported(big_launch, cluster, ray_py):
    rc, doc, _dt, text = big_launch
    truth = ray_truth(ray_py, cluster.env, cluster.address)
    r = rows(doc)
    assert r["cluster.attach"]["status"] == "pass", text[-2000:]
    assert r["cluster.attach"]["evidence"]["source"] == "state file"  # as verl's ray.init() finds it
    assert doc["cluster"]["address"]["resolved"] == cluster.address
    nodes = doc["cluster"]["nodes"]
    assert sorted(n["node_id"] for n in nodes if n["alive"]) == sorted(truth["nodes"])
    pythons = {n["node_id"]: None for n in nodes}
    for n in nodes:
        row = r["cluster.nodes.%s" % n["label"]]
        assert row["evidence"]["node_id"] == n["node_id"]
        pythons[n["node_id"]] = row["evidence"]["python"]
        # each node's own rows are in the report, under its label
        assert "%s.host.os" % n["label"] in r and "%s.packages.consistency" % n["label"] in r
    assert sorted(pythons.values()) == sorted(n["python"] for _p, n in cluster.nodes)  # each ran in its own Python
    # the node's temporary copy of the zipapp is gone: no fix points at it
    assert not any("preflight-node-" in (row["fix"] or "") + row["message"] for row in doc["results"])
    assert rc == 1


def test_node_advertising_more_cpus_than_usable(big_launch, cluster):
    _rc, doc, _dt, _text = big_launch
    r = rows(doc)
    big = [n for n in doc["cluster"]["nodes"] if n["resources"].get("CPU") == 4.0]
    assert len(big) == 1
    row = r["cluster.cpus.%s" % big[0]["label"]]
    usable = row["evidence"]["cpus"]["usable"]
    assert row["status"] == "warn" and usable <= len(os.sched_getaffinity(0)) < 4
    assert "advertises 4 CPUs" in row["message"] and row["fix"].startswith("restart that node's raylet with "
                                                                            "`ray start --num-cpus=%d" % usable)
    others = [n for n in doc["cluster"]["nodes"] if n["alive"] and n is not big[0]]
    assert not any("cluster.cpus.%s" % n["label"] in r for n in others)  # 1 advertised CPU: nothing to say


def test_drift_names_nodes_and_values(big_launch, cluster, ray_py, drift_py):
    _rc, doc, _dt, _text = big_launch
    r = rows(doc)
    row = r["cluster.drift.filelock"]
    assert row["status"] == "fail"
    labels = {n["node_id"]: n["label"] for n in doc["cluster"]["nodes"]}
    drift_label = labels[[i for _p, i in cluster.nodes if i["python"] == drift_py][0]["node_id"]]
    want_drift, want_main = dist_version(drift_py, "filelock"), dist_version(ray_py, "filelock")
    assert want_drift != want_main
    assert row["evidence"]["values"][want_drift] == [drift_label]
    assert len(row["evidence"]["values"][want_main]) == 2
    assert want_drift in row["message"] and want_main in row["message"] and drift_label in row["message"]
    # what is the same everywhere is not reported
    assert "cluster.drift.ray" not in r and "cluster.drift.torch" not in r and "cluster.drift.python" not in r


def test_launch_larger_than_cluster_fails_with_rays_numbers(big_launch, cluster, ray_py):
    _rc, doc, _dt, _text = big_launch
    truth = ray_truth(ray_py, cluster.env, cluster.address)
    r = rows(doc)
    gpus = truth["available"]["GPU"]
    assert gpus == 4.0  # 2 + 1 + 1 fake GPUs
    row = r["cluster.resources.gpus"]
    assert row["status"] == "fail"
    assert "Total available GPUs %g is less than total desired GPUs 6" % gpus in row["message"]
    nodes_row = r["cluster.resources.nodes"]
    assert nodes_row["status"] == "fail" and "1 node(s) offer trainer.n_gpus_per_node=2" in nodes_row["message"]
    # the suggested launch is re-checked against Ray in test_fitting_launch_and_verl_attach
    assert "trainer.nnodes=3 trainer.n_gpus_per_node=1" in row["fix"] and row["fix"] == nodes_row["fix"]
    assert r["cluster.resources.pool"]["status"] == "fail"


def test_gloo_across_nodes(big_launch, cluster, ray_py):
    _rc, doc, _dt, _text = big_launch
    truth = ray_truth(ray_py, cluster.env, cluster.address)
    row = rows(doc)["cluster.collective"]
    assert row["status"] == "pass", (row["message"], row["evidence"].get("failed_ranks"))
    ev = row["evidence"]
    assert ev["backend"] == "gloo" and ev["world_size"] == 3
    ids = {n["label"]: n["node_id"] for n in doc["cluster"]["nodes"]}
    assert sorted(ids[x["node"]] for x in ev["ranks"]) == sorted(truth["nodes"])  # one rank per node (SPREAD)
    assert all(x["ip"] == "127.0.0.1" for x in ev["ranks"])
    assert ev["sizes"] and all(s["busbw_gbps"] > 0 and s["time_us"] > 0 for s in ev["sizes"])


def test_fitting_launch_and_verl_attach(big_launch, pyz, ray_py, cluster, tmp_path):
    # the launch the failed run suggested, checked again against the same cluster
    import re

    fix = rows(big_launch[1])["cluster.resources.gpus"]["fix"]
    suggested = re.search(r"trainer\.nnodes=\d+ trainer\.n_gpus_per_node=\d+", fix).group(0).split()
    env = dict(cluster.env, RAY_TMPDIR=str(tmp_path))  # no state file: verl's ray.init() finds no cluster
    # verl 0.6.1's pool bundles take 1 CPU (matrices/verl_rules.toml [[ray_reserve]]); from 0.7.1 they take 3,
    # which the 1-CPU nodes of this cluster cannot hold (the suggestion counts GPUs only)
    rc, doc, _dt, text = cluster_cmd(pyz, ray_py, env, "--address", cluster.address, "--collective", "none",
                                     "--stage", "host", "--timeout", "60", "--verl", "0.6.1", "--", *suggested,
                                     "ray_kwargs.ray_init.num_cpus=1")
    r = rows(doc)
    # verl passes ray_init.num_cpus to ray.init(); Ray refuses it when attaching (its own message)
    refused = r["cluster.attach.ray-init"]
    assert refused["status"] == "fail" and "num_cpus" in refused["message"]
    assert "When connecting to an existing cluster" in refused["message"]
    assert r["cluster.attach"]["status"] == "pass", text[-2000:]
    assert r["cluster.attach.verl"]["status"] == "fail"
    assert "start a new local Ray instance" in r["cluster.attach.verl"]["message"]
    assert r["cluster.attach.verl"]["fix"] == "export RAY_ADDRESS=%s in the job's environment before launching verl" % (
        cluster.address)
    for item in ("gpus", "nodes", "pool"):
        assert r["cluster.resources.%s" % item]["status"] == "pass", r["cluster.resources.%s" % item]
    assert "cluster.collective" not in r
    assert rc == 1


def _verl_source(path):
    """A file of the real verl 0.9.1 wheel (the cached verl-core env of tests/envs.py)."""
    py = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    site = subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()
    with open(os.path.join(site, "verl", path)) as fh:
        return fh.read()


def test_launch_reserving_more_cpus_than_ray_has(pyz, ray_py, cluster):
    # failure_cases_3.md #54 (verl#7398, #7656): the TaskRunner, TransferQueue's storage units and
    # controller, and the pool's bundles need more CPUs than Ray offers: PENDING forever, no error
    import re

    rc, doc, _dt, text = cluster_cmd(pyz, ray_py, cluster.env, "--address", cluster.address, "--verl", "0.9.1",
                                     "--collective", "none", "--stage", "host", "--timeout", "60", "--",
                                     "trainer.nnodes=1", "trainer.n_gpus_per_node=1", "transfer_queue.enable=True")
    row = rows(doc)["cluster.resources.cpus"]
    # verl 0.9.1's own numbers, read from its wheel; Ray's own CPU count
    colocate = int(re.search(r"max_colocate_count: int = (\d+)\n    resource_pool_dict",
                             _verl_source("single_controller/ray/base.py")).group(1))
    units = int(re.search(r"num_data_storage_units: (\d+)",
                          _verl_source("trainer/config/_generated_ppo_trainer.yaml")).group(1))
    need = 1 + units + 1 + colocate
    total = ray_truth(ray_py, cluster.env, cluster.address)["cluster"]["CPU"]
    assert need > total
    assert rc == 1 and row["status"] == "fail", text[-2000:]
    assert row["evidence"]["reserved_cpus"] == need and row["evidence"]["ray_available_cpus"] <= total
    assert "reserves at least %d CPUs" % need in row["message"] and "ray start --num-cpus=%d" % need in row["fix"]
    assert rows(doc)["cluster.resources.pool"]["evidence"]["bundle"] == {"CPU": colocate, "GPU": 1}


def test_cpu_reserve_names_the_unit_count_that_fits():
    # the same count on Ray's numbers alone: 12 CPUs leave room for 7 storage units (1 + 7 + 1 + 3 = 12)
    from preflight.cluster import cpu_reserve_outcomes

    launch = {"nnodes": 1, "n_gpus_per_node": 1, "num_cpus_key": "ray_kwargs.ray_init.num_cpus",
              "reserve": {"bundle_cpus": 3, "task_runner_cpus": 1, "transfer_queue": True, "units": 8,
                          "controller_cpus": 1, "release": "0.9.1", "source": "-"}}
    (o,) = cpu_reserve_outcomes({"resources": {"available": {"CPU": 12.0}}}, launch)
    assert o.status.value == "fail" and "num_data_storage_units=7" in o.fix
    (o,) = cpu_reserve_outcomes({"resources": {"available": {"CPU": 13.0}}}, launch)
    assert o.status.value == "pass"
    launch["reserve"] = dict(launch["reserve"], transfer_queue=False)
    (o,) = cpu_reserve_outcomes({"resources": {"available": {"CPU": 4.0}}}, launch)
    assert o.status.value == "pass" and o.evidence["reserved_cpus"] == 4


def test_node_killed_mid_check(pyz, ray_py, cluster):
    victim = cluster.add(ray_py, num_cpus=1, num_gpus=0)
    out = os.path.join(cluster.tmpdir, "killed.json")
    log = open(os.path.join(cluster.tmpdir, "killed.log"), "w+")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, pyz, "cluster", "--python", ray_py, "--json", out, "--collective", "none",
                             "--stage", "host,python,packages", "--backend", "none", "--timeout", "60",
                             "--node-timeout", "90"], env=cluster.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # the victim's task has started its check: a zipapp process whose parent is a Ray worker (in
        # a process group of its own) started by the victim's raylet (in the node's group)
        while time.monotonic() - t0 < 120:
            ps = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,pgid=,args="], stdout=subprocess.PIPE,
                                universal_newlines=True).stdout
            table = [l.split(None, 3) for l in ps.splitlines() if len(l.split(None, 3)) == 4]
            parent = {pid: pp for pid, pp, _g, _a in table}
            pgid = {pid: g for pid, _pp, g, _a in table}
            if any("preflight.pyz check" in a and pgid.get(parent.get(pp)) == str(victim["pid"])
                   for _p, pp, _g, a in table):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the victim's check never started")
        cluster.kill(victim)
        proc.wait(timeout=200)
        log.seek(0)
        text = log.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    dt = time.monotonic() - t0
    with open(out) as fh:
        doc = json.load(fh)
    label = [n["label"] for n in doc["cluster"]["nodes"] if n["node_id"] == victim["node_id"]][0]
    row = rows(doc)["cluster.nodes.%s" % label]
    assert row["status"] == "fail", text[-2000:]
    assert "failed during its check" in row["message"] or "did not answer" in row["message"]
    assert dt < 90 + 60  # reported within the node timeout, not waited on forever
    assert proc.returncode == 1
    # the other nodes still answered
    others = [n for n in doc["cluster"]["nodes"] if n["alive"] and n["node_id"] != victim["node_id"]]
    assert all("%s.host.os" % n["label"] in rows(doc) for n in others)


def test_dead_ray_address(pyz, ray_py, tmp_path):
    env = dict(ray_env(str(tmp_path)), RAY_ADDRESS="127.0.0.1:%d" % closed_port())
    rc, doc, dt, _text = cluster_cmd(pyz, ray_py, env)
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail"
    assert "not reachable" in row["message"] and "RAY_ADDRESS" in row["message"]
    assert "unset RAY_ADDRESS" in row["fix"]
    assert dt < 60


def test_stale_state_file(pyz, ray_py, tmp_path):
    env = ray_env(str(tmp_path))
    os.makedirs(str(tmp_path / "ray"))
    dead = "127.0.0.1:%d" % closed_port()
    (tmp_path / "ray" / "ray_current_cluster").write_text(dead)
    rc, doc, _dt, _text = cluster_cmd(pyz, ray_py, env)
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail"
    assert dead in row["message"] and "state file" in row["message"]
    assert "ray stop" in row["fix"] and str(tmp_path / "ray" / "ray_current_cluster") in row["fix"]


def test_no_cluster_and_cpus_limited_by_affinity(pyz, ray_py, tmp_path):
    # verl#523: Ray counts the machine's CPUs, the affinity mask allows one
    env = ray_env(str(tmp_path))
    out = str(tmp_path / "r.json")
    proc = subprocess.run(["taskset", "-c", "0", sys.executable, pyz, "cluster", "--python", ray_py, "--json", out,
                           "--", "ray_kwargs.ray_init.num_cpus=null"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    with open(out) as fh:
        r = rows(json.load(fh))
    assert proc.returncode == 1
    assert "new local Ray instance" in r["cluster.attach"]["message"]
    ray_cpus = int(subprocess.check_output([ray_py, "-c", "from ray._private.utils import get_num_cpus; "
                                            "print(get_num_cpus())"], universal_newlines=True))
    row = r["cluster.cpus.local"]
    if ray_cpus > 1:
        assert row["status"] == "fail" and row["fix"] == "ray_kwargs.ray_init.num_cpus=1"
        assert "advertise %d CPUs but only 1 are usable" % ray_cpus in row["message"]
    else:
        assert row["status"] == "pass"


def test_bad_address_is_a_usage_error(pyz):
    proc = subprocess.run([sys.executable, pyz, "cluster", "--address", "not an address"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "HOST:PORT" in proc.stderr


def test_dead_node_is_named(pyz, ray_py, cluster):
    # a node killed before the check: once Ray's own table (read by a separate driver) says it is
    # not alive, the check names it so, and does not schedule on it
    victim = cluster.add(ray_py, num_cpus=1, num_gpus=0)
    cluster.kill(victim)
    t0 = time.monotonic()
    while victim["node_id"] in ray_truth(ray_py, cluster.env, cluster.address)["nodes"]:
        assert time.monotonic() - t0 < 120, "Ray never marked the killed node dead"
        time.sleep(2)
    rc, doc, _dt, text = cluster_cmd(pyz, ray_py, cluster.env, "--collective", "none", "--stage", "host")
    dead = [n for n in doc["cluster"]["nodes"] if not n["alive"]]
    assert dead, text[-2000:]
    r = rows(doc)
    for n in dead:
        row = r["cluster.nodes.%s" % n["label"]]
        assert row["status"] == "warn" and "not alive" in row["message"]
    alive = [n for n in doc["cluster"]["nodes"] if n["alive"]]
    assert len(alive) == len(ray_truth(ray_py, cluster.env, cluster.address)["nodes"])


@pytest.fixture(scope="module")
def ray312():
    return real_env("ray-py312", ["ray==2.60.0"], python_minor="3.12")


def test_version_mismatch(pyz, ray312, ray_py, cluster):
    # the cluster runs Python 3.11, this driver's Ray runs on 3.12: Ray refuses to connect
    rc, doc, _dt, text = cluster_cmd(pyz, ray312, cluster.env, "--address", cluster.address, "--collective", "none")
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail", text[-2000:]
    assert row["evidence"]["kind"] == "version_mismatch"
    cluster_py = subprocess.check_output([ray_py, "-c", "import platform; print(platform.python_version())"],
                                         universal_newlines=True).strip()
    mine = subprocess.check_output([ray312, "-c", "import platform; print(platform.python_version())"],
                                   universal_newlines=True).strip()
    assert "Python %s" % cluster_py in row["message"] and "Python %s" % mine in row["message"]
    assert "use Python %s in the target" % cluster_py in row["fix"]


def test_drift_names_heterogeneous_gpus():
    # the comparison itself, on two node results as the node tasks return them (NVML in their reports)
    from preflight.cluster import drift_outcomes, label_nodes

    def res(gpu, driver):
        return {"ok": True, "result": {"python_version": "3.12.3", "dists": {"torch": "2.11.0"},
                                       "report": {"machine": {"nvml": {"driver": driver, "devices": [
                                           {"name": gpu}, {"name": gpu}]}}, "results": []}}}
    nodes = label_nodes([{"node_id": "a", "ip": "10.0.0.1", "alive": True, "head": True},
                         {"node_id": "b", "ip": "10.0.0.2", "alive": True}])
    out = {o.item: o for o in drift_outcomes(nodes, {"a": res("NVIDIA H100 80GB HBM3", "580.95.05"),
                                                      "b": res("NVIDIA A100-SXM4-80GB", "580.95.05")})}
    assert set(out) == {"gpus"}
    assert "2x NVIDIA H100 80GB HBM3 on n0" in out["gpus"].message
    assert "2x NVIDIA A100-SXM4-80GB on n1" in out["gpus"].message


def test_collective_hang_names_node_and_rank(ray_py, cluster, matrix):
    # a rank that hangs in all_reduce (the rank script's fault injection) is killed and named
    from preflight.cluster import collective_outcome, label_nodes
    from preflight.probes.process import LOADER, load_script, run_script

    m = matrix.curated["nccl"]["measure"]
    gloo = {"sizes": [s << 20 for s in m["gloo_sizes_mib"]], "warmup": 1, "iters": 2, "min_timed_s": 0.0,
            "max_iters": 2}
    args = {"address": cluster.address, "connect_timeout_s": 30, "pyz": None, "pools": [], "pg_timeout_s": 20,
            "ray_init": {}, "collective": {"backend": "gloo", "world": 2, "rank_script": load_script("nccl_rank"),
                                           "loader": LOADER, "timeout_s": 20, "inject": {"rank": 1, "fault": "hang_allreduce"},
                                           "gloo": gloo}}
    t0 = time.monotonic()
    out = run_script(ray_py, "ray_cluster", args, timeout=150, env=cluster.env)
    assert time.monotonic() - t0 < 120
    ev = {e["event"]: e for e in out.events}
    assert "done" in ev, out.describe() + out.stderr_tail
    o = collective_outcome(ev["collective"], label_nodes(ev["nodes"]["nodes"]), 20)
    assert o.status.value == "fail"
    where = ev["collective"]["where"][1]
    label = [n["label"] for n in label_nodes(ev["nodes"]["nodes"]) if n["node_id"] == where["node_id"]][0]
    assert "rank 1 on %s (127.0.0.1" % label in o.message and "all_reduce 1 MiB" in o.message


def test_silent_gcs_is_reported_within_the_timeout(pyz, ray_py, tmp_path):
    # something listens on the GCS port but never answers: ray.init must not be waited on forever
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        env = dict(ray_env(str(tmp_path)), RAY_ADDRESS="127.0.0.1:%d" % srv.getsockname()[1])
        rc, doc, dt, text = cluster_cmd(pyz, ray_py, env, "--timeout", "10", timeout=120)
    finally:
        stop.set()
        th.join()
        for s in held:
            s.close()
        srv.close()
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail", text[-2000:]
    assert "did not return within 10 s" in row["message"] or row["evidence"].get("kind") == "gcs_unreachable"
    assert dt < 60


def test_target_without_ray(pyz, tmp_path):
    rc, doc, _dt, _text = cluster_cmd(pyz, sys.executable, ray_env(str(tmp_path)))  # the test venv has no ray
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail" and "ray cannot be imported" in row["message"]
    assert doc["target"]["version"] == "%d.%d.%d" % sys.version_info[:3]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the state file to another user")
def test_another_users_state_file_is_not_attached_to(pyz, ray_py, cluster, tmp_path):
    """The Ray state file names a live cluster (this test's), but uid 65534 wrote it: attaching
    would run what that user's workers send back as root, so the run does not attach (threat
    review B2); root's own file in Ray's 0777 directory is attached to (test_every_node_reported)."""
    env = ray_env(str(tmp_path))
    state = tmp_path / "ray" / "ray_current_cluster"
    os.makedirs(str(state.parent))
    os.chmod(str(state.parent), 0o777)  # as Ray makes it
    state.write_text(cluster.address)
    os.chown(str(state), 65534, 65534)
    rc, doc, _dt, text = cluster_cmd(pyz, ray_py, env, "--stage", "host", "--backend", "none")
    row = rows(doc)["cluster.attach"]
    assert rc == 1 and row["status"] == "fail", text[-2000:]
    assert "another user's" in row["message"] and "uid 65534" in row["message"], row
    assert "--address" in row["fix"]
    assert "attached" not in doc.get("cluster", {}) or not doc["cluster"].get("nodes"), text[-2000:]
