"""The launcher around verl's entry point, read: ``ray job submit``, ``torchrun``, a shell script
passing ``"$@"``, ``uv run``.

:func:`unwrap` returns the inner launch (the words :func:`preflight.launch.overrides.parse_launch`
reads) and a :class:`Wrapper` saying which wrapper options were read and which were ignored, the
working directory and runtime_env a Ray job would upload, and what a script exported.
"""

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["Wrapper", "unwrap", "split_words", "launch_wrapper", "job_cwd", "SCRIPT_MAX_BYTES"]

#: a launch script larger than this (1 MiB) is not read
SCRIPT_MAX_BYTES = 1 << 20
_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)

# ray job submit: options that take a value, and what this checker does with each
_RAY_READ = {"--address", "--working-dir", "--runtime-env", "--runtime-env-json", "--entrypoint-num-cpus",
             "--entrypoint-num-gpus", "--entrypoint-memory", "--entrypoint-resources"}
_RAY_VALUE = _RAY_READ | {"--submission-id", "--job-id", "--metadata-json", "--headers", "--log-style",
                          "--log-color", "--entrypoint-label-selector"}
_TORCHRUN_READ = {"--nproc_per_node", "--nproc-per-node", "--nnodes"}
_TORCHRUN_VALUE = _TORCHRUN_READ | {"--node_rank", "--node-rank", "--master_addr", "--master-addr", "--master_port",
                                    "--master-port", "--rdzv_backend", "--rdzv-backend", "--rdzv_endpoint",
                                    "--rdzv-endpoint", "--rdzv_id", "--rdzv-id", "--max_restarts", "--max-restarts",
                                    "--log_dir", "--log-dir", "--redirects", "--tee", "--local_addr", "--local-addr"}
_UV_VALUE = {"--with", "--python", "-p", "--project", "--directory", "--env-file", "--extra", "--group", "--index",
             "--index-url"}


