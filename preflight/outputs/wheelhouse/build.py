"""Building a wheelhouse: every wheel of a lock, downloaded (or built), hash-checked and indexed."""

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ... import __version__
from ...atomic import make_dirs, remove_file, tree_problem, write_new
from ...errors import UsageError
from ...paths import file_problem
from .files import MANIFEST, SERVED_LOCK, Say, copy_file, place_file, sha256_of, write_text
from .ownership import is_ours, owned_files, refuse_theirs
from .pins import LockEntry, installed_versions, plan, read_lock
from ...probes import child
from .pip import choose_files, pip_error, req_lines, run_pip, target_args, this_machine_matches

#: Platform tags a Linux x86_64 target accepts by default: manylinux glibc 2.17 .. 2.39 (a pip
#: cross-download needs every tag it may take named; 2.39 is Ubuntu 24.04's glibc).
DEFAULT_PLATFORMS = ["manylinux_2_%d_x86_64" % n for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


#: Downloads are kept here between runs (pip download skips a file already present with its hash).
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "wheelhouse")


def _index_html(title: str, links: Sequence[Tuple[str, str]]) -> str:
    body = "".join('<a href="%s">%s</a><br/>\n' % (href, text) for href, text in links)
    return "<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n%s</body></html>\n" % (title, body)


def check_pyz(path: str, option: str = "--pyz") -> None:
    """Raise UsageError unless ``path`` is this checker's zipapp: a zip archive holding
    ``__main__.py`` and the ``preflight`` package (what tools/build_pyz.py writes)."""
    import zipfile

    fix = "pass the dist/preflight.pyz that 'python3 tools/build_pyz.py' writes"
    why = file_problem(path)
    if why:
        raise UsageError("%s %s: %s; %s" % (option, path, why, fix))
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError("%s %s: not a zipapp (%s); %s" % (option, path, getattr(exc, "strerror", None) or exc, fix))
    lacks = [n for n in ("__main__.py", "preflight/__init__.py") if n not in names]
    if lacks:
        raise UsageError("%s %s: a zip archive but not the verl-preflight zipapp (it has no %s); %s" % (
            option, path, " and no ".join(lacks), fix))


def _find_pyz() -> Optional[str]:
    here = os.path.abspath(__file__)
    m = re.match(r"^(.*?\.pyz)(/|$)", here)
    if m and os.path.isfile(m.group(1)):
        return m.group(1)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))  # preflight/outputs/wheelhouse/
    cand = os.path.join(root, "dist", "preflight.pyz")
    return cand if os.path.isfile(cand) else None


def _downloaded(files_dir: str, listing: Sequence[str], e: LockEntry, chosen: str) -> str:
    """The file pip download saved for ``e``: the one with a sha256 the lock accepts (the hash
    filter may pick another platform tag than the metadata-only choice), else pip's choice."""
    if e.hashes:
        stem = re.sub(r"[-_.]+", "_", e.name).lower() + "-"
        for f in listing:
            if f.lower().startswith(stem) and f.endswith(".whl"):
                path = os.path.join(files_dir, f)
                if sha256_of(path) in e.hashes:
                    return path
    return os.path.join(files_dir, chosen)


