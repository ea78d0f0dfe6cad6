"""Differential tests: preflight's two ways of composing verl's config against hydra-core itself.

The truth is an independent process: the hydra-core installed in the test venv composing the
config directory of verl's real wheel (``verl/trainer/config`` read straight from the wheel that
``pip download`` fetched, not from matrices/), with a script written here, not preflight's.
The two ways under test, override by override:

* **vendored**: the zipapp's own hydra-core/omegaconf/antlr4/yaml (imported from inside the
  built ``preflight.pyz``, under ``python -I -S``) over the stored tree ``matrices/verl_config``;
* **target**: the target's own Hydra over an installed verl (a cached venv with verl's wheel and
  hydra-core), through preflight/target/verl_compose.py as the checker runs it.

Each case composes alone; the resolved dicts (or, when Hydra refuses, its message) must be
equal. The cases: every distinct override of verl's example launches (tests/data/
verl_example_launches.json, tools/gen_example_launches.py) at a fixed stride, plus grammar edge
cases. The summary line prints "overrides tried/equal".
"""

import hashlib
import json
import os
import subprocess
import tempfile
import sys
import zipfile

import pytest

from envs import CACHE, find_python
from sweep import FULL, sample
from preflight.launch.compose import stored_release, stored_tree
from preflight.probes.process import load_script, run_script
from test_launch_compose import verl_hydra_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELEASE = "0.9.1"

#: Hydra's override grammar at its edges (https://hydra.cc/docs/advanced/override_grammar/basic/).
EDGE = [
    # casts
    "+x=str(7)", "+x=int(3.0)", "+x=float(2)", "+x=bool(1)", "+x=str(true)", "+x=int('12')", "+x=float('1e3')",
    "+x=bool(false)", "+x=str([1,2])", "+x=int([1.5,2.5])", "+x=str({a:1})", "data.train_batch_size=int(64.0)",
    "trainer.project_name=str(123)", "+x=json_encode({a:1})",
    # numbers: underscores, exponents, signs, inf/nan
    "data.train_batch_size=1_024", "+x=1_000.5", "+x=1e-6", "+x=-3", "+x=+3", "+x=0x10", "+x=inf", "+x=-inf", "+x=nan",
    "+x=1.", "+x=.5", "+x=007",
    # null, booleans, strings
    "+x=null", "+x=NULL", "+x=True", "+x=false", "+x=yes", "+x=", "+x=''", "+x=\"\"", "+x=a b", "+x='a b'",
    "+x=\"a,b\"", "+x='it''s'", "+x=\"say \\\"hi\\\"\"", "+x=a\\,b", "+x=a\\ b", "+x=/abs/path/model",
    "+x=~/models/Qwen2.5-7B", "+x=Qwen/Qwen2.5-7B-Instruct", "+x=a:b", "+x=a=b", "+x=a@b", "+x=%20",
    # lists and dicts
    "+x=[]", "+x=[1,2,3]", "+x=[a, 'b c', null]", "+x=[[1,2],[3]]", "+x={}", "+x={a: 1, b: [x, 2]}",
    "+x={a: {b: 1}}", "trainer.logger=[console,wandb]", "trainer.logger='[\"console\",\"wandb\"]'",
    "actor_rollout_ref.rollout.val_kwargs={n: 4}", "actor_rollout_ref.rollout.val_kwargs={n: 4, temperature: 0.6}",
    "+x=[1,2", "+x={a:1", "+x={a}",
    # +, ++, ~
    "+data.train_batch_size=3", "++data.train_batch_size=3", "++x.y.z=1", "+x.y.z=1", "~trainer.logger",
    "~trainer.logger=[console,wandb]", "~trainer.logger=[console]", "~no_such.key", "data.no_such_key=1",
    "~data", "+data=1", "data=1",
    # interpolation
    "+x=${data.train_batch_size}", "+x=${data.no_such}", "+x=v${data.max_prompt_length}",
    "+x=${oc.select:data.no_such,5}", "+x=${oc.env:PREFLIGHT_DIFF_UNSET,dflt}", "+x=\\${data.train_batch_size}",
    "data.max_response_length=${data.max_prompt_length}", "+x=${.y}", "+x=${oc.decode:'[1,2]'}",
    # config groups, packages, sweeps (rejected)
    "model_engine=megatron", "model_engine=nope", "+x=1,2", "data.train_batch_size=1,2", "+x=choice(1,2)",
    "+x=range(3)", "+x=glob(*)", "+x=interval(0,1)", "+x=sort([3,1])", "+x=sort([b,a],reverse=true)",
    "hydra.job.name=x",
    # malformed
    "=1", ".x=1", "x..y=1", "+x=[", "+x=(1)",
]


