"""Files the job opens (matrices/launch_facts.toml ``input_file``). A tool config, a function-tool
file, an agent-loop config are opened after Ray starts, where verl's dry start-up never reaches, and
looked for as verl's own ``resolve_config_path`` looks: an absolute path as is, else the job's
working directory, else verl's project root (the directory above the installed verl package, which
the target reports). The reward function's file and a custom dataset class's file are read at
start-up with ``os.path.exists`` on the path as given; without the dry start-up only these rows
name a missing one."""

import os
from typing import Any, Dict, List, Optional

from ..rules import Finding

__all__ = ["check", "candidates"]


def candidates(value: str, cwd: str, verl_root: Optional[str]) -> List[str]:
    """Where verl looks for ``value`` (a config path), in its order: [value] when absolute, else
    the job's working directory ``cwd``, then ``verl_root`` (the project root) and the verl package
    in it (None: not known, left out). As verl's ``resolve_config_path`` does, a relative path that
    leaves the directory it is joined to (``../x``) is not looked for there, and ``file://`` is
    not stripped (``file:///abs`` is a relative name)."""
    if os.path.isabs(value):
        return [value]
    out = []
    for base in [cwd] + ([verl_root, os.path.join(verl_root, "verl")] if verl_root else []):
        base = os.path.abspath(base)
        cand = os.path.abspath(os.path.join(base, value))
        if cand.startswith(base + os.sep):
            out.append(cand)
    return out


def check(get: Any, cwd: str, facts: Dict[str, Any], reward_key: str = "reward.custom_reward_function") -> List[Finding]:
    """One row per input file the launch sets (matrices/launch_facts.toml ``input_file``): PASS
    where verl would find a regular file, WARN (with every place looked in) where it would not: as
    for data files, the check may run on another machine than the job (a login node).
    ``cwd``: the job's working directory; ``facts["verl"]["root"]``: verl's project root in the
    target (absent: only the working directory is looked in); ``reward_key``: where the release
    configures its custom reward function (its ruleset's ``custom_reward_key``)."""
    from .data import load_facts

    root = (facts.get("verl") or {}).get("root")
    out: List[Finding] = []
    for row in load_facts().get("input_file", []):
        key = reward_key + ".path" if row.get("reward") else row["key"]
        value = get(key, None)
        if not isinstance(value, str) or not value.strip():
            continue
        path = value
        if row.get("lookup") == "cwd":
            if path.startswith("pkg://"):
                continue  # a module verl imports, not a file
            path = path[len("file://"):] if path.startswith("file://") else path
        item = key.rsplit(".", 2)[-2] if key.endswith(".path") else key.rsplit(".", 1)[-1]
        looked = candidates(os.path.expanduser(path), cwd, root if row.get("lookup") == "config_path" else None)
        found = next((p for p in looked if os.path.isfile(p)), None)
        ev = {"key": key, "looked_in": looked, "opens": row["opens"], "source": row["source"]}
        if found:
            out.append(Finding("inputs", "pass", "%s=%s is the file %s" % (key, value, found), item=item,
                               evidence=ev))
            continue
        what = ("a directory" if any(os.path.isdir(p) for p in looked) else
                "not a regular file"
                if any(os.path.exists(p) for p in looked) else "no such file")
        how = "as verl's resolve_config_path does" if row.get("lookup") == "config_path" else \
            "from the job's working directory, as verl does"
        fate = "raises FileNotFoundError" if what != "not a regular file" else "blocks or fails reading it"
        out.append(Finding("inputs", "warn", "%s=%s: %s on this machine (looked in %s, %s); a job started here "
                           "%s %s" % (key, value, what, ", ".join(looked) or "nowhere: the path leaves every directory verl joins it to",
                                       how, fate, row["when"]),
                           "give %s the absolute path of the file%s (or create it there)" % (key, (
                               " (file:///abs/path.py keeps the file:// form)" if row.get("lookup") == "cwd" else
                               ", without file:// (verl's resolve_config_path takes a plain path)")
                               if value.startswith("file://") else ""),
                           item=item, evidence=ev,
                           stops="%s in %s, %s" % ("FileNotFoundError" if what != "not a regular file" else
                                                   "a read that blocks or fails", row["opens"], row["when"])))
    return out
