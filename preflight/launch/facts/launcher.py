"""Rows about the launcher around the entry point: a Ray job's working_dir against Ray's upload
limit (the installed Ray's own constant when the target has Ray, else the matrix's), a script
that drops its arguments, a runtime_env that cannot be read."""

import fnmatch
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from ..rules import Finding

__all__ = ["check", "tree_size"]

#: the working_dir walk stops after this many entries or seconds
WALK_MAX_ENTRIES = 200000
WALK_MAX_S = 5.0


def tree_size(root: str, excludes: List[str]) -> Tuple[int, int, bool, List[Tuple[int, str]]]:
    """(bytes, files, complete, largest [(bytes, relative path)]) of ``root`` as Ray would pack it:
    files matching a runtime_env ``excludes`` pattern (fnmatch on the relative path or any of its
    parents) left out. Symlinks are not followed. Bounded by WALK_MAX_ENTRIES / WALK_MAX_S."""
    total, files, seen = 0, 0, 0
    big: List[Tuple[int, str]] = []
    t0 = time.monotonic()
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            it = list(os.scandir(d))
        except OSError:
            continue
        for e in it:
            seen += 1
            if seen > WALK_MAX_ENTRIES or time.monotonic() - t0 > WALK_MAX_S:
                return total, files, False, sorted(big, reverse=True)[:5]
            rel = os.path.relpath(e.path, root)
            if any(fnmatch.fnmatch(rel, p.strip("/")) or fnmatch.fnmatch(rel + "/", p) or
                   fnmatch.fnmatch(os.path.basename(rel), p.strip("/")) for p in excludes):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    n = e.stat(follow_symlinks=False).st_size
                    total += n
                    files += 1
                    big.append((n, rel))
                    if len(big) > 50:
                        big = sorted(big, reverse=True)[:5]
            except OSError:
                continue
    return total, files, True, sorted(big, reverse=True)[:5]


def _mib(n: int) -> str:
    return "%.1f MiB" % (n / float(1 << 20))


def _working_dir(w: Any, facts: Dict[str, Any]) -> Optional[Finding]:
    from .data import load_facts

    if not w.working_dir:
        return None
    r = facts.get("ray") or {}
    data = load_facts()["ray"]
    limit, src = (int(r["upload_limit"]), "the installed Ray %s (%s)" % (r.get("version"), r.get("upload_limit_source"))) \
        if r.get("upload_limit") else (int(data["upload_limit"]), data["upload_limit_source"])
    if not os.path.isdir(w.working_dir):
        return Finding("launcher", "fail", "ray job submit --working-dir %s is not a directory here" % w.working_dir,
                       "pass the directory that holds your code (a local path or a remote URI)", item="working_dir")
    ex = (w.runtime_env or {}).get("excludes") or []
    total, files, complete, big = tree_size(w.working_dir, [str(x) for x in ex] if isinstance(ex, list) else [])
    ev = {"working_dir": w.working_dir, "bytes": total, "files": files, "complete": complete, "limit_bytes": limit,
          "limit_source": src, "largest": [{"bytes": n, "path": p} for n, p in big], "excludes": ex}
    largest = ", ".join("%s (%s)" % (p, _mib(n)) for n, p in big[:3])
    if total > limit:
        return Finding("launcher", "fail", "ray job submit uploads --working-dir %s: %s%s in %d files, above Ray's "
                       "upload limit of %s (%s); largest: %s" % (w.working_dir, _mib(total), "+" if not complete else "",
                                                                 files, _mib(limit), src, largest),
                       "add the large files to the runtime_env excludes (e.g. --runtime-env-json '{\"excludes\": "
                       "[\"*.parquet\", \"checkpoints/\", \".git/\"]}') or submit from a directory with only the "
                       "code; read data and models from shared storage", item="working_dir", evidence=ev,
                       stops="ray job submit refuses the package before the job starts ('exceeds the maximum size')")
    if total > limit // 4:
        return Finding("launcher", "warn", "ray job submit uploads --working-dir %s: %s in %d files (Ray's limit %s, "
                       "%s); every submission uploads it; largest: %s" % (w.working_dir, _mib(total), files,
                                                                          _mib(limit), src, largest),
                       "exclude data, checkpoints and .git from the working_dir (runtime_env excludes)",
                       item="working_dir", evidence=ev)
    return Finding("launcher", "pass", "ray job submit uploads --working-dir %s: %s in %d files (limit %s, %s)" % (
        w.working_dir, _mib(total), files, _mib(limit), src), item="working_dir", evidence=ev)


def check(w: Any, facts: Dict[str, Any]) -> List[Finding]:
    """The launcher rows (none for a plain launch)."""
    if w is None or not w.kind:
        return []
    out: List[Finding] = []
    wd = _working_dir(w, facts)
    if wd is not None:
        out.append(wd)
    if w.runtime_env_error:
        out.append(Finding("launcher", "fail", "the runtime_env cannot be read: %s" % w.runtime_env_error,
                           "give --runtime-env a YAML/JSON file (or --runtime-env-json a JSON object)",
                           item="runtime_env"))
    if w.copies is not None and w.copies > 1:
        out.append(Finding("launcher", "fail", "%s starts %d copies of verl's PPO driver (one per task): each "
                           "starts its own Ray cluster and waits for trainer.nnodes x n_gpus_per_node GPUs that "
                           "only the whole allocation has" % (w.kind, w.copies),
                           "start Ray on every node first (srun --nodes=N --ntasks-per-node=1 ray start ...; head "
                           "with --head, the others with --address), then run the entry point once, on the head "
                           "node: srun --nodes=1 --ntasks=1 python3 -m verl.trainer.main_ppo ...", item="copies",
                           evidence={"copies": w.copies, "read": ["%s %s" % rv for rv in w.read]},
                           stops="each driver's ResourcePoolManager finds fewer GPUs than the launch asks for"))
    for n in w.notes:
        out.append(Finding("launcher", "warn", n, "pass the overrides on: end the verl line of the script with "
                           "\"$@\" (or edit the script's own overrides)" if "does not pass" in n else
                           "give the launch as the python command inside the script", item="script"))
    return out
