"""packages.bytecode: whether the stack's large packages carry bytecode for the target.

The truth is the target interpreter itself: for every module a distribution's RECORD lists, it
says where it would look for the bytecode (importlib.util.cache_from_source, which follows
sys.pycache_prefix) and whether that file exists. The fix the row gives is run as given, and the
row must then pass.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from envs import _site, real_env

N_MODULES = 60
TRUTH = r"""
import csv, importlib.util, json, os, sys
site, record = sys.argv[1], sys.argv[2]
mods = [os.path.join(site, row[0]) for row in csv.reader(open(record)) if row and row[0].endswith(".py")]
print(json.dumps([len(mods), sum(os.path.exists(importlib.util.cache_from_source(m)) for m in mods)]))
"""

def _venv_with_networkx(base):
    """A venv (no pip) holding a 'networkx' distribution of N_MODULES real modules, installed as a
    wheel installer would lay it out (RECORD lists each file), with no bytecode."""
    venv = os.path.join(str(base), "v")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    site = _site(venv)
    pkg = os.path.join(site, "networkx")
    os.makedirs(pkg)
    lines = []
    for i in range(N_MODULES):
        name = "__init__.py" if i == 0 else "mod,%02d.py" % i if i == 1 else "mod_%02d.py" % i
        with open(os.path.join(pkg, name), "w") as fh:
            fh.write("VALUE = %d\n" % i)
        # a path with a comma is quoted in RECORD (csv)
        lines.append(('"networkx/%s"' if "," in name else "networkx/%s") % name + ",sha256=x,12")
    info = os.path.join(site, "networkx-3.4.2.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: networkx\nVersion: 3.4.2\n")
    lines += ["networkx-3.4.2.dist-info/METADATA,,", "networkx-3.4.2.dist-info/RECORD,,", "../../bin/nx,,"]
    with open(os.path.join(info, "RECORD"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return os.path.join(venv, "bin", "python"), site, os.path.join(info, "RECORD")

def _row(pyz, py, tmp_path, env=None):
    out = str(tmp_path / "r.json")
    p = subprocess.run([sys.executable, pyz, "check", "--stage", "python,packages", "--python", py, "--json", out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    assert os.path.exists(out), p.stdout[-2000:]
    return next(r for r in json.load(open(out))["results"] if r["id"] == "packages.bytecode")

def _truth(py, site, record, env=None):
    got = subprocess.check_output([py, "-c", TRUTH, site, record], universal_newlines=True,
                                  env=dict(os.environ, **(env or {})))
    return json.loads(got)

def _run_fix(fix, env=None, which=0):
    """Run the ``which``-th command the fix gives (0: the first; 1: the read-only alternative)."""
    cmds = re.findall(r"(?:byte-compile them once[^:]*|set it for every process that imports them): (.+?)"
                      r"(?: \(a module written|; when you build|$)", fix)
    cmd = cmds[which].replace(", then ", " && ")
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=300, env=dict(os.environ, **(env or {})))
    assert p.returncode == 0, (cmd, p.stdout)
    return cmd

def test_missing_bytecode_warns_and_its_fix_works(pyz, tmp_path):
    py, site, record = _venv_with_networkx(tmp_path)
    assert _truth(py, site, record) == [N_MODULES, 0]
    r = _row(pyz, py, tmp_path)
    assert r["status"] == "warn", r
    row = r["evidence"]["distributions"][0]
    assert [row["modules"], row["with_bytecode"]] == _truth(py, site, record)
    assert "networkx (%d of %d modules)" % (N_MODULES, N_MODULES) in r["message"]
    cmd = _run_fix(r["fix"])
    assert "-m compileall" in cmd and site in cmd
    assert _truth(py, site, record) == [N_MODULES, N_MODULES]
    r = _row(pyz, py, tmp_path)
    assert r["status"] == "pass", r
    assert [r["evidence"]["distributions"][0][k] for k in ("modules", "with_bytecode")] == [N_MODULES, N_MODULES]

def test_a_pycache_prefix_is_where_bytecode_is_looked_for(pyz, tmp_path):
    """With PYTHONPYCACHEPREFIX set, the interpreter reads bytecode only from that tree: what sits in
    __pycache__ beside the sources does not count, and the fix compiles into the prefix."""
    py, site, record = _venv_with_networkx(tmp_path)
    subprocess.run([py, "-m", "compileall", "-q", site], check=True)
    env = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    assert _truth(py, site, record, env) == [N_MODULES, 0]
    r = _row(pyz, py, tmp_path, env)
    assert r["status"] == "warn" and r["evidence"]["pycache_prefix"] == env["PYTHONPYCACHEPREFIX"], r
    cmd = _run_fix(r["fix"], env)
    assert "-X pycache_prefix=" in cmd and "owner" not in r["fix"]
    assert _truth(py, site, record, env) == [N_MODULES, N_MODULES]
    assert _row(pyz, py, tmp_path, env)["status"] == "pass"

def test_optimized_interpreters_look_for_opt_bytecode(pyz, tmp_path):
    py, site, record = _venv_with_networkx(tmp_path)
    subprocess.run([py, "-m", "compileall", "-q", site], check=True)  # plain .pyc only
    env = {"PYTHONOPTIMIZE": "1"}
    assert _truth(py, site, record, env) == [N_MODULES, 0]
    r = _row(pyz, py, tmp_path, env)
    assert r["status"] == "warn" and r["evidence"]["optimize"] == 1, r

def test_read_only_sources_get_a_prefix_alternative_that_works(tmp_path, monkeypatch, capsys):
    """Where the site directory cannot be written (an image layer), the fix names its owner and
    gives the PYTHONPYCACHEPREFIX way, which works without writing there."""
    from preflight.checks import packages
    from preflight.cli import main

    py, site, record = _venv_with_networkx(tmp_path)
    real_access = os.access
    monkeypatch.setattr(packages.os, "access", lambda p, mode, **kw: False if p == site else real_access(p, mode, **kw))
    out = tmp_path / "r.json"
    main(["check", "--stage", "python,packages", "--python", py, "--json", str(out), "-q"])
    r = next(x for x in json.load(open(str(out)))["results"] if x["id"] == "packages.bytecode")
    assert r["status"] == "warn" and "as the owner of %s" % site in r["fix"], r
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    cmd = _run_fix(r["fix"], env, which=1)
    assert cmd.startswith("export PYTHONPYCACHEPREFIX=$HOME/.cache/pycache && ")
    assert _truth(py, site, record) == [N_MODULES, 0]  # nothing written beside the sources
    env["PYTHONPYCACHEPREFIX"] = str(home / ".cache" / "pycache")
    assert _truth(py, site, record, env) == [N_MODULES, N_MODULES]

@pytest.mark.realenv
def test_a_pip_installed_stack_has_its_bytecode(pyz, tmp_path):
    py = real_env("torch-transformers", ["torch==2.13.0", "transformers==5.9.0"])
    r = _row(pyz, py, tmp_path)
    assert r["status"] == "pass", r
    rows = {x["name"].lower(): x for x in r["evidence"]["distributions"]}
    assert {"torch", "transformers", "sympy", "networkx"} <= set(rows)
    for name in ("torch", "transformers"):
        d = rows[name]
        info = [x for x in os.listdir(d["site"]) if x.lower().startswith(name + "-") and x.endswith(".dist-info")][0]
        assert [d["modules"], d["with_bytecode"]] == _truth(py, d["site"], os.path.join(d["site"], info, "RECORD"))


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "bad-lines"])
def test_hostile_records_neither_block_nor_crash(pyz, tmp_path, kind):
    """A RECORD that is a FIFO or a link to /dev/zero is named and skipped (never waited on, never
    read); lines with NUL bytes, over-long quoted paths or broken quoting are left out."""
    py, site, record = _venv_with_networkx(tmp_path)
    if kind == "fifo":
        os.remove(record)
        os.mkfifo(record)
    elif kind == "dev-zero":
        os.remove(record)
        os.symlink("/dev/zero", record)
    else:
        with open(record, "a") as fh:
            fh.write('networkx/a\x00b.py,,\n"networkx/%s.py",,\n"networkx/open.py,,\n' % ("x" * 200000))
    r = _row(pyz, py, tmp_path)
    if kind == "bad-lines":
        assert r["status"] == "warn" and r["evidence"]["distributions"][0]["modules"] == N_MODULES, r
    else:
        assert r["status"] == "pass" and r["evidence"]["distributions"] == [], r
        assert r["evidence"]["no_record"] == ["networkx (not a regular file (%s))" % (
            "a FIFO" if kind == "fifo" else "a character device")]


def test_relative_pycache_prefix_warns(pyz, tmp_path):
    py, site, record = _venv_with_networkx(tmp_path)
    r = _row(pyz, py, tmp_path, {"PYTHONPYCACHEPREFIX": "rel"})
    assert r["status"] == "warn" and "relative path 'rel'" in r["message"], r
    assert "export PYTHONPYCACHEPREFIX=$HOME/.cache/pycache" in r["fix"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the venv to another user")
def test_another_users_environment_names_its_owner(pyz, tmp_path):
    """root checking a venv whose site-packages is someone else's: its .pth files would run as root,
    so no probe runs it (tests/security/test_attack_foreign_code.py); the bytecode row is skipped
    behind python.interpreter's FAIL. (Before, the bytecode fix named the owner.)"""
    import pwd

    py, site, record = _venv_with_networkx(tmp_path)
    nobody = pwd.getpwnam("nobody")
    for d, dirs, files in os.walk(site):
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
    r = _row(pyz, py, tmp_path)
    assert r["status"] == "skip" and r["caused_by"] == ["python.interpreter"], r


