"""Code another user can change, run by this process (SECURITY.md, "Code another user can change"):
a reward file (A01), a model directory's ``auto_map`` code with ``trust_remote_code=True`` (A02)
and the target interpreter's own start-up (site-packages, a ``.pth`` file, sitecustomize, its
prefix: A04), each planted by uid 65534. The tool, as root, must not run it: the code's witness
file (``PWNED_*``) is never made, and a row says ``not run:`` naming the path. The same files
owned by root still run (the reward is scored, the model's code is loaded, the ``.pth`` runs).
"""

import json
import os
import subprocess
import sys

import pytest
from seckit import NOBODY, ROOT, need_root

EXEC = pytest.mark.fault("EXEC")

ROWS = [{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 2+2?"}], "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": "4"}, "extra_info": {"split": "train", "index": 0}}]

#: Writes PWN/PWNED_<what>_uid<uid> when imported (its witness), then scores 1.0.
REWARD = '''
import os
open(os.path.join(%r, "PWNED_reward_uid%%d" %% os.getuid()), "w").close()
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):
    return 1.0
'''

CONFIGURATION = '''
import os
from transformers import LlamaConfig
open(os.path.join(%r, "PWNED_model_uid%%d" %% os.getuid()), "w").close()
class EvilConfig(LlamaConfig):
    model_type = "evil"
'''

PTH = 'import os; open(os.path.join(%r, "PWNED_pth_uid%%d" %% os.getuid()), "w").close()\n'


@pytest.fixture(scope="module")
def verl_py():
    from envs import real_env

    return real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])


def _pwn(tmp_path):
    d = tmp_path / "pwn"
    d.mkdir()
    os.chmod(str(d), 0o1777)  # the witness can be written by any uid the code runs as
    return str(d)


def _theirs(path):
    """Give ``path`` and everything under it to uid 65534 (what they planted)."""
    for d, dirs, files in os.walk(str(path)):
        for n in [d] + [os.path.join(d, f) for f in files]:
            os.lchown(n, NOBODY, NOBODY)


def _parquet(py, path):
    code = ("import json,sys,pyarrow as pa,pyarrow.parquet as pq; d = json.load(sys.stdin); "
            "pq.write_table(pa.Table.from_pylist(d['rows']), d['path'])")
    subprocess.run([py, "-c", code], input=json.dumps({"rows": ROWS, "path": str(path)}), universal_newlines=True,
                   check=True)
    return str(path)


def _run(*args, timeout=400):
    p = subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout,
                       env=dict(os.environ, COLUMNS="400"))
    return p


def _rows(report):
    with open(str(report)) as fh:
        return json.load(fh)["results"]


def _refused(rows, path):
    return [r for r in rows if r["status"] in ("fail", "error") and "not run:" in r["message"] and path in r["message"]]


def _reward(tmp_path, pwn, foreign):
    d = tmp_path / ("eve" if foreign else "mine")
    d.mkdir()
    rw = d / "reward.py"
    rw.write_text(REWARD % pwn)
    if foreign:
        _theirs(d)
    return str(rw)


# A01: the reward file


@EXEC
@pytest.mark.realenv
@pytest.mark.parametrize("foreign", [True, False], ids=["theirs", "root's"])
def test_a01_data_custom_reward(verl_py, tmp_path, foreign):
    need_root()
    pwn = _pwn(tmp_path)
    rw = _reward(tmp_path, pwn, foreign)
    train = _parquet(verl_py, tmp_path / "train.parquet")
    out = tmp_path / "r.json"
    p = _run("data", "--python", verl_py, "--custom-reward", rw, train, "--json", str(out))
    rows = _rows(out)
    if foreign:
        assert os.listdir(pwn) == [], p.stdout[-3000:]
        assert _refused(rows, rw), p.stdout[-3000:]
        assert p.returncode != 0
    else:
        assert os.listdir(pwn) == ["PWNED_reward_uid0"], p.stdout[-3000:]
        assert not _refused(rows, rw)


