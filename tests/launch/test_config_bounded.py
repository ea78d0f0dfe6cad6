"""Config parsing and composition are bounded (issue 21's config item; fault_cases_3.md c01, c03):
what can run away composes in a child of the checker's interpreter under the timeout."""

import os
import time

import pytest

from preflight.errors import UsageError
from preflight.launch.compose import FileUnreadable, compose_stored
from preflight.launch.compose.run import bounded
from preflight.launch.overrides import parse_launch


def bomb(levels):
    ovs = ["+trainer.x0=aaaaaaaaaa"]
    ovs += ["+trainer.x%d=${trainer.x%d}${trainer.x%d}" % (i, i - 1, i - 1) for i in range(1, levels + 1)]
    return parse_launch(ovs)


def test_interpolation_bomb_ends_within_the_timeout():
    spec = bomb(16)
    assert not bounded(spec)
    t0 = time.monotonic()
    c = compose_stored(spec, release="0.9.1", timeout=3)
    took = time.monotonic() - t0
    assert took < 15, took
    assert c.error is not None and c.error.kind == "compose_probe"


def test_small_interpolation_still_composes_in_the_child():
    spec = parse_launch(["+trainer.x0=abc", "+trainer.x1=${trainer.x0}-${trainer.x0}"])
    assert not bounded(spec)
    c = compose_stored(spec, release="0.9.1", timeout=60)
    assert c.error is None and c.get("trainer.x1") == "abc-abc"


def test_plain_overrides_stay_in_process():
    assert bounded(parse_launch(["data.train_batch_size=8", "trainer.nnodes=2"]))
    assert not bounded(parse_launch(["+trainer.k%d=1" % i for i in range(500)]))


def test_deep_json_is_one_line(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"a":' * 150000 + "1" + "}" * 150000)
    with pytest.raises(FileUnreadable) as ei:
        compose_stored(parse_launch([]), file=str(p), release="0.9.1")
    assert "too deep" in str(ei.value)


def test_fifo_config_is_never_opened(tmp_path):
    p = str(tmp_path / "cfg.yaml")
    os.mkfifo(p)
    t0 = time.monotonic()
    with pytest.raises(UsageError):
        compose_stored(parse_launch([]), file=p, release="0.9.1")
    assert time.monotonic() - t0 < 10
