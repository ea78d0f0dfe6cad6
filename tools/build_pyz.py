#!/usr/bin/env python3
"""Build dist/preflight.pyz: the preflight package, matrices/ and the vendored pure-Python
dependencies of tools/vendor.txt, as one zipapp that runs with ``python3 -I -S`` on CPython 3.8+.

Vendored libraries go to ``preflight/_vendor/`` (with their METADATA and licences and a copy of
vendor.txt), never to the archive's top level; only the import names listed in
:data:`IMPORT_NAMES` are taken from each wheel (nvidia-ml-py's stray ``example.py`` is left out).
``preflight/__init__.py`` puts that folder first on sys.path when it exists.

Reproducible: the same commit and vendor.txt give the same bytes (entries sorted, timestamps
fixed to SOURCE_DATE_EPOCH or 1980-01-01, fixed permissions, no __pycache__). Wheels are fetched
once with pip (``--only-binary :all:`` for a pure ``py3-none-any`` wheel), checked against the
sha256 in vendor.txt and cached in ``$VERL_PREFLIGHT_CACHE/wheels`` (default ~/.cache/verl-preflight).

A vendor.txt line ending in ``# sdist: DIR`` names a source distribution instead (no pure wheel
exists: antlr4-python3-runtime 4.9.3 has none, PyYAML's wheels carry its C extension): only the
package folder DIR of the sdist is taken (PyYAML's pure ``lib/yaml``, which falls back from its
C loader by itself), with the sdist's PKG-INFO and LICENSE. A vendored package folder without
``__init__.py`` (hydra's generated grammar) gets an empty one: zipimport cannot import namespace
packages on every Python this runs on.

Usage: python3 tools/build_pyz.py [-o dist/preflight.pyz]
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN = b"""# verl-preflight zipapp entry point (kept parseable by old Pythons so they get a clear message)
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("error: verl-preflight needs Python 3.8 or newer to run (this is %d.%d); run it with "
                     "python3.8+ and point --python at the environment to check\\n" % sys.version_info[:2])
    sys.exit(2)

from preflight.interrupts import install_early

install_early()  # a SIGTERM in the first milliseconds is recorded, not fatal (--status-dir gets its verdict)

from preflight.cli import main

sys.exit(main())
"""


def cache_dir() -> str:
    base = os.environ.get("VERL_PREFLIGHT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight")
    d = os.path.join(base, "wheels")
    os.makedirs(d, exist_ok=True)
    return d


def read_vendor(path: str):
    """[(name, version, sha256)] from vendor.txt lines ``name==ver --hash=sha256:HEX``."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if "==" not in parts[0] or len(parts) < 2 or not parts[1].startswith("--hash=sha256:"):
                sys.exit("error: %s line %d: expected 'name==version --hash=sha256:HEX'" % (path, n))
            name, version = parts[0].split("==", 1)
            out.append((name, version, parts[1].split(":", 1)[1]))
    return out


