# Reads RL parquet files with the target's pyarrow (verl depends on it) and checks each row the
# way verl's RLHFDataset and reward managers will read it.
# ARGS: {"files": [...], "prompt_key": "prompt", "source_key": "data_source", "examples": 3,
#        "max_rows": 1000000}
# Events: "no_pyarrow" {error}; "file" {path, error?, num_rows, scanned, columns: {name: type},
#          checks: {prompt|data_source|reward_model|extra_info: {key, present, type, bad: {kind: count},
#          examples: [{row, kind, value}]}}, sources: {data_source: count} (first 200 values),
#          sources_other: rows with further values}
import os


def _short(v, n=160):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def _prompt_kind(v):
    if v is None:
        return "null"
    if isinstance(v, str):
        return "a string, not a list of chat messages"
    if not isinstance(v, (list, tuple)):
        return "a %s, not a list of chat messages" % type(v).__name__
    if not v:
        return "an empty list"
    for m in v:
        if not isinstance(m, dict):
            return "a list item that is not a {role, content} message"
        if not isinstance(m.get("role"), str) or not m.get("role"):
            return "a message without a role"
        c = m.get("content")
        if c is None or not isinstance(c, (str, list)):
            return "a message without text content"
    return None


def _source_kind(v):
    if v is None:
        return "null"
    if not isinstance(v, str):
        return "a %s, not a string" % type(v).__name__
    if not v:
        return "an empty string"
    return None


def _reward_kind(v):
    if v is None:
        return "null"
    if not isinstance(v, dict):
        return "a %s, not a mapping with ground_truth" % type(v).__name__
    if "ground_truth" not in v:
        return "a mapping without ground_truth"
    if v.get("ground_truth") is None:
        return "a mapping whose ground_truth is null"
    return None


def _extra_kind(v):
    if v is None or isinstance(v, dict):
        return None
    return "a %s, not a mapping" % type(v).__name__


def _one(path, keys, n_examples, max_rows):
    out = {"path": path}
    if not os.path.isfile(path):
        out["error"] = "no such file"
        return out
    try:
        pf = parquet_file(path)
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:500])
        return out
    schema = pf.schema_arrow
    out["num_rows"] = pf.metadata.num_rows
    out["columns"] = {f.name: str(f.type) for f in schema}
    checks = {}
    kinds = {"prompt": _prompt_kind, "data_source": _source_kind, "reward_model": _reward_kind,
             "extra_info": _extra_kind}
    wanted = []
    for role, key in keys.items():
        present = key in out["columns"]
        checks[role] = {"key": key, "present": present, "type": out["columns"].get(key), "bad": {}, "examples": []}
        if present and key not in wanted:
            wanted.append(key)
    sources = {}
    other = 0
    scanned = 0
    if wanted:
        for rb in pf.iter_batches(batch_size=2048, columns=wanted):
            rows = rb.to_pylist()
            for row in rows:
                if scanned >= max_rows:
                    break
                for role, key in keys.items():
                    c = checks[role]
                    if not c["present"]:
                        continue
                    v = row.get(key)
                    kind = kinds[role](v)
                    if role == "data_source" and kind is None:
                        if v in sources or len(sources) < 200:
                            sources[v] = sources.get(v, 0) + 1
                        else:
                            other += 1
                    if kind is not None:
                        c["bad"][kind] = c["bad"].get(kind, 0) + 1
                        if len(c["examples"]) < n_examples:
                            c["examples"].append({"row": scanned, "kind": kind, "value": _short(v)})
                scanned += 1
            if scanned >= max_rows:
                break
    out["scanned"] = scanned if wanted else 0
    out["checks"] = checks
    out["sources"] = sources
    out["sources_other"] = other
    return out


def main():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except Exception as exc:
        emit("no_pyarrow", error="%s: %s" % (type(exc).__name__, exc))
        return
    keys = {"prompt": ARGS.get("prompt_key") or "prompt", "data_source": ARGS.get("source_key") or "data_source",
            "reward_model": "reward_model", "extra_info": "extra_info"}
    emit("pyarrow", version=getattr(pyarrow, "__version__", None))
    for path in ARGS.get("files") or []:
        try:
            ev = _one(path, keys, int(ARGS.get("examples", 3)), int(ARGS.get("max_rows") or 10 ** 9))
        except Exception as exc:
            ev = {"path": path, "error": "%s: %s" % (type(exc).__name__, str(exc)[:500])}
        emit("file", **ev)


main()
