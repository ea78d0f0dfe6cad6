"""preflight wheelhouse: a real lock (pip's resolver) for a small stack with one binary wheel,
its wheelhouse downloaded by pip, split, reassembled, installed into a fresh venv with no index
reachable; corrupt and missing files refused before anything is installed; completeness checked
by pip offline and by the wheels' metadata, which must agree.

Needs the package index once: the lock and the downloads are cached under
~/.cache/verl-preflight (the lock text keyed by its inputs; pip download skips files present).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from envs import real_env
from preflight.cli import main
from preflight.errors import UsageError
from preflight.outputs import wheelhouse as wh
from preflight.outputs.lock import render_lock, resolve_lock

pytestmark = pytest.mark.realenv

PY = "%d.%d" % sys.version_info[:2]
TOP = ["jinja2==3.1.4", "six==1.16.0"]  # jinja2 brings markupsafe: a binary (cp311 manylinux) wheel
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "verl-preflight", "test-wheelhouse")


def _offline_env(monkeypatch):
    """pip can reach no index: an unroutable index URL, no config file, no find-links."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def lock_file():
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, "small-%s.lock" % PY)
    if not os.path.exists(path):
        res = resolve_lock(TOP, PY, pip_python=sys.executable)
        with open(path + ".tmp", "w") as fh:
            fh.write(render_lock(res, ["test lock: %s" % " ".join(TOP)]))
        os.replace(path + ".tmp", path)
    return path


@pytest.fixture(scope="module")
def built(lock_file, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("wh") / "wh")
    m = wh.build(lock_file, out, PY, cache=os.path.join(CACHE, "dl"))
    return out, m


def _lock_hashes(path):
    return {e.key: set(e.hashes) for e in wh.read_lock(path)}


def test_build_matches_lock(built, lock_file):
    out, m = built
    hashes = _lock_hashes(lock_file)
    assert {r["key"] for r in m["wheels"]} == set(hashes) == {"jinja2", "markupsafe", "six"}
    for r in m["wheels"]:
        path = os.path.join(out, r["file"])
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        assert digest == r["sha256"] and digest in hashes[r["key"]]  # pip's report is the independent truth
        assert r["size"] == os.path.getsize(path) and r["file"].endswith(".whl")
        assert r["lock_line"].startswith("%s==" % r["name"])
        index = open(os.path.join(out, "simple", r["key"], "index.html")).read()
        assert os.path.basename(r["file"]) in index and r["sha256"] in index
    assert any("manylinux" in r["file"] for r in m["wheels"])  # the binary one
    assert wh.verify(out)[1] == []


