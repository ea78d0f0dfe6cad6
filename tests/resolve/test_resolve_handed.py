"""The resolver on handed failure cases 44 and 45 (shared/reference/failure_cases_3.md): a chosen stack
that is known-bad for part of the release (the async rollout of verl 0.6.0) and a GPU without bf16
each come with a warning naming the fix. Truth: the recorded metadata of verl and vLLM."""

from packaging.requirements import Requirement

from preflight.resolve import resolve


def test_060_async_rollout_needs_a_vllm_outside_the_declared_range(matrix):
    # case 44 (verl#3842): verl 0.6.0's range holds no vLLM with vllm.v1.engine.utils (it arrived in 0.10)
    r = resolve(matrix, "0.6.0", gpu="H100", driver="570.86.15", python="3.12")
    spec = [Requirement(x.split(";")[0]) for x in matrix.meta("verl", "0.6.0")["requires_dist"]
            if x.startswith("vllm") and "vllm" in x.split(";")[-1]][0].specifier
    assert r.ok and spec.contains(r.vllm) and not spec.contains("0.10.0")
    warn = [w for w in r.warnings if "vllm.v1.engine.utils" in w]
    assert warn and "async" in warn[0] and "0.10.0" in warn[0] and "0.6.1" in warn[0]
    # verl 0.6.1 admits vLLM 0.10/0.11: no such warning
    r = resolve(matrix, "0.6.1", gpu="H100", driver="570.86.15", python="3.12")
    assert not [w for w in r.warnings if "vllm.v1.engine.utils" in w]


def test_bf16_warned_below_compute_capability_8(matrix):
    # case 45 (verl#2594): V100 (7.0) has no bf16, which verl's defaults use
    r = resolve(matrix, "0.4.1", gpu="V100", driver="550.54.14", python="3.10")
    warn = [w for w in r.warnings if "bf16" in w]
    assert r.ok and warn and "7.0" in warn[0] and "rollout.dtype=float16" in warn[0]
    assert matrix.gpu("V100")["cc"] == "7.0"
    # an Ampere GPU (8.0) has bf16
    r = resolve(matrix, "0.4.1", gpu="A100", driver="550.54.14", python="3.10")
    assert not [w for w in r.warnings if "bf16" in w]