def _fetch(keep: Sequence[LockEntry], python: str, platforms: Sequence[str], cache: str, files_dir: str,
           timeout: float, say: Say) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str]]:
    """(the file pip picks for each pin on the target, {pin: wheel built here from its source
    distribution}), with the wheels downloaded into ``files_dir``. Raises UsageError (nothing
    downloaded) for a pin with no file, or sdist-only pins this machine cannot build for the target."""
    with child.scratch("preflight-wheelhouse-") as tmp:
        say("asking pip which file each pin takes on CPython %s (%s ...), metadata only" % (python, platforms[0]))
        chosen = choose_files(keep, python, platforms, tmp, timeout)
        missing = [e for e in keep if e.key not in chosen]
        if missing:
            raise UsageError("pip chose no file for %s; nothing was downloaded" % ", ".join(
                "%s==%s" % (e.name, e.version) for e in missing))
        sdists = [e for e in keep if not chosen[e.key]["wheel"]]
        builder = None
        if sdists:
            builder = this_machine_matches(python, platforms)
            if builder is None:
                raise UsageError(
                    "%d pin(s) have only a source distribution for CPython %s on %s, and this machine cannot build "
                    "wheels for that target: %s. Nothing was downloaded. Run 'preflight wheelhouse' on a Linux "
                    "x86_64 machine with Python %s (it builds them with pip wheel), or build those wheels on the "
                    "target and add them" % (len(sdists), python, platforms[0], ", ".join(
                        "%s==%s (%s)" % (e.name, e.version, chosen[e.key]["file"]) for e in sdists), python))
            say("%d pin(s) have only a source distribution: %s; building wheels with %s" % (
                len(sdists), ", ".join("%s==%s" % (e.name, e.version) for e in sdists), builder))
        wheels = [e for e in keep if chosen[e.key]["wheel"]]
        if wheels:
            req = os.path.join(tmp, "download.txt")
            write_new(req, req_lines(wheels))
            say("downloading %d wheels (cache %s)" % (len(wheels), files_dir))
            args = ["download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest", files_dir] + \
                target_args(python, platforms) + ["-r", req]
            if all(e.hashes for e in wheels):
                args.insert(1, "--require-hashes")
            proc = run_pip(args, timeout, workdir=tmp)
            if proc.returncode != 0:
                raise UsageError("pip download failed: %s" % pip_error(proc))
        built: Dict[str, str] = {}
        if sdists:
            bdir = os.path.join(cache, "built", python)
            make_dirs(bdir, "the wheel cache")
            req = os.path.join(tmp, "build.txt")
            write_new(req, req_lines(sdists))
            before = set(os.listdir(bdir))
            proc = run_pip(["wheel", "--no-deps", "--quiet", "--wheel-dir", bdir, "-r", req], timeout, python=builder,
                        workdir=tmp)
            if proc.returncode != 0:
                raise UsageError("pip wheel could not build %s: %s" % (
                    ", ".join(e.name for e in sdists), pip_error(proc)))
            for e in sdists:
                prefix = re.sub(r"[-_.]+", "_", e.name).lower() + "-" + e.version + "-"
                cands = [f for f in os.listdir(bdir) if f.lower().startswith(prefix) and f.endswith(".whl")]
                fresh = [f for f in cands if f not in before] or cands
                if not fresh:
                    raise UsageError("pip wheel built no wheel for %s==%s" % (e.name, e.version))
                built[e.key] = os.path.join(bdir, sorted(fresh)[-1])
    return chosen, built


def _sources(keep: Sequence[LockEntry], chosen: Dict[str, Dict[str, Any]], built: Dict[str, str],
             files_dir: str) -> Dict[str, str]:
    """{pin: the file it is served from}: a built wheel, or the download whose sha256 the lock
    accepts. Raises UsageError naming the pins whose file is missing or has another hash."""
    bad: List[str] = []
    srcs: Dict[str, str] = {}
    listing = os.listdir(files_dir)
    for e in keep:
        src = built.get(e.key) or _downloaded(files_dir, listing, e, chosen[e.key]["file"])
        if not os.path.isfile(src):
            bad.append("%s==%s: pip reported %s but the file is not in %s" % (e.name, e.version,
                                                                              chosen[e.key]["file"], files_dir))
            continue
        srcs[e.key] = src
        if e.key not in built and e.hashes and sha256_of(src) not in e.hashes:
            bad.append("%s: sha256 %s is not one the lock accepts for %s==%s" % (os.path.basename(src), sha256_of(src),
                                                                                 e.name, e.version))
    if bad:
        raise UsageError("the wheelhouse does not match the lock: %s" % "; ".join(bad[:5]))
    return srcs


