"""The nearest options when no stack works (or one works only with caveats), each with the command that selects it."""

from typing import Any, Callable, List, Tuple

from ..shell import quote as shell_quote
from ..hw import driver_tuple
from .candidates import backend_spec
from .cuda import driver_status
from .evaluate import evaluate
from .model import Resolution
from .run import RANK, Run, WORD, bname


def attach_images(run: Run, res: Resolution) -> None:
    for img in run.mx.images(run.verl, run.backend):
        st = driver_status(run.mx, run.driver, str(img["cuda"])) if img.get("cuda") else {"status": "unknown"}
        res.images.append({"image": img["image"], "base": img.get("base"), "cuda": img.get("cuda"),
                           "python": img.get("python"), "torch": img.get("torch"),
                           "backend_version": img.get(run.backend) or "", "driver": st["status"],
                           "source": img["source"], "confidence": img["confidence"]})


def summary(r: Resolution) -> str:
    return "%s %s with torch %s (%s), Python %s" % (
        {"vllm": "vLLM", "sglang": "SGLang"}[r.backend], r.backend_version, r.torch, r.variant, r.python)


def resolve_command(run: Run, **change: Any) -> str:
    """The ``preflight resolve`` command line for this machine with ``change`` applied (keys:
    verl, backend, driver, python, build); a value of None drops the flag. ``--arch`` is given
    when the platform resolved is not the one resolve assumes without it (x86_64, or the GPU's
    host: GH200/GB200 on aarch64)."""


    v = {"verl": run.verl, "backend": run.backend, "driver": run.driver, "python": run.python, "build": run.build}
    v.update(change)
    parts = ["preflight", "resolve", "--verl", v["verl"]]
    if v["backend"] and v["backend"] != "vllm":
        parts += ["--backend", v["backend"]]
    if run.gpu:
        parts += ["--gpu", run.gpu]
    elif run.cc:
        parts += ["--cc", run.cc]
    if v["driver"]:
        parts += ["--driver", v["driver"]]
    if v["python"]:
        parts += ["--python", v["python"]]
    if v["build"]:
        parts += ["--backend-build", v["build"]]
    implied = str((run.mx.gpu(run.gpu) or {}).get("host_arch") or "") if run.gpu else ""
    if run.arch != (implied or "x86_64"):  # the option is for the platform resolved, not the default one
        parts += ["--arch", run.arch]
    return " ".join(shell_quote(str(p)) for p in parts)


def opt(opts: List[Tuple[str, str]], text: str, cmd: str) -> None:
    if all(o[0] != text for o in opts):
        opts.append((text, cmd))


def add_options(run: Run, res: Resolution, kinds: set, resolve: Callable[..., Resolution]) -> None:
    """Nearest fixes (module doc): Python, driver, other builds of the backend, other verl releases,
    the other backend. Each is a resolution that works, re-run with one input changed; each option
    ends with the exact command that selects it (also in ``res.commands``)."""
    mx = run.mx
    opts: List[Tuple[str, str]] = []
    if "python" in kinds and res.python:
        python_option(run, res, opts, resolve)
    if "proof" in kinds:
        for m in reversed(run.minors):
            if m == res.python:
                continue
            r = resolve(mx, run.verl, run.backend, run.driver, run.cc, None, m, None, _options=False, arch=run.arch,
                        backend_build=run.build)
            if r.ok and r.proof.get("status") == "proven":
                opt(opts, "use Python %s, for which pip resolves the set with wheels: %s" % (m, summary(r)),
                     resolve_command(run, python=m))
                break
    if not (res.ok and not (kinds & {"compat"})):
        if run.driver and kinds & {"driver", "compat", "gpu-driver"}:
            r = resolve(mx, run.verl, run.backend, None, run.cc, None, run.python, run.prefer, _options=False, arch=run.arch,
                        backend_build=run.build)
            if r.ok and r.min_driver and driver_tuple(r.min_driver) > driver_tuple(run.driver):
                branch = mx.driver_branch(r.min_driver) or {}
                opt(opts, "upgrade the NVIDIA driver to >= %s%s: %s" % (
                    r.min_driver, " (R%s branch or newer)" % branch["branch"] if branch else "", summary(r)),
                    resolve_command(run, driver=r.min_driver))
            elif r.ok and r.min_driver and "gpu-driver" in kinds:
                # the driver is past the GPU's last branch: the newest driver of that branch
                arow = [c for c in r.citations if c["row"].startswith("cuda.toml arch_driver")]
                opt(opts, "install a driver of the last branch that supports this GPU (%s): %s" % (
                    "; ".join(p for p in res.problems if "last driver branch" in p)[:200] or "see problems",
                    summary(r)), resolve_command(run, driver=None))
                del arow
        if not res.ok and res.backend_version and kinds & {"driver", "major", "arch"} and not run.build:
            for text, build in other_builds(run, res):
                opt(opts, text, resolve_command(run, build=build))
        if not res.ok:
            for text, v in other_releases(run, res, resolve):
                opt(opts, text, resolve_command(run, verl=v, build=None))
            for other in sorted((run.row.get("backend_extras") or {})):
                if other == run.backend:
                    continue
                r = resolve(mx, run.verl, other, run.driver, run.cc, None, run.python, run.prefer, _options=False, arch=run.arch)
                if r.ok:
                    opt(opts, "use --backend %s: %s%s" % (other, summary(r), caveat(r)),
                         resolve_command(run, backend=other, build=None))
    res.options = ["%s; select it with: %s" % (t, c) for t, c in opts]
    res.commands = [c for _, c in opts]


