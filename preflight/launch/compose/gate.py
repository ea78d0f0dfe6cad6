"""Every directory Hydra will read for a launch passes the same input gate as a single file.

Hydra reads the files of the launch's ``--config-path`` and of every ``hydra.searchpath`` entry
(from an override, from the user's ``--file`` or from the primary config's own ``hydra:`` block)
itself, in the composing child, as the invoking user (often root). A link another user planted
in such a tree would otherwise hand Hydra a file its owner cannot read (a root-only YAML would
reach the report), and a FIFO would stall the child. So before any child starts, each tree is
walked the way Hydra walks it (links followed) and each file is put through
:func:`preflight.paths.file_problem`; directories reached through a link go through
:func:`preflight.paths.foreign_link`.
"""

import os
import re
from typing import Iterator, List, Optional

from ...errors import UsageError
from ...paths import file_problem, foreign_link

#: Most entries walked in one tree: a Hydra config tree holds tens of files (verl's about 60); a
#: tree of more is a data directory named by mistake, and walking it would outlast --timeout.
MAX_TREE_ENTRIES = 5000

_SEARCHPATH = re.compile(r"^\+{0,2}hydra\.searchpath=(.*)$", re.S)


def _entries(value: object) -> List[str]:
    """The entries of a ``hydra.searchpath`` value: a list, or Hydra's override text ``[a,b]``."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p.strip().strip("'\"") for p in text.split(",") if p.strip()]


def _local(entry: str) -> Optional[str]:
    """The directory a searchpath entry names on this machine (``file://DIR`` or a bare path);
    None for ``pkg://`` (an installed package's own files) and other schemes."""
    if entry.startswith("file://"):
        return entry[len("file://"):]
    if "://" in entry:
        return None
    return entry or None


_FLOW = re.compile(r"^[ \t]*searchpath[ \t]*:[ \t]*\[([^\]\n]*)\]", re.M)
_BLOCK = re.compile(r"^([ \t]*)searchpath[ \t]*:[ \t]*\n((?:\1[ \t]*-[^\n]*\n?)+)", re.M)


def _declared(path: str) -> List[str]:
    """``searchpath`` entries as a YAML file declares them (the user's --file, the primary config of
    a --config-path), found in its text by two linear patterns (a flow list ``[a, b]`` and a block
    list of ``- a`` lines): the file is never parsed here, outside the composing child's deadline (a
    hostile YAML would stall this process). [] when it names none or cannot be read."""
    from ...paths import read_regular

    try:
        text = read_regular(path, 1 << 20).decode("utf-8", "replace")
    except OSError:
        return []
    out: List[str] = []
    for m in _FLOW.finditer(text):
        out += _entries("[%s]" % m.group(1))
    for m in _BLOCK.finditer(text):
        out += [ln.split("-", 1)[1].split("#", 1)[0].strip().strip("'\"") for ln in m.group(2).splitlines()
                if ln.strip().startswith("-")]
    return [e for e in out if e]


def searchpath_dirs(overrides: List[str], file: Optional[str], config_dir: Optional[str],
                    config_name: str) -> List[str]:
    """Local directories named by ``hydra.searchpath`` in ``overrides`` (texts), in ``file`` and in
    ``config_dir``/``config_name``.yaml, in that order, without repeats."""
    entries: List[str] = []
    for text in overrides:
        m = _SEARCHPATH.match(text)
        if m:
            entries += _entries(m.group(1))
    for path in ([file] if file else []) + ([os.path.join(config_dir, config_name + ".yaml")] if config_dir else []):
        if path and os.path.isfile(path):
            entries += _declared(path)
    out: List[str] = []
    for e in entries:
        d = _local(e)
        if d and d not in out:
            out.append(d)
    return out


def _walk(root: str) -> Iterator[str]:
    """Every path under ``root`` as Hydra would reach it (links followed, each directory once)."""
    seen = set()
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            st = os.stat(d)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            p = os.path.join(d, n)
            yield p
            if os.path.isdir(p):
                stack.append(p)


def config_tree_problem(root: str) -> Optional[str]:
    """Why the config tree at ``root`` must not be handed to Hydra, or None: the directory itself
    reached through another user's link, a file in it that fails :func:`file_problem` (another
    user's link to what they cannot read, a FIFO or device with a config's name), or more than
    :data:`MAX_TREE_ENTRIES` entries. A missing directory is None (Hydra reports it)."""
    root = os.path.expanduser(root)
    if not os.path.isdir(root):
        return None
    why = foreign_link(root)
    if why:
        return why
    for n, p in enumerate(_walk(root)):
        if n >= MAX_TREE_ENTRIES:
            return "holds more than %d entries (a config tree holds tens of files)" % MAX_TREE_ENTRIES
        if os.path.isdir(p):
            why = foreign_link(p)
        elif p.endswith((".yaml", ".yml")) or os.path.islink(p):
            why = file_problem(p)
        else:
            why = None
        if why:
            return "%s: %s" % (p, why)
    return None


def check_config_dirs(overrides: List[str], file: Optional[str], config_dir: Optional[str],
                      config_name: str) -> None:
    """Raise UsageError (one line: the directory, why, the fix) when the launch's --config-path or a
    ``hydra.searchpath`` directory fails :func:`config_tree_problem`."""
    dirs = ([("--config-path", config_dir)] if config_dir else []) + [
        ("hydra.searchpath entry", d) for d in searchpath_dirs(overrides, file, config_dir, config_name)]
    for what, d in dirs:
        why = config_tree_problem(d)
        if why:
            raise UsageError("%s %s: %s; point it at a config directory of your own" % (what, d, why))
