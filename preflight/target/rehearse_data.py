# Target script: the first rows of the user's train/val files, written to the rehearsal's private
# directory in the same format, with the target's pyarrow (verl depends on it) for parquet and the
# standard library for JSON lines.
# ARGS: {"files": [{"src": PATH, "dest": PATH, "rows": N}], "prompt_key": "prompt", "sample": 8}
# Events: "no_pyarrow" {error}; "slice" {src, dest, rows, total_rows, columns: {name: type}, format,
#          prompts: [first `sample` prompt values, JSON-able], error?}
import json
import os


def _jsonable(v):
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return repr(v)


def _jsonl(item, key, sample):
    rows, prompts, total = [], [], 0
    with open(item["src"], "rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            total += 1
            if len(rows) < item["rows"]:
                rows.append(raw.rstrip(b"\n"))
                if len(prompts) < sample:
                    try:
                        prompts.append(_jsonable(json.loads(raw.decode("utf-8")).get(key)))
                    except (ValueError, AttributeError):
                        prompts.append(None)
    fd = os.open(item["dest"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(b"\n".join(rows) + b"\n")
    return {"rows": len(rows), "total_rows": total, "columns": {}, "format": "jsonl", "prompts": prompts}


def _parquet(item, key, sample, pq):
    f = parquet_file(item["src"])
    total = f.metadata.num_rows
    want = int(item["rows"])
    batches, got = [], 0
    for b in f.iter_batches(batch_size=max(1, min(want, 4096))):
        batches.append(b.slice(0, want - got))
        got += batches[-1].num_rows
        if got >= want:
            break
    import pyarrow as pa

    table = pa.Table.from_batches(batches, schema=f.schema_arrow) if batches else f.schema_arrow.empty_table()
    fd = os.open(item["dest"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    pq.write_table(table, item["dest"])
    cols = {n: str(t) for n, t in zip(table.schema.names, table.schema.types)}
    prompts = []
    if key in table.schema.names:
        prompts = [_jsonable(v) for v in table.column(key).slice(0, sample).to_pylist()]
    return {"rows": table.num_rows, "total_rows": total, "columns": cols, "format": "parquet", "prompts": prompts}


def main():
    key = ARGS.get("prompt_key") or "prompt"
    sample = int(ARGS.get("sample", 8))
    pq = None
    for item in ARGS.get("files", []):
        ext = os.path.splitext(item["src"])[1].lower()
        try:
            if ext in (".jsonl", ".json"):
                info = _jsonl(item, key, sample)
            else:
                if pq is None:
                    try:
                        import pyarrow.parquet as pq
                    except Exception as exc:
                        emit("no_pyarrow", error="%s: %s" % (type(exc).__name__, exc))
                        return
                info = _parquet(item, key, sample, pq)
        except Exception as exc:
            emit("slice", src=item["src"], dest=item["dest"], error="%s: %s" % (type(exc).__name__, exc))
            continue
        info.update(src=item["src"], dest=item["dest"])
        emit("slice", **info)


main()
