"""vllm stage: a small offline generation with vLLM (tiny generated model, dummy weights)."""

from .base import check, skipped


@check("vllm.generate")
def generate(ctx):
    return skipped("the vLLM generation stage is not implemented in this version", [])