def test_unlistable_bytecode_directories_still_count(tmp_path, monkeypatch):
    """A __pycache__ that can be searched but not listed (mode 711): the interpreter reads the
    files by name, so they count."""
    from preflight.probes import bytecode as bc

    d = tmp_path / "pkg" / "__pycache__"
    d.mkdir(parents=True)
    (d / "m.cpython-311.pyc").write_bytes(b"x" * 20)
    real = os.listdir

    def no_list(p):
        if str(p) == str(d):
            raise PermissionError(13, "Permission denied")
        return real(p)
    monkeypatch.setattr(bc.os, "listdir", no_list)
    paths = [bc.pyc_path(str(tmp_path / "pkg" / n), "cpython-311") for n in ("m.py", "absent.py")]
    assert bc._count_present(paths) == 1


@pytest.mark.parametrize("field,value", [("optimize", "x"), ("optimize", [1]), ("pycache_prefix", 7),
                                         ("cache_tag", 5), ("optimize", True)])
def test_malformed_target_fields_skip_the_scan(field, value):
    from types import SimpleNamespace

    from preflight.probes import bytecode as bc

    info = {"cache_tag": "cpython-311", "pycache_prefix": None, "optimize": 0}
    info[field] = value
    out = bc.scan(info, [SimpleNamespace(name="torch", version="1", location="/nonexistent/t-1.dist-info")])
    assert out["malformed"] == [field] and out["cache_tag"] is None and out["distributions"] == []
