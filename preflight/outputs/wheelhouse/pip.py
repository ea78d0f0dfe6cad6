"""pip, asked for files on the *target* interpreter and platform (metadata only) and run under the
supervisor (:mod:`preflight.probes.child`)."""

import os
import re
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence

from packaging.utils import canonicalize_name

from ...errors import UsageError
from ...shell import quote as shell_quote
from ...probes import child
from .files import load_json
from .pins import LockEntry


def run_pip(args: Sequence[str], timeout: float, python: Optional[str] = None,
         workdir: Optional[str] = None) -> subprocess.CompletedProcess:
    """``python -m pip ARGS`` (default: this interpreter's pip) under the supervisor, output captured
    as text; ``timeout`` in seconds. Raises UsageError when it times out or cannot start."""
    cmd = [python or sys.executable, "-m", "pip", "--disable-pip-version-check"] + list(args)
    env = dict(os.environ)
    for key in ("PYTHONNOUSERSITE", "PYTHONSAFEPATH"):
        env.pop(key, None)
    try:
        return child.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         timeout=timeout, env=env, workdir=workdir)
    except subprocess.TimeoutExpired:
        raise UsageError("'pip %s' did not finish within %.0f s; check the network access to the index" % (
            args[0], timeout))
    except OSError as exc:
        raise UsageError("could not run pip with %s: %s" % (cmd[0], exc))


#: The first pip with ``--python`` (resolving for another interpreter's environment).
PIP_PYTHON_OPTION = (22, 3)


def outer_pip(target: str, timeout: float) -> str:
    """An interpreter whose pip can resolve against ``target``, which has none: this checker's own
    when its pip is 22.3 or newer. Raises UsageError naming both ways out when there is none."""
    proc = run_pip(["--version"], min(timeout, 60.0))
    m = re.match(r"pip (\d+)\.(\d+)", proc.stdout or "")
    if proc.returncode == 0 and m and (int(m.group(1)), int(m.group(2))) >= PIP_PYTHON_OPTION:
        return sys.executable
    raise UsageError("--python %s has no pip, and %s has no pip 22.3 or newer to resolve for it: add pip to it "
                     "(%s -m ensurepip) or run verl-preflight with a Python that has pip 22.3+" % (
                         target, sys.executable, shell_quote(target)))


def pip_error(proc: subprocess.CompletedProcess) -> str:
    """The one line (at most 400 characters) that says why pip failed: its last ERROR, or the
    requirements a conflict names."""
    lines = proc.stderr.splitlines()
    errs = [l for l in lines if l.startswith("ERROR") and "ResolutionImpossible" not in l]
    # a conflict: pip names the requirements that clash on the lines after "The conflict is caused by"
    for i, l in enumerate(lines):
        if "conflict is caused by" in l:
            errs.append("conflict: " + "; ".join(x.strip() for x in lines[i + 1:i + 4] if x.strip()))
            break
    errs = errs or [l for l in lines if l.startswith("ERROR")] or proc.stderr.strip().splitlines() \
        or proc.stdout.strip().splitlines()
    return (errs or ["exit %d" % proc.returncode])[-1][:400]


def req_lines(entries: Iterable[LockEntry], with_hashes: bool = True) -> str:
    """A requirements file pinning ``entries`` (``name==version --hash=sha256:...``)."""
    lines = []
    for e in entries:
        h = " ".join("--hash=sha256:%s" % x for x in e.hashes) if with_hashes and e.hashes else ""
        lines.append(("%s==%s %s" % (e.name, e.version, h)).strip())
    return "\n".join(lines) + "\n"


def target_args(python: str, platforms: Sequence[str]) -> List[str]:
    """pip's options that select CPython ``python``'s wheels for ``platforms`` (not this machine's)."""
    out = ["--implementation", "cp", "--python-version", python]
    for p in platforms:
        out += ["--platform", p]
    return out


def choose_files(entries: Sequence[LockEntry], python: str, platforms: Sequence[str], tmp: str,
                  timeout: float) -> Dict[str, Dict[str, Any]]:
    """canonical name -> {url, file, wheel} pip picks for each pin on the target (metadata only)."""
    req = os.path.join(tmp, "choose.txt")
    from ...atomic import write_new

    write_new(req, req_lines(entries, with_hashes=False))
    report = os.path.join(tmp, "choose.json")
    proc = run_pip(["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet", "--report", report,
                 "--target", os.path.join(tmp, "t")] + target_args(python, platforms) + ["-r", req], timeout,
                workdir=tmp)
    if proc.returncode != 0 or not os.path.exists(report):
        raise UsageError("pip found no file for a pin of the lock on Python %s (%s): %s; nothing was downloaded" % (
            python, ", ".join(platforms[:2]) + (", ..." if len(platforms) > 2 else ""), pip_error(proc)))
    data = load_json(report)
    out: Dict[str, Dict[str, Any]] = {}
    for item in data.get("install", []):
        url = (item.get("download_info") or {}).get("url") or ""
        fname = url.rsplit("/", 1)[-1].split("#", 1)[0]
        out[canonicalize_name(item["metadata"]["name"])] = {"url": url, "file": fname, "wheel": fname.endswith(".whl"),
                                                            "version": item["metadata"]["version"]}
    return out


def this_machine_matches(python: str, platforms: Sequence[str]) -> Optional[str]:
    """An interpreter of Python ``python`` on this machine when this machine is a valid target
    (Linux x86_64 and its glibc among the platform tags), else None."""
    import platform as _platform

    from ..lock import find_interpreter

    if sys.platform != "linux" or _platform.machine() != "x86_64":
        return None
    libc, ver = _platform.libc_ver()
    if libc != "glibc" or not ver:
        return None
    major, minor = (int(x) for x in ver.split(".")[:2])
    tags = {"manylinux_%d_%d_x86_64" % (major, minor), "linux_x86_64"}
    if not tags & set(platforms):
        return None
    return find_interpreter(python)
