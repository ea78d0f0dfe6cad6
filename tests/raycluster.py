"""A real multi-node Ray cluster on this machine, loopback only, for the cluster tests.

Every node is a ``tests/ray_node.py`` process (its own session) under a venv's python, so nodes
can come from different environments (drift). ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray
use 127.0.0.1 for every node, and ``RAY_TMPDIR`` (a short private directory) keeps the sessions
and the state file ``ray_current_cluster`` away from any other Ray on the machine. :meth:`stop`
ends every node (SIGTERM, then SIGKILL of its process group) and is safe to call twice.
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def closed_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released): a dead Ray address."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ray_env(tmpdir: str) -> dict:
    """The environment every process touching the test cluster runs with."""
    env = dict(os.environ)
    env.update(RAY_TMPDIR=tmpdir, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
               PYTHONUNBUFFERED="1", RAY_prestart_worker_first_driver="0")  # no idle workers on 2 cores
    env.pop("RAY_ADDRESS", None)
    return env


class RayCluster:
    """Nodes started with :meth:`add`; ``address`` is the head's GCS address (127.0.0.1:PORT)."""

    def __init__(self) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="pfr-", dir="/tmp")  # short: Unix socket paths are limited
        self.env = ray_env(self.tmpdir)
        self.nodes = []  # (Popen, info)
        self.address = None

    def add(self, python: str, num_cpus: int = 1, num_gpus: int = 0, resources=None, timeout: float = 90,
            env=None) -> dict:
        """Start a node (the first is the head) under ``python``, with ``env`` added to its
        environment (CUDA_VISIBLE_DEVICES: the GPUs this raylet owns); returns its info (address,
        node_id, pid). Raises RuntimeError when it does not come up within ``timeout`` seconds."""
        spec = {"num_cpus": num_cpus, "num_gpus": num_gpus, "resources": resources or {}}
        if self.address is None:
            spec["head"] = True
        else:
            spec["address"] = self.address
        log = open(os.path.join(self.tmpdir, "node%d.log" % len(self.nodes)), "w")
        proc = subprocess.Popen([python, os.path.join(HERE, "ray_node.py"), json.dumps(spec)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=dict(self.env, **(env or {})),
                                start_new_session=True,
                                universal_newlines=True)
        self.nodes.append((proc, None))
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError("ray node did not start (log %s)" % log.name)
        info = dict(json.loads(line), pid=proc.pid, python=python)
        self.nodes[-1] = (proc, info)
        if self.address is None:
            self.address = info["address"]
        return info

    def kill(self, info: dict) -> None:
        """Kill every process of one node at once (SIGKILL to its process group)."""
        try:
            os.killpg(info["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """Stop every node (workers first, the head last); remove the temp directory."""
        for proc, _info in reversed(self.nodes):
            try:
                proc.stdin.close()
            except OSError:
                pass
        deadline = time.time() + 15
        for proc, _info in reversed(self.nodes):
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what the node left behind (agents ignoring SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.nodes = []
        shutil.rmtree(self.tmpdir, ignore_errors=True)
