"""Secrets never on a command line (issue 21, fault_cases_3.md x01): every child the checker
starts gets its arguments through a private file, never argv.

The witness is independent of the launcher: a ``sitecustomize.py`` on the target's path (it runs
first in every Python the target starts, before any of the tool's code) appends its own
``/proc/self/cmdline`` and its parent's to a dump file, and a thread scans every
``/proc/*/cmdline`` while a command runs. A secret planted in every input (env-resolved reward
kwargs, a chat template, dataset lists, a model path) must appear in neither.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from faultkit import target
from preflight.probes import process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEAK = pytest.mark.fault("LEAK")
SECRET = "sk-SeCrEtJudge0123456789abcdef"


def _own_secret(tag):
    """A secret only this test uses: the scan reads every process on the machine, and tests run
    side by side under xdist (one test's own helper may hold its secret in its argv)."""
    return "sk-SeCrEt%s%s" % (tag, os.urandom(6).hex())

#: Appends this process's and its parent's argv (JSON) to $PF_CMDLINE_DUMP; with $PF_ARGS_COUNT,
#: also how many ``files`` the private ARGS file holds (read, not consumed); with $PF_DUMP_EXIT,
#: exits at once (the launcher is what is under test, not the script).
DUMP = r'''
import json, os
def _argv(pid):
    with open("/proc/%s/cmdline" % pid, "rb") as fh:
        return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0")[:-1]]
_d = os.environ.get("PF_CMDLINE_DUMP")
if _d:
    rec = {"self": _argv("self"), "parent": _argv(os.getppid())}
    if os.environ.get("PF_ARGS_COUNT") and os.environ.get("PREFLIGHT_ARGS"):
        with open(os.environ["PREFLIGHT_ARGS"]) as fh:
            rec["files"] = len(json.load(fh).get("files") or [])
    with open(_d, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    if os.environ.get("PF_DUMP_EXIT"):
        os._exit(0)
'''


def _records(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _scripts():
    d = os.path.join(ROOT, "preflight", "target")
    return sorted(f[:-3] for f in os.listdir(d) if f.endswith(".py") and not f.startswith("_"))


def _payload(secret):
    """One payload with the secret in every shape a script's input takes."""
    return {"files": ["/data/%s/train-%05d.parquet" % (secret, i) for i in range(3)], "template": "{{ '%s' }}" % secret,
            "reward": {"path": "/x/rw.py", "name": "compute_score", "kwargs": {"api_key": secret}},
            "path": "/models/%s" % secret, "items": [{"id": secret, "module": secret}], "targets": [secret],
            "overrides": ["+x.api_key=%s" % secret], "address": secret, "node_argv": [secret]}


@LEAK
@pytest.mark.parametrize("name", _scripts())
def test_every_target_script_is_started_argv_free(tmp_path, name):
    """Each target script, started the one way there is, shows only ``python -c LOADER``; its
    supervisor shows only its fixed code and two tool-made values."""
    py, _ = target(tmp_path, {"sitecustomize.py": DUMP})
    dump = str(tmp_path / "dump")
    out = process.run_script(py, name, _payload(SECRET), timeout=30,
                             env={"PF_CMDLINE_DUMP": dump, "PF_DUMP_EXIT": "1"})
    recs = _records(dump)
    assert recs, (name, out.describe(), out.stderr_tail)
    for rec in recs:
        assert not any(SECRET in a for a in rec["self"] + rec["parent"]), rec
        assert rec["self"][1:] == ["-c", process.LOADER], rec["self"]
        assert rec["parent"][1:5] == ["-I", "-S", "-c", process.supervisor_code()] and len(rec["parent"]) == 7


@LEAK
def test_twenty_thousand_long_shard_names_arrive_whole(tmp_path):
    """20 000 shard names of 200 characters (4 MB; one argv string may hold 128 KiB) reach the
    target in full: no E2BIG, no truncation."""
    py, _ = target(tmp_path, {"sitecustomize.py": DUMP})
    dump = str(tmp_path / "dump")
    files = ["/" + ("s%05d-" % i) + "x" * 192 for i in range(20000)]
    out = process.run_script(py, "read_parquet", {"files": files}, timeout=60,
                             env={"PF_CMDLINE_DUMP": dump, "PF_DUMP_EXIT": "1", "PF_ARGS_COUNT": "1"})
    assert out.launch_error is None, out.launch_error
    assert [r.get("files") for r in _records(dump)] == [20000]


def test_args_reach_the_script_and_leave_no_trace(monkeypatch):
    """The payload is the script's ARGS; its file and variable are gone before the script's own
    code runs, so the processes it starts inherit neither."""
    out = process.run_script(sys.executable, "imports", {"items": [{"id": "j", "module": "json"}]}, timeout=60)
    assert out.ok, out.describe() + out.stderr_tail
    assert any(e.get("id") == "j" for e in out.events), out.events
    with open(os.path.join(ROOT, "preflight", "target", "_prelude.py")) as fh:
        prelude = fh.read()
    body = ("import os\nemit('left', args=os.environ.get('PREFLIGHT_ARGS'), script=os.environ.get('PREFLIGHT_SCRIPT'), "
            "k=ARGS['k'], n=len(ARGS['files']))\n")
    monkeypatch.setattr(process, "load_script", lambda name: prelude + "\n" + body)  # the real prelude and launcher
    got = process.run_script(sys.executable, "inline", {"k": SECRET, "files": ["x" * 300] * 1000}, timeout=30)
    assert got.last("left") == {"event": "left", "args": None, "script": None, "k": SECRET, "n": 1000}, got.stderr_tail


class ProcScan(threading.Thread):
    """Reads every /proc/PID/cmdline every few milliseconds until stopped; ``hits`` are the
    command lines holding ``needle``, ``seen`` how many distinct processes were read."""

    def __init__(self, needle, own=None):
        super().__init__(daemon=True)
        self.needle = needle.encode()
        self.own = own  # the user's own command line (the checker's: it may name the inputs), not counted
        self.hits, self.seen, self.halt = [], set(), threading.Event()
        self.start()

    def run(self):
        while not self.halt.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as fh:
                        cmd = fh.read()
                except OSError:
                    continue
                self.seen.add(pid)
                if self.needle in cmd and not (self.own and self.own in cmd):
                    self.hits.append(cmd.replace(b"\0", b" ")[:300])
            time.sleep(0.005)

    def stop(self):
        self.halt.set()
        self.join(5)
        return self.hits


VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]
ROWS = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 2+2?"}], "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"split": "train", "index": 0}}]
REWARD = '''
import json, os
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):
    with open(os.environ["PF_REWARD_DUMP"], "a") as fh:
        fh.write(json.dumps({"kw": kw, "self": open("/proc/self/cmdline", "rb").read().decode("utf-8", "replace"),
                             "parent": open("/proc/%d/cmdline" % os.getppid(), "rb").read().decode("utf-8", "replace")}) + "\\n")
    return 1.0
'''


