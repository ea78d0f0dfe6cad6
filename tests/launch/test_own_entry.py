"""A recipe's or the user's own entry point composes the config its ``@hydra.main`` names, not
verl's ppo_trainer (examples review: 142 false FAIL rows on 47 recipe scripts, such as
``python3 -m recipe.dapo.main_dapo data.gen_batch_size=...``, a key only dapo_trainer has). The
truth: Hydra itself composing the same module's config."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MAIN = '''import hydra


@hydra.main(config_path="config", config_name="mine_trainer", version_base=None)
def main(config):
    pass
'''
CONFIG = """hydra:
  searchpath:
    - file://verl/trainer/config
defaults:
  - ppo_trainer
  - _self_
data:
  gen_batch_size: 8
  train_batch_size: 0
"""


def _job(tmp_path):
    d = tmp_path / "job" / "recipe" / "mine"
    (d / "config").mkdir(parents=True)
    (d / "main_mine.py").write_text(MAIN)
    (d / "config" / "mine_trainer.yaml").write_text(CONFIG)
    return tmp_path / "job"


def _config(cwd, *words):
    p = subprocess.run([sys.executable, "-m", "preflight", "config", "--no-startup", "--verl", "0.6.1", "--json", "-",
                        "--", "python3"] + list(words), capture_output=True, text=True, timeout=300, cwd=str(cwd),
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, {r["id"]: r for r in json.loads(p.stdout)["results"]}


def test_a_recipe_entry_point_composes_its_own_config(tmp_path):
    from hydra import compose, initialize_config_dir

    from preflight.launch.own_entry import hydra_main

    job = _job(tmp_path)
    assert hydra_main(MAIN) == ("config", "mine_trainer")
    # Hydra's own answer for the recipe's node: the key is there (no + needed); ppo_trainer has none
    own = tmp_path / "own"
    own.mkdir()
    (own / "mine_trainer.yaml").write_text("data:\n  gen_batch_size: 8\n")
    with initialize_config_dir(config_dir=str(own), version_base=None):
        assert compose(config_name="mine_trainer", overrides=["data.gen_batch_size=4"]).data.gen_batch_size == 4
    rc, rows = _config(job, "-m", "recipe.mine.main_mine", "data.gen_batch_size=4")
    assert rows["config.compose"]["status"] == "pass", rows["config.compose"]
    assert "mine_trainer" in json.dumps(rows["config.compose"]), rows["config.compose"]
    # its own trainer (fully_async's sets data.train_batch_size: 0): main_ppo's rules do not judge it
    assert rows["config.batch"]["status"] == "skip" and "its own trainer" in rows["config.batch"]["message"]
    assert not [r for r in rows.values() if r["status"] == "fail"] and rc == 0, rows


def test_a_recipe_entry_point_not_on_this_machine_is_not_judged_as_ppo_trainer(tmp_path):
    rc, rows = _config(tmp_path, "-m", "recipe.dapo.main_dapo", "data.gen_batch_size=512")
    row = rows["config.compose"]
    assert row["status"] == "warn" and "its module is not on this machine" in row["message"], row
    assert not [r for r in rows.values() if r["status"] == "fail"] and rc == 0