def example_cases(stride=8):
    """Every ``stride``-th distinct override of the example launches of verl's newest checkout."""
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    sel = sorted({o for launch in doc["launches"] if "HEAD" in launch["refs"] and not launch["config_path"]
                  and launch["config_name"] in (None, "ppo_trainer") for o in launch["overrides"]})
    return sel[::stride]


#: The default suite takes every 24th example override and 40 of the edge cases, spread over every
#: kind (tests/sweep.py); PREFLIGHT_FULL_SWEEP=1 takes every 8th and all of them (about 150).
CASES = example_cases(8) + EDGE if FULL else example_cases(24) + sample(EDGE, 40)

TRUTH = r"""
import json, sys
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

conf_dir, cases = json.loads(sys.stdin.read())
out = []
for ovs in cases:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=conf_dir, version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=ovs)
    except Exception as exc:
        out.append({"error": str(exc).strip()[:2000]})
        continue
    try:
        out.append({"tree": OmegaConf.to_container(cfg, resolve=True)})
    except Exception:
        out.append({"tree": OmegaConf.to_container(cfg, resolve=False), "unresolved": True})
print(json.dumps(out, default=str))
"""


def _msg(text):
    """Hydra's message without its config search path listing (absolute directories differ)."""
    return text.split("\nConfig search path:")[0].strip()


def _norm(case_events):
    """{i: result} from verl_compose "case" events, in the truth's shape."""
    out = {}
    for e in case_events:
        if e.get("error"):
            out[e["i"]] = {"error": _msg(e["error"]["message"])}
        elif e.get("resolve_error"):
            out[e["i"]] = {"tree": e["tree"], "unresolved": True}
        else:
            out[e["i"]] = {"tree": e["tree"]}
    return out


def _wheel_config_dir(release, dest):
    """verl/trainer/config of the real wheel of ``release``, extracted into ``dest`` (pip download,
    cached; its sha256 must be the one the stored tree was generated from)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import gen_verl_config

    from preflight.launch.compose import stored_index

    whl = gen_verl_config.wheel(release, stored_index()[release]["sha256"])
    with zipfile.ZipFile(whl) as z:
        z.extractall(str(dest), [n for n in z.namelist() if n.startswith("verl/trainer/config/")])
    return os.path.join(str(dest), "verl", "trainer", "config")


@pytest.fixture(scope="module")
def wheel_config_dir(tmp_path_factory):
    """verl/trainer/config of the real wheel of RELEASE."""
    return _wheel_config_dir(RELEASE, tmp_path_factory.mktemp("wheel"))


def _truth_key(conf_dir, cases, code):
    """What hydra-core's answers depend on: its own and omegaconf's versions, every file of the config
    directory (relative path and bytes), the cases and the composing code."""
    from importlib.metadata import version

    h = hashlib.sha256(json.dumps([version("hydra-core"), version("omegaconf"), cases, code]).encode())
    for d, dirs, files in sorted(os.walk(conf_dir)):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(d, f)
            h.update(os.path.relpath(path, conf_dir).encode() + b"\0")
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:32]


def _truth(conf_dir, cases, config_name="ppo_trainer"):
    """hydra-core of the test venv composing ``conf_dir`` once per case: {i: {"tree"} or {"error"}}.

    hydra-core's answers are kept in the test cache beside the real environments (tests/envs.CACHE,
    hydra-truth/), under a hash of everything they depend on (:func:`_truth_key`): the truth is
    still hydra-core's own, computed once per version, tree and case list, as an environment is
    built once; the side under test (the zipapp's Hydra, the target's) runs every time."""
    code = TRUTH.replace('config_name="ppo_trainer"', "config_name=%r" % config_name)
    path = os.path.join(CACHE, "hydra-truth", _truth_key(conf_dir, cases, code) + ".json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            out = json.load(fh)
    else:
        env = dict(os.environ, PREFLIGHT_DIFF_UNSET="")
        env.pop("PREFLIGHT_DIFF_UNSET")
        p = subprocess.run([sys.executable, "-c", code], input=json.dumps([conf_dir, [[c] for c in cases]]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                           timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        out = json.loads(p.stdout)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, suffix=".tmp") as fh:
            json.dump(out, fh)
        os.replace(fh.name, path)
    assert len(out) == len(cases)
    return {i: dict(r, error=_msg(r["error"])) if "error" in r else r for i, r in enumerate(out)}


@pytest.fixture(scope="module")
def truth(wheel_config_dir):
    return _truth(wheel_config_dir, CASES)


def _compare(name, truth, got, cases=CASES, minimum=150 if FULL else 45):
    equal = [i for i in truth if got.get(i) == truth[i]]
    differ = [cases[i] for i in truth if i not in equal]
    refused = sum(1 for i in truth if "error" in truth[i])
    print("\n%s: overrides tried/equal: %d/%d (%d refused by Hydra, same message; %d from verl's examples)" % (
        name, len(truth), len(equal), refused, len([c for c in cases if c not in EDGE])))
    assert not differ, "%s differs from hydra-core on: %s" % (name, differ[:10])
    assert len(truth) >= minimum


def _vendored(pyz, release, cases, config_name="ppo_trainer"):
    """The zipapp's own Hydra (from inside the zip, ``-I -S``) over matrices/verl_config/<release>:
    (interpreter used, {i: result})."""
    args = {"stored_dir": stored_tree(release), "stored_version": release, "sys_path": [pyz + "/preflight/_vendor"],
            "batch": [[c] for c in cases], "config_name": config_name}
    py = sys.executable
    try:
        py = find_python("3.12")
    except LookupError:
        pass
    env = {k: v for k, v in os.environ.items() if k != "PREFLIGHT_DIFF_UNSET"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:  # the prelude's own way in
        json.dump(args, fh)
    env["PREFLIGHT_ARGS"] = fh.name
    try:
        p = subprocess.run([py, "-I", "-S", "-c", load_script("verl_compose")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=900)
    finally:
        if os.path.exists(fh.name):
            os.unlink(fh.name)
    events = [json.loads(ln.split(" ", 1)[1]) for ln in p.stdout.splitlines() if ln.startswith("@@PREFLIGHT@@ ")]
    assert events and events[0]["event"] == "env", p.stderr[-2000:]
    assert "preflight.pyz" in json.dumps(events[0]) or events[0]["stored"]
    return py, _norm([e for e in events if e["event"] == "case"])


@pytest.mark.realenv
def test_vendored_hydra_over_the_stored_tree_equals_hydra_core(pyz, truth):
    """The zipapp's own Hydra (from inside the zip, no site-packages) over matrices/verl_config."""
    assert stored_release(RELEASE, "ppo_trainer") == (RELEASE, [])
    py, got = _vendored(pyz, RELEASE, CASES)
    _compare("vendored Hydra (%s -I -S, from the zip) over matrices/verl_config/%s" % (os.path.basename(py), RELEASE),
             truth, got)