def read_sdists(path: str):
    """{name: package folder inside the sdist} for vendor.txt lines ending in ``# sdist: DIR``."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            req, _sep, comment = line.partition("#")
            m = comment.strip().split("sdist:", 1)
            if req.strip() and len(m) == 2 and not m[0].strip():
                out[req.split("==", 1)[0].strip()] = m[1].strip().strip("/")
    return out


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_command(name: str, version: str, dest: str, for_py38: bool = True, sdist: bool = False) -> list:
    """The ``pip download`` argv that fetches ``name==version`` into folder ``dest``: a pure wheel (for
    Python 3.8 when ``for_py38``), or with ``sdist`` that package's source distribution. Everything else
    pip fetches comes as wheels only (``--only-binary=:all:``, which pip hands on to the isolated build
    environment where an sdist's metadata is prepared): the sdist's build tools (setuptools, Cython) are
    never built from source, and nothing of the sdist is built beyond its metadata (PyYAML's metadata step
    lets Cython translate its ``.pyx`` to C source; no compiler runs). The order matters: a later
    ``--only-binary=:all:`` would clear the ``--no-binary`` exception."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    if sdist:
        cmd.append("--no-binary=%s" % name)
    elif for_py38:
        cmd += ["--platform", "any", "--python-version", "38", "--implementation", "py", "--abi", "none"]
    return cmd + ["-d", dest, "%s==%s" % (name, version)]


def fetch(name: str, version: str, digest: str, for_py38: bool = True, sdist: bool = False) -> str:
    """Path of the cached wheel (or sdist, with ``sdist``) with ``digest``; downloads it with pip if
    missing (a wheel for Python 3.8 when ``for_py38``, else for the Python running the build)."""
    d = cache_dir()
    for fn in os.listdir(d):
        if fn.endswith((".whl", ".tar.gz")) and sha256(os.path.join(d, fn)) == digest:
            return os.path.join(d, fn)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = download_command(name, version, tmp, for_py38=for_py38, sdist=sdist)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".tar.gz" if sdist else ".whl")]
        if proc.returncode != 0 or not wheels:
            sys.exit("error: could not download %s==%s: %s (needs the package index once; later builds use "
                     "the cache in %s)" % (name, version, (proc.stderr.strip().splitlines() or ["?"])[-1], d))
        src = os.path.join(tmp, wheels[0])
        got = sha256(src)
        if got != digest:
            sys.exit("error: %s sha256 %s does not match tools/vendor.txt (%s); refusing to vendor it" % (
                wheels[0], got, digest))
        dst = os.path.join(d, wheels[0])
        os.replace(src, dst) if os.stat(tmp).st_dev == os.stat(d).st_dev else _copy(src, dst)
        return dst


def _copy(src: str, dst: str) -> None:
    with open(src, "rb") as a, open(dst + ".tmp", "wb") as b:
        b.write(a.read())
    os.replace(dst + ".tmp", dst)


#: What each vendored distribution contributes: its import names (a package folder or a module
#: file). Anything else at a wheel's top level (examples, tests) stays out of the zipapp.
IMPORT_NAMES = {
    "rich": ("rich",),
    "packaging": ("packaging",),
    "tomli": ("tomli",),
    "tomli-w": ("tomli_w",),
    "nvidia-ml-py": ("pynvml.py",),
    "hydra-core": ("hydra",),
    "omegaconf": ("omegaconf",),
    "antlr4-python3-runtime": ("antlr4",),
    "PyYAML": ("yaml",),
    "importlib-resources": ("importlib_resources",),
    "zipp": ("zipp",),
}
VENDOR_DIR = "preflight/_vendor/"


def _keep_wheel_member(name: str, imports=None) -> bool:
    if name.endswith("/") or "__pycache__" in name or name.endswith((".pyc", ".pyi")):
        return False
    top = name.split("/", 1)[0]
    if top.endswith(".dist-info"):
        base = name.rsplit("/", 1)[-1]
        return base == "METADATA" or "LICENSE" in base.upper() or "/licenses/" in name
    if top.endswith(".data"):
        return False
    return imports is None or top in imports


#: Build-time tools (never in the zipapp): shtab (Apache-2.0) turns the argparse parser into bash
#: and zsh completion scripts, so completion costs no runtime dependency.
BUILD_TOOLS = {"shtab": ("1.8.0", "f0922a82174b4007e06ac0bac4f79abd826c5cca88e201bfd927f889803c571d")}
COMPLETIONS = {"bash": "preflight/completion/preflight.bash", "zsh": "preflight/completion/_preflight"}


def completions():
    """{archive path: bytes} of the bash and zsh completion of ``preflight`` (shtab over
    :func:`preflight.cli.build_parser`); empty, with a note, when the build's Python is older
    than shtab supports (3.9)."""
    if sys.version_info < (3, 9):
        print("note: shell completion not generated (shtab needs Python >= 3.9 to run the build)", file=sys.stderr)
        return {}
    version, digest = BUILD_TOOLS["shtab"]
    whl = fetch("shtab", version, digest, for_py38=False)
    for path in (whl, ROOT):
        if path not in sys.path:
            sys.path.insert(0, path)
    import shtab  # noqa: E402 - from the hash-checked wheel

    from preflight.cli import build_parser

    return {COMPLETIONS[sh]: shtab.complete(build_parser(), shell=sh).encode("utf-8") for sh in sorted(COMPLETIONS)}


