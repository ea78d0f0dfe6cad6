"""RL parquet checks with real parquet files, written with pyarrow in the test and read with the
target's pyarrow (a real verl 0.9.1 environment), through the API, `preflight data` and the
config stage of `check`.

Case: failure_cases.md #31 (the raw Hugging Face GSM8K split fed to verl: KeyError 'reward_model').
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from envs import real_env
from preflight.launch.dataset import NoPyarrow, check_files

pytestmark = pytest.mark.realenv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]

# Rows shaped as verl's examples/data_preprocess/gsm8k.py writes them (data_source, chat prompt with the
# "####" answer instruction, ability, reward_model {style, ground_truth}, extra_info {split, index}).
GOOD_ROWS = [
    {"data_source": "openai/gsm8k",
     "prompt": [{"role": "user", "content": "A baker fills 12 trays with 8 rolls each and sells 30 rolls. How many "
                                            "rolls are left? Let's think step by step and output the final answer "
                                            "after \"####\"."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "66"},
     "extra_info": {"split": "train", "index": 0}},
    {"data_source": "openai/gsm8k",
     "prompt": [{"role": "user", "content": "A cyclist rides 15 km each day for 6 days. How far does she ride?"}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "90"},
     "extra_info": {"split": "train", "index": 1}},
]


@pytest.fixture(scope="module")
def verl_py():
    return real_env("verl091-core", VERL_CORE)


def write_parquet(py, path, rows=None, columns=None):
    """Write a parquet file with the target's pyarrow: from row dicts or from {column: values}."""
    code = textwrap.dedent("""
        import json, sys
        import pyarrow as pa, pyarrow.parquet as pq
        spec = json.loads(sys.argv[2])
        t = pa.Table.from_pylist(spec["rows"]) if spec.get("rows") is not None else pa.table(spec["columns"])
        pq.write_table(t, sys.argv[1])
        """)
    subprocess.run([py, "-c", code, str(path), json.dumps({"rows": rows, "columns": columns})], check=True)
    return str(path)


def by_item(found):
    return {f.item.split(".")[-1]: f for f in found}


def test_fc31_raw_gsm8k_split(verl_py, tmp_path):
    raw = write_parquet(verl_py, tmp_path / "train-00000-of-00001.parquet", columns={
        "question": ["A baker fills 12 trays with 8 rolls each...", "A cyclist rides 15 km each day..."],
        "answer": ["12 * 8 = <<12*8=96>>96 rolls, 96 - 30 = <<96-30=66>>66\n#### 66",
                   "15 * 6 = <<15*6=90>>90\n#### 90"]})
    found, info = check_files(verl_py, [raw], prompt_key="question", release="0.9.1")
    f = by_item(found)
    assert info["pyarrow"] and info["files"][0]["num_rows"] == 2
    assert f["prompt"].status == "fail" and "2 of 2 rows have a bad 'question': a string, not a list of chat " \
        "messages" in f["prompt"].message
    assert f["data_source"].status == "fail" and "no 'data_source' column" in f["data_source"].message
    assert f["reward_model"].status == "fail" and "KeyError: 'reward_model'" in f["reward_model"].message
    assert "examples/data_preprocess/gsm8k.py" in f["reward_model"].fix
    assert f["extra_info"].status == "pass"
    found, _ = check_files(verl_py, [raw], release="0.9.1")
    assert by_item(found)["prompt"].message.endswith("columns: answer, question")