def build(lock_path: str, out_dir: str, python: str, platforms: Sequence[str] = DEFAULT_PLATFORMS,
          omit: Sequence[Tuple[str, str]] = (), exclude_installed: Optional[str] = None,
          pyz: Optional[str] = None, cache: str = CACHE, say: Say = lambda s: None,
          timeout: float = 3600.0) -> Dict[str, Any]:
    """Build the wheelhouse of ``lock_path`` for CPython ``python`` (``"3.12"``) on ``platforms``
    into ``out_dir`` and return its manifest (also written to ``out_dir/wheelhouse.json``).

    Raises UsageError (nothing downloaded) when a pin has no file for the target, when pins
    have only a source distribution there and this machine cannot build them for it (all of
    them are named), and (after downloading) when a file's sha256 is not one the lock accepts.
    """
    entries = read_lock(lock_path)
    owned = owned_files(out_dir)
    pyz = pyz or _find_pyz()
    refuse_theirs(out_dir, [MANIFEST, SERVED_LOCK, "simple/index.html"] + (["preflight.pyz"] if pyz else []), owned)
    inst = installed_versions(exclude_installed) if exclude_installed else None
    keep, left = plan(entries, omit, inst)
    say("%s: %d pins; %d to carry, %d left out" % (lock_path, len(entries), len(keep), len(left)))
    make_dirs(out_dir, "-o")
    files_dir = os.path.join(cache, "files")
    make_dirs(files_dir, "the wheel cache")
    why = tree_problem(cache, ("files", "built"))
    if why:  # pip would reuse wheels another user put there
        raise UsageError("the wheel cache %s is not this user's own: %s; remove it or fix its owner and mode "
                         "(nothing was downloaded)" % (cache, why))
    chosen, built = _fetch(keep, python, platforms, cache, files_dir, timeout, say)
    # hash-check, then place (only over files an earlier build wrote), index
    srcs = _sources(keep, chosen, built, files_dir)
    simple = os.path.join(out_dir, "simple")
    rows: List[Dict[str, Any]] = []
    new = {MANIFEST, SERVED_LOCK, "simple/index.html"} | ({"preflight.pyz"} if pyz else set())
    for e in keep:
        new |= {"simple/%s/%s" % (e.key, os.path.basename(srcs[e.key])), "simple/%s/index.html" % e.key}
    same = {"simple/%s/%s" % (k, os.path.basename(v)) for k, v in srcs.items()}  # a wheel already there, byte
    same = {r for r in same if os.path.isfile(os.path.join(out_dir, r))  # for byte, loses nothing when replaced
            and sha256_of(os.path.join(out_dir, r)) == sha256_of(srcs[r.split("/")[1]])}
    refuse_theirs(out_dir, new - same, owned)
    for rel in sorted(owned or {}):  # the earlier build's files this one does not write again (older wheels)
        if rel not in new and is_ours(out_dir, rel, owned):
            remove_file(os.path.join(out_dir, rel), "-o")
            try:
                os.rmdir(os.path.dirname(os.path.join(out_dir, rel)))  # its package directory, once empty
            except OSError:
                pass
    make_dirs(simple, "-o")
    for e in keep:
        src = srcs[e.key]
        digest = sha256_of(src)
        source = "index"
        if e.key in built:
            source = "built from the source distribution %s (lock sha256 %s) with pip wheel" % (
                chosen[e.key]["file"], ", ".join(h[:16] for h in e.hashes) or "none")
        d = os.path.join(simple, e.key)
        make_dirs(d, "-o")
        fname = os.path.basename(src)
        place_file(src, os.path.join(d, fname))
        rows.append({"name": e.name, "key": e.key, "version": e.version, "file": "simple/%s/%s" % (e.key, fname),
                     "sha256": digest, "size": os.path.getsize(src), "lock_line": e.line, "source": source})
    for r in rows:
        write_text(os.path.join(simple, r["key"], "index.html"), _index_html(
            "Links for %s" % r["key"], [("%s#sha256=%s" % (os.path.basename(r["file"]), r["sha256"]),
                                        os.path.basename(r["file"]))]))
    write_text(os.path.join(simple, "index.html"),
               _index_html("Simple index", [(r["key"] + "/", r["key"]) for r in rows]))
    served = ["# verl-preflight %s wheelhouse for CPython %s (%s): %d packages served from this directory" % (
        __version__, python, platforms[0], len(rows)),
        "# install offline: pip install --no-index --find-links simple/<name> ... --require-hashes --no-deps -r "
        "requirements.lock (preflight install --wheelhouse DIR does it)"]
    served += ["# left out: %s==%s (%s)" % (o["name"], o["version"], o["reason"]) for o in left]
    for r in rows:
        served.append("%s==%s \\\n    --hash=sha256:%s" % (r["name"], r["version"], r["sha256"]))
    write_text(os.path.join(out_dir, SERVED_LOCK), "\n".join(served) + "\n")
    pyz_row = None
    if pyz:
        copy_file(pyz, os.path.join(out_dir, "preflight.pyz"))
        pyz_row = {"file": "preflight.pyz", "sha256": sha256_of(pyz), "size": os.path.getsize(pyz)}
    written = {rel: sha256_of(os.path.join(out_dir, rel)) for rel in sorted(new - {MANIFEST})
               if not rel.endswith(".whl")}
    with open(lock_path, "rb") as fh:
        lock_sha = hashlib.sha256(fh.read()).hexdigest()
    manifest = {"format": 1, "created_by": "verl-preflight %s" % __version__, "python": python,
                "implementation": "cp", "platforms": list(platforms),
                "lock": {"file": os.path.basename(lock_path), "sha256": lock_sha, "pins": len(entries)},
                "served_lock": SERVED_LOCK, "wheels": rows, "omitted": left, "pyz": pyz_row, "written": written,
                "total_bytes": sum(r["size"] for r in rows)}
    write_text(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest
