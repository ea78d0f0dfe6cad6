"""The fixes that install verl and torch, said once for every check (packages, imports): each
names the stack the resolver behind ``preflight resolve`` picks for this run's release, backend and
Python, and a backend the resolver refuses is never offered as a ``pip install`` line. Every
command is built by :func:`preflight.shell.command`."""

from typing import Any, Optional

from ..shell import command, quote
from .base import Context

__all__ = ["verl_pip_spec", "backend_problem", "backend_fix", "verl_install", "resolved_torch", "sglang_alternative",
           "install_hint"]


def verl_pip_spec(ctx: Context, version: str) -> str:
    """The pip requirement a fix should name for verl ``version`` and this run's rollout backend:
    ``verl[vllm]==V`` (or ``verl[sglang]==V``) for a backend, the release's core extra
    (``verl[verl-core]==V``, plain ``verl==V`` for releases without one) under ``--backend none``,
    and ``verl[vllm]==V`` when no backend is known (vLLM is verl's default rollout;
    :func:`sglang_alternative` names the other)."""
    row = ctx.matrix.verl(version) or {}
    if ctx.options.backend == "none":
        core = row.get("core_extra")
        return "verl[%s]==%s" % (core, version) if core else "verl==%s" % version
    backend, _how = ctx.backend()
    bextra = (row.get("backend_extras") or {}).get(backend) if backend else None
    if bextra:
        return "verl[%s]==%s" % (bextra, version)
    return "verl[vllm]==%s" % version


def _resolution(ctx: Context, version: str, backend: Optional[str]) -> Any:
    """The resolver's answer behind ``preflight resolve`` (:func:`preflight.resolve.resolve`, no
    options searched) for verl ``version``, ``backend`` and the target's Python when known, once
    per run (:meth:`Context.memo`: every install fix of every check asks it); None when the resolver
    cannot say (a hint only: the fixes then fall back to the pins)."""
    def run() -> Any:
        try:
            from ..resolve import resolve

            info = ctx.target() or {}
            py = ".".join(str(x) for x in (info.get("version") or [])[:2]) or None
            return resolve(ctx.matrix, version, backend=backend, python=py, _options=False)
        except Exception:
            return None
    return ctx.memo("install_fix.resolve:%s:%s" % (version, backend), run)


def backend_problem(ctx: Context, version: str, backend: str) -> Optional[str]:
    """Why verl ``version`` with the rollout ``backend`` ("vllm", "sglang") has no stack that
    installs, by the resolver (:func:`_resolution`): its first problem ("verl 0.9.1 requires
    transformers==5.9.0 but SGLang 0.5.12 requires transformers==5.6.0"); None when a stack resolves
    or the resolver cannot say. A fix never names an install the resolver refuses."""
    res = _resolution(ctx, version, backend)
    if res is None or res.ok:
        return None
    return (res.problems or ["no stack resolves"])[0]


def backend_fix(ctx: Context, version: str, backend: str, then: str = "") -> str:
    """The fix that installs verl ``version`` with ``backend``: ``pip install 'verl[sglang]==V'``
    (with ``then``, e.g. " to get the SGLang and torch it pins"), or, when the resolver finds no
    stack for it (:func:`backend_problem`), why not and the command that shows what does install."""
    row = ctx.matrix.verl(version) or {}
    extra = (row.get("backend_extras") or {}).get(backend) or backend
    why = backend_problem(ctx, version, backend)
    if why:
        return "verl %s with %s does not install: %s; %s shows the releases and backends that do" % (
            version, backend, why, command(["preflight", "resolve", "--verl", version, "--backend", backend]))
    return "%s%s" % (command(["pip", "install", "verl[%s]==%s" % (extra, version)]), then)


def verl_install(ctx: Context, version: str, spec: Optional[str] = None) -> str:
    """The command that installs verl ``version`` for this run (``spec``, default
    :func:`verl_pip_spec`: ``pip install 'verl[vllm]==V'``), or, when this run's backend has no
    stack that installs (:func:`backend_problem`), :func:`backend_fix`'s why and where to look."""
    b = None if ctx.options.backend == "none" else ctx.backend()[0]
    if b and backend_problem(ctx, version, b):
        return backend_fix(ctx, version, b)
    return command(["pip", "install", spec or verl_pip_spec(ctx, version)])


def resolved_torch(ctx: Context, version: str) -> Optional[str]:
    """The torch release the resolver (:func:`_resolution`) picks for verl ``version`` and this
    run's backend on the target's Python ("2.9.0"), or None when it finds no stack: a fix names the
    torch that ``resolve``, ``spec`` and ``install`` would."""
    res = _resolution(ctx, version, "none" if ctx.options.backend == "none" else ctx.backend()[0])
    return res.torch if res is not None and res.ok and res.torch else None


def sglang_alternative(ctx: Context, version: str) -> str:
    """``" (for an SGLang rollout: 'verl[sglang]==V')"`` when :func:`verl_pip_spec` chose vLLM only
    because no backend is known and the resolver finds an SGLang stack for ``version``, else ""."""
    if ctx.options.backend == "none" or ctx.backend()[0]:
        return ""
    if backend_problem(ctx, version, "sglang"):
        return ""
    return " (for an SGLang rollout: %s)" % quote("verl[sglang]==%s" % version)


def install_hint(ctx: Context, version: str) -> str:
    """``preflight install --verl V --prefix ~/venvs/verl`` as this run would need it (with
    ``--backend none`` when the run said so)."""
    return "preflight install --verl %s%s --prefix ~/venvs/verl" % (
        version, " --backend none" if ctx.options.backend == "none" else "")
