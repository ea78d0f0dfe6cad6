"""How a check is declared.

A check is a function ``f(ctx) -> Outcome | list[Outcome]`` registered with :func:`check`. It
returns :class:`Outcome` objects (built with :func:`passed`, :func:`warned`, :func:`failed`,
:func:`skipped`, :func:`errored`); the runner turns them into :class:`~preflight.result.Result`
rows, filling in the id (``check id`` or ``check id.item``), the stage and the duration.

A check whose answer comes from slow work in a target process (vLLM's import) may instead
return :class:`Deferred`: the runner goes on with the next checks and stages while that work
runs, and asks for the answer when something is gated on it, or at the end of the run.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from ..result import Result, Status

if TYPE_CHECKING:  # for annotations only: the concrete context sits a layer below and imports nothing of checks/
    from packaging.markers import Marker

    from ..context import Dist, Options
    from ..matrix import Matrix
    from ..probes.process import ProbeOutput

__all__ = ["Outcome", "Deferred", "Check", "check", "REGISTRY", "passed", "warned", "failed", "skipped", "errored",
           "to_result", "Context", "CheckResult"]


class Context(Protocol):
    """What a check may ask of the run: the facts it reads, memoised (the one implementation is
    :class:`preflight.context.Context`, which the runner passes; tests pass the same class with
    facts injected). A check reads no other state: the rows of earlier checks only through
    :attr:`results` (result id -> :class:`~preflight.result.Result`, filled by the runner)."""

    options: "Options"
    matrix: "Matrix"
    results: Dict[str, Any]

    def memo(self, key: str, fn: Callable[[], Any]) -> Any: ...
    def peek(self, key: str, default: Any = None) -> Any: ...
    def put(self, key: str, value: Any) -> None: ...
    def host(self) -> Dict[str, Any]: ...
    def target_probe(self) -> "ProbeOutput": ...
    def target(self) -> Optional[Dict[str, Any]]: ...
    def target_malformed(self) -> List[str]: ...
    def dists(self) -> Dict[str, "Dist"]: ...
    def broken_dists(self) -> List[Dict[str, Any]]: ...
    def installed(self, name: str) -> Optional["Dist"]: ...
    def bytecode(self) -> Dict[str, Any]: ...
    @property
    def python_cmd(self) -> str: ...
    def target_fix(self, fix: Optional[str]) -> Optional[str]: ...
    def marker_env(self, extra: str = "") -> Dict[str, str]: ...
    def marker_true(self, marker: Optional["Marker"], extra: str = "") -> bool: ...
    def verl_release(self) -> Tuple[Optional[str], str]: ...
    def verl_row(self) -> Optional[Dict[str, Any]]: ...
    def backend(self) -> Tuple[Optional[str], str]: ...
    def imports(self, items: List[Dict[str, Any]]) -> Dict[str, Any]: ...
    def torch_cuda(self) -> "ProbeOutput": ...
    def nvml(self) -> Dict[str, Any]: ...
    def gpu_expected(self) -> bool: ...


@dataclass
class Outcome:
    """What a check found; see :class:`preflight.result.Result` for the fields."""

    status: Status
    message: str
    evidence: Dict[str, Any] = field(default_factory=dict)
    fix: Optional[str] = None
    item: Optional[str] = None
    caused_by: Sequence[str] = ()


def passed(message: str, evidence: Optional[Dict[str, Any]] = None, item: Optional[str] = None) -> Outcome:
    """A PASS outcome."""
    return Outcome(Status.PASS, message, evidence or {}, None, item)


def warned(message: str, fix: str, evidence: Optional[Dict[str, Any]] = None, item: Optional[str] = None,
           caused_by: Sequence[str] = ()) -> Outcome:
    """A WARN outcome; ``fix`` is required."""
    return Outcome(Status.WARN, message, evidence or {}, fix, item, caused_by)


def failed(message: str, fix: str, evidence: Optional[Dict[str, Any]] = None, item: Optional[str] = None,
           caused_by: Sequence[str] = ()) -> Outcome:
    """A FAIL outcome; ``fix`` is required."""
    return Outcome(Status.FAIL, message, evidence or {}, fix, item, caused_by)


def skipped(message: str, caused_by: Sequence[str] = (), evidence: Optional[Dict[str, Any]] = None,
            item: Optional[str] = None) -> Outcome:
    """A SKIP outcome naming the results that made the check meaningless."""
    return Outcome(Status.SKIP, message, evidence or {}, None, item, caused_by)


def errored(message: str, evidence: Optional[Dict[str, Any]] = None, item: Optional[str] = None,
            fix: Optional[str] = None) -> Outcome:
    """An ERROR outcome: the check itself could not run."""
    return Outcome(Status.ERROR, message, evidence or {}, fix, item)


@dataclass
class Deferred:
    """A check's answer that is not ready yet.

    ``finish()`` blocks until the answer is known (it must keep its own deadline) and returns what
    the check function would have: an :class:`Outcome`, a list of them, or None. The runner calls
    it once: when a later check or stage is gated on this check's id (or on one of its items), or
    at the end of the run. The row keeps its place in the report and its stage ends when it does;
    its duration runs from the check's start to the answer (other stages ran meanwhile).
    """

    finish: Callable[[], Union[Outcome, List[Outcome], None]]


#: What a check function returns: one outcome, several (one per item), a Deferred, or None (no row).
CheckResult = Union[Outcome, List[Outcome], Deferred, None]
#: A check function: ``f(ctx) -> CheckResult``.
CheckFunc = Callable[[Context], CheckResult]


@dataclass
class Check:
    """A registered check: ``id`` is ``<stage>.<name>``; ``needs`` are result ids that must be
    pass or warn for the check to run (otherwise it is skipped, naming them)."""

    id: str
    func: CheckFunc
    needs: Sequence[str] = ()

    @property
    def stage(self) -> str:
        """The stage name (the id's first part)."""
        return self.id.split(".", 1)[0]


def to_result(check_id: str, o: Outcome, duration: float) -> Result:
    """The report row of outcome ``o`` of check ``check_id`` (``<stage>.<name>``): id ``check_id``
    or ``check_id.item``, the stage from the id, ``duration`` in seconds. A WARN or FAIL without a
    fix gets one saying it is a checker bug (every WARN and FAIL names a fix)."""
    rid = check_id if not o.item else "%s.%s" % (check_id, o.item)
    fix = o.fix
    status = o.status
    if status in (Status.WARN, Status.FAIL) and not fix:  # a check bug, not the user's problem
        fix = "(no fix recorded: please report this as a bug in verl-preflight)"
    return Result(id=rid, stage=check_id.split(".", 1)[0], status=status, message=o.message,
                  evidence=o.evidence, fix=fix or None, caused_by=list(o.caused_by), duration_s=duration)


#: stage name -> checks in registration (= run) order.
REGISTRY: Dict[str, List[Check]] = {}


def check(check_id: str, needs: Sequence[str] = ()) -> Callable[[CheckFunc], CheckFunc]:
    """Register the decorated function as check ``check_id`` (``<stage>.<name>``)."""
    def deco(func: CheckFunc) -> CheckFunc:
        c = Check(check_id, func, tuple(needs))
        lst = REGISTRY.setdefault(c.stage, [])
        lst[:] = [x for x in lst if x.id != check_id] + [c]
        return func
    return deco
