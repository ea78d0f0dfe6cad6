#!/usr/bin/env python3
"""Extract the launch lines of verl's example scripts as test data (tests/data/verl_example_launches.json).

Reads ``examples/**/*.sh`` and ``recipe/**/*.sh`` of a verl git checkout at each release tag (and
the checkout's HEAD), keeps the scripts that run ``python3 -m verl.trainer.main_ppo``, and stores, per script, only the
overrides and ``--config-name`` of that command, with the tag and path they came from. Shell
variables are expanded from the script's own plain assignments (``NAME=value``, ``${NAME:-x}``
defaults); any other variable becomes a local path ``/tmp/verl-examples/<NAME>`` ("local paths
substituted"), or a count (8 GPUs, 1 node) where its name says the scheduler sets it to one
(``SLURM_JOB_NUM_NODES``). No script text other than those override strings is stored.

The same launch at several tags is stored once with every tag in ``refs``.

Usage: python3 tools/gen_example_launches.py --repo /path/to/verl.git [--out tests/data/verl_example_launches.json]
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.overrides import parse_launch  # noqa: E402

ENTRY = "verl.trainer.main_ppo"
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_SUBST = re.compile(r"\$\(([^()]*)\)")
#: Variables a scheduler or the user's shell sets to a count (SLURM_JOB_NUM_NODES, NNODES, ARNOLD_WORKER_GPU...):
#: a path stand-in there would be a launch no shell produces, so they stand in as 8 (GPUs) or 1 (nodes).
_COUNT = re.compile(r"(^|_)(NUM|NNODES|NODES|N?GPUS?|WORLD_SIZE|NPROC)(_|$)")


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo] + list(args), stdout=subprocess.PIPE, check=True,
                          universal_newlines=True).stdout


def _arith(m, env):
    """$((expr)) over integers, with the script's variables (bare or $-prefixed)."""
    expr = re.sub(r"\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda v: env.get(v.group(1), "1"), m.group(1))
    if not re.match(r"^[\d\s+\-*/()%]+$", expr):
        return "1"
    try:
        return str(int(eval(expr.replace("/", "//"), {"__builtins__": {}})))  # digits and operators only
    except Exception:
        return "1"


def _value(name, default, env):
    if name in env:
        return env[name]
    if default is not None:
        return expand(default, env)
    if _COUNT.search(name):  # a count: 8 GPUs on a node (verl's own n_gpus_per_node default), 1 of anything else
        return "8" if "GPU" in name else "1"
    return "/tmp/verl-examples/%s" % name


def expand(text, env):
    """``text`` with $VAR, ${VAR}, ${VAR:-default}, ${VAR:+alt} (nested: ${A:-${B:-2}}), $((arith)) and
    $(command) replaced as the script's shell would, from ``env``."""
    text = re.sub(r"\$\(\((.*?)\)\)", lambda m: _arith(m, env), text)
    text = _SUBST.sub(lambda m: "/tmp/verl-examples/cmd", text)  # $(command): a local value
    out, i = [], 0
    while i < len(text):
        if text.startswith("${", i):
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|[0-9])(?::?([-+])(.*))?$", text[i + 2:j - 1], re.S)
            if depth == 0 and m and m.group(2) == "+":  # ${VAR:+alt}: alt where VAR is set, else nothing
                out.append(expand(m.group(3), env) if env.get(m.group(1)) else "")
                i = j
                continue
            if depth == 0 and m:
                out.append(_value(m.group(1), m.group(3), env))
                i = j
                continue
        m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)", text[i:])
        if m:
            out.append(_value(m.group(1), None, env))
            i += m.end()
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def launch_of(script):
    """The overrides and --config-name of the script's main_ppo command, or None."""
    text = script.replace("\\\r\n", " ").replace("\\\n", " ")
    env = {"HOME": "/tmp/verl-examples/home"}
    for line in text.splitlines():
        if ENTRY in line and "-m" in line:
            line = line.split(" $@")[0].replace('"$@"', "").replace("${@}", "")
            line = re.sub(r'"?\$\{[A-Za-z_][A-Za-z0-9_]*\[@\]\}"?', "", line)  # bash arrays: left out
            try:
                words = shlex.split(expand(line, env), comments=True)
            except ValueError:
                return None
            if ENTRY not in words:
                return None
            spec = parse_launch(words[words.index(ENTRY) - 1:])
            return {"config_name": spec.config_name, "config_path": spec.config_path,
                    "overrides": spec.override_texts}
        m = _ASSIGN.match(line)
        if m:
            try:
                vals = shlex.split(expand(m.group(2), env), comments=True)
            except ValueError:
                continue
            env[m.group(1)] = vals[0] if vals else ""
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="verl's git directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "verl_example_launches.json"))
    args = ap.parse_args()
    head = git(args.repo, "rev-parse", "HEAD").strip()
    tags = [t for t in git(args.repo, "tag").split() if re.match(r"^v\d+\.\d+(\.\d+)?(\.post\d+)?$", t)]
    launches, seen = [], {}
    for ref in tags + [head]:
        for path in sorted(git(args.repo, "ls-tree", "-r", "--name-only", ref, "examples", "recipe").split()):
            if not path.endswith(".sh"):
                continue
            script = git(args.repo, "show", "%s:%s" % (ref, path))
            got = launch_of(script)
            if got and got["overrides"]:
                key = json.dumps([path, got], sort_keys=True)
                if key in seen:  # the same launch in a later release: one entry, every tag listed
                    seen[key]["refs"].append(ref if ref != head else "HEAD")
                    continue
                seen[key] = dict(got, refs=[ref if ref != head else "HEAD"], path=path)
                launches.append(seen[key])
    doc = {"source": "https://github.com/volcengine/verl examples/**/*.sh and recipe/**/*.sh at each release tag "
                     "and at commit %s (HEAD); only the overrides of their `python3 -m %s` line are kept"
                     % (head, ENTRY),
           "generated_by": "tools/gen_example_launches.py", "launches": launches}
    with open(args.out, "w", encoding="utf-8") as fh:  # one launch per line: a diff shows what changed
        head_doc = json.dumps({k: v for k, v in doc.items() if k != "launches"}, sort_keys=True)
        fh.write(head_doc[:-1] + ', "launches": [\n')
        fh.write(",\n".join(json.dumps(x, sort_keys=True) for x in launches))
        fh.write("\n]}\n")
    print("wrote %d launches (%d overrides, %d distinct) to %s" % (
        len(launches), sum(len(x["overrides"]) for x in launches),
        len({o for x in launches for o in x["overrides"]}), os.path.relpath(args.out, ROOT)))


if __name__ == "__main__":
    main()
