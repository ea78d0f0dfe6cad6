"""Launch commands read into overrides, and the effective config composed by Hydra: the
vendored Hydra over the stored config tree (matrices/verl_config) and the target's own Hydra over
a real verl install (a cached venv with verl's wheel and hydra-core). The override-by-override
differential against an independent hydra-core process is tests/launch/test_hydra_differential.py.
"""

import json
import os
import re
import textwrap

import pytest

from envs import real_env
from preflight.launch.compose import (ComposeUnsupported, compose, compose_stored, provenance,
                                      redact_config_value, release_doc, stored_release)
from preflight.launch.overrides import parse_launch, parse_override

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: verl's wheel with the Hydra it pulls in, nothing else (verl_compose never imports verl).
VERL_HYDRA = ["verl==0.9.1", "hydra-core==1.3.8", "omegaconf==2.3.1", "antlr4-python3-runtime==4.9.3", "PyYAML==6.0.3",
              "packaging==25.0"]


def verl_hydra_env(version="0.9.1"):
    """A cached venv with verl==version and hydra-core (no torch: nothing imports verl)."""
    return real_env("verl%s-hydra" % version.replace(".", ""), ["verl==%s" % version] + VERL_HYDRA[1:],
                    pip_args=["--no-deps"])


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
    # verl's own scripts name the config with its file name (Hydra reads both)
    ("python3 -m verl.trainer.main_ppo --config-path=config --config-name='ppo_megatron_trainer.yaml' a=1",
     ["a=1"], {"config_path": "config", "config_name": "ppo_megatron_trainer"}),
])
def test_parse_launch(command, overrides, extra):
    spec = parse_launch(command)
    assert spec.override_texts == overrides
    for k, v in extra.items():
        assert getattr(spec, k) == v




def test_parse_override_splits_prefix_and_key_only():
    assert [(o.kind, o.key, o.value) for o in parse_launch(["a.b=1", "+c=[1,2]", "++d=x=y", "~e", "~f=3"]).overrides] == [
        ("set", "a.b", "1"), ("add", "c", "[1,2]"), ("force", "d", "x=y"), ("delete", "e", None), ("delete", "f", "3")]


def test_shell_variables_expand_from_the_command_and_environment(monkeypatch):
    monkeypatch.setenv("MODEL_DIR", "/m")
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    spec = parse_launch("N=4 python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=$MODEL_DIR/q "
                        "trainer.n_gpus_per_node=${N} x=$NOT_SET_HERE")
    assert spec.override_texts == ["actor_rollout_ref.model.path=/m/q", "trainer.n_gpus_per_node=4",
                                   "x=$NOT_SET_HERE"]
    assert any("NOT_SET_HERE" in n for n in spec.notes)


# ---- stored composition (the vendored Hydra over matrices/verl_config) -------------------------
def test_stored_defaults_match_the_real_yaml_values():
    # values written in verl 0.9.1's packaged data/legacy_data.yaml, trainer and rollout yaml
    assert stored_release("0.9.1", "ppo_trainer") == ("0.9.1", [])
    c = compose_stored(parse_launch([]), None, "0.9.1", env={})
    assert c.method == "stored" and c.verl_version == "0.9.1" and "matrices/verl_config/0.9.1/" in c.source
    assert c.get("data.train_batch_size") == 1024
    assert c.get("trainer.n_gpus_per_node") == 8
    assert c.get("actor_rollout_ref.rollout.n_gpus_per_node") == 8  # ${oc.select:trainer.n_gpus_per_node,8}
    assert c.get("actor_rollout_ref.rollout.name") == "???"
    assert c.get("trainer.default_local_dir") == "checkpoints/verl_examples/gsm8k"  # string interpolation
    assert c.resolve_errors == {}


