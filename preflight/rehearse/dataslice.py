"""How many rows of the user's train and val files a rehearsal needs, and where their copies go.

verl builds one training batch from ``data.train_batch_size`` prompts (each rolled out
``actor_rollout_ref.rollout.n`` times); its dataloader drops an incomplete last batch, and the
rehearsal runs two steps, so each train file contributes ``2 x train_batch_size`` rows (plus a
margin for prompts ``data.filter_overlong_prompts`` may drop). Validation needs one
``data.val_batch_size`` batch (the train batch size when unset). The rows themselves are read and
written by the target's pyarrow (``target/rehearse_data.py``); the copies live in the rehearsal's
private directory and nothing of the user's is changed.
"""

import os
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["rows_needed", "as_list", "plan_slices", "SUPPORTED"]

#: File suffixes verl's RL dataset reads (parquet; JSON lines through the datasets library).
SUPPORTED = (".parquet", ".jsonl", ".json")


def as_list(value: Any) -> List[str]:
    """``data.train_files``/``val_files`` as a list of paths (a string, a list, or a Hydra list
    string like ``"[a,b]"``); [] for None/unset."""
    if value is None or value == "???":
        return []
    if isinstance(value, str):
        v = value.strip()
        if v.startswith("[") and v.endswith("]"):
            return [p.strip().strip("'\"") for p in v[1:-1].split(",") if p.strip()]
        return [v]
    if isinstance(value, (list, tuple)):
        return [str(p) for p in value]
    return [str(value)]


def rows_needed(train_batch_size: int, steps: int = 2, margin: float = 0.25) -> int:
    """Rows each train file contributes: ``steps`` full batches of ``train_batch_size`` prompts
    plus ``margin`` (a fraction, for prompts filtered out as too long), at least one batch.
    Raises ValueError for a batch size below 1."""
    if int(train_batch_size) < 1:
        raise ValueError("data.train_batch_size must be at least 1 (got %r)" % (train_batch_size,))
    b = int(train_batch_size)
    return max(b, int(b * steps + max(1, round(b * margin))))


def plan_slices(train: Sequence[str], val: Sequence[str], workdir: str, train_rows: int,
                val_rows: Optional[int]) -> Dict[str, Any]:
    """The target's slice list and the new ``data.*_files`` values.

    Returns ``{"files": [{"src", "dest", "rows"}], "train": [dest...], "val": [dest...],
    "problems": [one line per unusable input]}``; ``val`` is [] when ``val_rows`` is None (no
    validation in the rehearsal). Sources are expanded (``~``) and made absolute; a missing file or
    an unsupported suffix is a problem, not an exception.
    """
    out: Dict[str, Any] = {"files": [], "train": [], "val": [], "problems": []}
    ddir = os.path.join(workdir, "data")
    for role, paths, rows in (("train", train, train_rows), ("val", val, val_rows)):
        if rows is None:
            continue
        for i, p in enumerate(paths):
            src = os.path.abspath(os.path.expanduser(p))
            ext = os.path.splitext(src)[1].lower()
            if ext not in SUPPORTED:
                out["problems"].append("data.%s_files: %s is not a parquet or JSON-lines file" % (role, p))
                continue
            if not os.path.isfile(src):
                out["problems"].append("data.%s_files: %s does not exist on this machine" % (role, p))
                continue
            dest = os.path.join(ddir, "%s-%d%s" % (role, i, ext))
            out["files"].append({"src": src, "dest": dest, "rows": int(rows)})
            out[role].append(dest)
    return out
