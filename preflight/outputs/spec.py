"""From a resolution to a fixed environment spec on disk: requirements.lock, pylock.toml (PEP 751,
the same set) and environment.json.

:func:`build_spec` turns a :class:`preflight.resolve.Resolution` (optionally with the overrides a
user gives: another torch release or index, no rollout backend) into top-level pins, lets pip
resolve the complete set with hashes (:mod:`preflight.outputs.lock`), and :func:`write_spec`
writes the two files. flash-attn is left out of the lock when it has to be built from source
(that build needs torch already installed); the spec records it as a post-install step.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import __version__
from ..errors import UsageError
from ..redact import redact, strip_userinfo, url_has_secret
from .environment import render_environment
from .install import lock_digest
from .lock import LockResult, render_lock, render_pylock, resolve_lock, unhashed
from .owned import OutputDir

__all__ = ["SpecOptions", "Spec", "build_spec", "write_spec", "top_level", "CREDENTIALS_NOTE", "SPEC_FILES", "cited_rows"]

#: What environment.json says, and the console tells, when an index URL carried credentials.
CREDENTIALS_NOTE = ("not written: give them to pip where it runs (PIP_EXTRA_INDEX_URL, pip config, ~/.netrc or "
                    "keyring; in a Docker build, a build secret; see the README, Index credentials)")


@dataclass
class SpecOptions:
    """User overrides on top of the resolution.

    Attributes:
        torch: pin torch to this version instead (e.g. "2.13.0"); torchvision/torchaudio pins are
            dropped unless the matrix pairs a release with it.
        torch_index: an index URL for torch, or "none" to use only pip's configured indexes.
        no_backend: install verl without a rollout engine (its core extra only), e.g. for CPU tests.
    """

    torch: Optional[str] = None
    torch_index: Optional[str] = None
    no_backend: bool = False


@dataclass
class Spec:
    """A resolved, locked stack: ``requirements`` (top-level pins), ``lock`` (pip's complete set),
    ``lock_text``, ``post_install`` (commands after the lock, e.g. a flash-attn source build),
    ``stack`` (the choices, for environment.json), ``pylock_text`` (the same set as pylock.toml),
    ``index_credentials`` (the index URLs that carried a user or password: used for this run's
    pip only, never written to a file)."""

    requirements: List[str]
    lock: LockResult
    lock_text: str
    post_install: List[str] = field(default_factory=list)
    stack: Dict[str, Any] = field(default_factory=dict)
    pylock_text: str = ""
    index_credentials: List[str] = field(default_factory=list)


def top_level(mx, res, opts: SpecOptions):
    """(top-level requirement strings, extra index URLs, post-install commands) for ``res``."""
    reqs = list(res.requirements)
    post: List[str] = []
    fa = res.flash_attn or {}
    if fa.get("status") == "source build":
        reqs = [r for r in reqs if not r.startswith("flash-attn")]
        post.append("pip install --no-build-isolation flash-attn==%s  # %s" % (fa.get("version"), fa.get("reason", "")))
    if opts.no_backend and res.backend == "none":
        # resolved as --backend none: the install line is verl's core, its torch and the bounds
        post = []
    elif opts.no_backend:
        # verl's core alone: no rollout engine, no GPU-only extras (flash-attn), no torchvision
        row = mx.verl(res.verl) or {}
        core = row.get("core_extra")
        verl_req = "verl[%s]==%s" % (core, res.verl) if core else "verl==%s" % res.verl
        reqs = [verl_req] + [r for r in reqs if r.startswith("torch==")]
        post = []
    if opts.torch:
        paired = {p: mx.paired(p, opts.torch) for p in ("torchvision", "torchaudio")}
        out = []
        for r in reqs:
            name = r.split("==")[0]
            if name == "torch":
                out.append("torch==%s" % opts.torch)
            elif name in paired:
                if paired[name]:
                    out.append("%s==%s" % (name, paired[name][-1]))
            else:
                out.append(r)
        reqs = out
    extra: List[str] = []
    if opts.torch_index and opts.torch_index != "none":
        extra = [opts.torch_index]
    elif opts.torch_index is None and not res.torch_from_pypi and res.index_url:
        extra = [res.index_url]
    extra += [u for u in res.extra_index_urls if u not in extra]
    return reqs, extra, post


def build_spec(mx, res, opts: SpecOptions, pip_python: Optional[str] = None) -> Spec:
    """Lock ``res`` (with ``opts``). Raises UsageError when the resolution found no working stack
    or pip cannot resolve the pins."""
    if not res.ok:
        raise UsageError("no stack works for verl %s here: %s (see 'preflight resolve')" % (
            res.verl, (res.problems or ["unknown reason"])[0]))
    reqs, extra, post = top_level(mx, res, opts)
    lock = resolve_lock(reqs, res.python, extra_index_urls=extra, pip_python=pip_python)
    header = ["verl-preflight %s (matrix %s): verl %s, %s, Python %s" % (
        __version__, mx.version, res.verl, "no rollout backend" if opts.no_backend else "%s %s" % (
            res.backend, res.backend_version), res.python),
        "top-level pins: %s" % " ".join(reqs),
        "complete set resolved by %s for Python %s%s; install with: pip install --require-hashes --no-deps "
        "-r requirements.lock" % ("uv" if lock.mode.startswith("uv") else "pip", res.python,
                                   " (cross-resolution, wheels only)" if not lock.mode.startswith("interpreter")
                                   else "")]
    header += ["after it: %s" % p for p in post]
    missing = unhashed(lock)
    if missing:
        header.append("no hash for %s (the index served none): --require-hashes refuses this lock and no "
                      "pylock.toml is written (PEP 751 requires a hash for every file); use an index that "
                      "serves hashes" % ", ".join(missing))
    text = render_lock(lock, header)
    torch_pin = next((r.split("==")[1] for r in reqs if r.startswith("torch==")), None)
    creds = [u for u in extra if url_has_secret(u)]  # userinfo or ?token=: given to pip by environment
    overrides = {k: v for k, v in opts.__dict__.items() if v}
    if overrides.get("torch_index"):
        overrides["torch_index"] = strip_userinfo(overrides["torch_index"])
    stack = {"verl": res.verl, "backend": None if opts.no_backend else res.backend,
             "backend_version": None if opts.no_backend else res.backend_version, "python": res.python,
             "torch": torch_pin, "variant": "pip configuration" if opts.torch_index == "none" else res.variant,
             "extra_index_urls": [strip_userinfo(u) for u in extra], "top_level": reqs, "post_install": post,
             "overrides": overrides}
    if creds:
        stack["private_index"] = CREDENTIALS_NOTE
    return Spec(reqs, lock, text, post, stack, render_pylock(lock), creds)


def cited_rows(citations: List[Dict[str, Any]], stack: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The resolution's matrix rows, with the torch and torch-variant rows replaced by what the
    lock holds when ``--torch``/``--torch-index`` chose otherwise (a row must cite what was locked)."""
    given = stack.get("overrides") or {}
    out = []
    for c in citations:
        if c.get("choice") == "torch" and given.get("torch") and str(c.get("value")) != str(stack.get("torch")):
            c = {"choice": "torch", "value": str(stack.get("torch")), "row": "--torch (given)",
                 "source": "the command line", "confidence": "V"}
        elif c.get("choice") == "torch variant" and given.get("torch_index"):
            c = {"choice": "torch variant", "value": str(stack.get("variant")), "row": "--torch-index (given)",
                 "source": "the command line", "confidence": "V"}
        out.append(c)
    return out


#: The files :func:`write_spec` writes into its directory.
SPEC_FILES = ("requirements.lock", "pylock.toml", "environment.json")


def write_spec(spec: Spec, out_dir: str, mx, res, machine: Dict[str, Any], inputs: Dict[str, Any],
               out: Optional[OutputDir] = None) -> List[str]:
    """Write requirements.lock, pylock.toml and environment.json into ``out_dir`` (created);
    return the paths.

    Files are written whole (:func:`preflight.atomic.write_atomic`); same inputs give the same
    bytes. ``out`` (default: ``OutputDir(out_dir, "-o")``) refuses to replace a file the tool did
    not write (UsageError). environment.json is redacted (:func:`preflight.redact.redact`).
    """
    out = out or OutputDir(out_dir, "-o")
    out.check(SPEC_FILES)
    env_text = render_environment(__version__, mx.version, redact(inputs), machine, redact(spec.stack),
                                  cited_rows(res.citations, spec.stack), lock_digest(spec.lock_text))
    written = []
    for name, text in (("requirements.lock", spec.lock_text), ("pylock.toml", spec.pylock_text),
                       ("environment.json", env_text)):
        if text:
            written.append(out.write(name, text))
    return written
