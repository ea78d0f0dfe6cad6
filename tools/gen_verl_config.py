#!/usr/bin/env python3
"""Store every verl release's Hydra config tree, generated from its real wheel (never hand-edited).

For each release: ``pip download --no-deps verl==X`` from the package index (or the wheel already
in the cache, checked against the recorded sha256), then

* ``matrices/verl_config/<X>/**.yaml``: the wheel's ``verl/trainer/config/**.yaml``, byte for byte
  (``_generated_*.yaml`` are left out: verl writes them as reference dumps of the composed
  configs and no defaults list names them). Each file's sha256 is checked against the wheel's
  RECORD before it is written;
* ``matrices/verl_config/<X>.json``: the wheel and its sha256, the files with their sha256, the
  primary configs and config groups, the fields of every config dataclass a ``_target_``
  names, and what the release's code builds into dataclasses (``built``: the config paths and
  classes it hands to ``omega_conf_to_dataclass``), read from the release's own source with
  ``ast`` (preflight/target/verl_fields.py);
* ``matrices/verl_config/index.json``: the releases stored;
* ``matrices/verl_config/renames.json``: the keys of each primary config that a release dropped,
  found by composing every release's defaults with Hydra (the one running this tool) and comparing
  consecutive releases, with the key that replaced each where one plainly did (the same leaf
  name moved to one new place, or a near name under the same parent with the same default).

Same wheels, same bytes (sorted keys, fixed layout). ``--check`` regenerates into a temporary
directory and compares (exit 1 on a difference).

Usage: python3 tools/gen_verl_config.py [--versions 0.9.1,0.8.0] [--check]
"""

import argparse
import base64
import csv
import difflib
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.compose import flatten  # noqa: E402
from preflight.target import verl_fields  # noqa: E402

OUT = os.path.join(ROOT, "matrices", "verl_config")
PREFIX = "verl/trainer/config/"
#: The verl releases on PyPI (https://pypi.org/project/verl/#history), oldest first.
RELEASES = ["0.1", "0.2", "0.2.0.post1", "0.2.0.post2", "0.3.0.post0", "0.3.0.post1", "0.4.0", "0.4.1", "0.5.0",
            "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1"]
#: Primary configs compared between releases for renames.json.
COMPARED = ("ppo_trainer", "ppo_megatron_trainer")


def wheel_cache() -> str:
    base = os.environ.get("VERL_PREFLIGHT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight")
    d = os.path.join(base, "verl-wheels")
    os.makedirs(d, exist_ok=True)
    return d


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel(version: str, digest: str = None) -> str:
    """Path of verl==version's wheel: the cached one (its sha256 must equal ``digest`` when
    given), else downloaded with pip."""
    d = wheel_cache()
    for path in sorted(glob.glob(os.path.join(d, "verl-%s-*.whl" % version))):
        with open(path, "rb") as fh:
            if digest is None or sha256_bytes(fh.read()) == digest:
                return path
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", d,
           "verl==%s" % version]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    found = sorted(glob.glob(os.path.join(d, "verl-%s-*.whl" % version)))
    if proc.returncode != 0 or not found:
        sys.exit("error: pip download verl==%s failed: %s" % (version, (proc.stderr.strip().splitlines() or ["?"])[-1]))
    with open(found[0], "rb") as fh:
        got = sha256_bytes(fh.read())
    if digest is not None and got != digest:
        sys.exit("error: %s has sha256 %s, index.json records %s" % (found[0], got, digest))
    return found[0]


def _record(z: zipfile.ZipFile) -> dict:
    rec = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
    out = {}
    if rec:
        for row in csv.reader(io.StringIO(z.read(rec[0]).decode("utf-8"))):
            if len(row) >= 2 and row[1].startswith("sha256="):
                raw = base64.urlsafe_b64decode(row[1][7:] + "=" * (-len(row[1][7:]) % 4))
                out[row[0]] = raw.hex()
    return out


def read_wheel(path: str):
    """(config files {rel: bytes}, read(rel) for the whole wheel) with RECORD hashes checked."""
    z = zipfile.ZipFile(path)
    names = set(z.namelist())
    record = _record(z)
    files = {}
    for n in sorted(names):
        if not n.startswith(PREFIX) or not n.endswith((".yaml", ".yml")):
            continue
        rel = n[len(PREFIX):]
        if os.path.basename(rel).startswith("_generated"):
            continue
        data = z.read(n)
        if n in record and record[n] != sha256_bytes(data):
            sys.exit("error: %s: %s does not match the wheel's RECORD" % (path, n))
        files[rel] = data
    return files, (lambda rel: z.read(rel) if rel in names else None)


def layout(files: dict):
    """(primary config names, {group: [options]}) of a config tree."""
    configs = sorted(r[:-5] for r in files if "/" not in r and r.endswith(".yaml"))
    groups = {}
    for r in files:
        if "/" in r and r.endswith(".yaml"):
            g, opt = r.rsplit("/", 1)
            groups.setdefault(g, []).append(opt[:-5])
    return configs, {g: sorted(v) for g, v in sorted(groups.items())}


