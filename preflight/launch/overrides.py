"""A verl launch command read into Hydra overrides.

:func:`parse_launch` takes the command as the user would type it (one string, or the argv words
after ``--``): leading ``VAR=value`` environment assignments, the program (``python3 -m
verl.trainer.main_ppo`` or a script), Hydra's ``--config-name``/``--config-path`` flags, and the
overrides. :func:`parse_override` only splits an override into its prefix (``+``, ``++``, ``~``)
and its key, for provenance and redaction; the value grammar, the override rules and
interpolation are Hydra's own, applied where the config is composed (:mod:`.compose`).
"""

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ..redact import collect_environ
from ..shell import overrides

__all__ = ["Override", "LaunchSpec", "ConfigError", "parse_launch", "parse_override", "override_line", "format_value",
           "or_list", "fix_overrides"]


class ConfigError(Exception):
    """The composition fails the way verl's Hydra would fail (a finding, not a usage error).

    Attributes: ``kind`` (short id), ``message`` (what Hydra/verl would say, paraphrased),
    ``fix`` (the smallest change).
    """

    def __init__(self, kind: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.fix = fix


@dataclass
class Override:
    """One Hydra override.

    Attributes:
        text: the override as given (``+trainer.foo=1``).
        kind: ``set`` (``key=v``), ``add`` (``+key=v``), ``force`` (``++key=v``), ``delete`` (``~key``).
        key: dotted key (``actor_rollout_ref.rollout.n``) or a config group (``model_engine``).
        value: the value as written (None for ``~key``); Hydra parses it.
        has_value: False only for ``~key``.
        origin: ``override`` for the user's, ``--gpus``/``--nnodes`` for the shorthands.
    """

    text: str
    kind: str
    key: str
    value: Any = None
    has_value: bool = True
    origin: str = "override"


@dataclass
class LaunchSpec:
    """A parsed launch command.

    Attributes:
        overrides: in command-line order (later wins).
        config_name: ``--config-name`` (None: the entry point's default, ``ppo_trainer``).
        config_path: ``--config-path`` as given (None: verl's packaged config directory).
        entry: the module after ``-m`` or the script path (None when only overrides were given).
        env: ``VAR=value`` assignments before the program (CUDA_VISIBLE_DEVICES matters here).
        ignored: words that are neither overrides nor understood flags (reported, not used).
        program: the first word after the VAR=value assignments when it is a program (not an
            override): ``python3``, ``torchrun``, ``bash``, ``./run.sh``; None when only overrides
            were given.
        notes: remarks about the parse (unexpanded shell variables, multirun).
    """

    overrides: List[Override] = field(default_factory=list)
    config_name: Optional[str] = None
    config_path: Optional[str] = None
    entry: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    ignored: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    program: Optional[str] = None

    @property
    def override_texts(self) -> List[str]:
        """The overrides as Hydra strings, in order."""
        return [o.text for o in self.overrides]


_ENV_RE = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$", re.S)
_SHELL_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_PYTHON_RE = re.compile(r"(^|/)(python[0-9.]*|uv|torchrun|ray)$")


def _expand(word: str, env: Dict[str, str], notes: List[str]) -> str:
    """Expand ``$VAR``/``${VAR}`` the way the shell would, from ``env`` then os.environ; an unset
    variable is left as written and noted. Hydra interpolations (``${a.b}``) are not shell names."""
    def sub(m: "re.Match") -> str:
        name = m.group(1) or m.group(2)
        if name in env:
            return env[name]
        if name in os.environ:
            return os.environ[name]
        note = "$%s is not set here; it was taken literally" % name
        if note not in notes:
            notes.append(note)
        return m.group(0)
    return _SHELL_VAR.sub(sub, word)


def _split(command: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(command, str):
        text = command.replace("\\\r\n", " ").replace("\\\n", " ")
        try:
            return shlex.split(text, comments=True)
        except ValueError as exc:
            raise ValueError("cannot split the launch command: %s (check its quotes)" % exc)
    words = list(command)
    if words and words[0] == "--":
        words = words[1:]
    return words


def parse_launch(command: Union[str, Sequence[str]]) -> LaunchSpec:
    """Read a launch command (a string, or argv words) into a :class:`LaunchSpec`.

    Raises ValueError when a string command has unbalanced quotes (what Hydra refuses in an
    override is reported when the config is composed).
    """
    words = _split(command)
    spec = LaunchSpec()
    i = 0
    while i < len(words) and _ENV_RE.match(words[i]):  # leading VAR=value assignments
        m = _ENV_RE.match(words[i])
        spec.env[m.group(1)] = _expand(m.group(2), spec.env, spec.notes)
        i += 1
    if i < len(words) and words[i] == "env":
        i += 1
        while i < len(words) and _ENV_RE.match(words[i]):
            m = _ENV_RE.match(words[i])
            spec.env[m.group(1)] = _expand(m.group(2), spec.env, spec.notes)
            i += 1
    collect_environ(spec.env)  # a secret-named VAR=value of the launch line: masked wherever its value shows
    rest = words[i:]
    if rest and "=" not in rest[0] and not rest[0].startswith(("~", "+", "-")):
        spec.program = rest[0]
    start = 0
    for j, w in enumerate(rest):
        if "=" in w and not w.startswith("-"):
            break  # the first override: no program word comes after it
        if w == "-m" and j + 1 < len(rest):
            spec.entry, start = rest[j + 1], j + 2
            break
        if w.endswith(".py"):
            spec.entry, start = w, j + 1
            break
    else:
        if rest and _PYTHON_RE.search(rest[0]):
            spec.ignored.append(rest[0])
            start = 1
    args = rest[start:]
    k = 0
    while k < len(args):
        w = _expand(args[k], spec.env, spec.notes)
        k += 1
        flag, eq, inline = w.partition("=")
        if flag in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd"):
            if not eq and k < len(args):
                inline = _expand(args[k], spec.env, spec.notes)
                k += 1
            if flag in ("--config-name", "-cn"):  # Hydra reads name and name.yaml alike (verl's scripts use both)
                spec.config_name = inline[:-len(".yaml")] if inline.endswith(".yaml") and len(inline) > 5 else inline
            elif flag in ("--config-path", "-cp"):
                spec.config_path = inline
            else:
                spec.notes.append("%s %s (extra config directory) is not followed; its configs are not read" % (
                    flag, inline))
            continue
        if w in ("--multirun", "-m"):
            spec.notes.append("--multirun: only the first job of the sweep is checked")
            continue
        if w.startswith("-") and not w.startswith("--config"):
            spec.ignored.append(w)
            continue
        if w.startswith("~") or "=" in w:
            spec.overrides.append(parse_override(w))
        else:
            spec.ignored.append(w)
    return spec


def parse_override(text: str, origin: str = "override") -> Override:
    """One override word -> :class:`Override`: its prefix (``+``, ``++``, ``~``) and the key before
    the first ``=``. The value is kept as written: Hydra's own parser reads it when the config is
    composed (and reports what it refuses). Never raises.
    """
    s = text.strip()
    kind = "set"
    if s.startswith("~"):
        kind, s = "delete", s[1:]
    elif s.startswith("++"):
        kind, s = "force", s[2:]
    elif s.startswith("+"):
        kind, s = "add", s[1:]
    key, eq, val = s.partition("=")
    return Override(text, kind, key.strip(), val if eq else None, bool(eq), origin)


# ---- override formatting: fixes written as launch words ---------------------------------------
def or_list(xs: Sequence[Any]) -> str:
    """``a, b or c``; ``""`` for no items (a fix text is only built for a finding that has one)."""
    xs = [str(x) for x in xs]
    if not xs:
        return ""
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " or " + xs[-1]


def format_value(v: Any) -> str:
    """An override value as Hydra reads it back: ``True``/``False``, ``null``, ``[a,b]``, else ``str``."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[%s]" % ",".join(format_value(i) for i in v)
    return str(v)


def override_line(alt: Dict[str, Any]) -> str:
    """Overrides as launch words: ``{"a.b": 8, "c": True}`` -> ``a.b=8 c=True``."""
    return overrides({k: format_value(v) for k, v in alt.items()})  # each word shell-quoted


_SET_WORD = re.compile(r"^([A-Za-z_][\w.]*)=([\w.+-]+)$")


def fix_overrides(fix: str) -> List[Dict[str, Any]]:
    """The overrides a fix text stands for when it is exactly ``set k=v [k2=v2 ...]`` with
    literal values (``set a.b=4``, ``set x=vllm``), as one alternative; [] for any other text.

    Values are read as Hydra reads an override's value (int, float, bool, null, else a string).
    """
    if not fix.startswith("set "):
        return []
    words = fix[4:].split()
    out: Dict[str, Any] = {}
    for w in words:
        m = _SET_WORD.match(w)
        if not m or m.group(2) == "...":
            return []
        out[m.group(1)] = _literal(m.group(2))
    return [out] if out else []


def _literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    for typ in (int, float):
        try:
            return typ(text)
        except ValueError:
            pass
    return text
