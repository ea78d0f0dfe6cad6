"""Reading and verifying a wheelhouse (``wheelhouse.json``): every wheel present with its size and sha256."""

import os
from typing import Any, Dict, List, Optional, Tuple

from ...errors import UsageError
from .files import MANIFEST, PARTS_MANIFEST, SERVED_LOCK, Say, load_json, plain_name, sha256_of
from .parts import reassemble


def _manifest_problem(m: Any) -> Optional[str]:
    """What makes ``m`` (a parsed wheelhouse.json) unusable, or None: the shape :func:`build`
    writes (a mapping whose ``wheels`` is a list of {name, version, file, size, sha256}), and
    each file a plain name inside the wheelhouse (no absolute path, no ``..``)."""
    if not isinstance(m, dict):
        return "not a JSON object"
    wheels = m.get("wheels")
    if not isinstance(wheels, list):
        return "'wheels' is not a list"
    if not isinstance(m.get("python"), str):
        return "'python' is not a Python version"
    if not plain_name(m.get("served_lock") or SERVED_LOCK):
        return "'served_lock' is not a file inside the wheelhouse"
    total = m.get("total_bytes", 0)
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        return "'total_bytes' is not a byte count"
    omitted = m.get("omitted", [])
    if not isinstance(omitted, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                and isinstance(o.get("reason", ""), str) for o in omitted):
        return "'omitted' is not a list of {name, reason}"
    for i, r in enumerate(wheels):
        if not isinstance(r, dict):
            return "wheel %d is not an object" % i
        for key, kind in (("name", str), ("key", str), ("version", str), ("file", str), ("sha256", str),
                          ("size", int)):
            if not isinstance(r.get(key), kind) or isinstance(r.get(key), bool):
                return "wheel %d has no valid %r" % (i, key)
        if not plain_name(r["file"]) or not r["file"].endswith(".whl"):
            return "wheel %d's file %r is not a wheel inside the wheelhouse" % (i, r["file"])
    return None


def verify(wh_dir: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """(manifest, problems): every wheel the manifest lists is present with its size and sha256,
    and the served lock is there. ``problems`` names each missing or corrupt file."""
    try:
        m = load_json(os.path.join(wh_dir, MANIFEST))
    except (OSError, ValueError, RecursionError) as exc:
        return None, ["%s: no readable %s (%s); pass the directory 'preflight wheelhouse -o' wrote" % (
            wh_dir, MANIFEST, getattr(exc, "strerror", None) or type(exc).__name__)]
    bad = _manifest_problem(m)
    if bad:
        return None, ["%s: %s is not a wheelhouse manifest (%s); pass the directory 'preflight wheelhouse -o' wrote, "
                      "or build it again" % (wh_dir, MANIFEST, bad)]
    problems = []
    if not os.path.isfile(os.path.join(wh_dir, m.get("served_lock") or SERVED_LOCK)):
        problems.append("%s is missing" % (m.get("served_lock") or SERVED_LOCK))
    for r in m.get("wheels", []):
        path = os.path.join(wh_dir, r["file"])
        if not os.path.isfile(path):
            problems.append("%s==%s: %s is missing" % (r["name"], r["version"], r["file"]))
        elif os.path.getsize(path) != r["size"]:
            problems.append("%s==%s: %s has %d bytes, expected %d" % (r["name"], r["version"], r["file"],
                                                                     os.path.getsize(path), r["size"]))
        elif sha256_of(path) != r["sha256"]:
            problems.append("%s==%s: %s is corrupt (sha256 differs from the manifest's %s)" % (
                r["name"], r["version"], r["file"], r["sha256"][:16]))
    return m, problems


def open_wheelhouse(path: str, say: Say = lambda s: None,
                    option: str = "--wheelhouse") -> Tuple[str, Dict[str, Any]]:
    """A verified wheelhouse directory and its manifest, from a wheelhouse or a parts directory
    (reassembled into ``path/wheelhouse`` first, once). Raises UsageError naming every missing
    or corrupt part or wheel, and ``option`` (how the user gave ``path``: ``--wheelhouse``,
    ``wheelhouse verify``, ``--check``) when ``path`` is not a directory; nothing is installed by
    then."""
    if not os.path.isdir(path):
        raise UsageError("%s %s: %s; pass the directory 'preflight wheelhouse -o' wrote "
                         "(or the one holding its parts)" % (option, path, "not a directory" if os.path.exists(path)
                                                            else "no such directory"))
    wh = path
    if not os.path.isfile(os.path.join(path, MANIFEST)) and os.path.isfile(os.path.join(path, PARTS_MANIFEST)):
        wh = os.path.join(path, "wheelhouse")
        if not os.path.isfile(os.path.join(wh, MANIFEST)):
            problems = reassemble(path, wh, say)
            if problems:
                raise UsageError("wheelhouse parts in %s are not usable%s: %s; copy the named part(s) again from "
                                 "the machine that built them" % (
                                     path, "" if option == "wheelhouse verify" else ", nothing was installed",
                                     "; ".join(problems)))
    m, problems = verify(wh)
    if problems:
        raise UsageError("wheelhouse %s is not usable%s: %s%s%s" % (
            wh, "" if option == "wheelhouse verify" else ", nothing was installed", "; ".join(problems[:6]),
            " (and %d more)" % (len(problems) - 6) if len(problems) > 6 else "",
            "" if m is None else "; rebuild it with 'preflight wheelhouse' or copy the named file(s) again"))
    say("wheelhouse %s: %d wheels verified (sha256), %d bytes" % (wh, len(m["wheels"]), m.get("total_bytes", 0)))
    return wh, m


def find_links(wh_dir: str, manifest: Dict[str, Any]) -> List[str]:
    """pip options that install from ``wh_dir`` and nothing else: ``--no-index`` and one
    ``--find-links`` per package directory."""
    out = ["--no-index"]
    for key in sorted({r["key"] for r in manifest["wheels"]}):
        out += ["--find-links", os.path.join(os.path.abspath(wh_dir), "simple", key)]
    return out
