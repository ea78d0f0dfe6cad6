"""python stage: the target interpreter runs, its version fits the verl release, its environment.

All facts come from running the target (``--python PATH``), never from the checker itself.
"""

import os

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..shell import quote as shell_quote
from .base import CheckResult, Context, check, failed, passed, warned


@check("python.interpreter")
def interpreter(ctx: Context) -> CheckResult:
    """The target interpreter runs and reports its facts; an install marked incomplete fails here."""
    out = ctx.target_probe()
    info = ctx.target()
    ev = out.evidence()
    ev["python"] = ctx.options.python
    if info is None:
        if out.launch_error and "not Python 3.6 or newer" in out.launch_error and not out.launch_error.startswith(
                "not run:"):  # probes.process.tree_refusal: a Python 2, or one that cannot parse the probe
            return failed(out.launch_error, "point --python at the Python 3.10-3.12 interpreter of your verl environment",
                          ev)
        if out.launch_error and out.launch_error.startswith("not run: "):  # probes.process.tree_refusal
            from ..paths import CODE_FIX

            if "did not say what it runs at start-up" in out.launch_error:  # not a refusal of its owner
                return failed("%s: %s" % (ctx.options.python, out.launch_error),
                              ("it could not find the program it runs (exit status 127: command not found; a pyenv "
                               "shim whose Python is not active here answers so: see 'pyenv versions'); "
                               if "status 127" in out.launch_error else "") +
                              "pass the Python interpreter itself with --python (e.g. ~/venvs/verl/bin/python), not a "
                              "wrapper that drops or changes its arguments", ev)
            return failed("%s: %s" % (ctx.options.python, out.launch_error), CODE_FIX, ev)
        if out.launch_error:
            return failed("cannot run %s: %s" % (ctx.options.python, out.launch_error),
                          "pass the path of an existing Python interpreter with --python "
                          "(e.g. --python ~/venvs/verl/bin/python)", ev)
        hello = out.last("interpreter") or {}
        ver = hello.get("version")
        if isinstance(ver, list) and len(ver) >= 2 and all(isinstance(x, int) for x in ver) and tuple(ver[:2]) < (3, 6):
            return failed("%s is Python %s, not Python 3.6 or newer" % (ctx.options.python, ".".join(map(str, ver))),
                          "point --python at the Python 3.10-3.12 interpreter of your verl environment", ev)
        if "SyntaxError" in out.stderr_tail:
            return failed("%s is not Python 3.6 or newer (it cannot parse the probe)" % ctx.options.python,
                          "point --python at the Python 3.10-3.12 interpreter of your verl environment", ev)
        bad = ctx.target_malformed()
        if bad:
            ev["malformed"] = bad
            return failed("%s answered with a malformed report (%s): it is not a Python interpreter this tool can "
                          "check, or something on its path replaced the probe's answer" % (
                              ctx.options.python, "; ".join(bad[:4])),
                          "pass the real interpreter of your environment with --python (e.g. ~/venvs/verl/bin/python), "
                          "not a wrapper script", ev)
        return failed("the interpreter %s did not report its facts: %s" % (ctx.options.python, out.describe()),
                      "to see what is wrong with it, run: %s -c \"import sys; print(sys.version)\"" % ctx.python_cmd, ev)
    ev.update(executable=info["executable"], version=info["version_string"], implementation=info["implementation"],
              prefix=info["prefix"])
    if info.get("incomplete_marker"):
        ev["incomplete_marker"] = info["incomplete_marker"]
        return failed("this environment is marked incomplete: an install into %s did not finish" % info["prefix"],
                      "run 'preflight install' for this prefix again (it resumes), or remove the prefix", ev)
    from ..atomic import run_problem

    theirs = run_problem(ctx.options.python) or run_problem(info["executable"] or ctx.options.python)
    if theirs:  # root running it runs that user's code
        ev["not_own"] = theirs
        return warned("%s %s at %s, but %s: running it (as this user%s) runs code another user controls" % (
            info["implementation"], info["version_string"], info["executable"], theirs,
            ", root" if os.geteuid() == 0 else ""),
            "check with an interpreter only you and root can change (e.g. one 'preflight install' made), or "
            "ask its owner to fix its owner and mode", ev)
    return passed("%s %s at %s" % (info["implementation"], info["version_string"], info["executable"]), ev)