def test_split_reassemble_install_offline(built, tmp_path, monkeypatch, lock_file):
    out, m = built
    parts = str(tmp_path / "parts")
    doc = wh.split(out, parts, 64 * 1024)
    assert len(doc["parts"]) >= 3 and all(p["size"] <= 64 * 1024 for p in doc["parts"])
    assert sum(p["size"] for p in doc["parts"]) == doc["size"]
    _offline_env(monkeypatch)
    prefix = str(tmp_path / "venv")
    rc = main(["install", "--wheelhouse", parts, "--prefix", prefix, "--no-check"])
    assert rc == 0
    py = os.path.join(prefix, "bin", "python")
    got = subprocess.check_output([py, "-c", "import jinja2, markupsafe, six, json; print(json.dumps("
                                   "[jinja2.__version__, markupsafe.__version__, six.__version__]))"],
                                  universal_newlines=True)
    want = {e.key: e.version for e in wh.read_lock(lock_file)}
    assert json.loads(got) == [want["jinja2"], want["markupsafe"], want["six"]]
    # the wheelhouse is complete for that venv: pip offline and the metadata agree
    ans = wh.check_complete(parts, py)
    assert ans["complete"] and ans["missing"] == [] and ans["would_install"] == []


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_installed_modules_are_byte_compiled(built, tmp_path, monkeypatch, tool):
    """Both installers leave bytecode beside every installed module: the probes write none, so
    without it each check of a cold node compiles the whole stack again. The truth is the venv's
    own interpreter (importlib.util.cache_from_source of each module it imports)."""
    out, _ = built
    _offline_env(monkeypatch)
    if tool == "uv":  # named by $UV, as spec honours it (not on PATH)
        py = real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])
        monkeypatch.setenv("UV", os.path.join(os.path.dirname(py), "uv"))
        monkeypatch.setenv("UV_NO_CACHE", "1")
    prefix = str(tmp_path / "venv")
    rc = main(["install", "--wheelhouse", out, "--prefix", prefix, "--no-check"] + (["--uv"] if tool == "uv" else []))
    assert rc == 0
    with open(os.path.join(prefix, ".verl-preflight-installed")) as fh:
        assert json.load(fh)["tool"] == tool
    py = os.path.join(prefix, "bin", "python")
    code = ("import importlib.util, json, os, jinja2, jinja2.compiler, markupsafe, six\n"
            "mods = [jinja2, jinja2.compiler, markupsafe, six]\n"
            "print(json.dumps({m.__name__: os.path.exists(importlib.util.cache_from_source(m.__file__)) "
            "for m in mods}))")
    got = json.loads(subprocess.check_output([py, "-B", "-c", code], universal_newlines=True))
    assert got == {"jinja2": True, "jinja2.compiler": True, "markupsafe": True, "six": True}


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_a_resumed_install_finishes_the_bytecode(built, tmp_path, monkeypatch, tool):
    """An install stopped after the packages landed but before their bytecode did: the installer
    skips them on resume, so the resume compiles the prefix itself."""
    from preflight.outputs.install import INCOMPLETE, INSTALLED

    out, _ = built
    _offline_env(monkeypatch)
    extra = []
    if tool == "uv":
        py = real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])
        monkeypatch.setenv("PATH", os.path.dirname(py) + os.pathsep + os.environ.get("PATH", ""))
        monkeypatch.setenv("UV_NO_CACHE", "1")
        extra = ["--uv"]
    prefix = str(tmp_path / "venv")
    args = ["install", "--wheelhouse", out, "--prefix", prefix, "--no-check"] + extra
    assert main(args) == 0
    for d, dirs, _files in os.walk(os.path.join(prefix, "lib")):
        for x in [x for x in dirs if x == "__pycache__"]:
            shutil.rmtree(os.path.join(d, x))
    os.remove(os.path.join(prefix, INSTALLED))
    with open(os.path.join(prefix, INCOMPLETE), "w") as fh:
        fh.write("{}")
    assert main(args) == 0
    py = os.path.join(prefix, "bin", "python")
    code = ("import importlib.util, json, os, jinja2, jinja2.compiler, six\n"
            "print(json.dumps([os.path.exists(importlib.util.cache_from_source(m.__file__)) "
            "for m in (jinja2, jinja2.compiler, six)]))")
    assert json.loads(subprocess.check_output([py, "-B", "-c", code], universal_newlines=True)) == [True] * 3


def test_corrupt_part_refused_nothing_installed(built, tmp_path, monkeypatch, capsys):
    out, _ = built
    parts = str(tmp_path / "parts")
    doc = wh.split(out, parts, 64 * 1024)
    victim = os.path.join(parts, doc["parts"][1]["file"])
    with open(victim, "r+b") as fh:
        fh.seek(100)
        b = fh.read(1)
        fh.seek(100)
        fh.write(bytes([b[0] ^ 0xFF]))
    _offline_env(monkeypatch)
    prefix = str(tmp_path / "venv")
    assert main(["install", "--wheelhouse", parts, "--prefix", prefix, "--no-check"]) == 2
    err = capsys.readouterr().err
    assert doc["parts"][1]["file"] in err and "corrupt" in err and "nothing was installed" in err
    assert not os.path.exists(prefix)
    os.remove(victim)
    assert main(["wheelhouse", "verify", parts]) == 2
    assert "%s is missing" % doc["parts"][1]["file"] in capsys.readouterr().err


def test_missing_wheel_refused_nothing_installed(built, tmp_path, monkeypatch, capsys):
    out, m = built
    copy = str(tmp_path / "wh")
    shutil.copytree(out, copy)
    row = next(r for r in m["wheels"] if r["key"] == "markupsafe")
    os.remove(os.path.join(copy, row["file"]))
    _offline_env(monkeypatch)
    prefix = str(tmp_path / "venv")
    assert main(["install", "--wheelhouse", copy, "--prefix", prefix, "--no-check"]) == 2
    err = capsys.readouterr().err
    assert "MarkupSafe==%s" % row["version"] in err or "markupsafe==%s" % row["version"] in err.lower()
    assert "missing" in err and not os.path.exists(prefix)