def python_option(run: Run, res: Resolution, opts: List[Tuple[str, str]], resolve: Callable[..., Resolution]) -> None:
    """The "use Python X" option when the asked Python does not fit: the stack of ``res``'s
    Python re-resolved (so its install line's proof is looked up), else the newest other minor
    whose stack is proven; one whose proof says "does not install" is never offered, one
    unproven only where no minor is proven, saying so."""
    later: Any = None
    for m in [res.python] + [x for x in reversed(run.minors) if x != res.python]:
        r = resolve(run.mx, run.verl, run.backend, run.driver, run.cc, None, m, None, _options=False, arch=run.arch,
                    backend_build=run.build)
        if not r.ok or r.python != m or r.verdict == "does not install":
            continue
        if r.verdict == "works":
            opt(opts, "use Python %s (e.g. uv venv -p %s): %s%s" % (m, m, summary(r), caveat(r)),
                resolve_command(run, python=m))
            return
        later = later or (m, r)
    if later:
        m, r = later
        opt(opts, "use Python %s (e.g. uv venv -p %s): %s%s" % (m, m, summary(r), caveat(r)),
            resolve_command(run, python=m))


def core_python_option(run: Run, res: Resolution, resolve: Callable[..., Resolution]) -> None:
    """For ``--backend none`` whose install line pip refuses: the newest other CPython minor whose
    verl core install line is proven, else the unproven one nearest it (saying so), as an option with
    its command; none where every other minor's line is refused or has no stack."""
    later: Any = None
    for m in reversed(run.minors):
        if m == res.python:
            continue
        r = resolve(run.mx, run.verl, "none", run.driver, run.cc, None, m, None, _options=False, arch=run.arch)
        if r.python != m or r.verdict not in ("works", "unproven"):
            continue
        if r.verdict == "unproven":  # the one nearest the asked Python
            if later is None or _dist(m, res.python) < _dist(later[0], res.python):
                later = (m, r)
            continue
        later = (m, r)
        break
    if later:
        m, r = later
        cmd = resolve_command(run, backend="none", python=m, build=None)
        res.options.append("use Python %s, %s verl %s's core: torch %s (%s), Python %s%s; select it with: %s" % (
            m, "for which pip resolves" if r.verdict == "works" else "where the matrix fits", run.verl, r.torch,
            r.variant, m, caveat(r), cmd))
        res.commands.append(cmd)


def _dist(a: str, b: Any) -> int:
    """How many minors apart CPython ``a`` and ``b`` ("3.9", "3.12") are; 99 when ``b`` is unknown."""
    if not b:
        return 99
    return abs(int(a.split(".")[1]) - int(str(b).split(".")[1]))


def caveat(r: Resolution) -> str:
    bits = []
    if any("minor-version compatibility" in w for w in r.warnings):
        bits.append("through minor-version compatibility")
    if r.confidence != "V":
        bits.append("rests on %s rows" % WORD[r.confidence])
    if r.verdict == "unproven":
        why = str((r.proof or {}).get("reason") or "")
        bits.append("unproven%s" % (" here: needs the PyTorch index" if "PyTorch index" in why else
                                    ": no recorded proof of its install line"))
    return " (%s)" % ", ".join(bits) if bits else ""


def other_builds(run: Run, res: Resolution) -> List[Tuple[str, str]]:
    """Other published builds of the chosen backend release (vllm.toml ``other``) that would run."""
    mx = run.mx
    row = mx.backend_build(run.backend, res.backend_version or "")
    out: List[Tuple[str, str]] = []
    if not row:
        return out
    _, _, extras = backend_spec(run)
    for other in row.get("other") or []:
        o = dict(other, source=row["source"], versions=row["versions"],
                 confidence=max(other.get("confidence", "S"), row.get("confidence", "V"), key=lambda c: RANK[c]))
        ev = evaluate(run, res.backend_version or "", extras, res.python or run.minors[-1], bcuda_override=o)
        if ev["fail"]:
            continue
        where = str(other["where"]).format(version=res.backend_version)
        if o["confidence"] != "V":
            where += "; [%s] published for some releases, not verified for this one" % o["confidence"]
        out.append(("use %s %s's %s build (%s) with torch %s from the %s index (%s)%s" % (
            bname(run), res.backend_version, other["variant"], where, ev["torch"], ev["variant"]["variant"],
            ev["variant"]["index"],
            "; the driver runs it through minor-version compatibility" if ev["warnings"] else "") +
            "; unproven here: needs the PyTorch index and %s, not reachable from the prover" % where.split(";")[0],
            str(other["variant"])))
    return out


def other_releases(run: Run, res: Resolution, resolve: Callable[..., Resolution]) -> List[Tuple[str, str]]:
    """The nearest other verl releases that work on this machine (a second one when the nearest
    needs minor-version compatibility or rests on S/U rows)."""
    mx = run.mx
    known = mx.verl_versions()
    here = known.index(run.verl)
    order = sorted((i for i in range(len(known)) if i != here), key=lambda i: (abs(i - here), i < here))
    out: List[Tuple[str, str]] = []
    clean = False
    for i in order:
        v = known[i]
        if run.backend not in (mx.verl(v) or {}).get("backend_extras", {}):
            continue
        r = resolve(mx, v, run.backend, run.driver, run.cc, None, run.python, run.prefer, _options=False, arch=run.arch)
        if not r.ok:
            continue
        cav = caveat(r)
        if not out or (not clean and not cav):
            out.append(("use verl %s: %s%s" % (v, summary(r), cav), v))
            clean = clean or not cav
        if clean or len(out) >= 2:
            break
    return out
