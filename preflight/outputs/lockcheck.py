"""The grammar of a requirements.lock the tool hands to pip or uv, and nothing more.

pip reads a requirements file as a small program: ``-r FILE`` and ``-c FILE`` read other files
(and print their lines in errors), ``--find-links DIR`` / ``--no-index`` take wheels from a
directory, ``-e PATH`` and URL requirements install what a path names, ``--trusted-host`` turns
off TLS checks, ``${VAR}`` expands the environment. A lock someone else wrote must do none of
that: :func:`check_lock` accepts exactly what :func:`preflight.outputs.lock.render_lock`, the
wheelhouse's served lock, ``uv pip compile --generate-hashes`` and ``pip-compile
--generate-hashes`` write (comments, ``--index-url``/``--extra-index-url`` with an http(s) URL,
``name[extras]==version [; marker]`` with ``--hash=sha256:HEX`` options, lines continued by a
backslash) and refuses any other line, naming its number. :func:`check_pylock` is the same
judgement for a PEP 751 ``pylock.toml``: every file a remote http(s) URL with a sha256.
"""

import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import UsageError

__all__ = ["check_lock", "check_pylock", "lock_problem"]

_INDEX = re.compile(r"(--index-url|--extra-index-url|-i)(?:=|[ \t]+)(\S+)$")
_HASH = re.compile(r"--hash[= ]sha256:[0-9a-fA-F]{64}$")
_URL = re.compile(r"https?://[^\s${}\\]+$")
#: A pylock file may also be a file:// URL: `spec` writes one where the index served the wheel from this
#: machine's own mirror; its sha256 pins the bytes, so whoever can write that path cannot change what installs.
_FILE_URL = re.compile(r"(?:https?|file)://[^\s${}\\]+$")
#: pip's comment rule: ``#`` at the start of a line or after white space
_COMMENT = re.compile(r"(^|\s+)#.*$")

FIX = ("a lock holds only comments, --index-url/--extra-index-url URL and name==version lines with "
       "--hash=sha256: options (what 'preflight spec' writes); write it again with 'preflight spec -o DIR'")


def _logical(text: str) -> List[Tuple[int, str]]:
    """(first line number, text without comments) of each logical line, as pip joins them: a line
    ending in a backslash continues on the next; a comment line ends the joined line."""
    out: List[Tuple[int, str]] = []
    cur: List[str] = []
    first = 0
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        is_comment = bool(re.match(r"\s*#", line))
        if line.endswith("\\") and not is_comment:
            if not cur:
                first = n
            cur.append(line[:-1])
            continue
        if cur:
            cur.append("" if is_comment else line)
            out.append((first, " ".join(cur)))
            cur = []
        else:
            out.append((n, line))
    if cur:
        out.append((first, " ".join(cur)))
    return [(n, _COMMENT.sub("", l).strip()) for n, l in out]


def _requirement_problem(words: List[str]) -> Optional[str]:
    """Why ``words`` (a requirement and its options) is not ``name==version [; marker]`` with only
    ``--hash=sha256:`` options, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    opts = [i for i, w in enumerate(words) if w.startswith("-")]
    head = " ".join(words[:opts[0]] if opts else words)
    for w in words[opts[0]:] if opts else []:
        if not _HASH.match(w):
            return "the option %r (only --hash=sha256:HEX may follow a requirement)" % w[:60]
    if "${" in head or "/" in head.split(";", 1)[0] or "@" in head.split(";", 1)[0]:
        return "a path, URL or variable as a requirement"
    try:
        req = Requirement(head)
    except InvalidRequirement:
        return "not a requirement"
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        return "not pinned as name==version"
    return None


def lock_problem(text: str) -> Optional[Tuple[int, str, str]]:
    """(line number, the line, why) of the first line of ``text`` outside the lock grammar, or None."""
    raw = text.split("\n")
    if "\x00" in text:
        return (1, "", "a NUL byte (not a text file)")
    for n, line in _logical(text):
        if not line:
            continue
        shown = raw[n - 1].strip()[:80]
        if line.startswith("-"):
            m = _INDEX.match(line)
            if not m:
                return (n, shown, "the option %r is not allowed in a lock" % line.split()[0].split("=")[0][:40])
            if not _URL.match(m.group(2)):
                return (n, shown, "the index is not an http(s) URL")
            continue
        why = _requirement_problem(line.split())
        if why:
            return (n, shown, why)
    return None


def check_lock(text: str, path: str, option: str = "--lock") -> None:
    """Raise UsageError (one line: the file, the line number, what is wrong, the fix) when ``text``
    holds anything :func:`lock_problem` refuses."""
    bad = lock_problem(text)
    if bad:
        n, shown, why = bad
        from ..report.text import one_line

        raise UsageError(one_line("%s %s line %d: %s (%s); %s" % (option, path, n, why, shown, FIX)))


def check_pylock(data: Dict[str, Any]) -> Optional[str]:
    """Why the parsed pylock.toml ``data`` names something other than http(s) or file:// URLs of
    files with a sha256 (a bare local path, a directory, a VCS checkout, an archive), or None."""
    for p in data.get("packages") or []:
        if not isinstance(p, dict):
            return "a [[packages]] entry that is not a table"
        for key in ("directory", "vcs", "archive"):
            if key in p:
                return "package %r is a %s" % (p.get("name"), key)
        files = list(p.get("wheels") or []) + ([p["sdist"]] if p.get("sdist") else [])
        if not files:
            return "package %r names no file" % p.get("name")
        for f in files:
            if not isinstance(f, dict) or "path" in f or not _FILE_URL.match(str(f.get("url") or "")):
                return "package %r has a file that is not an http(s) or file:// URL" % (p.get("name"),)
            if "=***" in str(f.get("url")):  # its credential was hidden when written: pip cannot fetch it
                return "package %r has a file URL whose credential was hidden" % (p.get("name"),)
            if not re.match(r"[0-9a-fA-F]{64}$", str((f.get("hashes") or {}).get("sha256") or "")):
                return "package %r has a file without a sha256" % (p.get("name"),)
    return None
