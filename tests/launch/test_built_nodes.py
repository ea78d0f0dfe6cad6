"""A ``_target_`` node binds its dataclass's fields only where the release's code builds it (third
reviewer: six v0.6.1 fapo launches were FAIL for ``+reward_model.reward_kwargs``, but verl 0.6.1
never hands ``reward_model`` to ``omega_conf_to_dataclass``; only its ``rollout`` below). The truth:
the installed verl's own source, searched by a regular expression (independent of the ``ast``
reading the product does), and the control that a node verl does build still fails."""

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: A saved config of the fapo recipe's shape (written here, not copied): the trainer's defaults plus
#: a reward_model node naming RewardModelConfig.
RM_CONFIG = """hydra:
  searchpath:
    - file://verl/trainer/config
defaults:
  - ppo_trainer
  - _self_
reward_model:
  _target_: verl.workers.config.RewardModelConfig
  reward_manager: dapo
"""


@pytest.fixture(scope="module")
def verl061():
    from envs import real_env

    return real_env("verl061-tf4", ["verl==0.6.1", "torch==2.13.0", "transformers>=4.51,<5", "pyarrow>=19,<20"])


def _verl_builds(py, pattern):
    site = subprocess.run([py, "-c", "import os, verl; print(os.path.dirname(verl.__file__))"], check=True,
                          capture_output=True, text=True).stdout.strip()
    hits = []
    for f in glob.glob(os.path.join(site, "**", "*.py"), recursive=True):
        with open(f, encoding="utf-8", errors="replace") as fh:
            hits += re.findall(r"omega_conf_to_dataclass\(\s*(" + pattern + r")\s*[,)]", fh.read())
    return hits


def _fail_rows(py, tmp_path, overrides):
    (tmp_path / "rm.yaml").write_text(RM_CONFIG)
    p = subprocess.run([sys.executable, "-m", "preflight", "config", "--python", py, "--no-startup", "--verl", "0.6.1",
                        "--", "python3", "-m", "verl.trainer.main_ppo", "--config-path", str(tmp_path), "--config-name",
                        "rm.yaml"] + overrides, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=ROOT, COLUMNS="400"))
    assert p.returncode in (0, 1), p.stderr
    return [ln for ln in p.stdout.splitlines() if ln.startswith("FAIL")]


@pytest.mark.realenv
def test_only_a_node_the_release_builds_binds_its_fields(verl061, tmp_path):
    assert _verl_builds(verl061, r"[\w.]*reward_model") == []  # 0.6.1 never builds reward_model itself
    assert _verl_builds(verl061, r"[\w.]*actor_rollout_ref\.actor")  # built: its fields bind
    rows = _fail_rows(verl061, tmp_path, ["+reward_model.reward_kwargs.max_resp_len=100",
                                          "+actor_rollout_ref.actor.no_such_field=1"])
    assert not [r for r in rows if "reward_kwargs" in r], rows
    assert [r for r in rows if "FSDPActorConfig, which has no field 'no_such_field'" in r], rows


def test_what_a_release_builds_is_read_from_its_code(tmp_path):
    """The reading itself, over a small package of this test's own: a path given through self's
    config, a config's attribute chain, a dataclass_type, and a bare parameter (not visible)."""
    sys.path.insert(0, os.path.join(ROOT, "preflight", "target"))
    try:
        import verl_fields
    finally:
        sys.path.pop(0)
    pkg = tmp_path / "verl" / "workers"
    pkg.mkdir(parents=True)
    (pkg / "w.py").write_text(
        "def f(self, config, c):\n"
        "    omega_conf_to_dataclass(self.config.actor.fsdp_config)\n"
        "    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)\n"
        "    omega_conf_to_dataclass(c, dataclass_type=HFModelConfig)\n"
        "    omega_conf_to_dataclass(config)\n"
        "    omega_conf_to_dataclass(config.get('profiler', {}))\n")
    got = verl_fields.built(verl_fields.dir_reader(str(tmp_path)), verl_fields.package_modules(str(tmp_path)))
    assert got == {"paths": ["actor.fsdp_config", "actor_rollout_ref.rollout", "profiler"], "classes": ["HFModelConfig"]}