def test_check_names_missing_and_requirer(lock_file, tmp_path):
    out = str(tmp_path / "wh")
    m = wh.build(lock_file, out, PY, omit=[("markupsafe", "test: left out")], cache=os.path.join(CACHE, "dl"))
    assert [o["name"].lower() for o in m["omitted"]] == ["markupsafe"]
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    ans = wh.check_complete(out, os.path.join(venv, "bin", "python"))
    assert not ans["complete"]
    assert "markupsafe" in (ans["pip_error"] or "").lower()  # pip's own verdict names it
    assert [r["name"] for r in ans["missing"]] == ["markupsafe"]  # the metadata walk agrees
    assert ans["missing"][0]["required_by"][0].startswith("jinja2 ")
    assert ans["missing"][0]["omitted"].endswith("test: left out")


def test_check_against_a_venv_without_pip(built, lock_file, tmp_path):
    """A venv made by uv has no pip: this interpreter's pip resolves for it (--python), and gives the
    same verdicts as for a venv with pip."""
    out, _ = built
    venv = str(tmp_path / "nopip")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    ans = wh.check_complete(out, py)
    assert ans["complete"] and ans["missing"] == [] and ans["pip_error"] is None, ans
    assert sorted(x.split("==")[0].lower() for x in ans["would_install"]) == ["jinja2", "markupsafe", "six"]
    part = str(tmp_path / "wh")
    wh.build(lock_file, part, PY, omit=[("markupsafe", "test: left out")], cache=os.path.join(CACHE, "dl"))
    ans = wh.check_complete(part, py)
    assert not ans["complete"] and "markupsafe" in (ans["pip_error"] or "").lower()


def test_sdist_only_named_before_download(tmp_path):
    lock = tmp_path / "sdist.lock"
    lock.write_text("six==1.16.0\nantlr4-python3-runtime==4.9.3\n")  # antlr4 4.9.3: a source distribution only
    cache = str(tmp_path / "cache")
    with pytest.raises(UsageError) as exc:
        wh.build(str(lock), str(tmp_path / "wh"), PY, platforms=["manylinux_2_17_aarch64"], cache=cache)
    assert "antlr4-python3-runtime==4.9.3" in str(exc.value) and "Nothing was downloaded" in str(exc.value)
    assert os.listdir(os.path.join(cache, "files")) == []


def test_wrong_hash_refused(tmp_path, lock_file):
    text = open(lock_file).read()
    entry = next(e for e in wh.read_lock(lock_file) if e.key == "six")
    lock = tmp_path / "bad.lock"
    lock.write_text(text.replace(entry.hashes[0], "0" * 64))
    with pytest.raises(UsageError):
        wh.build(str(lock), str(tmp_path / "wh"), PY, cache=os.path.join(CACHE, "dl"))


def test_parse_size_and_bad_input(tmp_path):
    assert wh.parse_size("64MiB") == 64 << 20 and wh.parse_size("60M") == 60 << 20
    assert wh.parse_size("1GiB") == 1 << 30 and wh.parse_size("100MB") == 100 * 10 ** 6
    for bad in ("lots", "10KiB", ""):
        with pytest.raises(UsageError):
            wh.parse_size(bad)
    unpinned = tmp_path / "r.txt"
    unpinned.write_text("six>=1\n")
    with pytest.raises(UsageError) as exc:
        wh.read_lock(str(unpinned))
    assert "six>=1" in str(exc.value)
    assert main(["wheelhouse", "verify", str(tmp_path / "nope")]) == 2