def _sdist_entries(path: str, name: str, version: str, folder: str):
    """{archive path: bytes} of package ``folder`` of an sdist (e.g. ``lib/yaml`` -> ``yaml/...``),
    plus its PKG-INFO and licence under ``<name>-<version>.dist-info/``."""
    out = {}
    info = "%s-%s.dist-info/" % (name.replace("-", "_"), version)
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/", 1)
            if not m.isfile() or len(parts) < 2:
                continue
            rel = parts[1]
            if rel.startswith(folder + "/") and rel.endswith(".py"):
                out[folder.rsplit("/", 1)[-1] + rel[len(folder):]] = tar.extractfile(m).read()
            elif rel == "PKG-INFO" or rel.upper().startswith("LICENSE"):
                out[info + ("METADATA" if rel == "PKG-INFO" else rel)] = tar.extractfile(m).read()
    if not out:
        sys.exit("error: %s has no %s/ (tools/vendor.txt '# sdist:' comment)" % (path, folder))
    return out


def _add_package_inits(entries) -> None:
    """An empty ``__init__.py`` for every vendored folder of modules that lacks one."""
    dirs = {k.rsplit("/", 1)[0] for k in entries if k.endswith(".py") and k.startswith(VENDOR_DIR)}
    for d in sorted(dirs):
        if d + "/" != VENDOR_DIR and d + "/__init__.py" not in entries:
            entries[d + "/__init__.py"] = b""


def collect_entries(vendor_txt: str):
    """{archive path: bytes} of everything that goes into the zipapp."""
    entries = {"__main__.py": MAIN}
    with open(vendor_txt, "rb") as fh:
        entries[VENDOR_DIR + "vendor.txt"] = fh.read()  # also the marker preflight/__init__.py looks for
    sdists = read_sdists(vendor_txt)
    for name, version, digest in read_vendor(vendor_txt):
        if name not in IMPORT_NAMES:
            sys.exit("error: tools/vendor.txt: %s has no import names in tools/build_pyz.py IMPORT_NAMES; add "
                     "them" % name)
        if name in sdists:
            for member, data in _sdist_entries(fetch(name, version, digest, sdist=True), name, version,
                                               sdists[name]).items():
                entries[VENDOR_DIR + member] = data
            continue
        whl = fetch(name, version, digest)
        with zipfile.ZipFile(whl) as z:
            for member in z.namelist():
                if _keep_wheel_member(member, IMPORT_NAMES[name]):
                    entries[VENDOR_DIR + member] = z.read(member)
    _add_package_inits(entries)
    pkg = os.path.join(ROOT, "preflight")
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "_matrices")
        for fn in filenames:
            if fn.endswith((".py", ".json")):  # .json: the published report schema (preflight/schema/)
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                with open(full, "rb") as fh:
                    entries[rel] = fh.read()
    mdir = os.path.join(ROOT, "matrices")
    for dirpath, dirnames, filenames in os.walk(mdir):
        dirnames.sort()
        for fn in filenames:
            if fn.endswith((".toml", ".json", ".yaml")):
                full = os.path.join(dirpath, fn)
                rel = "preflight/_matrices/" + os.path.relpath(full, mdir).replace(os.sep, "/")
                with open(full, "rb") as fh:
                    entries[rel] = fh.read()
    entries.update(completions())
    return entries


def build(out: str, vendor_txt: str) -> str:
    """Write the zipapp to ``out`` atomically; return its sha256."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01, zip's earliest date
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    entries = collect_entries(vendor_txt)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(SHEBANG)
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name in sorted(entries):
                info = zipfile.ZipInfo(name, date_time=stamp)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3
                z.writestr(info, entries[name], compresslevel=9)
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return sha256(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "dist", "preflight.pyz"))
    ap.add_argument("--vendor", default=os.path.join(ROOT, "tools", "vendor.txt"))
    args = ap.parse_args()
    digest = build(args.output, args.vendor)
    print("built %s (%d bytes, sha256 %s)" % (args.output, os.path.getsize(args.output), digest))


if __name__ == "__main__":
    main()