@dataclass
class Wrapper:
    """A launcher read around the entry point.

    Attributes:
        kind: ``ray job submit``, ``torchrun``, ``shell script``, ``uv run`` (several joined by
            ``" > "``), or None for a plain launch.
        read: wrapper options this checker read, as (option, value).
        ignored: wrapper options it did not weigh.
        working_dir: ``--working-dir`` (or runtime_env working_dir), absolute.
        runtime_env: the runtime_env mapping given (``--runtime-env`` file or ``--runtime-env-json``).
        runtime_env_error: why the runtime_env could not be read.
        env: variables the job inherits from the wrapper (runtime_env env_vars, script exports).
        nproc_per_node, nnodes: torchrun's (None when not given).
        script: the shell script read; ``script_args``: the words given to it.
        notes: one-line remarks (a script that drops its arguments, an unreadable script).
        copies: how many copies of the command ``srun``/``mpirun`` start (None: not read).
    """

    kind: Optional[str] = None
    read: List[Tuple[str, str]] = field(default_factory=list)
    ignored: List[str] = field(default_factory=list)
    working_dir: Optional[str] = None
    runtime_env: Optional[Dict[str, Any]] = None
    runtime_env_error: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    nproc_per_node: Optional[int] = None
    nnodes: Optional[int] = None
    script: Optional[str] = None
    script_args: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    copies: Optional[int] = None

    def add_kind(self, kind: str) -> None:
        """Record one more wrapper layer."""
        self.kind = kind if self.kind is None else "%s > %s" % (self.kind, kind)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form (values of env are left to the report's redaction)."""
        return {"kind": self.kind, "read": ["%s %s" % rv for rv in self.read], "ignored": self.ignored,
                "working_dir": self.working_dir, "runtime_env_keys": sorted(self.runtime_env or {}),
                "runtime_env_error": self.runtime_env_error, "env": dict(self.env), "nproc_per_node": self.nproc_per_node,
                "nnodes": self.nnodes, "script": self.script, "notes": self.notes}


def split_words(command: Union[str, Sequence[str]]) -> List[str]:
    """The words of a launch given as one string (split as a POSIX shell does, ``\\``-newline
    joined, comments dropped; raises ValueError on an open quote) or as argv words (a leading
    ``--`` dropped)."""
    if isinstance(command, str):
        return shlex.split(command.replace("\\\n", " "), comments=True)
    w = list(command)
    return w[1:] if w and w[0] == "--" else w


def _take(words: List[str], i: int, valued: set) -> Tuple[str, Optional[str], int]:
    """(option, value, next index) for the option at ``words[i]`` (``--opt=v`` or ``--opt v``)."""
    w = words[i]
    opt, eq, val = w.partition("=")
    if eq:
        return opt, val, i + 1
    if opt in valued and i + 1 < len(words):
        return opt, words[i + 1], i + 2
    return opt, None, i + 1


def _load_runtime_env(w: Wrapper, value: str, is_json: bool, cwd: str) -> None:
    try:
        if is_json:
            data = json.loads(value)
        else:
            from ...paths import read_regular

            raw = read_regular(os.path.join(cwd, value), 1 << 20).decode("utf-8", "replace")
            try:
                data = json.loads(raw)
            except ValueError:
                import yaml  # type: ignore[import-untyped]  # vendored PyYAML (Ray reads runtime_env as YAML)

                data = yaml.safe_load(raw)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
    except Exception as exc:  # a bad runtime_env is a fact to report, not a crash
        w.runtime_env_error = "%s: %s" % (value if not is_json else "--runtime-env-json", getattr(exc, "strerror", None)
                                          or exc)
        return
    w.runtime_env = data
    ev = data.get("env_vars")
    if isinstance(ev, dict):
        w.env.update({str(k): str(v) for k, v in ev.items()})
    if data.get("working_dir") and not w.working_dir and isinstance(data["working_dir"], str) and \
            "://" not in data["working_dir"]:
        w.working_dir = os.path.abspath(os.path.join(cwd, data["working_dir"]))


def _ray_submit(words: List[str], w: Wrapper, cwd: str) -> List[str]:
    i = 0
    while i < len(words):
        if words[i] == "--":
            return words[i + 1:]
        if not words[i].startswith("-"):
            break
        opt, val, i = _take(words, i, _RAY_VALUE)
        if opt in _RAY_READ:
            w.read.append((opt, val or ""))
            if opt == "--working-dir" and val and "://" not in val:
                w.working_dir = os.path.abspath(os.path.join(cwd, val))
            elif opt == "--runtime-env" and val:
                _load_runtime_env(w, val, False, cwd)
            elif opt == "--runtime-env-json" and val:
                _load_runtime_env(w, val, True, cwd)
        else:
            w.ignored.append(opt if val is None else "%s %s" % (opt, val))
    rest = words[i:]
    if len(rest) == 1 and " " in rest[0]:  # the entrypoint given as one quoted string
        rest = shlex.split(rest[0])
    return rest


def _torchrun(words: List[str], w: Wrapper) -> List[str]:
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-m":
        opt, val, i = _take(words, i, _TORCHRUN_VALUE)
        opt = opt.replace("-", "_").replace("__", "--") if opt.startswith("--") else opt
        if opt in ("--nproc_per_node", "--nnodes"):
            w.read.append((opt, val or ""))
            try:
                n = int(str(val).split(":")[-1])
            except (TypeError, ValueError):
                n = None
            if opt == "--nproc_per_node":
                w.nproc_per_node = n
            else:
                w.nnodes = n
        else:
            w.ignored.append(opt if val is None else "%s %s" % (opt, val))
    return ["python3"] + words[i:]


#: srun's and mpirun's options that take a value, and those read for the number of copies
_TASKS_VALUE = {"-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "-np", "--np", "-c", "--cpus-per-task",
                "-p", "--partition", "-J", "--job-name", "-t", "--time", "--gres", "--gpus", "--gpus-per-node",
                "-G", "-w", "--nodelist", "--mem", "-A", "--account", "-o", "--output", "-e", "--error",
                "-H", "--host", "--hostfile", "-x", "--map-by", "--bind-to", "--mca"}


_TASKS_KEY = {"-N": "nodes", "--nodes": "nodes", "-n": "ntasks", "--ntasks": "ntasks", "-np": "ntasks",
              "--np": "ntasks", "--ntasks-per-node": "per_node"}


def _tasks(prog: str, words: List[str], w: Wrapper) -> List[str]:
    """The command after srun's / mpirun's options; ``w.copies``: how many copies they start (srun:
    --ntasks, else --nodes x --ntasks-per-node, one task per node by default; mpirun: -np)."""
    i, got = 0, {}  # type: Tuple[int, Dict[str, int]]
    while i < len(words) and words[i].startswith("-"):
        m = re.match(r"^(-[Nn])(\d+)$", words[i])  # srun -N2 -n4
        if m:
            opt, val, i = m.group(1), m.group(2), i + 1
        else:
            opt, val, i = _take(words, i, _TASKS_VALUE)
        if opt in _TASKS_KEY:
            w.read.append((opt, val or ""))
            try:
                got[_TASKS_KEY[opt]] = int(str(val).split("-")[-1])  # a range N1-N2: its upper end
            except (TypeError, ValueError):
                pass
        else:
            w.ignored.append(opt if val is None else "%s %s" % (opt, val))
    if got.get("ntasks"):
        w.copies = got["ntasks"]
    elif prog == "srun":
        w.copies = got.get("nodes", 1) * got.get("per_node", 1)
    return words[i:]


_SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _expand(text: str, scope: Dict[str, str]) -> str:
    def sub(m: "re.Match") -> str:
        name = m.group(1) or m.group(4)
        if name in scope and (scope[name] != "" or not (m.group(2) or "").startswith(":")):
            return scope[name]
        if m.group(2):
            return _expand(m.group(3) or "", scope)
        return m.group(0)
    return _SHELL_VAR.sub(sub, text)


_VERL_LINE = re.compile(r"(?:^|\s)(?:-m\s+)?verl\.trainer\.[A-Za-z_.]+|main_ppo(?:\.py)?\b")


def _script(path: str, args: List[str], w: Wrapper, cwd: str) -> Optional[List[str]]:
    """The verl launch inside a shell script, its variables expanded, "$@" replaced by ``args``."""
    from ...paths import read_regular

    full = os.path.join(cwd, os.path.expanduser(path))
    try:
        text = read_regular(full, SCRIPT_MAX_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        w.notes.append("the script %s was not read (%s): its launch is not checked" % (path, exc.strerror or exc))
        return None
    w.script, w.script_args = os.path.abspath(full), list(args)
    scope: Dict[str, str] = dict(os.environ)
    for k, a in enumerate(args, 1):
        scope[str(k)] = a
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        exported = s.startswith("export ")
        body = s[len("export "):].strip() if exported else s
        m = _ENV.match(body)
        if m and " " not in m.group(1):
            try:
                parts = shlex.split(_expand(m.group(2), scope), comments=True)
            except ValueError:
                parts = [m.group(2)]
            value = parts[0] if parts else ""
            if len(parts) <= 1 and not re.search(r"\$\(|`", m.group(2)):
                scope[m.group(1)] = value
                if exported:
                    w.env[m.group(1)] = value
            continue
        if _VERL_LINE.search(s):
            raw = s.replace('"$@"', " \x00ARGS\x00 ").replace("$@", " \x00ARGS\x00 ").replace("${@}", " \x00ARGS\x00 ") \
                .replace('"$*"', " \x00ARGS\x00 ").replace("$*", " \x00ARGS\x00 ")
            try:
                words = shlex.split(_expand(raw, scope), comments=True)
            except ValueError as exc:
                w.notes.append("the verl line of %s cannot be split (%s)" % (path, exc))
                return None
            out: List[str] = []
            passed = False
            for word in words:
                if word.strip() == "\x00ARGS\x00":
                    out.extend(args)
                    passed = True
                else:
                    out.append(word)
            if args and not passed:
                w.notes.append("%s does not pass its arguments on (no \"$@\" in its verl line): %s are dropped" % (
                    path, " ".join(args)))
            for name, value in sorted(w.env.items()):
                out.insert(0, "%s=%s" % (name, value))
            return out
    w.notes.append("no verl entry point (python3 -m verl.trainer.main_ppo ...) found in %s" % path)
    return None


def job_cwd(w: Any, cwd: Optional[str] = None) -> str:
    """The directory the job's driver runs in, where verl resolves relative paths (data files, a
    reward file): a ``ray job submit`` job runs in its uploaded ``--working-dir`` (a local directory
    here), every other launch in the directory it is started from (``cwd``, default this one)."""
    wd = getattr(w, "working_dir", None)
    if wd and os.path.isdir(wd):
        return str(wd)
    return cwd or os.getcwd()


def unwrap(command: Union[str, Sequence[str]], cwd: Optional[str] = None) -> Tuple[List[str], Wrapper]:
    """(inner launch words, :class:`Wrapper`) for a launch given as a string or argv words.

    A plain launch comes back unchanged with ``Wrapper.kind`` None. Never raises for odd input
    (a ValueError from unbalanced quotes is left to parse_launch, which reports it).
    """
    cwd = cwd or os.getcwd()
    w = Wrapper()
    try:
        words = split_words(command)
    except ValueError:  # unbalanced quotes: parse_launch reports them
        return command, w  # type: ignore[return-value]
    lead: List[str] = []
    for _ in range(4):  # at most a few layers: uv run > ray job submit > bash run.sh
        i = 0
        while i < len(words) and _ENV.match(words[i]) and "/" not in words[i].split("=", 1)[0]:
            lead.append(words[i])
            i += 1
        if i < len(words) and words[i] == "env":
            i += 1
            continue_words = words[i:]
            words = continue_words
            continue
        rest = words[i:]
        if not rest:
            break
        prog = os.path.basename(rest[0])
        if prog == "ray" and rest[1:3] == ["job", "submit"]:
            w.add_kind("ray job submit")
            words = _ray_submit(rest[3:], w, cwd)
            continue
        if prog == "torchrun" or (re.match(r"python[0-9.]*$", prog) and rest[1:3] == ["-m", "torch.distributed.run"]):
            w.add_kind("torchrun")
            words = _torchrun(rest[1:] if prog == "torchrun" else rest[3:], w)
            continue
        if prog in ("srun", "mpirun", "mpiexec"):
            w.add_kind(prog)
            words = _tasks(prog, rest[1:], w)
            continue
        if prog == "uv" and rest[1:2] == ["run"]:
            w.add_kind("uv run")
            j = 2
            while j < len(rest) and rest[j].startswith("-"):
                opt, val, j = _take(rest, j, _UV_VALUE)
                w.ignored.append(opt if val is None else "%s %s" % (opt, val))
            words = rest[j:]
            continue
        if prog in ("bash", "sh", "zsh", "dash") and len(rest) > 1 and not rest[1].startswith("-"):
            script, args = rest[1], rest[2:]
        elif rest[0].endswith(".sh"):
            script, args = rest[0], rest[1:]
        else:
            words = rest
            break
        w.add_kind("shell script")
        inner = _script(script, args, w, cwd)
        if inner is None:
            words = rest
            break
        words = inner
    if w.kind is None:
        return (list(command) if not isinstance(command, str) else command), w  # type: ignore[return-value]
    return lead + words, w


def launch_wrapper(ctx: Any) -> Tuple[List[str], "Wrapper"]:
    """(inner launch words, :class:`Wrapper`) of the run's launch (``ctx.options.launch.words``),
    unwrapped once per run (memoised on ``ctx`` as ``launch_wrapper``)."""
    return ctx.memo("launch_wrapper", lambda: unwrap(ctx.options.launch.words or []))
