"""A log split into error events.

An :class:`Event` is either a Python exception line (``ValueError: ...``, with the traceback
frames above it and the continuation lines of its message) or a log line that matches a
standalone error text of matrices/signatures.toml (NCCL, Ray, Hydra's override errors, pip).
Prefixes that Ray and vLLM put in front of every line of a worker's output (``(TaskRunner
pid=123)``, ``ERROR 12-01 10:00:00 [core.py:700]``) and ANSI colours are stripped first.
"""

import re
from dataclasses import dataclass, field
from typing import List, Optional, Pattern, Sequence, Set, Tuple

__all__ = ["Event", "split_events", "clean_lines"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RAY_PREFIX = re.compile(r"^\s*\((?:[A-Za-z_][\w.]*\s+)?(?:pid=\d+[^)]*|raylet[^)]*|autoscaler[^)]*|gcs_server[^)]*)\)\s?")
_LOG_PREFIX = re.compile(
    r"^(?:\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s*)?(?:\[?(?P<lvl>ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)\]?[\s:]+)?"
    r"(?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+)?(?:\[[\w./ -]+:\d+\]\s*)?(?:--\s+)?")
_EXC = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Timeout|Mismatch)|"
    r"KeyError|StopIteration))(?:\((?P<inner>[\w.]+)\))?(?::\s?(?P<msg>.*))?$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
#: Ray prints a remote traceback with its "Traceback (most recent call last):" line replaced by the
#: process title (ray/exceptions.py RayTaskError.__str__): ``ray::Actor.method() (pid=N, ip=A)``
_RAY_TB = re.compile(r"\bray::[\w.:<>-]+\(\) \(pid=\d+")
#: a traceback's first line; torch's DataLoader re-raises a worker's error with the worker's
#: traceback under "Original Traceback" (torch/_utils.py ExceptionWrapper.reraise)
_TB_STARTS = ("Traceback (most recent call last)", "Original Traceback (most recent call last)")
_SEPARATORS = ("The above exception was the direct cause of the following exception",
               "During handling of the above exception, another exception occurred")
_MAX_CONT = 20


@dataclass
class Event:
    """One error in the log.

    Attributes:
        kind: ``exception`` (a Python exception line) or ``line`` (a matching log line).
        headline: the first line as cleaned (``ValueError: ...`` or the log line).
        type: the exception's dotted type ("" for a line event); ``inner``: the type in
            ``RayTaskError(ValueError)``.
        message: the message, continuation lines included.
        lineno: 1-based line of the headline in the log.
        frames: the traceback above it, outermost first, as (file, line, function).
        level: ``warning`` for a logger WARNING line or a ``*Warning`` type, else ``error``.
    """

    kind: str
    headline: str
    type: str = ""
    inner: str = ""
    message: str = ""
    lineno: int = 0
    frames: List[Tuple[str, int, str]] = field(default_factory=list)
    level: str = "error"
    end: int = 0

    @property
    def context(self) -> str:
        """The text signatures are searched in: the frames, then the headline and message."""
        fr = "\n".join('File "%s", line %d, in %s' % f for f in self.frames)
        return (fr + "\n" if fr else "") + self.headline + ("\n" + self.message if self.message and
                                                           self.message not in self.headline else "")

    @property
    def where(self) -> Optional[str]:
        """``file:line in function`` of the innermost frame, or None."""
        if not self.frames:
            return None
        f = self.frames[-1]
        return "%s:%d in %s" % f


def clean_lines(text: str) -> List[Tuple[str, str]]:
    """Every line as (cleaned, level): ANSI colours, Ray's ``(Actor pid=N)`` prefix and a logger's
    level/time/location prefix removed; level is ``warning``, ``error`` or ``""``."""
    out = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        s = _ANSI.sub("", raw)
        s = _RAY_PREFIX.sub("", s)
        m = _LOG_PREFIX.match(s)
        lvl = ""
        if m and m.end() > 0:
            lvl = {"WARNING": "warning", "WARN": "warning"}.get(m.group("lvl") or "", "error" if m.group("lvl") in (
                "ERROR", "CRITICAL", "FATAL") else "")
            rest = s[m.end():]
            if rest.strip() or not s.strip():
                s = rest
        out.append((s.rstrip(), lvl))
    return out


def _is_exception(line: str, in_tb: bool) -> Optional["re.Match"]:
    m = _EXC.match(line)
    if m is None:
        return None
    if m.group("msg") is None and not in_tb:
        return None  # a bare word like 'ValueError' outside a traceback is not an error line
    return m


def split_events(text: str, standalone: Sequence[Pattern]) -> List[Event]:
    """The error events of ``text`` in log order (duplicates, e.g. the same traceback printed by a
    Ray worker and again by the driver, kept once). ``standalone``: compiled patterns whose match
    makes a plain log line an event."""
    lines = clean_lines(text)
    events: List[Event] = []
    covered: Set[int] = set()
    frames: List[Tuple[str, int, str]] = []
    in_tb = False
    i = 0
    while i < len(lines):
        line, lvl = lines[i]
        stripped = line.strip()
        if stripped.startswith(_TB_STARTS) or (_RAY_TB.search(stripped) and not _EXC.match(stripped)):
            in_tb, frames = True, []
            i += 1
            continue
        fm = _FRAME.match(line)
        if fm and in_tb:
            frames.append((fm.group("file"), int(fm.group("line")), fm.group("func")))
            i += 1
            continue
        m = _is_exception(stripped, in_tb) if (not line[:1].isspace() or not in_tb) else None
        if m is not None:
            msg_lines = [m.group("msg") or ""]
            j = i + 1
            while j < len(lines) and j - i <= _MAX_CONT:
                nxt = lines[j][0]
                ns = nxt.strip()
                if not ns or ns.startswith(_TB_STARTS) or ns.startswith(_SEPARATORS) or \
                        _is_exception(ns, False) or _FRAME.match(nxt):
                    break
                msg_lines.append(ns)
                j += 1
            typ = m.group("type")
            level = "warning" if typ.endswith("Warning") or lvl == "warning" else "error"
            events.append(Event("exception", stripped, typ, m.group("inner") or "", "\n".join(msg_lines).strip(),
                                i + 1, list(frames) if in_tb else [], level, j))
            covered.update(range(i, j))
            in_tb, frames = bool(_RAY_TB.search(stripped)), []  # RayTaskError(X): ray::A.f() (pid=N): frames follow
            i = j
            continue
        if in_tb and stripped and not line[:1].isspace() and not fm:
            in_tb = False  # something else interrupted the traceback
        i += 1
    # plain log lines that carry a known error text
    for idx, (line, lvl) in enumerate(lines):
        if idx in covered or not line.strip():
            continue
        if any(p.search(line) for p in standalone):
            cont = []
            for k in range(idx + 1, min(idx + 6, len(lines))):
                if not lines[k][0].strip() or k in covered:
                    break
                cont.append(lines[k][0].strip())
            events.append(Event("line", line.strip(), message="\n".join(cont), lineno=idx + 1,
                                level="warning" if lvl == "warning" else "error", end=idx + 1 + len(cont)))
    events.sort(key=lambda e: e.lineno)
    seen = set()
    unique = []
    for e in events:
        key = re.sub(r"\d+", "N", e.headline)[:300]
        if key in seen:
            continue
        seen.add(key)
        unique.append(e)
    return unique