def _older_releases():
    from preflight.launch.compose import stored_index

    return [v for v in stored_index() if v != RELEASE]


@pytest.mark.realenv
@pytest.mark.parametrize("release", _older_releases())
def test_vendored_hydra_equals_hydra_core_for_every_stored_release(pyz, release, tmp_path):
    """Every other stored release: no override, then a sample of verl's example overrides and of the
    grammar edge cases (the grammar itself is the same Hydra for every release, and is tried whole on
    RELEASE above; here the question is the release's own tree), composed by the zipapp's Hydra over
    that release's stored tree and by hydra-core over the config directory of that release's own wheel
    (keys a release lacks: both refuse, with the same message). PREFLIGHT_FULL_SWEEP=1: every 3rd edge
    case and every 64th example override (about 45 cases; the 15 releases were equal, with all 119 of
    every 32nd example and every edge case too)."""
    assert stored_release(release, "ppo_trainer") == (release, [])
    cases = example_cases(64) + EDGE[::3] if FULL else \
        ["trainer.total_epochs=1"] + sample(example_cases(64), 2) + sample(EDGE[::3], 3)
    truth = _truth(_wheel_config_dir(release, tmp_path), cases)
    py, got = _vendored(pyz, release, cases)
    _compare("vendored Hydra over matrices/verl_config/%s" % release, truth, got, cases, minimum=len(cases))


@pytest.mark.realenv
def test_target_hydra_over_an_installed_verl_equals_hydra_core(truth):
    py = verl_hydra_env(RELEASE)
    out = run_script(py, "verl_compose", {"batch": [[c] for c in CASES], "config_name": "ppo_trainer"}, timeout=900)
    env = out.last("env")
    assert env is not None and env["verl_version"] == RELEASE and not env["stored"], out.describe()
    _compare("target's Hydra %s over installed verl %s" % (env["hydra_version"], RELEASE), truth,
             _norm([e for e in out.events if e["event"] == "case"]))
