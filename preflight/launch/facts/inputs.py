"""Files the job opens after Ray starts (matrices/launch_facts.toml ``input_file``): a tool config,
a function-tool file, an agent-loop config. verl's dry start-up stops before the worker that opens
them, so a missing one is found here, resolved as verl's own ``resolve_config_path`` resolves it:
an absolute path as is, else the job's working directory, else verl's project root (the directory
above the installed verl package, which the target reports)."""

import os
from typing import Any, Dict, List, Optional

from ..rules import Finding

__all__ = ["check", "candidates"]


def candidates(value: str, cwd: str, verl_root: Optional[str]) -> List[str]:
    """Where verl looks for ``value`` (a config path), in its order: [value] when absolute, else
    the job's working directory ``cwd``, then ``verl_root`` (None: not known, left out)."""
    if os.path.isabs(value):
        return [value]
    out = [os.path.abspath(os.path.join(cwd, value))]
    if verl_root:
        out.append(os.path.abspath(os.path.join(verl_root, value)))
    return out


def check(get: Any, cwd: str, facts: Dict[str, Any]) -> List[Finding]:
    """One row per input file the launch sets: PASS where verl would find a regular file, WARN
    (with every place looked in) where it would not: as for data files, the check may run on
    another machine than the job (a login node), and verl's dry start-up accepts the launch. ``facts["verl"]["root"]``: verl's project root
    in the target (absent: only the working directory is looked in)."""
    from .data import load_facts

    root = (facts.get("verl") or {}).get("root")
    out: List[Finding] = []
    for row in load_facts().get("input_file", []):
        value = get(row["key"], None)
        if not isinstance(value, str) or not value.strip():
            continue
        item = row["key"].rsplit(".", 1)[-1]
        looked = candidates(os.path.expanduser(value), cwd, root)
        found = next((p for p in looked if os.path.isfile(p)), None)
        ev = {"key": row["key"], "looked_in": looked, "opens": row["opens"], "source": row["source"]}
        if found:
            out.append(Finding("inputs", "pass", "%s=%s is the file %s" % (row["key"], value, found), item=item,
                               evidence=ev))
            continue
        what = "a directory" if any(os.path.isdir(p) for p in looked) else "no such file"
        out.append(Finding("inputs", "warn", "%s=%s: %s on this machine (looked in %s, as verl's resolve_config_path "
                           "does); a job started here raises FileNotFoundError when the agent loop worker opens it, "
                           "after Ray and the workers started" % (row["key"], value, what, ", ".join(looked)),
                           "give %s the absolute path of the file (or create it there)" % row["key"], item=item,
                           evidence=ev, stops="FileNotFoundError in %s, after Ray starts" % row["opens"]))
    return out
