"""The data slicer: the first rows of parquet and JSON-lines files, copied by the target's
pyarrow into the rehearsal's private directory; checked by reading both files back with pyarrow."""

import json
import subprocess

import pytest

from envs import real_env
from preflight.probes.process import run_script
from preflight.rehearse.dataslice import as_list, plan_slices, rows_needed

pytestmark = pytest.mark.realenv


@pytest.fixture(scope="module")
def py():
    return real_env("data-jinja", ["pyarrow==19.0.1", "jinja2==3.1.6"])


def _write(py, path, n):
    code = ("import pyarrow as pa, pyarrow.parquet as pq\n"
            "rows = [{'data_source': 'openai/gsm8k', 'prompt': [{'role': 'user', 'content': 'q%d' % i}],"
            " 'reward_model': {'style': 'rule', 'ground_truth': str(i)}} for i in range(N)]\n"
            "pq.write_table(pa.Table.from_pylist(rows), P, row_group_size=7)\n").replace("N", str(n)).replace("P", repr(path))
    subprocess.run([py, "-c", code], check=True)


def _read(py, path):
    out = subprocess.run([py, "-c", "import json, pyarrow.parquet as pq; t = pq.read_table(%r); "
                          "print(json.dumps(t.to_pylist()))" % path], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True)
    return json.loads(out.stdout)


def test_rows_needed_and_lists():
    assert rows_needed(16) == 36 and rows_needed(1) == 3
    with pytest.raises(ValueError):
        rows_needed(0)
    assert as_list("[a.parquet, 'b.parquet']") == ["a.parquet", "b.parquet"]
    assert as_list("x.parquet") == ["x.parquet"] and as_list(None) == []


def test_parquet_and_jsonl_slices(py, tmp_path):
    src = str(tmp_path / "train.parquet")
    _write(py, src, 50)
    jl = tmp_path / "val.jsonl"
    jl.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": "v%d" % i}]}) + "\n" for i in range(9)))
    work = tmp_path / "w"
    (work / "data").mkdir(parents=True)
    plan = plan_slices([src, str(tmp_path / "missing.parquet")], [str(jl)], str(work), 20, 4)
    assert plan["problems"] == ["data.train_files: %s does not exist on this machine" % (tmp_path / "missing.parquet")]
    out = run_script(py, "rehearse_data", {"files": plan["files"], "prompt_key": "prompt", "sample": 3}, timeout=120)
    ev = {e["src"]: e for e in out.events if e.get("event") == "slice"}
    t = ev[src]
    assert t["rows"] == 20 and t["total_rows"] == 50 and t["format"] == "parquet"
    assert t["columns"]["prompt"].startswith("list<element: struct<")
    assert _read(py, t["dest"]) == _read(py, src)[:20]
    assert t["prompts"] == [[{"role": "user", "content": "q%d" % i}] for i in range(3)]
    v = ev[str(jl)]
    assert v["rows"] == 4 and v["total_rows"] == 9
    assert [json.loads(x)["prompt"][0]["content"] for x in open(v["dest"])] == ["v0", "v1", "v2", "v3"]


def test_short_file_and_a_string_prompt_column(py, tmp_path):
    """A file with fewer rows than asked gives all it has; a ``prompt`` column of strings (the planted
    column-type failure) is read as pyarrow types it and refused before the run."""
    from preflight.rehearse.rehearsal import prompt_column_problem

    short = str(tmp_path / "short.parquet")
    _write(py, short, 5)
    bad = str(tmp_path / "bad.parquet")
    subprocess.run([py, "-c", "import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.Table.from_pylist("
                    "[{'prompt': 'q%d' % i, 'data_source': 'openai/gsm8k'} for i in range(12)]), " + repr(bad) + ")"],
                   check=True)
    work = tmp_path / "w"
    (work / "data").mkdir(parents=True)
    plan = plan_slices([short], [bad], str(work), 36, 8)
    assert plan["problems"] == []
    out = run_script(py, "rehearse_data", {"files": plan["files"], "prompt_key": "prompt", "sample": 2}, timeout=120)
    ev = {e["src"]: e for e in out.events if e.get("event") == "slice"}
    assert ev[short]["rows"] == 5 == ev[short]["total_rows"]
    assert _read(py, ev[short]["dest"]) == _read(py, short)
    assert ev[bad]["rows"] == 8 and ev[bad]["columns"]["prompt"] == "string"
    assert "not a list of {role, content}" in prompt_column_problem(ev[bad]["columns"], "prompt")
    assert prompt_column_problem(ev[short]["columns"], "prompt") is None
