"""One Ray node for the cluster tests, run under a test venv's python (which has ray).

``python ray_node.py '{"head": true, "num_cpus": 1, "num_gpus": 0, "resources": {...}}'`` starts a
head; ``{"address": "127.0.0.1:PORT", ...}`` a worker node joining it. Nodes are started the way
``ray.cluster_utils.Cluster.add_node`` starts them (``ray._private.node.Node``), on 127.0.0.1
only: the tests set ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which makes Ray use the loopback
address, and ``RAY_TMPDIR`` to a private directory. It prints one JSON line (the GCS address,
the node id, the session directory) and stays up until its stdin closes or it gets SIGTERM;
then every process of the node is killed. The test starts it in its own session, so killing
its process group kills the whole node at once (a node that dies mid-check).
"""

import json
import signal
import sys


def main() -> None:
    import ray
    import ray._private.node
    import ray._private.parameter
    import ray._private.utils

    spec = json.loads(sys.argv[1])
    params = dict(num_cpus=spec.get("num_cpus", 1), num_gpus=spec.get("num_gpus", 0),
                  resources=spec.get("resources") or {}, object_store_memory=80 * 1024 * 1024,
                  min_worker_port=0, max_worker_port=0, node_ip_address="127.0.0.1")
    if spec.get("head"):
        params.update(include_dashboard=False, gcs_server_port=spec.get("port") or None)
    else:
        params.update(gcs_address=spec["address"], include_log_monitor=False, node_manager_port=0)
    ray_params = ray._private.parameter.RayParams(**params)
    if not spec.get("head"):
        ray_params.dashboard_agent_listen_port = None
    node = ray._private.node.Node(ray_params, head=bool(spec.get("head")), shutdown_at_exit=False, spawn_reaper=True)
    if spec.get("head"):
        ray._private.utils.write_ray_address(node.gcs_address)

    def stop(*_a):
        node.kill_all_processes(check_alive=False, allow_graceful=False)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(json.dumps({"address": node.gcs_address, "node_id": getattr(node, "node_id", None) or node.unique_id, "session_dir": node.get_session_dir_path(),
                      "python": sys.executable}), flush=True)
    sys.stdin.read()
    stop()


if __name__ == "__main__":
    main()