def test_verl_format_passes(verl_py, tmp_path):
    good = write_parquet(verl_py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    found, _ = check_files(verl_py, [good], release="0.9.1")
    assert {k: f.status for k, f in by_item(found).items()} == {
        "prompt": "pass", "data_source": "pass", "reward_model": "pass", "extra_info": "pass",
        "reward_function": "pass"}
    assert "openai/gsm8k (2)" in by_item(found)["data_source"].message


def test_bad_rows_are_counted_with_the_first_examples(verl_py, tmp_path):
    rows = [dict(GOOD_ROWS[i % 2], extra_info={"split": "train", "index": i}) for i in range(10)]
    rows[3] = dict(rows[3], reward_model={"style": "rule", "ground_truth": None})
    rows[7] = dict(rows[7], reward_model={"style": "rule", "ground_truth": None})
    rows[5] = dict(rows[5], prompt=[{"role": "user", "content": None}])
    rows[8] = dict(rows[8], data_source="my_dataset")
    path = write_parquet(verl_py, tmp_path / "mixed.parquet", rows=rows)
    found, info = check_files(verl_py, [path], release="0.9.1", examples=1)
    f = by_item(found)
    assert f["reward_model"].status == "fail"
    assert f["reward_model"].message.startswith("mixed.parquet: 2 of 10 rows have a bad reward_model: a mapping "
                                                "whose ground_truth is null (row 3:")
    assert f["prompt"].status == "fail" and "1 of 10 rows" in f["prompt"].message and "row 5" in f["prompt"].message
    rf = f["reward_function"]
    assert rf.status == "fail" and "'my_dataset' (1 rows): no default reward function in verl 0.9.1" in rf.message
    assert "reward.custom_reward_function.path=" in rf.fix
    reward = tmp_path / "my_reward.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    found, _ = check_files(verl_py, [path], release="0.9.1", custom_reward=str(reward))
    assert by_item(found)["reward_function"].status == "pass"
    assert info["files"][0]["sources"] == {"openai/gsm8k": 9, "my_dataset": 1}


def test_a_path_that_is_not_utf8_is_read_as_verl_reads_it(verl_py, tmp_path):
    """A directory name with a byte that is not UTF-8 (rev-attack A5): verl's reader (datasets) opens
    the file; pyarrow's own opening refuses the name. The file is judged on its rows, like any other,
    and the real datasets library is asked too."""
    d = os.path.join(os.fsencode(str(tmp_path)), b"u\xff")
    os.mkdir(d)
    good = write_parquet(verl_py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    odd = os.fsdecode(os.path.join(d, b"train.parquet"))
    os.rename(str(good), odd)
    found, info = check_files(verl_py, [odd], release="0.9.1")
    assert {k: f.status for k, f in by_item(found).items()} == {
        "prompt": "pass", "data_source": "pass", "reward_model": "pass", "extra_info": "pass",
        "reward_function": "pass"}, [(f.item, f.message) for f in found]
    assert info["files"][0]["num_rows"] == len(GOOD_ROWS)
    truth = subprocess.run([verl_py, "-c", "import os, sys, datasets\nprint(len(datasets.load_dataset('parquet', "
                            "data_files=[os.fsdecode(os.fsencode(sys.argv[1]))], split='train')))", odd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                           cwd=str(tmp_path))
    assert truth.stdout.split()[-1] == str(len(GOOD_ROWS)), truth.stderr[-1500:]


def test_interpreter_without_pyarrow(tmp_path, verl_py):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    good = write_parquet(verl_py, tmp_path / "t.parquet", rows=GOOD_ROWS)
    with pytest.raises(NoPyarrow):
        check_files(str(bare / "bin" / "python"), [good])


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, env=env)


def test_data_command(verl_py, tmp_path):
    good = write_parquet(verl_py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    raw = write_parquet(verl_py, tmp_path / "raw.parquet", columns={"question": ["q"], "answer": ["a"]})
    out = tmp_path / "d.json"
    p = cli("data", "--python", verl_py, good, "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "OK: 0 failed" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["data"]["files"][0]["num_rows"] == 2 and doc["exit_code"] == 0
    p = cli("data", "--python", verl_py, good, raw)
    assert p.returncode == 1 and "WOULD FAIL: 3 failed" in p.stdout
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    p = cli("data", "--python", str(bare / "bin" / "python"), good)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot import pyarrow" in p.stderr
    p = cli("data", "--python", verl_py, str(tmp_path / "missing.parquet"))
    assert p.returncode == 2 and "no such file" in p.stderr


def test_config_stage_reads_the_launch_datasets(verl_py, tmp_path):
    good = write_parquet(verl_py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    raw = write_parquet(verl_py, tmp_path / "test.parquet", columns={"question": ["q"], "answer": ["a"]})
    out = tmp_path / "r.json"
    launch = ("python3 -m verl.trainer.main_ppo data.train_files=%s data.val_files=%s actor_rollout_ref.rollout.name="
              "vllm data.train_batch_size=64 actor_rollout_ref.actor.ppo_mini_batch_size=16 "
              "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
              "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 algorithm.adv_estimator=grpo" % (good, raw))
    p = cli("check", "--python", verl_py, "--stage", "config", "--no-startup", "--launch", launch, "--json", str(out))
    doc = json.loads(out.read_text())
    res = {r["id"]: r for r in doc["results"]}
    assert res["config.compose"]["status"] == "pass" and "Hydra in the target (verl 0.9.1)" in \
        res["config.compose"]["message"]
    assert res["config.data.train.parquet.prompt"]["status"] == "pass"
    assert res["config.data.test.parquet.reward_model"]["status"] == "fail"
    assert p.returncode == 1


# ---- review fixes: empty files, a missing custom reward file, directories ------------------------
def test_zero_row_file_fails(verl_py, tmp_path):
    empty = write_parquet(verl_py, tmp_path / "empty.parquet", columns={
        "data_source": [], "prompt": [], "reward_model": []})
    found, info = check_files(verl_py, [empty], release="0.9.1")
    f = by_item(found)
    assert info["files"][0]["num_rows"] == 0
    assert f["rows"].status == "fail" and "empty.parquet: the file has no rows" in f["rows"].message
    assert "data_source, prompt, reward_model" in f["rows"].message and f["rows"].fix


def test_missing_custom_reward_file_fails(verl_py, tmp_path):
    good = write_parquet(verl_py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    found, _ = check_files(verl_py, [good], release="0.9.1", custom_reward="/nonexistent.py")
    f = by_item(found)["custom_reward"]
    assert f.status == "fail" and "custom reward function file /nonexistent.py does not exist" in f.message
    assert f.fix.startswith("set reward.custom_reward_function.path to the .py file")
    mine = tmp_path / "my_reward.py"
    mine.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    found, _ = check_files(verl_py, [good], release="0.9.1", custom_reward=str(mine))
    assert by_item(found)["custom_reward"].status == "pass"
    p = cli("data", "--python", verl_py, "--custom-reward", "/nonexistent.py", good,
            env=dict(os.environ, COLUMNS="300"))
    assert p.returncode == 1 and "FAIL   files.custom_reward  custom reward function file /nonexistent.py does " \
        "not exist: verl stops" in p.stdout, p.stdout


def test_data_command_reads_a_directory(verl_py, tmp_path):
    d = tmp_path / "gsm8k"
    d.mkdir()
    write_parquet(verl_py, d / "train.parquet", rows=GOOD_ROWS)
    write_parquet(verl_py, d / "test.parquet", rows=GOOD_ROWS)
    (d / "README.md").write_text("not data\n")
    out = tmp_path / "d.json"
    p = cli("data", "--python", verl_py, str(d), "--json", str(out), env=dict(os.environ, COLUMNS="300"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "is a directory: checked its 2 *.parquet file(s)" in p.stdout
    assert sorted(os.path.basename(f["path"]) for f in json.loads(out.read_text())["data"]["files"]) == [
        "test.parquet", "train.parquet"]
    empty = tmp_path / "nothing"
    empty.mkdir()
    p = cli("data", "--python", verl_py, str(empty))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "is a directory with no *.parquet file" in p.stderr


def test_config_stage_directory_in_train_files(verl_py, tmp_path):
    d = tmp_path / "gsm8k"
    d.mkdir()
    write_parquet(verl_py, d / "train.parquet", rows=GOOD_ROWS)
    out = tmp_path / "r.json"
    launch = "python3 -m verl.trainer.main_ppo data.train_files=%s data.val_files=%s" % (d, d / "train.parquet")
    cli("check", "--python", verl_py, "--stage", "config", "--launch", launch, "--json", str(out))
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    row = res["config.data.directory_gsm8k"]
    assert row["status"] == "fail" and "Unsupported file format" in row["message"]
    assert row["fix"] == "list the files instead: [%s]" % (d / "train.parquet")
    assert res["config.data.train.parquet.prompt"]["status"] == "pass"


def test_extra_info_as_a_json_string_fails_as_verls_dataset_does(verl_py, tmp_path):
    """extra_info stored as a JSON string (a preprocessing that json.dumps it): a FAIL, as verl's own
    RLHFDataset.__getitem__ fails on the first row. The truth is verl's own statement, taken from the
    installed rl_dataset.py and run on the row as `datasets` gives it."""
    rows = [dict(GOOD_ROWS[i % 2], extra_info=json.dumps({"split": "train", "index": i})) for i in range(3)]
    path = write_parquet(verl_py, tmp_path / "train.parquet", rows=rows)
    truth = subprocess.run([verl_py, "-c", textwrap.dedent("""
        import inspect, re, sys
        import datasets
        from verl.utils.dataset import rl_dataset
        src = inspect.getsource(rl_dataset.RLHFDataset.__getitem__)
        line = next(l.strip() for l in src.splitlines() if re.match(r"\\s*index = row_dict.get\\(.extra_info", l))
        row_dict = datasets.load_dataset("parquet", data_files=sys.argv[1])["train"][0]
        try:
            exec(line, {}, {"row_dict": row_dict})
            print("ok")
        except Exception as exc:
            print(type(exc).__name__)
        """), path], stdout=subprocess.PIPE, universal_newlines=True, timeout=300,
        env=dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")).stdout.split()
    assert truth[-1:] == ["AttributeError"], truth
    found, _ = check_files(verl_py, [path], release="0.9.1")
    f = by_item(found)["extra_info"]
    assert f.status == "fail" and "3 rows have a bad extra_info: a str, not a mapping" in f.message, f.message
    assert "AttributeError" in f.message and "json.loads" in f.fix
    good = write_parquet(verl_py, tmp_path / "good.parquet", rows=GOOD_ROWS)
    assert by_item(check_files(verl_py, [good], release="0.9.1")[0])["extra_info"].status == "pass"
