#!/usr/bin/env python3
"""Generate matrices/verl_config/<verl version>/<config name>.json from a real verl install.

The file holds verl's trainer config as Hydra composes it from the release's packaged YAML
(``verl/trainer/config/<name>.yaml`` and its defaults list), unresolved (interpolations kept as
``${...}`` text), plus the config groups and their options. ``preflight config`` uses it when the
target interpreter has no verl. The composition is done by preflight/target/verl_compose.py,
the same script the checker runs, so the copy and the live path cannot drift.

Usage: python3 tools/gen_verl_config.py --python ~/venvs/verl/bin/python [--name ppo_trainer ...]
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.probes.process import run_script  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="interpreter of an environment with verl installed")
    ap.add_argument("--name", action="append", default=None,
                    help="config name (default: ppo_trainer and ppo_megatron_trainer)")
    ap.add_argument("--out", default=os.path.join(ROOT, "matrices", "verl_config"))
    args = ap.parse_args()
    for name in args.name or ["ppo_trainer", "ppo_megatron_trainer"]:
        out = run_script(args.python, "verl_compose", {"config_name": name, "overrides": [], "resolve": False},
                         timeout=120)
        env, tree, err = out.last("env"), out.last("tree"), out.last("error")
        if env is None or tree is None:
            print("error: %s: %s %s" % (name, out.describe(), (err or out.last("no_verl") or {})), file=sys.stderr)
            return 1
        ver = env["verl_version"]
        doc = {
            "verl": ver,
            "config_name": name,
            "source": "verl %s wheel: verl/trainer/config/%s.yaml and its defaults list, composed with "
                      "hydra-core %s / omegaconf %s (interpolations unresolved)" % (
                          ver, name, env["hydra_version"], env["omegaconf_version"]),
            "generated_by": "tools/gen_verl_config.py",
            "confidence": "V",
            "groups": env["groups"],
            "configs": env["configs"],
            "config": tree["tree"],
        }
        d = os.path.join(args.out, ver)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name + ".json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=False)
            fh.write("\n")
        print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))
        _index(args.out, ver, name)
    return 0


def _index(out: str, ver: str, name: str) -> None:
    """Record ``name`` of release ``ver`` in ``index.json`` (the zipapp cannot list directories)."""
    path = os.path.join(out, "index.json")
    doc = {"note": "stored verl trainer configs (tools/gen_verl_config.py); version -> config names", "versions": {}}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    names = doc["versions"].setdefault(ver, [])
    if name not in names:
        names.append(name)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    sys.exit(main())
