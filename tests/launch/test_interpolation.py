"""preflight.launch.interpolation: which keys an OmegaConf value refers to, the one reading that
provenance (compose), fix overlays (fixes), unresolved numbers (rules) and token budgets
(model_rules) share. Truth: OmegaConf 2.3 itself (the vendored copy) resolves each case, with a
marker value at the key the reader names."""

import pytest
from omegaconf import OmegaConf

from preflight.launch.interpolation import key_parts, reference_of, references


def _set(tree, parts, value):
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def _resolved(path, value, at, marker):
    """``path``'s value under OmegaConf, with ``value`` at ``path`` and ``marker`` at ``at``."""
    tree = {}
    _set(tree, key_parts(at), marker)
    _set(tree, key_parts(path), value)
    return OmegaConf.select(OmegaConf.create(tree), path)


WHOLE = [
    ("a.b", "${c.d}", "c.d"),
    ("a.b", "${.x}", "a.x"),
    ("a.b.c", "${..y}", "a.y"),
    ("a.b", "${oc.select:c.d,7}", "c.d"),
    ("a.b", "${oc.select:.x,null}", "a.x"),
    ("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
     "${actor_rollout_ref.actor.ppo_max_token_len_per_gpu}", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"),
    ("critic.ppo_micro_batch_size_per_gpu", "${oc.select:actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu,null}",
     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    ("a.b", "${my-key.x}", "my-key.x"),
]


@pytest.mark.parametrize("path, value, key", WHOLE)
def test_reference_of_a_whole_reference(path, value, key):
    assert reference_of(value, path) == key
    assert _resolved(path, value, key, 4242) == 4242  # OmegaConf reads exactly that key


@pytest.mark.parametrize("value", ["${oc.env:HOME}", "${a}_${b}", "x${a}", "plain", 3, None, "${oc.env:X,1}",
                                   "${now:%Y}", " ${c} "])
def test_no_single_key_reference(value):
    assert reference_of(value, "a.b") is None


@pytest.mark.parametrize("path, value, keys", [
    ("a.b", "${c}_${d.e}", ["c", "d.e"]),
    ("a.b", "run-${.name}-${oc.select:x.y,0}", ["a.name", "x.y"]),
    ("a.b", "${c}${c}", ["c"]),
    ("a.b", "${oc.env:HOME}/${c}", ["c"]),
    ("a.b", "no interpolation", []),
])
def test_references_inside_a_value(path, value, keys):
    assert references(value, path) == keys
    for i, k in enumerate(keys):  # each named key is one OmegaConf reads
        tree = {}
        for j, other in enumerate(keys):
            _set(tree, key_parts(other), "M%d" % j)
        _set(tree, key_parts(path), value.replace("${oc.env:HOME}", "H"))
        assert "M%d" % i in str(OmegaConf.select(OmegaConf.create(tree), path))


def test_key_parts():
    assert key_parts("a.b[0].c") == ["a", "b", "0", "c"] and key_parts("x") == ["x"] and key_parts("") == []
