#!/usr/bin/env python3
"""The rules against verl's own dry start-up over verl's example launches (issue 23 item 2).

For one installed verl (``--python``), the launches of tests/data/verl_example_launches.json
stored for ``--ref`` (a release tag, or HEAD) are run through verl's start-up in one target process
(preflight/target/verl_startup.py, batch mode), with their data files and model paths replaced by
tiny local ones (``--inputs``: the ``{"model", "train", "test"}`` of tests/verl_fixtures.py), and
through the rules (the stored defaults of the release composed by the vendored Hydra, then
:func:`preflight.launch.rules.evaluate` without machine facts). Prints, per release: composed,
ran, accepted, failed (by kind and verl's message), rule FAILs where verl accepts (false positives
when the rule names a check before Ray), and the disagreements; ``--json`` writes them.

Usage: python3 tools/verl_differential.py --python ENV/bin/python --ref v0.6.1 --inputs inputs.json
"""

import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from preflight.launch.compose import compose_stored  # noqa: E402
from preflight.launch.overrides import parse_launch  # noqa: E402
from preflight.launch.rules import evaluate  # noqa: E402
from preflight.launch.startup import classify, compare, run_startup_batch  # noqa: E402

#: Keys whose values are local inputs: replaced with the tiny model and data files.
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "critic.model.tokenizer_path",
              "reward_model.model.path", "reward_model.model.input_tokenizer", "reward.reward_model.model_path",
              "actor_rollout_ref.model.tokenizer_path")
DATA_KEYS = {"data.train_files": "train", "data.val_files": "test"}


def localise(overrides, inputs):
    """The overrides with model paths and data files pointing at ``inputs``; trainer.logger to
    console (a logger back-end is not the start-up's business)."""
    out = []
    for o in overrides:
        k, eq, _v = o.partition("=")
        key = k.lstrip("+~")
        if eq and key in MODEL_KEYS:
            o = "%s=%s" % (k, inputs["model"])
        elif eq and key in DATA_KEYS:
            o = "%s=%s" % (k, inputs[DATA_KEYS[key]])
        out.append(o)
    keys = {o.partition("=")[0].lstrip("+~") for o in out}
    for key, which in DATA_KEYS.items():
        if key not in keys:
            out.append("%s=%s" % (key, inputs[which]))
    if "actor_rollout_ref.model.path" not in keys:
        out.append("actor_rollout_ref.model.path=%s" % inputs["model"])
    return out


def launches_for(ref):
    with open(os.path.join(ROOT, "tests", "data", "verl_example_launches.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    return [x for x in doc["launches"] if ref in x["refs"] and not x.get("config_path")]


def differential(python, ref, inputs, release, limit=None, timeout=600.0):
    """``{"release", "ref", "composed", "ran", "accepted", "failed", "failures", "rule_fails_verl_accepts",
    "disagreements", "cases"}`` for the launches of ``ref`` (at most ``limit``)."""
    cases = launches_for(ref)[:limit]
    by_name = collections.OrderedDict()
    for i, x in enumerate(cases):
        by_name.setdefault(x.get("config_name") or "ppo_trainer", []).append(i)
    results = [None] * len(cases)
    for name, idx in by_name.items():
        sts = run_startup_batch(python, [localise(cases[i]["overrides"], inputs) for i in idx], config_name=name,
                                timeout=timeout)
        for i, st in zip(idx, sts):
            results[i] = st
    report = {"release": release, "ref": ref, "composed": 0, "ran": 0, "accepted": 0, "failed": 0,
              "failures": collections.Counter(), "rule_fails_verl_accepts": [], "disagreements": [], "cases": []}
    for x, st in zip(cases, results):
        ovs = localise(x["overrides"], inputs)
        row = {"path": x["path"], "config_name": x.get("config_name")}
        if st is None or not st.ran:
            row["verl"] = "not run"
            report["cases"].append(row)
            continue
        report["ran"] += 1
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
        comp = compose_stored(parse_launch(ovs), release=release)
        if comp.error is not None:
            row["rules"] = "compose: %s" % comp.error.message[:160]
            report["cases"].append(row)
            continue
        _plan, found, _note = evaluate(comp.get, release)
        fails = [f for f in found if f.status == "fail" and f.rule not in ("fix_line",)]
        row["rules"] = [f.id for f in fails]
        if st.accepted and fails:
            report["rule_fails_verl_accepts"].append({"path": x["path"], "rules": [(f.id, f.message[:160], f.where)
                                                                                    for f in fails]})
        dis = compare(found, st)
        if dis:
            report["disagreements"].append({"path": x["path"], "disagreements": dis})
        report["cases"].append(row)
    report["failures"] = dict(report["failures"])
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--ref", required=True, help="the tag of verl_example_launches.json (v0.6.1, HEAD...)")
    ap.add_argument("--release", help="the installed release (default: from the ref)")
    ap.add_argument("--inputs", required=True, help="JSON {model, train, test} (tests/verl_fixtures.py)")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json")
    args = ap.parse_args()
    with open(args.inputs) as fh:
        inputs = json.load(fh)
    release = args.release or args.ref.lstrip("v")
    rep = differential(args.python, args.ref, inputs, release, args.limit)
    print("verl %s, launches of %s: %d ran, %d composed, %d accepted, %d failed" % (
        release, args.ref, rep["ran"], rep["composed"], rep["accepted"], rep["failed"]))
    for why, n in sorted(rep["failures"].items(), key=lambda kv: -kv[1]):
        print("  failed x%d: %s" % (n, why))
    print("rule FAILs on launches verl accepts: %d" % len(rep["rule_fails_verl_accepts"]))
    for r in rep["rule_fails_verl_accepts"]:
        print("  %s: %s" % (r["path"], "; ".join("%s (%s)" % (i, w) for i, _m, w in r["rules"])))
    print("disagreements (pre-Ray rules contradicted, or verl failures no rule flags): %d" % len(rep["disagreements"]))
    for d in rep["disagreements"]:
        for x in d["disagreements"]:
            print("  %s: %s | rules: %s | verl: %s" % (d["path"], x["rule"], x["rules"][:120], x["verl"][:160]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rep, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
