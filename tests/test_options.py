"""Typed options per stage (issue 11 item 6): the config, nccl and vllm stages read typed fields;
the old untyped ``extra`` dict is a view over them, so both spellings agree."""

from preflight.context import LaunchOptions, NcclOptions, Options, VllmOptions
from preflight.stages import stage


def test_old_extra_keys_land_in_typed_fields():
    o = Options(python="/p", extra={"launch": ["a=1"], "config_file": "c.yaml", "gpus": 8, "nnodes": 2,
                                    "launch_given": True, "nccl_backend": "gloo", "nccl_inject": "hang",
                                    "vllm_compile": True, "vllm_session": True, "future_key": 3})
    assert o.launch == LaunchOptions(words=["a=1"], config_file="c.yaml", gpus=8, nnodes=2, given=True)
    assert o.nccl == NcclOptions(backend="gloo", inject="hang") and o.vllm == VllmOptions(compile=True, session=True)
    assert o.other == {"future_key": 3} and o.extra["future_key"] == 3


def test_extra_view_reads_and_writes_the_typed_fields():
    o = Options(launch=LaunchOptions(words="x=1"), nccl=NcclOptions(backend="gloo"))
    assert o.extra["launch"] == "x=1" and o.extra.get("nccl_backend") == "gloo"
    o.extra.update({"launch": ["y=2"], "gpus": 4})
    assert o.launch.words == ["y=2"] and o.launch.gpus == 4
    assert Options().nccl.backend == "nccl" and not Options().launch.given


def test_the_nccl_gate_reads_the_typed_backend(ctx_factory):
    ctx = ctx_factory()
    assert "gpu.nvml" in stage("nccl").gate(ctx)
    ctx.options.nccl.backend = "gloo"
    assert stage("nccl").gate(ctx) == ("imports.torch",)