def test_precedence_default_file_override(tmp_path):
    spec = parse_launch(["data.max_prompt_length=2048", "trainer.n_gpus_per_node=6"])
    f = tmp_path / "saved.json"
    f.write_text(json.dumps({"data": {"max_prompt_length": 1024, "train_batch_size": 64},
                             "trainer": {"n_gpus_per_node": 4}}))
    c = compose_stored(spec, str(f), "0.9.1", env={})
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
    ("~data.no_such_key", "delete_missing", "remove the ~ override"),
    ("data.train_batch_size=1,2", "ambiguous_value", "Ambiguous value"),
    ("data.train_batch_size=[1,2", "override_syntax", "fix the override's syntax"),
    ("model_engine=nope", "hydra_final", "model_engine"),
])
def test_stored_refusals_quote_hydra(override, kind, words):
    c = compose_stored(parse_launch([override]), None, "0.9.1", env={})
    assert c.error is not None and c.error.kind == kind and words in (c.error.message + c.error.fix), c.error.message
    assert c.error.message.startswith("Hydra (final step): ") and "\n" not in c.error.message


TP2 = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"


@pytest.mark.parametrize("release,words,config_named,fix_words", [
    # no strategy chosen, a key only Megatron workers have: both of the release's ways to get them
    ("0.9.1", [TP2], True, ["model_engine=megatron or --config-name=ppo_megatron_trainer", "delete the override"]),
    ("0.5.0", [TP2], True, ["add --config-name=ppo_megatron_trainer"]),  # no model_engine group before 0.8.0
    # an FSDP launch: delete the Megatron key, never switch trainers
    ("0.9.1", ["actor_rollout_ref.actor.strategy=fsdp", TP2], False, ["delete the override " + TP2]),
    ("0.9.1", ["critic.strategy=fsdp2", "critic.megatron.tensor_model_parallel_size=2"], False,
     ["delete the override critic.megatron"]),
    # a key no config has, under a megatron node: no config name
    ("0.9.1", ["actor_rollout_ref.actor.megatron.no_such_knob=2"], False, ["delete it"]),
    # strategy=megatron on the FSDP config: the Megatron config whatever the key
    ("0.9.1", ["actor_rollout_ref.actor.strategy=megatron", "actor_rollout_ref.actor.no_such_knob=2"], True,
     ["model_engine=megatron or --config-name=ppo_megatron_trainer", "then check actor_rollout_ref.actor.no_such_knob"]),
])
def test_megatron_config_offered_only_for_megatron(release, words, config_named, fix_words):
    """Hydra refuses the key; the Megatron config is offered only to a launch that chose Megatron
    or whose key only Megatron workers have (the reviewer's FSDP launch was told to switch)."""
    c = compose_stored(parse_launch(words), None, release, env={})
    assert c.error is not None and c.error.kind == "override_missing", c.error
    assert ("ppo_megatron_trainer" in c.error.fix) == config_named, c.error.fix
    for w in fix_words:
        assert w in c.error.fix, (w, c.error.fix)
    if not config_named:
        return
    # the offered ways compose for real (the same vendored Hydra over the same stored tree)
    ways = re.findall(r"model_engine=megatron|--config-name=ppo_megatron_trainer", c.error.fix)
    assert ways
    for way in ways:
        ok = compose_stored(parse_launch([way] + [w for w in words if "strategy=" not in w]), None, release, env={})
        if "no_such_knob" in " ".join(words):
            assert ok.error is not None  # the unknown key stays unknown: the fix said to check it
        else:
            assert ok.error is None and ok.get("actor_rollout_ref.actor.strategy") == "megatron", (way, ok.error)
            assert ok.get("actor_rollout_ref.actor.megatron.tensor_model_parallel_size") == 2


def test_strategy_chosen_in_a_saved_config_counts(tmp_path):
    """A saved config (--file) that trains the actor with FSDP2: its Megatron override is to be deleted."""
    saved = tmp_path / "saved.yaml"
    saved.write_text("actor_rollout_ref:\n  actor:\n    strategy: fsdp2\n")
    c = compose_stored(parse_launch([TP2]), str(saved), "0.9.1", env={})
    assert c.error is not None and "ppo_megatron_trainer" not in c.error.fix
    assert "actor_rollout_ref.actor.strategy=fsdp2" in c.error.message and "delete the override" in c.error.fix