@EXEC
@pytest.mark.realenv
@pytest.mark.parametrize("key", ["custom_reward_function.path", "reward.custom_reward_function.path", "root's"])
def test_a01_config_reward_in_smoke_and_verl_startup(verl_py, tmp_path, key):
    need_root()
    pwn = _pwn(tmp_path)
    foreign = key != "root's"
    rw = _reward(tmp_path, pwn, foreign)
    train = _parquet(verl_py, tmp_path / "train.parquet")
    out = tmp_path / "r.json"
    p = _run("config", "--python", verl_py, "--verl", "0.9.1", "--json", str(out), "--",
             "data.train_files=%s" % train, "data.val_files=%s" % train,
             "%s=%s" % (key if foreign else "custom_reward_function.path", rw))
    rows = _rows(out)
    if foreign:
        assert os.listdir(pwn) == [], p.stdout[-3000:]
        ids = {r["id"] for r in _refused(rows, rw)}
        assert "config.verl.startup" in ids, p.stdout[-3000:]
        if key == "custom_reward_function.path":  # the release's own key (0.9.1 reads both)
            assert any(i.startswith("config.data") for i in ids), ids
        assert p.returncode != 0
    else:
        assert "PWNED_reward_uid0" in os.listdir(pwn), p.stdout[-3000:]
        assert not _refused(rows, rw)


# A02: a model directory's auto_map code with trust_remote_code=True


def _model(tmp_path, pwn, foreign):
    d = tmp_path / ("evil-model" if foreign else "my-model")
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "model_type": "evil", "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"},
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 2048}))
    (d / "configuration_evil.py").write_text(CONFIGURATION % pwn)
    if foreign:
        _theirs(d)
    return str(d)


@EXEC
@pytest.mark.realenv
@pytest.mark.parametrize("foreign", [True, False], ids=["theirs", "root's"])
def test_a02_model_auto_map_with_trust_remote_code(verl_py, tmp_path, foreign):
    need_root()
    pwn = _pwn(tmp_path)
    model = _model(tmp_path, pwn, foreign)
    train = _parquet(verl_py, tmp_path / "train.parquet")
    out = tmp_path / "r.json"
    p = _run("config", "--python", verl_py, "--verl", "0.9.1", "--json", str(out), "--",
             "data.train_files=%s" % train, "data.val_files=%s" % train, "data.max_prompt_length=512",
             "actor_rollout_ref.model.path=%s" % model, "actor_rollout_ref.model.trust_remote_code=True")
    rows = _rows(out)
    if foreign:
        assert os.listdir(pwn) == [], p.stdout[-3000:]
        assert "config.verl.startup" in {r["id"] for r in _refused(rows, model)}, p.stdout[-3000:]
        assert p.returncode != 0
    else:
        assert "PWNED_model_uid0" in os.listdir(pwn), p.stdout[-3000:]
        assert not _refused(rows, model)


# A04: the target interpreter's start-up


