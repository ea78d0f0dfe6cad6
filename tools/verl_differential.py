#!/usr/bin/env python3
"""The rules against verl's own dry start-up over verl's example launches (issue 23 item 2).

For one installed verl (``--python``), the launches of tests/data/verl_example_launches.json
stored for ``--ref`` (a release tag, or HEAD) are run through verl's start-up in one target process
(preflight/target/verl_startup.py, batch mode), with their data files and model paths replaced by
tiny local ones (``--inputs``: the ``{"model", "train", "test"}`` of tests/verl_fixtures.py), and
through the rules (the stored defaults of the release composed by the vendored Hydra, then
:func:`preflight.launch.rules.evaluate` without machine facts). Prints, per release: composed,
ran, accepted, failed (by kind and verl's message), rule FAILs where verl accepts (each marked
before Ray, a false positive, or not: the rule's ``where`` names a later stage), the override keys
no source file of that verl reads (config.verl.ignored), and the disagreements; ``--json`` writes
them.

Usage: python3 tools/verl_differential.py --python ENV/bin/python --ref v0.6.1 --inputs inputs.json \
           [--repo /work/.mirror/volcengine+verl/repo] [--json out.json]
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.compose import compose_stored  # noqa: E402
from preflight.launch.overrides import parse_launch  # noqa: E402
from preflight.launch.rules import evaluate  # noqa: E402
from preflight.launch.startup import classify, compare, run_startup_batch  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_example_launches import CMD  # noqa: E402  (the extractor's stand-in for $(command))

#: The extractor's stand-in for a variable the script reads unset (``$PWD``...): beside CMD.
UNSET = os.path.dirname(CMD) + "/%s"

#: Keys whose values are local inputs: replaced with the tiny model and data files.
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "critic.model.tokenizer_path",
              "reward_model.model.path", "reward_model.model.input_tokenizer", "reward.reward_model.model_path",
              "actor_rollout_ref.model.tokenizer_path")
DATA_KEYS = {"data.train_files": "train", "data.val_files": "test"}


#: An override value naming a file of verl's repository (the scripts run from its root): relative
#: (``recipe/x.py``, ``./recipe/x.py``), or under the extractor's stand-in for ``$(pwd)`` (CMD, which
#: stands for every ``$(command)``; verl's scripts use it as ``PROJECT_DIR="$(pwd)"``) or for ``$PWD``.
REPO_FILE = re.compile(r"^(?:\./|(?:%s|%s)/)?((?:recipe|examples)/[\w./-]+\.(?:py|yaml|yml|json|jsonl))$" % (
    re.escape(CMD), re.escape(UNSET % "PWD")))


def head_commit():
    """The commit the stored launches call HEAD (tests/data/verl_example_launches.json's source)."""
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        m = re.search(r"commit ([0-9a-f]{40})", json.load(fh)["source"])
    return m.group(1) if m else "HEAD"


def repo_file(value, repo):
    """The absolute path of a copy of the repository file ``value`` names, taken from ``repo``
    (``{"git_dir", "ref", "out"}``: verl's git directory, the tag or commit, where copies go), or
    None when ``value`` names none or the tag lacks it."""
    m = REPO_FILE.match(value.strip("'\""))
    if not m or not repo:
        return None
    dst = os.path.join(repo["out"], m.group(1))
    if not os.path.exists(dst):
        ref = head_commit() if repo["ref"] == "HEAD" else repo["ref"]
        p = subprocess.run(["git", "--git-dir", repo["git_dir"], "show", "%s:%s" % (ref, m.group(1))],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.returncode != 0:
            return None
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as fh:
            fh.write(p.stdout)
    return dst


def localise(overrides, inputs, repo=None):
    """The overrides with model paths and data files pointing at ``inputs``, and files of verl's
    repository (``recipe/...py``: a custom reward function or dataset class, as the scripts name
    them from the repository's root) at copies taken from ``repo`` (see :func:`repo_file`)."""
    out = []
    for o in overrides:
        k, eq, v = o.partition("=")
        key = k.lstrip("+~")
        if eq and key in MODEL_KEYS:
            o = "%s=%s" % (k, inputs["model"])
        elif eq and key in DATA_KEYS:
            o = "%s=%s" % (k, inputs[DATA_KEYS[key]])
        elif eq and repo_file(v, repo):
            o = "%s=%s" % (k, repo_file(v, repo))
        out.append(o)
    keys = {o.partition("=")[0].lstrip("+~") for o in out}
    for key, which in DATA_KEYS.items():
        if key not in keys:
            out.append("%s=%s" % (key, inputs[which]))
    if "actor_rollout_ref.model.path" not in keys:
        out.append("actor_rollout_ref.model.path=%s" % inputs["model"])
    return out


#: ``--config-path`` values that name verl's own config directory (relative to main_ppo.py, as
#: Hydra reads them): these launches run with their ``--config-name`` there.
VERL_CONFIG_PATHS = ("config", "./config")


def config_name_of(x):
    """The launch's config name in verl's own config directory (``.yaml`` dropped)."""
    name = x.get("config_name") or "ppo_trainer"
    return name[:-5] if name.endswith(".yaml") else name


def launches_for(ref, own_dirs=False):
    """The stored example launches of ``ref`` that compose from verl's own config directory (no
    ``--config-path``, or one naming verl's own); ``own_dirs=True``: the others, whose config
    directory is the example's own (not in the installed package; not run)."""
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    out = []
    for x in doc["launches"]:
        if ref not in x["refs"]:
            continue
        verl_dir = not x.get("config_path") or x["config_path"] in VERL_CONFIG_PATHS
        if verl_dir != own_dirs:
            out.append(x)
    return out


def differential(python, ref, inputs, release, limit=None, timeout=600.0, repo=None):
    """``{"release", "ref", "composed", "ran", "accepted", "failed", "failures", "rule_fails_verl_accepts",
    "disagreements", "ignored", "ignored_launches", "cases"}`` for the launches of ``ref`` (at most
    ``limit``); ``timeout``: seconds for the target process, plus 10 s per launch; ``repo``: see
    :func:`repo_file` (files the scripts name from verl's repository root)."""
    cases = launches_for(ref)[:limit]
    by_name = collections.OrderedDict()
    for i, x in enumerate(cases):
        by_name.setdefault(config_name_of(x), []).append(i)
    results = [None] * len(cases)
    for name, idx in by_name.items():
        sts = run_startup_batch(python, [localise(cases[i]["overrides"], inputs, repo) for i in idx], config_name=name,
                                timeout=timeout + 10.0 * len(idx))
        for i, st in zip(idx, sts):
            results[i] = st
    report = {"release": release, "ref": ref, "composed": 0, "ran": 0, "accepted": 0, "failed": 0,
              "failures": collections.Counter(), "rule_fails_verl_accepts": [], "disagreements": [], "cases": [],
              "ignored": collections.Counter(), "ignored_launches": 0,
              "own_config_dir": len(launches_for(ref, own_dirs=True))}
    for x, st in zip(cases, results):
        ovs = localise(x["overrides"], inputs, repo)
        row = {"path": x["path"], "config_name": config_name_of(x)}
        if st is None or not st.ran:
            row["verl"] = "not run"
            report["cases"].append(row)
            continue
        report["ran"] += 1
        keys = [k["override"] for k in (st.ignored or {}).get("keys") or []]
        if keys:
            row["ignored"] = keys
            report["ignored_launches"] += 1
            report["ignored"].update(keys)
        if st.error is None or st.error.get("step") != "compose":
            report["composed"] += 1
        if st.accepted:
            report["accepted"] += 1
            row["verl"] = "accepted"
        else:
            report["failed"] += 1
            kind, _fix = classify(st.error or {})
            msg = str((st.error or {}).get("message") or "").strip().splitlines()
            why = "%s/%s: %s" % (kind, (st.error or {}).get("kind"), (msg[0] if msg else "")[:160])
            report["failures"][why] += 1
            row["verl"] = why
        comp = compose_stored(parse_launch(["--config-name", config_name_of(x)] + ovs), release=release)
        if comp.error is not None:
            row["rules"] = "compose: %s" % comp.error.message[:160]
            report["cases"].append(row)
            continue
        _plan, found, _note = evaluate(comp.get, release)
        fails = [f for f in found if f.status == "fail" and f.rule not in ("fix_line",)]
        row["rules"] = [f.id for f in fails]
        dis = compare(found, st)
        if st.accepted and fails:  # before_ray: the rule says verl stops at a step its start-up ran (compare)
            pre = {d["id"] for d in dis}
            report["rule_fails_verl_accepts"].append({"path": x["path"], "rules": [
                (f.id, f.message[:160], f.where, f.id in pre) for f in fails]})
        if dis:
            report["disagreements"].append({"path": x["path"], "disagreements": dis})
        report["cases"].append(row)
    report["failures"] = dict(report["failures"])
    report["ignored"] = dict(report["ignored"])
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--ref", required=True, help="the tag of verl_example_launches.json (v0.6.1, HEAD...)")
    ap.add_argument("--release", help="the installed release (default: from the ref)")
    ap.add_argument("--inputs", required=True, help="JSON {model, train, test} (tests/verl_fixtures.py tiny_inputs); "
                    "the train file needs at least as many rows as the examples' largest data.train_batch_size "
                    "(e.g. 4096), or verl refuses them with an empty train dataloader")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json")
    ap.add_argument("--repo", help="verl's git directory (the fetch mirror): files the scripts name from the "
                                   "repository root (recipe/...py) are taken from it at --ref")
    args = ap.parse_args()
    with open(args.inputs) as fh:
        inputs = json.load(fh)
    release = args.release or args.ref.lstrip("v")
    repo = None
    if args.repo:
        repo = {"git_dir": args.repo, "ref": args.ref, "out": os.path.join(os.path.dirname(os.path.abspath(
            args.inputs)), "repo-" + args.ref)}
    rep = differential(args.python, args.ref, inputs, release, args.limit, repo=repo)
    print("verl %s, launches of %s: %d ran, %d composed, %d accepted, %d failed (%d more use the example's own "
          "config directory: not run)" % (release, args.ref, rep["ran"], rep["composed"], rep["accepted"], rep["failed"],
                                         rep["own_config_dir"]))
    for why, n in sorted(rep["failures"].items(), key=lambda kv: -kv[1]):
        print("  failed x%d: %s" % (n, why))
    pre = sum(1 for r in rep["rule_fails_verl_accepts"] if any(b for _i, _m, _w, b in r["rules"]))
    print("rule FAILs on launches verl accepts: %d (%d before Ray: false positives; the others name a later stage "
          "than the dry start-up's stop point)" % (len(rep["rule_fails_verl_accepts"]), pre))
    for r in rep["rule_fails_verl_accepts"]:
        print("  %s: %s" % (r["path"], "; ".join("%s%s (%s)" % (i, " [before Ray]" if b else "", w)
                                                 for i, _m, w, b in r["rules"])))
    print("launches with override keys verl %s never reads: %d" % (release, rep["ignored_launches"]))
    for key, n in sorted(rep["ignored"].items(), key=lambda kv: -kv[1]):
        print("  x%d: %s" % (n, key))
    print("disagreements (pre-Ray rules contradicted, or verl failures no rule flags): %d" % len(rep["disagreements"]))
    for d in rep["disagreements"]:
        for x in d["disagreements"]:
            print("  %s: %s | rules: %s | verl: %s" % (d["path"], x["rule"], x["rules"][:120], x["verl"][:160]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rep, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
