"""Unknown commands and arguments name the program and subcommand as they were run."""

import difflib
import subprocess
import sys

import pytest

from preflight.commands import COMMANDS


def _run(pyz, *args):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


def _one_line(p):
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("typo", ["chek", "resolv", "imag", "wheelhose", "clustr"])
def test_unknown_command_suggests_the_nearest(pyz, typo):
    near = difflib.get_close_matches(typo, [m.NAME for m in COMMANDS], n=1)
    assert near  # the independent truth: difflib over the registered command names
    line = _one_line(_run(pyz, typo))
    assert "unknown command '%s' (did you mean '%s'?" % (typo, near[0]) in line
    assert "see '%s %s --help')" % (sys.executable, pyz) in line  # the tool as it was run
    assert "unrecognized arguments" not in line


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("args,sub,bad", [
    (["check", "--bogus"], "check", "--bogus"),
    (["--bogus"], "check", "--bogus"),  # check is the default command
    (["data", "x", "-v"], "data", "-v"),
    (["resolve", "--nope"], "resolve", "--nope"),
])
def test_unknown_argument_names_the_subcommand(pyz, args, sub, bad):
    line = _one_line(_run(pyz, *args))
    how = "%s %s" % (sys.executable, pyz)
    assert "unrecognized arguments: %s" % bad in line
    assert line.startswith("error: %s %s: " % (how, sub)), line
    assert "(see '%s %s --help')" % (how, sub) in line


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("given", ["v0.9.1", "0.9", "V0.7.0", "0.9.1+local"])
def test_a_verl_release_spelled_another_way_is_the_matrix_release(pyz, given):
    """New-user review: ``--verl v0.9.1`` was echoed unnormalised and ``0.9`` shown as a release of
    its own. The truth: packaging's PEP 440 equality against the matrix's own release names."""
    from packaging.version import Version

    from preflight.matrix import load

    want = [v for v in load().verl_versions() if Version(v) == Version(Version(given).public)]
    assert len(want) == 1
    p = _run(pyz, "resolve", "--verl", given, "--no-probe", "--json", "-")
    assert p.returncode in (0, 1), p.stderr
    import json

    doc = json.loads(p.stdout)
    assert doc["verl"]["version"] == want[0], doc["verl"]


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("args,needle", [
    (["resolve", "--verl", "banana"], "argument --verl: 'banana' is not a version"),
    (["spec", "--torch-index", "notaurl", "-o", "x"], "argument --torch-index: not an index URL"),
    (["spec", "--torch-index", "ftp://host/simple", "-o", "x"], "argument --torch-index: not an index URL"),
    (["spec", "--torch-index", "https://", "-o", "x"], "argument --torch-index: not an index URL"),
])
def test_a_value_of_the_wrong_kind_is_one_line_naming_the_option(pyz, args, needle):
    assert needle in _one_line(_run(pyz, *args))