@pytest.mark.realenv
def test_fsdp_launch_in_the_target_is_not_sent_to_megatron():
    """The same FSDP launch composed by Hydra in a real verl 0.9.1 install."""
    c = compose(verl_hydra_env(), parse_launch(["actor_rollout_ref.actor.strategy=fsdp", TP2]))
    assert c.method == "hydra" and c.error is not None and c.error.kind == "override_missing"
    assert "ppo_megatron_trainer" not in c.error.fix and "delete the override " + TP2 in c.error.fix
    c = compose(verl_hydra_env(), parse_launch([TP2]))
    assert "model_engine=megatron or --config-name=ppo_megatron_trainer" in c.error.fix


def test_add_force_delete_casts_and_groups():
    c = compose_stored(parse_launch(["+trainer.extra.depth=2", "++data.train_batch_size=32", "~trainer.logger",
                                     "+trainer.s=str(7)", "data.max_prompt_length=int(3.0)",
                                     "model_engine=megatron"]), None, "0.9.1", env={})
    assert c.error is None, c.error.message
    assert c.get("trainer.extra.depth") == 2 and c.get("data.train_batch_size") == 32
    assert not c.has("trainer.logger")
    assert c.get("trainer.s") == "7" and c.get("data.max_prompt_length") == 3
    assert c.get("actor_rollout_ref.actor.strategy") == "megatron"  # the group option's defaults list


def test_each_stored_release_composes_its_own_tree():
    c = compose_stored(parse_launch([]), None, "0.7.0", env={})
    assert c.verl_version == "0.7.0" and c.notes == []
    c = compose_stored(parse_launch([]), None, "0.9.2", env={})
    assert c.verl_version == "0.9.1" and any("0.9.2" in n for n in c.notes)
    with pytest.raises(ComposeUnsupported):
        compose_stored(parse_launch(["--config-name=no_such_trainer"]), None, "0.9.1", env={})


def test_oc_env_and_unresolvable_values(monkeypatch):
    monkeypatch.delenv("PF_TEST_VAR", raising=False)
    spec = parse_launch(["+x.e=${oc.env:PF_TEST_VAR,dflt}", "+x.f=${oc.env:PF_TEST_VAR}", "+x.g=${nope.k}",
                         "+x.h=v${data.train_batch_size}"])
    c = compose_stored(spec, None, "0.9.1", env={})
    assert c.get("x.e") == "dflt" and c.get("x.h") == "v1024"
    assert set(c.resolve_errors) == {"x.f", "x.g"}
    c = compose_stored(spec, None, "0.9.1", env={"PF_TEST_VAR": "set"})
    assert c.get("x.e") == "set" and c.get("x.f") == "set"