def test_bootstrap_wheelhouse_offline(built, tmp_path, monkeypatch, pyz_file):
    out, _ = built
    parts = str(tmp_path / "parts")
    wh.split(out, parts, 64 * 1024)
    _offline_env(monkeypatch)
    prefix = str(tmp_path / "venv")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(["sh", os.path.join(root, "bootstrap.sh"), "--pyz", pyz_file, "--wheelhouse", parts, "--prefix",
                           prefix, "--", "--stage", "python"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "--no-index" in proc.stdout and "ready" in proc.stdout
    subprocess.run([os.path.join(prefix, "bin", "python"), "-c", "import jinja2, six"], check=True)


def test_missing_requirements_follow_requested_extras(tmp_path):
    """The metadata walk: extras a requirer asks for count (b[extra1] brings d), a package asking
    for its own extra (a[self]) does not loop, an extra nobody asks for (b's 'other') does not count."""
    import zipfile

    def wheel(name, requires):
        path = tmp_path / ("%s-1.0-py3-none-any.whl" % name)
        with zipfile.ZipFile(str(path), "w") as z:
            z.writestr("%s-1.0.dist-info/METADATA" % name, "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s\n" % (
                name, "".join("Requires-Dist: %s\n" % r for r in requires)))
        return {"name": name, "key": name, "version": "1.0", "file": path.name}

    manifest = {"wheels": [wheel("a", ["b[extra1]>=1", "a[self]", 'c; extra == "self"']),
                           wheel("b", ['d; extra == "extra1"', 'e; extra == "other"'])]}
    env = {"python_version": PY, "sys_platform": "linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_system": "Linux", "python_full_version": PY + ".0",
           "platform_python_implementation": "CPython", "platform_release": "", "platform_version": "",
           "implementation_version": PY + ".0"}
    rows = wh.missing_requirements(str(tmp_path), manifest, env, installed={})
    assert {r["name"]: r["required_by"] for r in rows} == {"c": ["a 1.0: c"], "d": ["b 1.0: d"]}
    assert wh.missing_requirements(str(tmp_path), manifest, env, installed={"c": "2", "d": "1"}) == []


def test_pylock_gives_the_same_wheelhouse(lock_file, built, tmp_path):
    """A PEP 751 pylock.toml with the same pins and hashes serves the same files."""
    out, m = built
    lines = ['lock-version = "1.0"', 'created-by = "test"', ""]
    for r in m["wheels"]:
        lines += ["[[packages]]", 'name = "%s"' % r["name"], 'version = "%s"' % r["version"],
                  'wheels = [{name = "%s", hashes = {sha256 = "%s"}}]' % (os.path.basename(r["file"]), r["sha256"]), ""]
    pylock = tmp_path / "pylock.toml"
    pylock.write_text("\n".join(lines))
    entries = wh.read_lock(str(pylock))
    assert {(e.key, e.version, tuple(e.hashes)) for e in entries} == {
        (e.key, e.version, tuple(e.hashes)) for e in wh.read_lock(lock_file)}
    m2 = wh.build(str(pylock), str(tmp_path / "wh"), PY, cache=os.path.join(CACHE, "dl"))
    assert sorted((r["key"], r["sha256"]) for r in m2["wheels"]) == sorted((r["key"], r["sha256"]) for r in m["wheels"])


def test_exclude_installed_and_omit_reasons(lock_file, tmp_path):
    entries = wh.read_lock(lock_file)
    six = next(e for e in entries if e.key == "six")
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("six==%s\nJinja2==0.1\n" % six.version)  # jinja2 at another version: still carried
    inst = wh.installed_versions(str(freeze))
    keep, left = wh.plan(entries, omit=[("Markup*", "bring your own")], installed=inst)
    assert sorted(e.key for e in keep) == ["jinja2"]
    reasons = {o["name"].lower(): o["reason"] for o in left}
    assert reasons["six"] == "%s listed in %s" % (six.version, freeze)
    assert reasons["markupsafe"] == "--omit Markup*: bring your own"
    # the interpreter itself as the source: this test venv's pip is installed there
    pip_v = wh.installed_versions(sys.executable)[0].get("pip")
    assert pip_v and pip_v == subprocess.check_output([sys.executable, "-m", "pip", "--version"],
                                                      universal_newlines=True).split()[1]


def test_sdist_built_when_the_target_is_this_machine(tmp_path):
    """antlr4-python3-runtime 4.9.3 has only a source distribution: for this machine's Python and
    platform the wheelhouse builds it with pip wheel and says so in the manifest."""
    lock = tmp_path / "sdist.lock"
    lock.write_text("antlr4-python3-runtime==4.9.3\n")
    m = wh.build(str(lock), str(tmp_path / "wh"), PY, cache=os.path.join(CACHE, "dl"))
    (row,) = m["wheels"]
    assert row["file"].endswith(".whl") and row["source"].startswith("built from the source distribution")
    assert wh.verify(str(tmp_path / "wh"))[1] == []


@pytest.mark.fault("WRONG")
def test_verify_prints_a_hostile_directory_name_escaped(built, tmp_path, pyz):
    """The command's own summary lines go through the same escaping as reports: an ESC sequence in
    a directory name reaches the terminal as text, not as a command to it."""
    import shutil

    evil = str(tmp_path / "wh\x1b]0;pwned\x07\x1b[2J")
    shutil.copytree(built[0], evil)
    r = subprocess.run([sys.executable, pyz, "wheelhouse", "verify", evil], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "3 wheels" in r.stdout and "\\x1b]0;pwned\\x07" in r.stdout
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr
