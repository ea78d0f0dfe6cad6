"""The user's saved config file (``config --file``, ``check --config``): read only when it is a sane regular file."""

import json
import os
import re
from typing import Any, Dict

from ...errors import UsageError
from ...paths import file_problem, read_regular
from .errors import FileUnreadable

#: Largest config file read (bytes). A verl config is a few KB (a full dump of ppo_trainer about
#: 50 KB); anything far larger is data passed by mistake, and reading it would outlast --timeout.
MAX_CONFIG_BYTES = 1 << 20


def check_user_file(path: str) -> None:
    """Raise UsageError when the saved config (``config --file``, ``check --config``) is absent, FileUnreadable when it is over
    :data:`MAX_CONFIG_BYTES` or a .json file is not a JSON mapping (YAML files are read by Hydra's
    OmegaConf in the composing process)."""
    why = file_problem(path)
    if why is not None:
        raise UsageError("config file %s: %s; pass the path of a saved verl config (YAML or JSON)" % (path, why))
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise FileUnreadable("config file %s is %.1f MiB, over the %d MiB a config can be (a verl config is a few KB); "
                             "pass the config itself, not data" % (path, size / float(1 << 20), MAX_CONFIG_BYTES >> 20))
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:  # unreadable by this user (mode, ACL), or swapped since the stat above
        raise FileUnreadable("config file %s: cannot be read (%s); make it readable by you or pass a copy of yours" % (
            path, exc.strerror or exc))
    if path.lower().endswith(".json"):
        try:
            data = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise FileUnreadable("config file %s: not valid JSON (nested too deep for a config); fix the file" % path)
        except ValueError as exc:
            raise FileUnreadable("config file %s: not valid JSON (%s); fix the file or pass the YAML" % (path, exc))
    else:
        data = _yaml_top(raw)
    if data is not None and not isinstance(data, dict):
        raise FileUnreadable("config file %s: the top level is %s, not a mapping of config keys (a saved verl "
                             "config reads 'trainer:', 'data:', ...); pass the YAML or JSON config itself" % (
                                 path, _kind(data)))


def _kind(data: Any) -> str:
    if isinstance(data, list):
        return "a list"
    if isinstance(data, str):
        return "one string (%r...)" % data[:40] if len(data) > 40 else "one string (%r)" % data
    if isinstance(data, bool):
        return "a boolean (%s)" % str(data).lower()
    if isinstance(data, (int, float)):
        return "a number (%s)" % data
    return "a value of type %s" % type(data).__name__


def _yaml_top(raw: bytes) -> Any:
    """What a YAML file's top level is, by the vendored PyYAML's safe loader; None where it does not
    parse here (Hydra's OmegaConf, with its own loader, then reads it and names the error)."""
    try:
        import yaml  # type: ignore[import-untyped]  # vendored PyYAML

        return yaml.safe_load(raw.decode("utf-8"))
    except Exception:  # not this function's verdict: the composition reads the file and says why
        return None


def unreadable_error(file: str, fe: Dict[str, Any]) -> FileUnreadable:
    """The :class:`FileUnreadable` for the composing script's ``file_error`` event ``fe`` (``kind``, ``message``) on
    ``file``: Hydra's first line and the last line/column it names."""
    text = str(fe.get("message") or "").strip()
    first = (text.splitlines() or [""])[0]
    where = re.findall(r"line \d+, column \d+", text)
    return FileUnreadable("config file %s: not valid YAML (%s: %s%s); fix the file" % (
        file, fe.get("kind"), first, " at %s" % where[-1] if where else ""))
