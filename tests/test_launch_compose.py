"""Launch commands read into Hydra overrides, and the effective config: stored defaults vs Hydra.

The stored defaults (matrices/verl_config) are checked against a real verl 0.9.1 install, and the
stored composer (Hydra's override rules and OmegaConf's interpolation re-implemented) must give
the same config, key for key, as Hydra's compose API in that install.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from envs import real_env
from preflight.launch.compose import (ComposeUnsupported, compose, compose_stored, flatten, load_stored,
                                      provenance, redact_config_value, resolve)
from preflight.launch.overrides import ConfigError, parse_launch, parse_override, parse_value
from preflight.probes.process import run_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERL_CORE = ["verl[verl-core]==0.9.1", "torch==2.13.0"]


def stored_default(key):
    doc, _ = load_stored("0.9.1", "ppo_trainer")
    return resolve(doc["config"], {})[0] if key is None else flatten(resolve(doc["config"], {})[0])[key]


# ---- launch command parsing --------------------------------------------------------------------
@pytest.mark.parametrize("command,overrides,extra", [
    ("python3 -m verl.trainer.main_ppo data.train_batch_size=60 actor_rollout_ref.rollout.n=12",
     ["data.train_batch_size=60", "actor_rollout_ref.rollout.n=12"], {"entry": "verl.trainer.main_ppo"}),
    ("CUDA_VISIBLE_DEVICES=0,1 PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \\\n  trainer.n_gpus_per_node=2",
     ["trainer.n_gpus_per_node=2"], {"env": {"CUDA_VISIBLE_DEVICES": "0,1", "PYTHONUNBUFFERED": "1"}}),
    ("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=6",
     ["trainer.nnodes=6"], {"config_name": "ppo_megatron_trainer"}),
    ("python3 recipe/dapo/main_dapo.py --config-path config --config-name dapo_trainer +x.y=1",
     ["+x.y=1"], {"config_path": "config", "config_name": "dapo_trainer", "entry": "recipe/dapo/main_dapo.py"}),
    (["data.train_batch_size=64", "~trainer.logger", "++a.b=[1,2]"],
     ["data.train_batch_size=64", "~trainer.logger", "++a.b=[1,2]"], {"entry": None}),
    (["--", "python", "-m", "verl.trainer.main_ppo", "x=1", "stray"], ["x=1"], {"ignored": ["stray"]}),
])
def test_parse_launch(command, overrides, extra):
    spec = parse_launch(command)
    assert spec.override_texts == overrides
    for k, v in extra.items():
        assert getattr(spec, k) == v


@pytest.mark.parametrize("text,value", [
    ("60", 60), ("1_000", 1000), ("1e-6", 1e-6), ("0.5", 0.5), ("null", None), ("True", True), ("false", False),
    ("vllm", "vllm"), ("'a,b'", "a,b"), ("[console,wandb]", ["console", "wandb"]), ("[]", []),
    ("{a: 1, b: [x, 2]}", {"a": 1, "b": ["x", 2]}), ("${data.max_prompt_length}", "${data.max_prompt_length}"),
    ("", ""), ("~/models/Qwen2.5-7B", "~/models/Qwen2.5-7B"),
])
def test_parse_value_hydra_grammar(text, value):
    assert parse_value(text) == value


@pytest.mark.parametrize("text,kind", [
    ("a=1,2", "ambiguous_value"), ("a=choice(1,2)", "override_function"), ("a=[1,2", "override_syntax"),
    ("novalue", "override_syntax"), (".a=1", "override_syntax"),
])
def test_bad_overrides_are_config_errors(text, kind):
    with pytest.raises(ConfigError) as ei:
        parse_override(text)
    assert ei.value.kind == kind and ei.value.fix


def test_shell_variables_expand_from_the_command_and_environment(monkeypatch):
    monkeypatch.setenv("MODEL_DIR", "/m")
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    spec = parse_launch("N=4 python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=$MODEL_DIR/q "
                        "trainer.n_gpus_per_node=${N} x=$NOT_SET_HERE")
    assert spec.override_texts == ["actor_rollout_ref.model.path=/m/q", "trainer.n_gpus_per_node=4",
                                   "x=$NOT_SET_HERE"]
    assert any("NOT_SET_HERE" in n for n in spec.notes)


# ---- stored composition -------------------------------------------------------------------------
def test_stored_defaults_match_the_real_yaml_values():
    # values written in verl 0.9.1's packaged data/legacy_data.yaml, trainer and rollout yaml
    doc, notes = load_stored("0.9.1", "ppo_trainer")
    assert notes == [] and doc["verl"] == "0.9.1" and "verl 0.9.1 wheel" in doc["source"]
    c = compose_stored(parse_launch([]), None, "0.9.1", env={})
    assert c.get("data.train_batch_size") == 1024
    assert c.get("trainer.n_gpus_per_node") == 8
    assert c.get("actor_rollout_ref.rollout.n_gpus_per_node") == 8  # ${oc.select:trainer.n_gpus_per_node,8}
    assert c.get("actor_rollout_ref.rollout.name") == "???"
    assert c.get("trainer.default_local_dir") == "checkpoints/verl_examples/gsm8k"  # string interpolation
    assert c.resolve_errors == {}


def test_precedence_default_file_override():
    spec = parse_launch(["data.max_prompt_length=2048", "trainer.n_gpus_per_node=6"])
    file_tree = {"data": {"max_prompt_length": 1024, "train_batch_size": 64}, "trainer": {"n_gpus_per_node": 4}}
    c = compose_stored(spec, file_tree, "0.9.1", env={})
    assert c.get("data.train_batch_size") == 64 and c.source_of("data.train_batch_size") == "file"
    assert c.get("data.max_prompt_length") == 2048 and c.source_of("data.max_prompt_length") == "override"
    assert c.get("trainer.n_gpus_per_node") == 6
    assert c.get("data.max_response_length") == 512 and c.source_of("data.max_response_length") == "default"
    # an interpolated default follows the key it copies
    assert c.get("actor_rollout_ref.rollout.prompt_length") == 2048
    assert c.source_of("actor_rollout_ref.rollout.prompt_length") == "override via data.max_prompt_length"
    assert c.get("actor_rollout_ref.rollout.n_gpus_per_node") == 6


def test_later_override_wins_and_dicts_merge():
    spec = parse_launch(["data.train_batch_size=8", "data.train_batch_size=16",
                         "actor_rollout_ref.rollout.val_kwargs={n: 4}"])
    c = compose_stored(spec, None, "0.9.1", env={})
    assert c.get("data.train_batch_size") == 16
    assert c.provenance["data.train_batch_size"]["override"] == "data.train_batch_size=16"
    assert c.get("actor_rollout_ref.rollout.val_kwargs.n") == 4
    assert c.get("actor_rollout_ref.rollout.val_kwargs.do_sample") is False  # merged, not replaced


@pytest.mark.parametrize("override,kind,words", [
    ("+data.train_batch_size=3", "append_existing", "drop the '+'"),
    ("data.train_batch_sise=3", "override_missing", "did you mean data.train_batch_size"),
    ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "override_missing",
     "--config-name=ppo_megatron_trainer"),
    ("~data.no_such_key", "delete_missing", "remove the override"),
])
def test_stored_refusals_match_hydra(override, kind, words):
    c = compose_stored(parse_launch([override]), None, "0.9.1", env={})
    assert c.error is not None and c.error.kind == kind and words in (c.error.message + c.error.fix)


def test_add_force_delete():
    c = compose_stored(parse_launch(["+trainer.extra.depth=2", "++data.train_batch_size=32", "~trainer.logger"]),
                       None, "0.9.1", env={})
    assert c.error is None
    assert c.get("trainer.extra.depth") == 2 and c.get("data.train_batch_size") == 32
    assert not c.has("trainer.logger")


def test_group_override_needs_hydra():
    with pytest.raises(ComposeUnsupported) as ei:
        compose_stored(parse_launch(["model_engine=megatron"]), None, "0.9.1", env={})
    assert "--python" in ei.value.fix


def test_unknown_release_uses_nearest_stored_with_a_note():
    c = compose_stored(parse_launch([]), None, "0.7.0", env={})
    assert c.verl_version == "0.9.1" and any("0.7.0" in n for n in c.notes)


def test_oc_env_and_relative_interpolation():
    tree = {"a": {"x": 3, "y": "${.x}", "z": "v${..b}"}, "b": 5, "e": "${oc.env:PF_TEST_VAR,dflt}",
            "s": "${oc.select:nope.k,[1, 2]}", "bad": "${nope.k}"}
    out, errors = resolve(tree, {"PF_TEST_VAR": "set"})
    assert out["a"]["y"] == 3 and out["a"]["z"] == "v5" and out["e"] == "set" and out["s"] == [1, 2]
    assert errors == {"bad": "interpolation key 'nope.k' not found"}
    assert resolve(tree, {})[0]["e"] == "dflt"


def test_provenance_of_file_only_keys():
    p = provenance({"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, [parse_override("+c=3")])
    assert p == {"a": {"source": "default"}, "b": {"source": "file"}, "c": {"source": "override", "override": "+c=3"}}


def test_yaml_file_without_a_yaml_reader_is_a_usage_error(tmp_path):
    from preflight.errors import UsageError

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    f = tmp_path / "cfg.yaml"
    f.write_text("data:\n  train_batch_size: 64\n")
    probe = subprocess.run([str(bare / "bin" / "python"), "-c", "import yaml"], stderr=subprocess.DEVNULL)
    if probe.returncode == 0:
        pytest.skip("this Python's base install has PyYAML")
    with pytest.raises(UsageError) as ei:
        compose(str(bare / "bin" / "python"), parse_launch([]), str(f), "0.9.1")
    assert "pass the config as JSON or point --python at the verl environment" in str(ei.value)
    j = tmp_path / "cfg.json"
    j.write_text(json.dumps({"data": {"train_batch_size": 64}}))
    c = compose(str(bare / "bin" / "python"), parse_launch(["data.max_prompt_length=8"]), str(j), "0.9.1")
    assert c.method == "stored" and c.get("data.train_batch_size") == 64 and c.source_of("data.train_batch_size") == "file"


def test_config_values_are_redacted_by_what_verl_calls_its_keys():
    c = compose_stored(parse_launch(["data.prompt_key=question", "+trainer.wandb_api_key=abc123def",
                                     "+my.secret.thing=xyz", "trainer.project_name=https://u:pw@h/p",
                                     "+x.hf=hf_abcdefghijklmnopqrstuvwx"]), None, "0.9.1", env={})
    shown = c.shown_values()
    assert shown["data.prompt_key"] == "question" and shown["data.reward_fn_key"] == "data_source"
    assert shown["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == 16384
    assert shown["trainer.wandb_api_key"] == "***" and shown["my.secret.thing"] == "***"
    assert shown["trainer.project_name"] == "https://u:***@h/p" and shown["x.hf"] == "***"
    schema = c.schema()
    assert redact_config_value("data.prompt_key", "question", schema) == "question"
    # one of verl's own keys that plainly names a secret keeps it hidden
    assert redact_config_value("trainer.api_key", "abc", {"trainer.api_key"}) == "***"
    ovs = parse_launch(["data.prompt_key=question", "+trainer.wandb_api_key=abc123def"]).overrides
    assert c.shown_overrides(ovs) == ["data.prompt_key=question", "+trainer.wandb_api_key=***"]
    full = c.to_dict(full=True)["values"]
    assert full["trainer.wandb_api_key"]["value"] == "***" and full["data.prompt_key"]["value"] == "question"


# ---- against a real verl install ----------------------------------------------------------------
@pytest.fixture(scope="module")
def verl_py():
    return real_env("verl091-core", VERL_CORE)


def _yaml_value(py, rel, key):
    code = ("import os, yaml, importlib.util; d = importlib.util.find_spec('verl').submodule_search_locations[0]; "
            "print(yaml.safe_load(open(os.path.join(d, 'trainer', 'config', %r)))%s)" % (
                rel, "".join("[%r]" % k for k in key.split("."))))
    return subprocess.check_output([py, "-c", code], universal_newlines=True).strip()


@pytest.mark.realenv
def test_stored_copy_equals_the_installed_release(verl_py):
    for name in ("ppo_trainer", "ppo_megatron_trainer"):
        out = run_script(verl_py, "verl_compose", {"config_name": name, "overrides": [], "resolve": False}, timeout=120)
        assert out.last("env")["verl_version"] == "0.9.1"
        doc, _ = load_stored("0.9.1", name)
        assert out.last("tree")["tree"] == doc["config"], "regenerate with tools/gen_verl_config.py"


@pytest.mark.realenv
def test_composition_order_with_hydra_in_a_real_install(verl_py, tmp_path):
    # default < file < override, on verl's own packaged YAML
    default_tbs = int(_yaml_value(verl_py, "data/legacy_data.yaml", "train_batch_size"))
    cfg = tmp_path / "saved.yaml"
    cfg.write_text("data:\n  train_batch_size: %d\n  max_prompt_length: 1024\n" % (default_tbs // 16))
    only_defaults = compose(verl_py, parse_launch([]))
    with_file = compose(verl_py, parse_launch([]), str(cfg))
    with_both = compose(verl_py, parse_launch(["data.train_batch_size=%d" % (default_tbs // 32)]), str(cfg))
    assert only_defaults.method == "hydra" and only_defaults.verl_version == "0.9.1"
    assert only_defaults.get("data.train_batch_size") == default_tbs
    assert only_defaults.source_of("data.train_batch_size") == "default"
    assert with_file.get("data.train_batch_size") == default_tbs // 16
    assert with_file.source_of("data.train_batch_size") == "file"
    assert with_both.get("data.train_batch_size") == default_tbs // 32
    assert with_both.source_of("data.train_batch_size") == "override"
    assert with_both.get("actor_rollout_ref.rollout.prompt_length") == 1024
    assert with_both.source_of("actor_rollout_ref.rollout.prompt_length") == "file via data.max_prompt_length"


OVERRIDE_SETS = [
    [],
    ["data.train_batch_size=60", "actor_rollout_ref.rollout.n=12", "trainer.n_gpus_per_node=6",
     "data.max_prompt_length=2048", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"],
    ["+trainer.extra=5", "++actor_rollout_ref.actor.fsdp_config.param_offload=true", "~trainer.logger",
     "actor_rollout_ref.rollout.val_kwargs={n: 4, temperature: 0.6}", "trainer.project_name=p1"],
]


@pytest.mark.realenv
@pytest.mark.parametrize("overrides", OVERRIDE_SETS)
def test_stored_composer_equals_hydra(verl_py, tmp_path, overrides):
    cfg = tmp_path / "saved.yaml"
    cfg.write_text(textwrap.dedent("""\
        data:
          train_batch_size: 64
        trainer:
          experiment_name: exp_${data.train_batch_size}
        newkey: 7
        """))
    spec = parse_launch(overrides)
    h = compose(verl_py, spec, str(cfg))
    s = compose(sys.executable, spec, str(cfg), "0.9.1") if _has_yaml(sys.executable) else None
    file_tree = {"data": {"train_batch_size": 64}, "trainer": {"experiment_name": "exp_${data.train_batch_size}"},
                 "newkey": 7}
    s = s or compose_stored(spec, file_tree, "0.9.1")
    assert h.error is None and s.error is None
    assert flatten(h.raw) == flatten(s.raw)
    assert flatten(h.resolved) == flatten(s.resolved)
    assert h.provenance == s.provenance


def _has_yaml(py):
    return subprocess.run([py, "-c", "import yaml"], stderr=subprocess.DEVNULL).returncode == 0


@pytest.mark.realenv
@pytest.mark.parametrize("override,stored_kind,words", [
    ("+data.train_batch_size=3", "append_existing", "already"),
    ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "override_missing", "Could not override"),
    ("data.train_batch_size=1,2", None, "Ambiguous value"),
])
def test_hydra_refusals_are_findings(verl_py, override, stored_kind, words):
    h = compose(verl_py, _raw_spec(override))
    assert h.error is not None and words in h.error.message, h.error.message
    if "megatron" in override:
        assert "--config-name=ppo_megatron_trainer" in h.error.fix
    if stored_kind:
        s = compose_stored(_raw_spec(override), None, "0.9.1", env={})
        assert s.error.kind == stored_kind


def _raw_spec(override):
    """A spec holding the override text as typed, even one our parser would refuse first."""
    from preflight.launch.overrides import LaunchSpec, Override

    try:
        return parse_launch([override])
    except ConfigError:
        return LaunchSpec(overrides=[Override(override, "set", override.split("=")[0], None)])


@pytest.mark.realenv
def test_megatron_config_name_and_recipe_style_file(verl_py, tmp_path):
    spec = parse_launch("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer "
                        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2")
    h = compose(verl_py, spec)
    assert h.error is None and h.get("actor_rollout_ref.actor.strategy") == "megatron"
    assert h.get("actor_rollout_ref.actor.megatron.tensor_model_parallel_size") == 2
    s = compose_stored(spec, None, "0.9.1", env={})
    assert flatten(s.resolved) == flatten(h.resolved)
    recipe = tmp_path / "my_trainer.yaml"
    recipe.write_text("defaults:\n  - ppo_trainer\n  - _self_\n\ndata:\n  train_batch_size: 48\n")
    hr = compose(verl_py, parse_launch(["trainer.nnodes=2"]), str(recipe))
    sr = compose_stored(parse_launch(["trainer.nnodes=2"]), {"defaults": ["ppo_trainer", "_self_"],
                                                             "data": {"train_batch_size": 48}}, "0.9.1", env={})
    assert hr.error is None and hr.get("data.train_batch_size") == 48 and hr.get("trainer.nnodes") == 2
    assert flatten(hr.resolved) == flatten(sr.resolved)
