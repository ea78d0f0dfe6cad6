"""Mechanism "bounded text for every regex on user text" (F7): every signature regex runs only on
text whose lines are cut to ``diagnose.LINE_CAP`` (``diagnose.bounded``), and every pattern that
explain, diagnose and redact apply to user text is tried here against adversarial inputs (100 KB
runs of each character the pattern names, and of its literal text repeated) under a time bound, so
a future backtracking (quadratic) pattern fails the suite, naming itself."""

import json
import os
import subprocess
import sys
import time

import pytest

from preflight.diagnose import LINE_CAP, bounded
from preflight.explain import explain_text

HANG = pytest.mark.fault("HANG")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: each search of a 100 KB input: a linear pattern needs milliseconds, a quadratic one minutes
PER_SEARCH_S = 0.25

_CHILD = r'''
import json, re, sys, time
try:
    import re._parser as sp
    from re._constants import LITERAL, NOT_LITERAL, IN, RANGE, CATEGORY, ANY, NEGATE
except ImportError:
    import sre_parse as sp
    from sre_constants import LITERAL, NOT_LITERAL, IN, RANGE, CATEGORY, ANY, NEGATE
sys.path.insert(0, sys.argv[1])
from preflight import matrix as matrix_mod, redact
from preflight.explain import events, classify

N = 100000
CAT = {"CATEGORY_DIGIT": "7", "CATEGORY_NOT_DIGIT": "a", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "a",
       "CATEGORY_WORD": "a", "CATEGORY_NOT_WORD": "-"}

def chars(tree, out, lits):
    for op, av in tree:
        name = str(op)
        if op is LITERAL:
            out.add(chr(av)); lits.append(chr(av))
        elif op is NOT_LITERAL:
            out.add("a" if av != ord("a") else "b")
        elif op is ANY:
            out.add("a")
        elif op is IN:
            for iop, iav in av:
                if iop is LITERAL:
                    out.add(chr(iav))
                elif iop is RANGE:
                    out.update((chr(iav[0]), chr(iav[1])))
                elif iop is CATEGORY:
                    out.add(CAT.get(str(iav), "a"))
                elif iop is NEGATE:
                    out.add("\x01")
            lits.append(min(x for x in out) if out else "a")
        elif isinstance(av, (list, tuple)):
            for sub in av:
                if isinstance(sub, sp.SubPattern):
                    chars(sub, out, lits)
                elif isinstance(sub, (list, tuple)):
                    for s2 in sub:
                        if isinstance(s2, sp.SubPattern):
                            chars(s2, out, lits)

def inputs(rx):
    out, lits = set(), []
    chars(sp.parse(rx.pattern, rx.flags), out, lits)
    lit = "".join(lits) or "a"
    yield "literal", (lit * (N // len(lit) + 1))[:N]
    yield "literal-no-end", (lit[:-1] * (N // max(1, len(lit) - 1) + 1))[:N]
    for c in sorted(out):
        yield repr(c), c * N

GROUP, _, PART = sys.argv[2].partition(":")
pats = []  # (id, compiled, how it is applied to user text: search or match)
sig = matrix_mod.load().curated["signatures"]
if GROUP in ("signature", "wrapper", "explain"):
    rows = sig.get(GROUP, [])
    if PART:  # a long table in slices (each test stays under 5 s)
        k, n = map(int, PART.split("/"))
        rows = rows[k::n]
    for r in rows:
        pats.append(("signatures.toml %s %s" % (GROUP, r["id"]), re.compile(r["pattern"], re.M), "search"))
else:
    mod = {"events": events, "classify": classify, "redact": redact}[GROUP]
    src = open(mod.__file__).read()
    named = sorted(vars(mod).items()) + [("_SHAPES[%d]" % i, rx) for i, (_, rx) in enumerate(
        getattr(mod, "_SHAPES", ()))]
    for name, val in named:
        if isinstance(val, re.Pattern):
            # a pattern only ever matched at one position (.match/.fullmatch) is tried that way
            used = set(re.findall(r"\b%s\.(\w+)\(" % re.escape(name), src))
            how = "match" if used and used <= {"match", "fullmatch"} else "search"
            pats.append(("%s.%s" % (mod.__name__, name), val, how))
for pid, rx, how in pats:
    for iname, text in inputs(rx):
        print("start", json.dumps([pid, iname]), flush=True)
        t = time.process_time()  # CPU time: the bound holds on a loaded machine too
        (rx.match if how == "match" else rx.search)(text)
        print("took", json.dumps([pid, iname, time.process_time() - t]), flush=True)
print("patterns", len(pats), flush=True)
'''


