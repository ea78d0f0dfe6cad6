"""Legacy reward keys verl 0.9.1's main_ppo never reads (matrices/verl_rules.toml ``legacy_unread``).

Truth: the installed verl 0.9.1 itself. Its dry start-up, given the 0.6-style
``custom_reward_function.path``, scores with the default scorer (get_custom_reward_fn reads only
``reward.custom_reward_function``); ``migrate_legacy_reward_impl``, the one function that moves the
legacy keys, names each mapping of the table and is called from no module of verl/trainer/.
"""

import os
import re
import subprocess

import pytest
from envs import real_env
from verl_fixtures import tiny_inputs

from preflight.launch.compose import compose_stored
from preflight.launch.overrides import parse_launch
from preflight.launch.rules import evaluate
from preflight.launch.rules.table import ruleset
from preflight.launch.startup import run_startup

BASE = ["actor_rollout_ref.rollout.name=vllm", "algorithm.adv_estimator=grpo", "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "trainer.n_gpus_per_node=1"]


def _ids(ovs, release="0.9.1"):
    c = compose_stored(parse_launch(["python3", "-m", "verl.trainer.main_ppo"] + BASE + ovs), None, release)
    return [(f.id, f.status, f.fix) for f in evaluate(c.get, release)[1] if f.rule == "legacy_unread"]


def test_legacy_keys_warn_with_the_key_the_release_reads():
    got = _ids(["reward_model.reward_manager=dapo", "custom_reward_function.path=/x/r.py"])
    assert [(i, s) for i, s, _f in got] == [("legacy_unread.custom_reward_function_path", "warn"),
                                            ("legacy_unread.reward_model_reward_manager", "warn")]
    assert "reward.custom_reward_function.path=/x/r.py" in got[0][2]
    assert "reward.reward_manager.name=dapo" in got[1][2]
    assert _ids(["reward.custom_reward_function.path=/x/r.py"]) == []  # the key 0.9.1 reads
    assert _ids(["custom_reward_function.path=/x/r.py"], "0.6.1") == []  # 0.6.1 reads the top-level node


@pytest.mark.realenv
def test_verl_091_ignores_them_and_its_source_says_where_they_go(tmp_path):
    py = real_env("verl091-core", ["verl[verl-core]==0.9.1", "torch==2.13.0"])
    i = tiny_inputs(py, str(tmp_path / "in"), 8, 0)
    reward = tmp_path / "r.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 7.0\n")
    files = ["data.train_files=" + i["train"], "data.val_files=" + i["test"], "actor_rollout_ref.model.path=" + i["model"]]
    st = run_startup(py, BASE + files + ["custom_reward_function.path=%s" % reward,
                                         "custom_reward_function.name=compute_score"], timeout=300)
    assert st.error is None, st.error
    assert "default_compute_score" in st.reward["function"], st.reward  # the user's file was never loaded
    st = run_startup(py, BASE + files + ["reward.custom_reward_function.path=%s" % reward,
                                         "reward.custom_reward_function.name=compute_score"], timeout=300)
    assert "default_compute_score" not in st.reward["function"], st.reward
    root = subprocess.run([py, "-c", "import os, verl; print(os.path.dirname(verl.__file__))"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    with open(os.path.join(root, "experimental", "reward_loop", "reward_loop.py")) as fh:
        src = fh.read()
    body = src[src.index("def migrate_legacy_reward_impl"):]
    body = re.split(r"\n(?:def|class) ", body[10:])[0]
    for old, new in ruleset("0.9.1")[0]["legacy_unread"].items():  # each key the function moves, and where to
        assert old.split(".")[-1] in body and new.split(".")[-1] in body, (old, new)
        assert ("config.%s" % old) in body or ('"%s"' % old.split(".")[-1]) in body or old == "reward_model.model.path" \
            and "config.reward_model.model.path" in body, old
    for dirpath, _d, names in os.walk(os.path.join(root, "trainer")):
        for n in names:
            if n.endswith(".py"):
                with open(os.path.join(dirpath, n)) as fh:
                    assert "migrate_legacy_reward_impl" not in fh.read(), n
