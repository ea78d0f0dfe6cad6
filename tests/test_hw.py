"""preflight.hw: which GPUs CUDA_VISIBLE_DEVICES leaves, the one reading that the nccl stage,
the launch rules (with NVML) and the launch line's GPU count (without) share.

Truth: the CUDA C++ Programming Guide, "CUDA Environment Variables" (a comma-separated list of
indices or UUIDs; only the devices before an invalid entry are visible), and the fake NVML
provider's devices (tests/fake_nvml.py: index i has uuid GPU-000i).
"""

import pytest
from fake_nvml import FakeNvml, h200s

from preflight.hw import visible_devices, visible_entries
from preflight.launch.model_rules import count_visible
from preflight.launch.rules import visible_gpus
from preflight.probes.nvml import collect


@pytest.mark.parametrize("cvd, entries", [
    ("3", ["3"]), ("0,1,2,3", ["0", "1", "2", "3"]), ("0,1,-1,3", ["0", "1"]), ("", []), (" 1 , 2 ", ["1", "2"]),
    ("GPU-8a1b,GPU-77c2", ["GPU-8a1b", "GPU-77c2"]), ("0,0", ["0"]), ("MIG-1f2e", ["MIG-1f2e"]),
    ("0,,1", ["0"]), ("1,x,2", ["1"]), ("-1", []), ("NoDevFiles", []), ("0,1,", ["0", "1"]),
])
def test_visible_entries(cvd, entries):
    assert visible_entries(cvd) == entries
    assert count_visible(cvd) == len(entries)  # the launch line's count is the same reading


@pytest.mark.parametrize("cvd, indices", [
    (None, [0, 1, 2, 3]), ("2,0", [2, 0]), ("GPU-0003,9,1", [3]), ("1,7,2", [1]), ("GPU-0001", [1]),
    ("0,0,1", [0, 1]), ("0,GPU-0000,1", [0, 1]), ("", []), ("0,,1", [0]), ("3,-1,0", [3]),
])
def test_visible_devices(cvd, indices):
    snap = collect(FakeNvml(h200s(4)))
    assert [d["index"] for d in snap["devices"]] == [0, 1, 2, 3]
    assert [d["uuid"] for d in snap["devices"]][1].startswith("GPU-0001")
    assert [d["index"] for d in visible_devices(snap["devices"], cvd)] == indices
    gpus, _ = visible_gpus(snap, {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd})
    assert [d["index"] for d in gpus] == indices  # the launch rules' reading is the same one


def test_unreadable_devices_are_never_visible():
    devs = [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "error": "unknown"}, {"index": 2, "uuid": "GPU-2"}]
    assert [d["index"] for d in visible_devices(devs, None)] == [0, 2]
    assert [d["index"] for d in visible_devices(devs, "1,2")] == []  # CUDA stops at 1