def _venv(tmp_path, pwn, shape):
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True)
    sp = subprocess.run([str(v / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                        check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    if shape == "sitecustomize":
        with open(os.path.join(sp, "sitecustomize.py"), "w") as fh:
            fh.write(PTH.replace("pth", "sitecustomize") % pwn)
        planted = os.path.join(sp, "sitecustomize.py")
    else:
        with open(os.path.join(sp, "zz_evil.pth"), "w") as fh:
            fh.write(PTH % pwn)
        planted = os.path.join(sp, "zz_evil.pth")
    if shape == "site-packages":
        _theirs(sp)
        planted = sp
    elif shape in ("pth", "sitecustomize"):
        os.lchown(planted, NOBODY, NOBODY)
    elif shape == "prefix":
        os.chmod(str(v), 0o777)
        planted = str(v)
    return str(v / "bin" / "python"), planted


@EXEC
@pytest.mark.parametrize("shape", ["site-packages", "pth", "sitecustomize", "prefix", "root's"])
def test_a04_interpreter_start_up_of_another_user(tmp_path, shape):
    need_root()
    pwn = _pwn(tmp_path)
    py, planted = _venv(tmp_path, pwn, shape)
    out = tmp_path / "r.json"
    p = _run("check", "--python", py, "--stage", "python,packages", "--json", str(out), timeout=120)
    rows = _rows(out)
    if shape != "root's":
        assert os.listdir(pwn) == [], p.stdout[-3000:]
        refused = _refused(rows, planted)
        assert [r["id"] for r in refused] == ["python.interpreter"], p.stdout[-3000:]
        assert "uid 65534" in refused[0]["message"] or "writable" in refused[0]["message"]
        assert p.returncode != 0
    else:
        assert os.listdir(pwn) == ["PWNED_pth_uid0"], p.stdout[-3000:]
        assert not [r for r in rows if "not run:" in r["message"]]


SILENT = """#!/bin/sh
# answers the checker's -I -S read with silence, and runs anything else with a witness
for a in "$@"; do [ "$a" = "-I" ] && exit 0; done
: > %s/PWNED_binary_uid$(id -u)
exec %s "$@"
"""


@EXEC
@pytest.mark.parametrize("how", ["path", "name on PATH"])
def test_a04_an_interpreter_of_another_user_silent_under_I_is_never_run(tmp_path, how):
    """The executable itself is judged before it runs: one owned by uid 65534 that exits without a
    word under -I (so no start-up tree comes back to judge) must not then be run without it."""
    need_root()
    pwn = _pwn(tmp_path)
    d = tmp_path / "eve" / "bin"
    d.mkdir(parents=True)
    py = d / "python3"
    py.write_text(SILENT % (pwn, sys.executable))
    os.chmod(str(py), 0o755)
    _theirs(tmp_path / "eve")
    out = tmp_path / "r.json"
    if how == "path":
        p = _run("check", "--python", str(py), "--stage", "python,packages", "--json", str(out), timeout=120)
    else:
        p = subprocess.run([sys.executable, "-m", "preflight", "check", "--python", "python3", "--stage",
                            "python,packages", "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                           env=dict(os.environ, COLUMNS="400", PATH="%s:%s" % (d, os.environ["PATH"])))
    rows = _rows(out)
    assert os.listdir(pwn) == [], p.stdout[-3000:]
    refused = _refused(rows, str(py))
    assert [r["id"] for r in refused] == ["python.interpreter"], p.stdout[-3000:]
    assert "uid 65534" in refused[0]["message"] and p.returncode != 0


@EXEC
def test_a04_a_bytecode_cache_prefix_of_another_user_is_not_read_by_the_target(tmp_path):
    """PYTHONPYCACHEPREFIX names where compiled modules are read from: a .pyc planted there for the
    standard library's json (stamped with the real source's mtime and size, so it passes as fresh)
    runs in its place. The attack works on a plain run; when another user owns that directory the
    checker's probes never start (the checker's own prefix is judged in tests/probes/test_bytecode.py)."""
    need_root()
    pwn = _pwn(tmp_path)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(cache))
    plant = ("import importlib.util, json, marshal, os, struct, sys\n"
             "src = json.__file__\n"
             "st = os.stat(src)\n"
             "code = compile(sys.argv[1], src, 'exec')\n"
             "pyc = importlib.util.cache_from_source(src)\n"
             "os.makedirs(os.path.dirname(pyc), exist_ok=True)\n"
             "with open(pyc, 'wb') as fh:\n"
             "    fh.write(importlib.util.MAGIC_NUMBER + struct.pack('<III', 0, int(st.st_mtime) & 0xFFFFFFFF,\n"
             "             st.st_size & 0xFFFFFFFF) + marshal.dumps(code))\n")
    subprocess.run([sys.executable, "-c", plant, PTH.replace("pth", "pyc") % pwn], env=env, check=True)
    subprocess.run([sys.executable, "-c", "import json"], env=env, check=True)
    assert os.listdir(pwn) == ["PWNED_pyc_uid%d" % os.getuid()]  # the planted .pyc runs on a plain import
    os.remove(os.path.join(pwn, os.listdir(pwn)[0]))
    _theirs(cache)  # a cache directory another user made (a shared /tmp/pycache, say)
    out = tmp_path / "r.json"
    # the checker itself runs isolated (-I ignores the variable, as `python -I preflight.pyz` does);
    # its environment, variable included, is what the target's probes inherit
    boot = "import runpy, sys; sys.path.insert(0, %r); runpy.run_module('preflight', run_name='__main__', alter_sys=True)"
    p = subprocess.run([sys.executable, "-I", "-c", boot % ROOT, "check", "--python", sys.executable, "--stage",
                        "python,packages,imports", "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, env=env)
    assert os.listdir(pwn) == [], p.stdout[-3000:]
    refused = _refused(_rows(out), str(cache))
    assert [r["id"] for r in refused] == ["python.interpreter"] and "uid 65534" in refused[0]["message"], p.stdout


# A01b: the bytecode Python runs in place of a reward's source

PLANT_PYC = '''
import importlib.util, marshal, os, struct, sys
src, pwn = sys.argv[1], sys.argv[2]
st = os.stat(src)
code = compile("open(%r + '/PWNED_pyc_uid%%d' %% __import__('os').getuid(), 'w').close()\\n"
               "def compute_score(*a, **k):\\n    return 1.0\\n" % pwn, src, "exec")
pyc = importlib.util.cache_from_source(src)
os.makedirs(os.path.dirname(pyc), exist_ok=True)
with open(pyc, "wb") as fh:
    fh.write(importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size)
             + marshal.dumps(code))
'''


@EXEC
@pytest.mark.realenv
@pytest.mark.parametrize("shape", ["sticky dir", "their __pycache__", "root's"])
def test_a01_bytecode_beside_a_reward_file_is_judged(verl_py, tmp_path, shape):
    """root's own reward file; uid 65534 makes ``__pycache__/reward.cpython-3X.pyc`` beside it with
    the source's mtime and size in its header, so an import runs it instead of the source: in a
    sticky shared directory (they can add a name there), or in a __pycache__ they own. The data
    smoke and config's smoke must not import it; root's own __pycache__ in root's directory is fine."""
    from seckit import as_nobody, reachable, shared_dir

    need_root()
    pwn = _pwn(tmp_path)
    reachable(str(tmp_path))
    folder = tmp_path / "rw"
    if shape == "sticky dir":
        shared_dir(str(folder))
    else:
        folder.mkdir(mode=0o755)
    rw = folder / "reward.py"
    rw.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
                  "    return 1.0\n")
    os.chmod(str(rw), 0o644)
    if shape == "their __pycache__":
        (folder / "__pycache__").mkdir()
        os.chown(str(folder / "__pycache__"), NOBODY, NOBODY)
    if shape == "root's":
        subprocess.run([verl_py, "-c", PLANT_PYC, str(rw), pwn], check=True)  # root's own bytecode: it runs
    else:
        as_nobody(verl_py, "-c", PLANT_PYC, str(rw), pwn)
    train = _parquet(verl_py, tmp_path / "train.parquet")
    for args in (["data", "--python", verl_py, "--custom-reward", str(rw), train],
                 ["config", "--python", verl_py, "--verl", "0.9.1", "--no-startup", "--",
                  "data.train_files=%s" % train, "data.val_files=%s" % train, "custom_reward_function.path=%s" % rw]):
        out = tmp_path / "r.json"
        p = _run(*(args[:1] + ["--json", str(out)] + args[1:]))
        rows = _rows(out)
        if shape == "root's":
            assert "PWNED_pyc_uid0" in os.listdir(pwn), p.stdout[-3000:]
            assert not _refused(rows, str(rw)), p.stdout[-3000:]
        else:
            assert os.listdir(pwn) == [], p.stdout[-3000:]
            assert _refused(rows, str(rw)) and p.returncode != 0, p.stdout[-3000:]