def test_provenance_of_file_only_keys():
    p = provenance({"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, [parse_override("+c=3")])
    assert p == {"a": {"source": "default"}, "b": {"source": "file"}, "c": {"source": "override", "override": "+c=3"}}


# ---- the release's own code: config dataclasses and dropped keys (failure case 33) ----------------
CASE33 = ["algorithm.adv_estimator=grpo", "data.train_batch_size=32", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
          "actor_rollout_ref.actor.fsdp_config.param_offload=False", "{}actor_rollout_ref.actor.fsdp_config.grad_offload"
          "=False", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False"]


@pytest.mark.parametrize("prefix", ["", "+", "++"])
def test_a_key_verl_dropped_fails_with_plus_too(prefix):
    words = [w.format(prefix) for w in CASE33]
    c = compose_stored(parse_launch(words), None, "0.9.1", env={})
    assert c.error is not None and c.error.kind in ("override_missing", "unknown_field"), c.error
    assert "grad_offload" in c.error.message and "dropped" in c.error.message
    assert c.error.fix.startswith("delete the override") and "+actor" not in c.error.fix.replace(words[4], "")


def test_dataclass_fields_come_from_the_release_source():
    # 0.7.1's FSDPEngineConfig still has grad_offload (verl/workers/config/engine.py), 0.9.1's not
    f071 = release_doc("0.7.1")["dataclasses"]["verl.workers.config.FSDPEngineConfig"]
    f091 = release_doc("0.9.1")["dataclasses"]["verl.workers.config.FSDPEngineConfig"]
    assert f071["file"] == "verl/workers/config/engine.py" and "grad_offload" in f071["fields"]
    assert "grad_offload" not in f091["fields"] and "param_offload" in f091["fields"]
    c = compose_stored(parse_launch(["actor_rollout_ref.actor.fsdp_config.grad_offload=true"]), None, "0.7.1", env={})
    assert c.error.fix == "add it with +actor_rollout_ref.actor.fsdp_config.grad_offload=true"  # 0.7.1 takes it
    c = compose_stored(parse_launch(["+actor_rollout_ref.actor.fsdp_config.grad_offload=true"]), None, "0.7.1", env={})
    assert c.error is None and c.get("actor_rollout_ref.actor.fsdp_config.grad_offload") is True


def test_a_moved_key_names_its_replacement():
    c = compose_stored(parse_launch(["ray_init.num_cpus=4"]), None, "0.9.1", env={})
    assert c.error.fix == "write ray_kwargs.ray_init.num_cpus=4 instead of ray_init.num_cpus=4"
    c = compose_stored(parse_launch(["ray_init.num_cpus=4"]), None, "0.5.0", env={})
    assert c.error is None and c.get("ray_init.num_cpus") == 4


@pytest.mark.parametrize("release", ["0.9.1", "0.6.1"])
@pytest.mark.parametrize("typed,meant", [
    ("actor_rollout_ref.rollout.tp_size", "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    ("actor_rollout_ref.rollout.gpu_mem_util", "actor_rollout_ref.rollout.gpu_memory_utilization"),
    ("actor_rollout_ref.actor.ulysses_sp_size", "actor_rollout_ref.actor.ulysses_sequence_parallel_size"),
    ("actor_rollout_ref.actor.micro_bsz_per_gpu", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    ("trainer.n_gpus", "trainer.n_gpus_per_node"),
])
def test_a_short_spelling_of_an_option_names_the_option(release, typed, meant):
    """tp_size, gpu_mem_util, sp, bsz: the field's short spellings of verl's option names. The fix
    names the option, and the fixed launch composes (the stored release's tree)."""
    c = compose_stored(parse_launch(["%s=2" % typed]), None, release, env={})
    assert c.error is not None and c.error.fix == "write %s=2 instead of %s=2" % (meant, typed), c.error
    fixed = compose_stored(parse_launch(["%s=2" % meant]), None, release, env={})
    assert fixed.error is None and fixed.get(meant) == 2


def test_a_new_key_under_a_dataclass_node_fails_but_a_plain_node_takes_it():
    c = compose_stored(parse_launch(["+actor_rollout_ref.rollout.my_knob=1"]), None, "0.9.1", env={})
    assert c.error.kind == "unknown_field" and "verl.workers.config.RolloutConfig" in c.error.message
    assert c.error.fix == "delete the override +actor_rollout_ref.rollout.my_knob=1"
    c = compose_stored(parse_launch(["+trainer.my_knob=1"]), None, "0.9.1", env={})
    assert c.error is None and c.get("trainer.my_knob") == 1


def test_config_values_are_redacted_by_what_verl_calls_its_keys():
    c = compose_stored(parse_launch(["data.prompt_key=question", "+trainer.wandb_api_key=abc123def",
                                     "+my.secret.thing=xyz", "trainer.project_name=https://u:pw@h/p",
                                     "+x.hf=hf_abcdefghijklmnopqrstuvwx"]), None, "0.9.1", env={})
    shown = c.shown_values()
    assert shown["data.prompt_key"] == "question" and shown["data.reward_fn_key"] == "data_source"
    assert shown["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == 16384
    assert shown["trainer.wandb_api_key"] == "***" and shown["my.secret.thing"] == "***"
    assert shown["trainer.project_name"] == "https://***@h/p" and shown["x.hf"] == "***"
    schema = c.schema()
    assert redact_config_value("data.prompt_key", "question", schema) == "question"
    # one of verl's own keys that plainly names a secret keeps it hidden
    assert redact_config_value("trainer.api_key", "abc", {"trainer.api_key"}) == "***"
    ovs = parse_launch(["data.prompt_key=question", "+trainer.wandb_api_key=abc123def"]).overrides
    assert c.shown_overrides(ovs) == ["data.prompt_key=question", "+trainer.wandb_api_key=***"]
    full = c.to_dict(full=True)["values"]
    assert full["trainer.wandb_api_key"]["value"] == "***" and full["data.prompt_key"]["value"] == "question"


# ---- against a real verl install (the target's own Hydra) --------------------------------------
@pytest.fixture(scope="module")
def verl_py():
    return verl_hydra_env("0.9.1")


@pytest.mark.realenv
def test_composition_order_with_hydra_in_a_real_install(verl_py, tmp_path):
    cfg = tmp_path / "saved.yaml"
    cfg.write_text("data:\n  train_batch_size: 64\n  max_prompt_length: 1024\n")
    only_defaults = compose(verl_py, parse_launch([]))
    with_file = compose(verl_py, parse_launch([]), str(cfg))
    with_both = compose(verl_py, parse_launch(["data.train_batch_size=32"]), str(cfg))
    assert only_defaults.method == "hydra" and only_defaults.verl_version == "0.9.1"
    assert only_defaults.get("data.train_batch_size") == 1024
    assert only_defaults.source_of("data.train_batch_size") == "default"
    assert with_file.get("data.train_batch_size") == 64 and with_file.source_of("data.train_batch_size") == "file"
    assert with_both.get("data.train_batch_size") == 32 and with_both.source_of("data.train_batch_size") == "override"
    assert with_both.source_of("actor_rollout_ref.rollout.prompt_length") == "file via data.max_prompt_length"


@pytest.mark.realenv
def test_stored_path_equals_the_target_path_with_a_file(verl_py, tmp_path):
    cfg = tmp_path / "saved.yaml"
    cfg.write_text(textwrap.dedent("""\
        data:
          train_batch_size: 64
        trainer:
          experiment_name: exp_${data.train_batch_size}
        newkey: 7
        """))
    recipe = tmp_path / "my_trainer.yaml"
    recipe.write_text("defaults:\n  - ppo_trainer\n  - _self_\n\ndata:\n  train_batch_size: 48\n")
    for f, words in ((cfg, ["+trainer.extra=5", "~trainer.logger", "actor_rollout_ref.rollout.val_kwargs={n: 4}"]),
                     (recipe, ["trainer.nnodes=2"]), (None, ["--config-name=ppo_megatron_trainer",
                                                            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"])):
        spec = parse_launch(words)
        h = compose(verl_py, spec, str(f) if f else None)
        s = compose_stored(spec, str(f) if f else None, "0.9.1", env={})
        assert h.method == "hydra" and s.method == "stored" and h.error is None and s.error is None
        assert h.raw == s.raw and h.resolved == s.resolved and h.provenance == s.provenance


@pytest.mark.realenv
def test_target_path_reads_the_installed_dataclasses(verl_py):
    words = [w.format("+") for w in CASE33]
    h = compose(verl_py, parse_launch(words))
    assert h.method == "hydra" and h.error is not None and h.error.kind == "unknown_field"
    assert h.error.fix.startswith("delete the override +actor_rollout_ref.actor.fsdp_config.grad_offload")


#: A launch's own config directory as verl's examples ship them (examples/sglang_multiturn/config at
#: v0.7.0): the primary config extends verl's trainer config through its defaults and searchpath.
OWN_PRIMARY = """\
hydra:
  searchpath:
    - file://verl/trainer/config
defaults:
  - ppo_trainer
  - _self_
data:
  max_prompt_length: 1000
actor_rollout_ref:
  rollout:
    name: sglang
"""


def test_stored_compose_with_the_launchs_own_config_directory(tmp_path):
    """rev-verl FP-2: a --config-path of the user's own holding a config no stored release has composed
    over the stored verl tree (its defaults name ppo_trainer), not refused as an unknown config."""
    (tmp_path / "mine.yaml").write_text(OWN_PRIMARY)
    spec = parse_launch("python3 -m verl.trainer.main_ppo --config-path=%s --config-name=mine.yaml "
                        "data.train_batch_size=8" % tmp_path)
    c = compose_stored(spec, release="0.7.0")
    assert c.error is None, c.error
    assert c.get("data.max_prompt_length") == 1000 and c.get("actor_rollout_ref.rollout.name") == "sglang"
    assert c.get("data.train_batch_size") == 8 and c.get("trainer.total_epochs") is not None


def test_own_config_is_never_told_to_switch_config_name(tmp_path):
    """A launch with its own config (over verl's ppo_trainer) that sets strategy=megatron: the
    config name is the user's; the refused key gets the rest of the chain, not ppo_megatron_trainer."""
    (tmp_path / "mine.yaml").write_text(OWN_PRIMARY)
    spec = parse_launch("python3 -m verl.trainer.main_ppo --config-path=%s --config-name=mine.yaml "
                        "actor_rollout_ref.actor.strategy=megatron %s" % (tmp_path, TP2))
    c = compose_stored(spec, release="0.7.0")
    assert c.error is not None and c.error.kind == "override_missing"
    assert "ppo_megatron_trainer" not in c.error.fix and "model_engine" not in c.error.fix, c.error.fix


@pytest.mark.realenv
def test_relative_config_path_is_read_as_hydra_reads_it(tmp_path, monkeypatch):
    """rev-verl FP-3: ``--config-path=config`` is relative to the entry module's directory (verl/trainer/),
    as Hydra's compute_search_path_dir reads it, whatever the working directory: the target's Hydra over the
    installed verl composes it like the default, and the stored path does the same."""
    py = verl_hydra_env()
    monkeypatch.chdir(str(tmp_path))  # no ./config here: the working directory must not matter
    line = "python3 -m verl.trainer.main_ppo --config-path=config --config-name=ppo_trainer.yaml data.train_batch_size=8"
    target = compose(py, parse_launch(line))
    plain = compose(py, parse_launch("data.train_batch_size=8"))
    stored = compose_stored(parse_launch(line), release="0.9.1")
    assert target.error is None and stored.error is None, (target.error, stored.error)
    assert target.get("data.train_batch_size") == plain.get("data.train_batch_size") == stored.get(
        "data.train_batch_size") == 8
    assert target.get("actor_rollout_ref.actor.strategy") == plain.get("actor_rollout_ref.actor.strategy")


def test_an_empty_config_file_is_verls_defaults(tmp_path):
    """An empty YAML file loads as {} (OmegaConf, as Hydra reads it): the launch is the release's
    defaults, not a YAML error the tool made by writing "{}" after its own defaults list."""
    f = tmp_path / "empty.yaml"
    f.write_text("")
    c = compose_stored(parse_launch([]), str(f), "0.9.1", env={})
    plain = compose_stored(parse_launch([]), None, "0.9.1", env={})
    assert c.error is None, c.error
    assert c.get("data.train_batch_size") == plain.get("data.train_batch_size")
    assert c.get("actor_rollout_ref.actor.ppo_mini_batch_size") == plain.get("actor_rollout_ref.actor.ppo_mini_batch_size")
