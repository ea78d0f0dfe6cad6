"""Ray's temp dir against the Unix socket path limit.

Ray puts its sockets under ``<root>/session_<date>_<pid>/sockets/``; a socket path longer than
the limit (107 bytes on Linux) makes ``ray.init`` fail. The root is ``ray_init._temp_dir`` (or
``ray_kwargs.ray_init._temp_dir``), else ``$RAY_TMPDIR/ray``, else ``/tmp/ray``. The limit is the
installed Ray's own (``validate_socket_filepath`` probed in the target), else the matrix's.
"""

import os
from typing import Any, Dict, List, Tuple

from ...paths import writable_problem
from ..rules import Finding

__all__ = ["check", "temp_root"]

_KEYS = ("ray_kwargs.ray_init._temp_dir", "ray_kwargs.ray_init.temp_dir", "ray_init._temp_dir", "ray_init.temp_dir")


def temp_root(get: Any, env: Dict[str, str]) -> Tuple[str, str]:
    """(Ray's temp root for a local ray.init, where it came from)."""
    from .data import load_facts

    for k in _KEYS:
        v = get(k, None)
        if isinstance(v, str) and v:
            return v, k
    if env.get("RAY_TMPDIR"):
        return os.path.join(env["RAY_TMPDIR"], "ray"), "RAY_TMPDIR"
    return os.path.join(load_facts()["ray"]["default_tmpdir"], "ray"), "Ray's default"


def check(get: Any, env: Dict[str, str], wrapper: Any, facts: Dict[str, Any]) -> List[Finding]:
    """``ray_tmp`` row: the longest socket path Ray will make vs the limit."""
    from .data import load_facts

    if env.get("RAY_ADDRESS") or (wrapper is not None and wrapper.kind and "ray job submit" in wrapper.kind):
        return [Finding("ray", "skip", "Ray's temp dir is the running cluster's (the job attaches to it)", item="temp_dir")]
    data = load_facts()["ray"]
    root, how = temp_root(get, env)
    r = facts.get("ray") or {}
    limit, src = (r["socket_maxlen"], "the installed Ray %s (%s)" % (r.get("version"), r.get("socket_source"))) \
        if r.get("socket_maxlen") else (int(data["socket_maxlen"]), data["socket_maxlen_source"])
    longest = len(os.path.abspath(root).encode("utf-8")) + 1 + int(data["session_name_len"]) + 1 + \
        len(data["longest_socket"])
    ev = {"temp_root": root, "from": how, "longest_socket_path_bytes": longest, "limit_bytes": limit, "limit_source": src,
          "session_name_source": data["session_name_source"]}
    if longest > limit:
        room = limit - (longest - len(os.path.abspath(root).encode("utf-8")))
        return [Finding("ray", "fail", "Ray's temp dir %s (%s) is %d bytes deep: its socket paths (%s/session_<date>_"
                        "<pid>/%s) reach %d bytes, above the Unix socket limit of %d (%s)" % (
                            root, how, len(os.path.abspath(root)), root, data["longest_socket"], longest, limit, src),
                        "use a temp dir of at most %d bytes: export RAY_TMPDIR=/tmp (or +ray_kwargs.ray_init._temp_dir="
                        "/tmp/ray)" % max(room, 1), item="temp_dir", evidence=ev,
                        stops="OSError 'AF_UNIX path length cannot exceed %d bytes' in ray.init, before any worker" % limit)]
    why = writable_problem(root)
    if why:
        return [Finding("ray", "fail", "Ray's temp dir %s (%s): %s" % (root, how, why),
                        "point RAY_TMPDIR at a writable directory (export RAY_TMPDIR=/tmp)", item="temp_dir", evidence=ev)]
    return [Finding("ray", "pass", "Ray's temp dir %s (%s): socket paths up to %d of %d bytes" % (root, how, longest,
                                                                                              limit),
                    item="temp_dir", evidence=ev)]
