# Facts about the target interpreter and its installed distributions.
# Emits one "info" event. Never imports third-party packages: distributions are read from
# their metadata files only, so a package whose import crashes cannot crash this probe.
import os
import platform
import stat
import sys


def _marker_env():
    impl = sys.implementation
    iver = "%d.%d.%d" % impl.version[:3]
    if impl.version.releaselevel != "final":
        iver += impl.version.releaselevel[0] + str(impl.version.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": iver,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def _regular(path):
    # True for a regular file; False for anything else there (a FIFO would block the read, a
    # device never end it); None when nothing is there
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return None


def _metadata_files_readable(loc):
    # importlib.metadata reads the metadata path itself (an egg-info file) or METADATA, PKG-INFO
    # and requires.txt inside it: a FIFO there would block this probe and a device never end the
    # read, so any such path that is not a regular file (or, for the location, a directory) is an
    # error of this distribution alone. Raises ValueError naming it.
    try:
        mode = os.stat(loc).st_mode
    except OSError:
        return
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise ValueError("%s is neither a directory nor a regular file" % os.path.basename(loc))
    if stat.S_ISDIR(mode):
        for f in ("METADATA", "PKG-INFO", "requires.txt"):
            if _regular(os.path.join(loc, f)) is False:
                raise ValueError("%s is not a regular file" % f)


def _dist_info_headers(path, parser):
    # the header block of a *.dist-info/METADATA (the long description after it is never
    # parsed): about 2.5x faster than importlib.metadata's whole-file parse over a vLLM stack's
    # few hundred distributions. None where importlib's own reading must decide, so the result
    # stays what importlib.metadata says: no such file, bytes that are not UTF-8, a header folded
    # over several lines. Raises ValueError for a METADATA that is not a regular file.
    if not path.endswith(".dist-info"):
        return None
    meta = os.path.join(path, "METADATA")
    kind = _regular(meta)
    if kind is None:
        return None
    if not kind:
        raise ValueError("METADATA is not a regular file")
    try:
        with open(meta, encoding="utf-8") as fh:
            head = []
            for line in fh:
                if line in ("\n", "\r\n", "\r"):  # the blank line (a line of spaces continues a header)
                    break
                head.append(line)
    except (OSError, UnicodeDecodeError):
        return None
    msg = parser.parsestr("".join(head))
    values = [msg[k] or "" for k in ("Name", "Version", "Requires-Python")] + (msg.get_all("Requires-Dist") or [])
    if any("\n" in v for v in values):
        return None
    return msg


def _dists_importlib():
    import importlib.metadata as md
    from email.parser import HeaderParser

    parser = HeaderParser()
    out = []
    for d in md.distributions():
        row = {"location": None}
        try:
            path = getattr(d, "_path", None)
            row["location"] = str(path) if path is not None else None
            _metadata_files_readable(row["location"] or "")  # before any read, ours or importlib's
            meta = _dist_info_headers(row["location"], parser) if path is not None else None
            if meta is not None:
                requires = meta.get_all("Requires-Dist") or []
            else:
                meta = d.metadata
                requires = d.requires or []
            name = meta["Name"] if meta is not None else None
            version = meta["Version"] if meta is not None else None
            row["name"] = name
            row["version"] = version
            row["requires"] = list(requires)
            row["requires_python"] = meta["Requires-Python"] if meta is not None else None
            row["installer"] = None
            try:
                if _regular(os.path.join(row["location"] or "", "INSTALLER")):
                    row["installer"] = (d.read_text("INSTALLER") or "").strip() or None
            except Exception:
                pass
            if not name or not version:
                row["error"] = "metadata has no %s" % ("Name" if not name else "Version")
        except Exception as exc:  # malformed metadata must not stop the probe
            row["error"] = "%s: %s" % (type(exc).__name__, exc)
        out.append(row)
    return out


def _dists_scan():
    # Python < 3.8: read *.dist-info/METADATA and *.egg-info/PKG-INFO by hand.
    from email.parser import Parser

    out = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        for fn in sorted(os.listdir(entry)):
            if not (fn.endswith(".dist-info") or fn.endswith(".egg-info")):
                continue
            base = os.path.join(entry, fn)
            mfile = os.path.join(base, "METADATA" if fn.endswith(".dist-info") else "PKG-INFO")
            row = {"location": base}
            if _regular(mfile) is False:
                row["error"] = "%s is not a regular file" % os.path.basename(mfile)
                out.append(row)
                continue
            try:
                with open(mfile, encoding="utf-8", errors="replace") as fh:
                    msg = Parser().parse(fh)
                row["name"] = msg.get("Name")
                row["version"] = msg.get("Version")
                row["requires"] = msg.get_all("Requires-Dist") or []
                row["requires_python"] = msg.get("Requires-Python")
                if not row["name"] or not row["version"]:
                    row["error"] = "metadata has no Name or Version"
            except Exception as exc:
                row["error"] = "%s: %s" % (type(exc).__name__, exc)
            out.append(row)
    return out


def _tree():
    # What this interpreter runs before any script, read under -I -S (so none of it has run):
    # its prefix (a venv's, from pyvenv.cfg, as site.venv() would set it), the site directories
    # site.main() would add, the .pth files in them, sitecustomize/usercustomize on the way, and
    # the directories of sys.path (standard library) and PYTHONPATH. Only names are read.
    import site

    exe_dir = os.path.dirname(os.path.abspath(sys.executable or ""))
    prefixes = [sys.prefix, sys.exec_prefix]
    prefix = sys.prefix
    user = not os.environ.get("PYTHONNOUSERSITE")
    for d in (exe_dir, os.path.dirname(exe_dir)):
        cfg = os.path.join(d, "pyvenv.cfg")
        if _regular(cfg):
            prefix = os.path.dirname(exe_dir)
            system = False
            try:
                with open(cfg, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        key, _, value = line.partition("=")
                        if key.strip().lower() == "include-system-site-packages":
                            system = value.strip().lower() == "true"
            except OSError:
                pass
            prefixes = [prefix] + (prefixes if system else [])
            user = user and system
            break
    # as site.venv() would: sys.prefix is the venv's while getsitepackages runs. Under -S it is still
    # the base's, and Debian's getsitepackages adds lib/pythonX.Y/site-packages only for a venv
    # (sys.prefix != sys.base_prefix): without this, a venv's own site-packages went unjudged there
    saved = sys.prefix, sys.exec_prefix
    try:
        sys.prefix = sys.exec_prefix = prefix
        site_dirs = list(site.getsitepackages(prefixes))
    finally:
        sys.prefix, sys.exec_prefix = saved
    if user:
        try:
            site_dirs.append(site.getusersitepackages())
        except Exception:
            pass
    path_dirs = [p for p in sys.path if p] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    startup = []
    for d in site_dirs:
        try:
            pths = sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".pth"))
        except OSError:
            pths = []
        startup += pths
        for pth in pths:  # the directories a .pth line adds to sys.path (as site.addpackage reads them)
            try:
                with open(pth, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read(1 << 20).splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.rstrip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    path_dirs.append(os.path.join(d, line))
    for d in path_dirs + site_dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        startup += [os.path.join(d, n) for n in sorted(names)
                    if n.split(".")[0] in ("sitecustomize", "usercustomize")]
    emit("tree", executable=sys.executable, prefix=os.path.abspath(prefix),
         site_dirs=[os.path.abspath(d) for d in site_dirs if os.path.isdir(d)],
         path_dirs=[os.path.abspath(d) for d in path_dirs],  # missing ones too: who could make them counts
         startup=[os.path.abspath(f) for f in startup])


def main():
    # first, what this interpreter is, in a form any Python can send: if the rest fails (Python 2,
    # a broken install), the checker can still say what the target is
    emit("interpreter", version=list(sys.version_info[:3]), executable=sys.executable)
    try:
        dists = _dists_importlib()
    except ImportError:
        dists = _dists_scan()
    prefix = sys.prefix
    conda = os.path.isdir(os.path.join(prefix, "conda-meta"))
    try:
        import importlib.util as iu

        has_pip = iu.find_spec("pip") is not None
    except Exception:
        has_pip = False
    marker_file = os.path.join(prefix, ".verl-preflight-incomplete")
    incomplete = None
    if _regular(marker_file) is False:
        incomplete = "present (not a regular file)"
    elif os.path.exists(marker_file):
        try:
            with open(marker_file) as fh:
                incomplete = fh.read().strip() or "present"
        except OSError:
            incomplete = "present"
    libc = platform.libc_ver()
    emit(
        "info",
        executable=sys.executable,
        version=list(sys.version_info[:3]),
        version_string=sys.version.split()[0],
        releaselevel=sys.version_info.releaselevel,
        implementation=sys.implementation.name,
        prefix=prefix,
        base_prefix=getattr(sys, "base_prefix", prefix),
        is_venv=getattr(sys, "base_prefix", prefix) != prefix,
        is_conda=conda,
        conda_env=os.environ.get("CONDA_DEFAULT_ENV"),
        has_pip=has_pip,
        platform=platform.platform(),
        libc=list(libc),
        marker_env=_marker_env(),
        sys_path=[p for p in sys.path if p],
        cache_tag=getattr(sys.implementation, "cache_tag", None),
        pycache_prefix=getattr(sys, "pycache_prefix", None),
        optimize=sys.flags.optimize,
        distributions=dists,
        incomplete_marker=incomplete,
    )


if ARGS.get("tree"):
    _tree()
else:
    main()
