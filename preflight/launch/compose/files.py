"""The user's saved config file (``config --file``, ``check --config``): read only when it is a sane regular file."""

import json
import os
import re
from typing import Any, Dict

from ...errors import UsageError
from ...paths import file_problem
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
    if path.lower().endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except RecursionError:
            raise FileUnreadable("config file %s: not valid JSON (nested too deep for a config); fix the file" % path)
        except (OSError, ValueError) as exc:
            raise FileUnreadable("config file %s: not valid JSON (%s); fix the file or pass the YAML" % (path, exc))
        if not isinstance(data, dict):
            raise FileUnreadable("config file %s: the top level must be a mapping of config keys" % path)


def unreadable_error(file: str, fe: Dict[str, Any]) -> FileUnreadable:
    """The :class:`FileUnreadable` for the composing script's ``file_error`` event ``fe`` (``kind``, ``message``) on
    ``file``: Hydra's first line and the last line/column it names."""
    text = str(fe.get("message") or "").strip()
    first = (text.splitlines() or [""])[0]
    where = re.findall(r"line \d+, column \d+", text)
    return FileUnreadable("config file %s: not valid YAML (%s: %s%s); fix the file" % (
        file, fe.get("kind"), first, " at %s" % where[-1] if where else ""))
