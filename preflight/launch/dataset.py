"""RL parquet files checked the way verl reads them, with the target's pyarrow.

verl's RLHFDataset reads the chat messages in ``data.prompt_key`` (default ``prompt``: a list of
``{role, content}``); its reward managers read ``data.reward_fn_key`` (default ``data_source``) to
pick the reward function and ``reward_model["ground_truth"]`` for every row; ``extra_info`` is
optional (``{}`` when absent). The row scan runs in the target (preflight/target/read_parquet.py);
this module turns its counts into findings and checks each data_source against the default reward
functions of the release (``default_reward_sources`` in matrices/verl_rules.toml).
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .rules import Finding, load_rules, ruleset

__all__ = ["NoPyarrow", "scan", "findings", "check_files", "custom_reward_findings", "PREPROCESS_HINT"]

PREPROCESS_HINT = ("convert the data to verl's RL format first: verl's examples/data_preprocess/gsm8k.py writes "
                   "data_source, prompt (chat messages), ability, reward_model {style, ground_truth} and extra_info")


class NoPyarrow(Exception):
    """The target interpreter cannot import pyarrow (so verl could not read parquet either)."""


def scan(python: str, files: Sequence[str], prompt_key: str = "prompt", source_key: str = "data_source",
         examples: int = 3, max_rows: int = 1000000, timeout: float = 120.0) -> Tuple[List[Dict[str, Any]], str]:
    """(one summary per file, pyarrow version) from the target's pyarrow.

    Raises NoPyarrow when the target lacks pyarrow, RuntimeError when the reader process fails.
    """
    from ..probes.process import run_script

    out = run_script(python, "read_parquet", {"files": [os.path.abspath(f) for f in files], "prompt_key": prompt_key,
                                              "source_key": source_key, "examples": examples, "max_rows": max_rows},
                     timeout=timeout)
    if out.last("no_pyarrow") is not None:
        raise NoPyarrow(out.last("no_pyarrow")["error"])
    ver = (out.last("pyarrow") or {}).get("version") or "?"
    files_ev = [e for e in out.events if e.get("event") == "file"]
    if len(files_ev) < len(files):
        raise RuntimeError("the parquet reader under %s %s" % (python, out.describe()))
    return files_ev, ver


def _label(path: str, all_paths: Sequence[str]) -> str:
    base = os.path.basename(path)
    if sum(1 for p in all_paths if os.path.basename(p) == base) > 1:
        return path
    return base


def _examples(c: Dict[str, Any]) -> str:
    ex = c.get("examples") or []
    return "; ".join("row %d: %s" % (e["row"], e["value"]) for e in ex[:2])


def findings(summaries: Sequence[Dict[str, Any]], release: Optional[str] = None,
             custom_reward: Optional[str] = None) -> List[Finding]:
    """Findings for the scanned files (see module doc). ``custom_reward`` is the configured
    custom reward function path (then any data_source is fine)."""
    rs, _note = ruleset(release)
    out: List[Finding] = []
    custom_ok = True
    if custom_reward:
        out.extend(custom_reward_findings(custom_reward, rs))
        custom_ok = out[-1].status != "fail"
    known = default_sources(release)
    key = rs.get("custom_reward_key", "reward.custom_reward_function")
    paths = [s["path"] for s in summaries]
    for s in summaries:
        lab = _label(s["path"], paths)

        def add(role: str, status: str, msg: str, fix: Optional[str] = None, **ev: Any) -> None:
            out.append(Finding("data", status, "%s: %s" % (lab, msg), fix, "%s.%s" % (lab, role),
                               check="verl's RL dataset and reward manager read these columns",
                               where="verl/utils/dataset/rl_dataset.py RLHFDataset; verl/workers/reward_manager/naive.py",
                               evidence=dict(ev, path=s["path"])))
        if s.get("error"):
            add("file", "fail", "cannot be read as parquet: %s" % s["error"],
                "check the path (data.train_files / data.val_files) and that the file is parquet")
            continue
        n, scanned = s.get("num_rows", 0), s.get("scanned", 0)
        if not n:
            add("rows", "fail", "the file has no rows (columns: %s): verl cannot train or validate on an empty "
                "dataset (its dataloader has no batch to give)" % (", ".join(sorted(s.get("columns") or {})) or
                                                                   "none"),
                "re-run the preprocessing that wrote it (check its input and filters), or drop it from "
                "data.train_files / data.val_files", num_rows=n)
            continue
        cols = ", ".join(sorted(s.get("columns") or {}))
        part = "" if scanned >= n else " (first %d scanned)" % scanned
        checks = s.get("checks") or {}
        p = checks.get("prompt", {})
        if not p.get("present"):
            add("prompt", "fail", "no '%s' column (data.prompt_key); columns: %s" % (p.get("key"), cols),
                "%s; or set data.prompt_key to the column that holds the chat messages" % PREPROCESS_HINT, columns=cols)
        elif p.get("bad"):
            bad = sum(p["bad"].values())
            kind = max(p["bad"], key=p["bad"].get)
            add("prompt", "fail", "%d of %d rows%s have a bad '%s': %s (%s)" % (
                bad, scanned, part, p["key"], kind, _examples(p)),
                "store each prompt as a list of messages [{\"role\": \"user\", \"content\": \"...\"}]; %s" %
                PREPROCESS_HINT, bad_rows=bad, kinds=p["bad"], examples=p.get("examples"))
        else:
            add("prompt", "pass", "%d rows%s, '%s' holds chat messages (%s)" % (scanned, part, p["key"], p.get("type")))
        d = checks.get("data_source", {})
        if not d.get("present"):
            add("data_source", "fail", "no '%s' column (data.reward_fn_key): the reward manager picks the reward "
                "function by it; columns: %s" % (d.get("key"), cols),
                "add a '%s' column naming the dataset of each row (e.g. openai/gsm8k); %s" % (
                    d.get("key"), PREPROCESS_HINT))
        elif d.get("bad"):
            bad = sum(d["bad"].values())
            add("data_source", "fail", "%d of %d rows%s have a bad '%s': %s (%s)" % (
                bad, scanned, part, d["key"], max(d["bad"], key=d["bad"].get), _examples(d)),
                "give every row a non-empty '%s' string" % d["key"], bad_rows=bad, kinds=d["bad"])
        else:
            add("data_source", "pass", "'%s' present: %s" % (d["key"], ", ".join(
                "%s (%d)" % (k, v) for k, v in sorted((s.get("sources") or {}).items())[:8])))
        r = checks.get("reward_model", {})
        if not r.get("present"):
            add("reward_model", "fail", "no 'reward_model' column: verl reads reward_model['ground_truth'] of every "
                "row (KeyError: 'reward_model' at the first reward); columns: %s" % cols,
                "add reward_model = {\"style\": \"rule\", \"ground_truth\": <answer>} per row; %s" % PREPROCESS_HINT)
        elif r.get("bad"):
            bad = sum(r["bad"].values())
            add("reward_model", "fail", "%d of %d rows%s have a bad reward_model: %s (%s)" % (
                bad, scanned, part, max(r["bad"], key=r["bad"].get), _examples(r)),
                "give every row reward_model = {\"style\": \"rule\", \"ground_truth\": <answer>}", bad_rows=bad,
                kinds=r["bad"])
        else:
            add("reward_model", "pass", "reward_model.ground_truth present in every row%s" % part)
        e = checks.get("extra_info", {})
        if not e.get("present"):
            add("extra_info", "pass", "no extra_info column: verl uses {} (index 0) for every row")
        elif e.get("bad"):
            bad = sum(e["bad"].values())
            add("extra_info", "fail", "%d rows%s have a bad extra_info: %s (%s): RLHFDataset.__getitem__ calls "
                "extra_info.get(\"index\") on every row it gives, so the first such row raises AttributeError" % (
                    bad, part, max(e["bad"], key=e["bad"].get), _examples(e)),
                "store extra_info as a mapping (e.g. {\"split\": \"train\", \"index\": i}) or null; a JSON string "
                "must be parsed (json.loads) in the preprocessing that writes the file", bad_rows=bad)
        else:
            add("extra_info", "pass", "extra_info is a mapping in every row")
        srcs = s.get("sources") or {}
        if not srcs:
            continue
        prefixes = tuple(known["prefixes"])
        unknown = {k: v for k, v in srcs.items() if k not in known["sources"] and not (
            prefixes and k.startswith(prefixes))}
        label = known["label"]
        if custom_reward and not custom_ok:
            add("reward_function", "skip", "the custom reward function file %s is missing (see custom_reward)" %
                custom_reward)
        elif custom_reward:
            add("reward_function", "pass", "custom reward function %s is used for every data_source" % custom_reward)
        elif unknown:
            first = sorted(unknown)[0]
            exact = known["exact"]
            add("reward_function", "fail" if exact else "warn",
                "data_source %s: no default reward function in verl %s%s (NotImplementedError 'Reward function is "
                "not implemented' at the first reward)" % (", ".join("%r (%d rows)" % (k, v) for k, v in
                                                                     sorted(unknown.items())[:5]), label,
                                                         "" if exact else " (the list of %s; %s is not recorded)" % (
                                                             label, release)),
                "write compute_score(data_source, solution_str, ground_truth, extra_info=None) in a .py file and set "
                "%s.path=/path/to/that.py %s.name=compute_score (or rename data_source to one verl knows, e.g. "
                "openai/gsm8k for GSM8K)" % (key, key), unknown=unknown, first=first)
        else:
            add("reward_function", "pass", "every data_source has a default reward function in verl %s" % label)
    return out


def default_sources(release: Optional[str]) -> Dict[str, Any]:
    """The data_source values verl ``release``'s default reward function knows:
    ``{"sources": set, "prefixes": [...], "label": release, "exact": bool, "source": where from}``.

    From matrices/verl_reward_sources.json (generated from each release's wheel by
    tools/gen_reward_sources.py); a release not in it gets the nearest older recorded one
    (``exact`` False), else the newest; the ruleset's ``default_reward_sources`` are the fallback
    when the file is absent.
    """
    import json

    from packaging.version import Version

    from ..matrix import parse_version, read_data

    raw = read_data("verl_reward_sources.json")
    table = json.loads(raw.decode("utf-8"))["versions"] if raw else {}
    table = {v: r for v, r in table.items() if r.get("sources") is not None}
    if table:
        pv = parse_version(release) if release else None
        order = sorted(table, key=Version)
        pick, exact = order[-1], False
        if release in table:
            pick, exact = release, True
        elif pv is not None:
            older = [v for v in order if Version(v) <= pv]
            pick = older[-1] if older else order[0]
        row = table[pick]
        return {"sources": set(row["sources"]), "prefixes": list(row.get("prefixes") or []), "label": pick,
                "exact": exact, "source": "%s %s in the verl %s wheel" % (row["file"], row["function"], pick)}
    rs, _note = ruleset(release)
    known_rs = rs if rs.get("default_reward_sources") else next(
        (r for r in reversed(load_rules()["ruleset"]) if r.get("default_reward_sources")), rs)
    return {"sources": set(known_rs.get("default_reward_sources") or []),
            "prefixes": list(known_rs.get("default_reward_prefixes") or []), "label": known_rs.get("label"),
            "exact": known_rs is rs, "source": "matrices/verl_rules.toml"}


def custom_reward_findings(path: str, rs: Dict[str, Any]) -> List[Finding]:
    """A finding on the custom reward function file ``path`` (``pkg://`` module paths are not
    looked up): verl loads it with importlib from the launch's working directory and raises
    FileNotFoundError ('Custom module file not found') when it is absent."""
    key = rs.get("custom_reward_key", "reward.custom_reward_function")
    meta: Dict[str, Any] = dict(check="the custom reward function file must exist and be a Python file",
                where="verl/utils/import_utils.py load_module (from verl/trainer/ppo/reward.py)")
    if path.startswith("pkg://"):
        return [Finding("data", "skip", "custom reward function %s is a module path, not looked up here" % path,
                        item="custom_reward", **meta)]
    file = path[len("file://"):] if path.startswith("file://") else path
    full = os.path.abspath(os.path.expanduser(file))
    if os.path.isfile(full):
        return [Finding("data", "pass", "custom reward function file %s exists" % path, item="custom_reward",
                        evidence={"path": full}, **meta)]
    from ..paths import file_problem

    problem = file_problem(full)
    why = ("is a directory, not a Python file" if os.path.isdir(full) else "does not exist"
           if problem in (None, "no such file") else "is %s" % problem)
    return [Finding("data", "fail", "custom reward function file %s %s%s: verl stops with FileNotFoundError "
                    "'Custom module file not found' when it builds the reward function" % (
                        path, why, "" if full == path else " (%s)" % full),
                    "set %s.path to the .py file that defines the function (relative paths are read from the "
                    "directory the launch runs in)" % key, item="custom_reward", evidence={"path": full}, **meta)]


def check_files(python: str, files: Sequence[str], prompt_key: str = "prompt", source_key: str = "data_source",
                release: Optional[str] = None, custom_reward: Optional[str] = None, examples: int = 3,
                timeout: float = 120.0) -> Tuple[List[Finding], Dict[str, Any]]:
    """Scan ``files`` with ``python``'s pyarrow and return (findings, {"pyarrow": version,
    "files": summaries}). Raises NoPyarrow or RuntimeError like :func:`scan`."""
    summaries, ver = scan(python, files, prompt_key, source_key, examples, timeout=timeout)
    return findings(summaries, release, custom_reward), {"pyarrow": ver, "files": summaries}