def _python_for(ctx: Context, verl_v, requires_python: str) -> str:
    """The Python minor to suggest: the resolver's choice for this verl release (the one its whole
    stack supports), else the newest minor with torch wheels that Requires-Python admits."""
    try:
        from ..resolve import resolve

        res = resolve(ctx.matrix, verl_v, _options=False)
        if res.python:
            return res.python
    except Exception:  # a suggestion only: fall back to the data below
        pass
    spec = SpecifierSet(requires_python)
    minors = sorted(_torch_pythons(ctx), key=Version)
    ok = [m for m in minors if Version(m + ".0") in spec]
    return ok[-1] if ok else "a version within %s" % requires_python


def _torch_pythons(ctx: Context):
    """Python minors some recorded torch release admits (from torch's Requires-Python)."""
    out = set()
    for t in ctx.matrix.versions("torch"):
        rp = (ctx.matrix.meta("torch", t) or {}).get("requires_python")
        if not rp:
            continue
        for minor in range(8, 16):
            if Version("3.%d.0" % minor) in SpecifierSet(rp):
                out.add("3.%d" % minor)
    return out


@check("python.version", needs=("python.interpreter",))
def version(ctx: Context) -> CheckResult:
    """The target's Python against the Requires-Python of the verl release checked."""
    info = ctx.target()
    # from the version tuple: sys.version of a source build can read "3.12.3+", not PEP 440
    v = Version(".".join(str(x) for x in info["version"][:3]))
    verl_v, how = ctx.verl_release()
    row = ctx.verl_row()
    meta = (row or {}).get("_meta") or {}
    rp = meta.get("requires_python")
    ev = {"python": str(v), "verl": verl_v, "verl_chosen_by": how, "requires_python": rp,
          "source": meta.get("source")}
    if info.get("implementation") != "cpython":
        return warned("%s is not CPython: torch, vLLM and flash-attn ship CPython wheels only" % info["implementation"],
                      "use a CPython build (python.org, uv, conda or the distribution's python3)", ev)
    if row is None:
        return warned("Python %s not checked against verl: verl %s is not a release the matrix can place" % (v, verl_v),
                      "install a released verl (see packages.verl)", ev)
    if not rp:
        return passed("Python %s (verl %s declares no Requires-Python)" % (v, verl_v), ev)
    try:
        spec = SpecifierSet(rp)
    except InvalidSpecifier:
        return passed("Python %s (verl %s Requires-Python %r unreadable)" % (v, verl_v, rp), ev)
    if v not in spec:
        pick = _python_for(ctx, verl_v, rp)
        return failed("Python %s is outside verl %s's Requires-Python %s" % (v, verl_v, rp),
                      "create the environment with Python %s (e.g. 'uv venv --python %s' or "
                      "'conda create -n verl python=%s')" % (pick, pick, pick), ev)
    if info.get("releaselevel") != "final":
        return warned("Python %s is a pre-release" % info["version_string"], "use a final CPython release", ev)
    return passed("Python %s within verl %s's Requires-Python %s" % (v, verl_v, rp), ev)


@check("python.environment", needs=("python.interpreter",))
def environment(ctx: Context) -> CheckResult:
    """venv or conda, pip present, unreadable distribution metadata."""
    info = ctx.target()
    kind = "conda env %s" % (info.get("conda_env") or info["prefix"]) if info.get("is_conda") else (
        "venv %s" % info["prefix"] if info.get("is_venv") else "system interpreter %s" % info["prefix"])
    ev = {"prefix": info["prefix"], "base_prefix": info["base_prefix"], "is_venv": info.get("is_venv"),
          "is_conda": info.get("is_conda"), "has_pip": info.get("has_pip")}
    broken = ctx.broken_dists()
    if broken:
        ev["broken_metadata"] = broken[:10]
        where = ", ".join(str(b.get("location")) for b in broken[:3])
        return failed("%d installed distribution(s) have unreadable metadata (%s)" % (len(broken), where),
                      "reinstall or delete the broken *.dist-info directories listed in the evidence "
                      "(pip cannot manage them either)", ev)
    if not info.get("has_pip"):
        return warned("%s has no pip: verl's extras and fixes are installed with pip" % kind,
                      "%s -m ensurepip --upgrade (or install uv and use: uv pip install --python %s ...)" % (
                          shell_quote(info["executable"]), shell_quote(info["executable"])), ev)
    if not info.get("is_venv") and not info.get("is_conda"):
        return warned("%s: installing verl into it can break system packages" % kind,
                      "create a dedicated environment: python3 -m venv ~/venvs/verl", ev)
    return passed(kind + ", pip present", ev)