def compose_defaults(tree_dir: str, name: str):
    """Composed, unresolved defaults of primary config ``name`` (Hydra in this interpreter), or
    None when Hydra cannot compose it without overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=tree_dir, version_base=None):
            return OmegaConf.to_container(compose(config_name=name), resolve=False)
    except Exception as exc:  # noqa: BLE001 - recorded as "not composable"
        print("note: %s: %s does not compose without overrides: %s" % (tree_dir, name, str(exc).splitlines()[0]),
              file=sys.stderr)
        return None


def _replacement(key: str, old_val, added: dict) -> str:
    """The key that plainly replaced ``key`` among ``added`` {key: default}, or '': the only new
    key with the same leaf name and the same default (moved), else a new key under the same parent
    with the same default and a leaf name at least 80% alike (renamed)."""
    leaf = key.rsplit(".", 1)[-1]
    moved = [k for k in added if k.rsplit(".", 1)[-1] == leaf]
    if len(moved) == 1 and added[moved[0]] == old_val:
        return moved[0]
    parent = key.rsplit(".", 1)[0] if "." in key else ""
    near = {k.rsplit(".", 1)[-1]: k for k in added
            if (k.rsplit(".", 1)[0] if "." in k else "") == parent and added[k] == old_val}
    best = difflib.get_close_matches(leaf, list(near), n=1, cutoff=0.8)
    return near[best[0]] if best else ""


def renames(defaults: dict) -> dict:
    """{config: {key: {"last_in", "removed_in", "replacement"}}} from consecutive releases."""
    out = {}
    for name in COMPARED:
        seq = [(v, defaults[v][name]) for v in defaults if defaults[v].get(name) is not None]
        entries = {}
        for (a, ta), (b, tb) in zip(seq, seq[1:]):
            fa, fb = flatten(ta), flatten(tb)
            added = {k: v for k, v in fb.items() if k not in fa}
            for k in sorted(set(fa) - set(fb)):
                if any(x.startswith(k + ".") for x in fb) or k.endswith("._target_"):
                    continue  # became a mapping, or a node's class changed: not a user's key
                entries[k] = {"last_in": a, "removed_in": b, "replacement": _replacement(k, fa[k], added)}
        out[name] = dict(sorted(entries.items()))
    return out


def dump(doc) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def generate(out: str, versions, index_old: dict) -> None:
    os.makedirs(out, exist_ok=True)
    index = {"note": "verl's Hydra config trees, one per release, generated from the release's wheel by "
                     "tools/gen_verl_config.py; never edit by hand",
             "generated_by": "tools/gen_verl_config.py", "versions": {}}
    defaults = {}
    for ver in versions:
        old = (index_old.get("versions") or {}).get(ver) or {}
        path = wheel(ver, old.get("sha256"))
        with open(path, "rb") as fh:
            digest = sha256_bytes(fh.read())
        files, read = read_wheel(path)
        if not files:
            print("note: verl %s has no %s*.yaml; not stored" % (ver, PREFIX), file=sys.stderr)
            continue
        vdir = os.path.join(out, ver)
        if os.path.isdir(vdir):
            shutil.rmtree(vdir)
        for rel, data in files.items():
            dst = os.path.join(vdir, *rel.split("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as fh:
                fh.write(data)
        configs, groups = layout(files)
        targets = set()
        for data in files.values():
            targets.update(re.findall(r"^[ \t]*_target_:[ \t]*['\"]?([\w.]+)", data.decode("utf-8", "replace"), re.M))
        defaults[ver] = {name: compose_defaults(vdir, name) for name in COMPARED if name in configs}
        doc = {"verl": ver, "wheel": os.path.basename(path), "sha256": digest,
               "source": "https://pypi.org/project/verl/%s/ (%s, %s*.yaml)" % (ver, os.path.basename(path), PREFIX),
               "files": {rel: sha256_bytes(data) for rel, data in files.items()},
               "configs": configs, "groups": groups,
               "dataclasses": verl_fields.extract(read, targets),
               "built": verl_fields.built(read, [n for n in zipfile.ZipFile(path).namelist()
                                                 if n.startswith("verl/") and n.endswith(".py")])}
        with open(os.path.join(out, ver + ".json"), "wb") as fh:
            fh.write(dump(doc))
        index["versions"][ver] = {"wheel": os.path.basename(path), "sha256": digest, "configs": configs}
        print("verl %s: %d files, %d configs, %d dataclasses" % (ver, len(files), len(configs),
                                                                 len(doc["dataclasses"])))
    with open(os.path.join(out, "index.json"), "wb") as fh:
        fh.write(dump(index))
    ren = {"note": "keys a release dropped from its composed defaults (Hydra, no overrides), by comparing "
                   "consecutive stored releases; replacement: the key that took its place, '' when none did",
           "source": "tools/gen_verl_config.py over matrices/verl_config/<version>/", "configs": renames(defaults)}
    with open(os.path.join(out, "renames.json"), "wb") as fh:
        fh.write(dump(ren))


def _tree_bytes(d: str) -> dict:
    out = {}
    for dirpath, _dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default=None, help="comma-separated releases (default: every stored one, or "
                                                     "every release when none is stored)")
    ap.add_argument("--all", action="store_true", help="every verl release on the package index")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true", help="regenerate into a temporary directory and compare")
    args = ap.parse_args()
    index_old = {}
    ipath = os.path.join(OUT, "index.json")
    if os.path.exists(ipath):
        with open(ipath, encoding="utf-8") as fh:
            index_old = json.load(fh)
    stored = list((index_old.get("versions") or {}))
    versions = RELEASES if args.all or not stored else stored
    if args.versions:
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp, versions, index_old)
            a, b = _tree_bytes(tmp), _tree_bytes(args.out)
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            if diff:
                print("differs from %s: %s" % (args.out, ", ".join(diff[:20])), file=sys.stderr)
                return 1
            print("regenerated %d files: byte-identical" % len(a))
            return 0
    generate(args.out, versions, index_old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