@pytest.fixture(scope="module")
def verl_py():
    from envs import real_env

    return real_env("verl091-core", VERL_CORE)


def _parquet(py, path):
    code = ("import json,sys,pyarrow as pa,pyarrow.parquet as pq; d = json.load(sys.stdin); "
            "pq.write_table(pa.Table.from_pylist(d['rows']), d['path'])")
    subprocess.run([py, "-c", code], input=json.dumps({"rows": ROWS, "path": str(path)}), universal_newlines=True,
                   check=True)
    return str(path)


@LEAK
@pytest.mark.realenv
def test_x01_reward_kwargs_from_the_environment(verl_py, tmp_path):
    """x01: ``+custom_reward_function.reward_kwargs.api_key=${oc.env:S3_JUDGE_KEY}``: the reward
    function gets the secret as a keyword argument; no command line of any process holds it."""
    train = _parquet(verl_py, tmp_path / "train.parquet")
    rw = tmp_path / "rw.py"
    rw.write_text(REWARD)
    dump = tmp_path / "rw.dump"
    SECRET = _own_secret("X01")
    env = dict(os.environ, S3_JUDGE_KEY=SECRET, PF_REWARD_DUMP=str(dump), COLUMNS="300")
    scan = ProcScan(SECRET)
    try:
        p = subprocess.run([sys.executable, "-m", "preflight", "config", "--python", verl_py, "--verl", "0.9.1", "--",
                            "data.train_files=%s" % train, "data.val_files=%s" % train,
                            "custom_reward_function.path=%s" % rw,
                            "+custom_reward_function.reward_kwargs.api_key=${oc.env:S3_JUDGE_KEY}"],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=300)
    finally:
        hits = scan.stop()
    recs = [json.loads(l) for l in dump.read_text().splitlines()] if dump.exists() else []
    assert recs, p.stdout[-3000:]
    assert all(r["kw"].get("api_key") == SECRET for r in recs), recs
    assert not any(SECRET in r["self"] or SECRET in r["parent"] for r in recs), recs
    assert hits == [], hits
    assert SECRET not in p.stdout