def _run_all(group, timeout):
    p = subprocess.Popen([sys.executable, "-c", _CHILD, ROOT, group], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out, err


#: each group with the fewest patterns it must hold (so a renamed table cannot empty the check)
GROUPS = {"signature": 10, "wrapper": 3, "explain:0/3": 12, "explain:1/3": 12, "explain:2/3": 12, "events": 5,
          "classify": 1, "redact": 20}


@HANG
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_regex_on_user_text_is_linear_on_adversarial_input(group):
    rc, out, err = _run_all(group, timeout=120)  # a hang guard only: each search is judged by its CPU time
    lines = out.splitlines()
    assert lines, err
    last = lines[-1]
    assert rc == 0 and last.startswith("patterns"), "still searching %s after the time limit\n%s" % (last, err[-2000:])
    assert int(last.split()[1]) >= GROUPS[group]
    slow = [json.loads(x[5:]) for x in lines if x.startswith("took ")]
    slow = [s for s in slow if s[2] > PER_SEARCH_S]
    assert not slow, "patterns that backtrack on 100 KB of their own characters: %s" % slow


def test_the_suite_catches_a_quadratic_pattern():
    """The check above can fail: the old dataclass-unexpected-kw pattern, on a 20 KB line."""
    import re

    old = re.compile(r"(?P<cls>[A-Za-z_][A-Za-z0-9_]*Config)\.__init__\(\)")
    t = time.process_time()
    old.search("x" * 20000)
    quad = time.process_time() - t
    t = time.process_time()
    old.search("x" * 2000)
    small = time.process_time() - t
    assert quad > 20 * small  # 10x the text, ~100x the time


@HANG
@pytest.mark.parametrize("line", [b"x" * 200000, b"Config" * 40000, b"a_" * 100000, b"9" * 200000,
                                  b"ValueError: " + b"x" * 2000000, b"File \"" + b"a" * 200000],
                         ids=["x-200k", "Config-repeated", "word-chars", "digits", "exception-2MB", "frame"])
def test_explain_of_one_long_line_is_quick(line, matrix):
    t = time.process_time()  # CPU time: the bound holds on a loaded machine too
    explain_text(line.decode(), matrix)
    assert time.process_time() - t < 3


@HANG
def test_explain_cli_of_a_200k_line_log(tmp_path):
    log = tmp_path / "one-line.log"
    log.write_bytes(b"x" * 200000)
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-m", "preflight", "explain", str(log)], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime  # load-proof, unlike wall time
    assert cpu < 5 and "Traceback" not in p.stderr, (cpu, p.stderr)


def test_bounded_cuts_every_line_and_keeps_the_tail():
    text = "\n".join(["a" * 10000] * 300 + ["ValueError: end"])
    b = bounded(text)
    assert max(len(x) for x in b.split("\n")) == LINE_CAP
    assert b.endswith("ValueError: end") and b.count("\n") == 255
    assert bounded("short") == "short"


def test_a_real_error_after_a_long_line_is_still_found(matrix):
    log = "x" * 100000 + "\nTypeError: FSDPConfig.__init__() got an unexpected keyword argument 'grad_offload'\n"
    ex = explain_text(log, matrix)
    assert ex.id == "dataclass-unexpected-kw" and ex.groups.get("key") == "grad_offload"