@LEAK
@pytest.mark.realenv
def test_data_command_with_secrets_in_every_input(verl_py, tmp_path):
    """``data --model DIR --custom-reward`` with the secret in the model's path, its chat
    template, the dataset's file name and the reward's path: no command line holds it."""
    SECRET = _own_secret("Data")
    d = tmp_path / ("model-" + SECRET)
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "num_attention_heads": 2}))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{# %s #}{{ messages[0]['content'] }}" % SECRET}))
    train = _parquet(verl_py, tmp_path / ("train-%s.parquet" % SECRET))
    rw = tmp_path / ("rw_%s.py" % SECRET.replace("-", "_"))
    rw.write_text(REWARD)
    dump = tmp_path / "rw.dump"
    scan = ProcScan(SECRET.replace("-", "_")[3:], own=b"-m\0preflight\0data\0")  # the part every input holds
    try:
        p = subprocess.run([sys.executable, "-m", "preflight", "data", "--python", verl_py, "--model", str(d),
                            "--custom-reward", str(rw), train], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                           env=dict(os.environ, PF_REWARD_DUMP=str(dump), COLUMNS="300"))
    finally:
        hits = scan.stop()
    assert dump.exists() and "chat_template" in p.stdout, p.stdout[-3000:]
    assert hits == [], hits


def _calls(tree, names):
    import ast

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in names:
                yield node


def test_no_child_is_started_with_serialised_data_on_its_command_line():
    """Structure: across preflight/, no process start (Popen, subprocess.run, child.run,
    run_live, run_argv, _run_child, execvp) is given a command line holding ``json.dumps(...)``
    (how arguments travelled before), and ``run_argv`` (the one start that takes a free argv) is
    called only for the checker's own NVML probe, whose argv is fixed."""
    import ast

    starters = {"Popen", "run", "run_live", "run_argv", "_run_child", "execvp", "check_output", "call"}
    offenders, argv_users = [], set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "preflight")):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            rel = os.path.relpath(path, ROOT)
            for call in _calls(tree, starters):
                if isinstance(call.func, ast.Attribute) and call.func.attr == "run_argv" or \
                        isinstance(call.func, ast.Name) and call.func.id == "run_argv":
                    argv_users.add(rel)
                for arg in call.args[:1]:
                    for inner in _calls(arg, {"dumps"}):
                        offenders.append("%s:%d" % (rel, inner.lineno))
            for lst in ast.walk(tree):  # a command line built apart: [python, "-c", code, json.dumps(args)]
                if isinstance(lst, ast.List) and any(isinstance(e, ast.Constant) and e.value == "-c"
                                                     for e in lst.elts):
                    for e in lst.elts:
                        for inner in _calls(e, {"dumps"}):
                            offenders.append("%s:%d" % (rel, inner.lineno))
    assert offenders == [], offenders
    assert argv_users == {os.path.join("preflight", "probes", "nvml.py")}, argv_users
