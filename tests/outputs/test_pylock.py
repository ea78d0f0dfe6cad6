"""PEP 751 pylock.toml beside requirements.lock: written from the same resolved set, read back by
the real readers (pip >= 26.1 ``-r pylock.toml`` and uv), and uv's own lock agrees with pip's.

pip and uv come from a cached tool venv (``tests/envs.py``), built once; the resolutions need the
package index (metadata only, small packages), so those tests are marked ``realenv``.
"""

import json
import os
import subprocess
import sys

import pytest

from envs import real_env
from preflight.outputs.lock import LockResult, Locked, parse_lock, render_lock, render_pylock, resolve_lock

try:
    import tomllib
except ImportError:  # pragma: no cover
    import tomli as tomllib

SMALL = ["requests==2.32.3"]  # a real tree: requests, urllib3, idna, certifi, charset-normalizer (binary wheels)


def _fixture_lock():
    return LockResult([
        Locked("Jinja2", "3.1.6", ["sha256:" + "a" * 64],
               "https://files.pythonhosted.org/packages/aa/bb/jinja2-3.1.6-py3-none-any.whl"),
        Locked("torch", "2.11.0+cu130", ["sha256:" + "b" * 64],
               "https://download.pytorch.org/whl/cu130/torch-2.11.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
        Locked("antlr4-python3-runtime", "4.9.3", ["sha256:" + "c" * 64],
               "https://files.pythonhosted.org/packages/cc/dd/antlr4-python3-runtime-4.9.3.tar.gz"),
    ], None, ["https://download.pytorch.org/whl/cu130"], "3.12", "test")


def test_pylock_is_valid_pep751_and_matches_the_lock():
    from packaging.pylock import Pylock

    res = _fixture_lock()
    text = render_pylock(res)
    assert text == render_pylock(res)  # same input, same bytes
    lock = Pylock.from_dict(tomllib.loads(text))  # packaging's validator of the PEP 751 schema
    assert str(lock.lock_version) == "1.0" and lock.created_by == "verl-preflight"
    got = {str(p.name): str(p.version) for p in lock.packages}
    assert got == {"antlr4-python3-runtime": "4.9.3", "jinja2": "3.1.6", "torch": "2.11.0+cu130"}
    assert got == {k.replace("_", "-"): v for k, v in parse_lock(render_lock(res)).items()}
    by = {str(p.name): p for p in lock.packages}
    assert by["torch"].wheels[0].hashes == {"sha256": "b" * 64} and by["antlr4-python3-runtime"].sdist is not None
    env = {"sys_platform": "linux", "platform_machine": "x86_64", "python_version": "3.12"}
    assert all(m.evaluate(env) for m in lock.environments)
    assert not lock.environments[0].evaluate(dict(env, python_version="3.11"))


@pytest.fixture(scope="module")
def tools():
    """(python with pip 26.1.2, the uv binary) from a cached venv."""
    py = real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])
    return py, os.path.join(os.path.dirname(py), "uv")


@pytest.mark.realenv
def test_uv_lock_is_the_same_set_as_pips(tools, monkeypatch):
    py, uv = tools
    monkeypatch.setenv("UV", uv)
    by_pip = resolve_lock(SMALL, "3.11", use_uv=False)
    by_uv = resolve_lock(SMALL, "3.11")  # $UV found: uv pip compile
    assert by_uv.mode.startswith("uv pip compile") and not by_pip.mode.startswith("uv")
    assert {p.name.lower(): p.version for p in by_uv.packages} == {p.name.lower(): p.version for p in by_pip.packages}
    for a, b in zip(by_pip.packages, by_uv.packages):
        assert set(a.hashes) <= set(b.hashes)  # uv lists every artifact's hash; pip's pick is among them
    # uv reports the sizes the index serves (PyPI does; a local file:// mirror may not): the download
    # size spec prints; pip's report has none
    served = [p for p in by_uv.packages if (p.url or "").startswith("https://files.pythonhosted.org/")]
    assert served and all(isinstance(p.size, int) and p.size > 0 for p in served)
    assert all(p.size is None for p in by_pip.packages)


@pytest.mark.realenv
def test_pip_and_uv_read_the_pylock(tools, tmp_path):
    py, uv = tools
    res = resolve_lock(SMALL, "3.11", use_uv=False)
    pylock = tmp_path / "pylock.toml"
    pylock.write_text(render_pylock(res))
    report = tmp_path / "report.json"
    p = subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "--dry-run", "--ignore-installed",
                        "--no-deps", "-q", "--report", str(report), "-r", str(pylock)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    assert p.returncode == 0, p.stdout
    got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert got == {x.name.lower(): x.version for x in res.packages}
    venv = tmp_path / "v"
    subprocess.run([uv, "venv", "--python", sys.executable, str(venv)], check=True, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)
    u = subprocess.run([uv, "pip", "install", "--python", str(venv / "bin" / "python"), "--dry-run", "-r",
                        str(pylock)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=600)
    assert u.returncode == 0, u.stdout
    assert all(("%s==%s" % (x.name.lower(), x.version)) in u.stdout.lower() for x in res.packages), u.stdout
    # a wrong hash is refused: the lock's hashes are enforced
    bad = tmp_path / "bad" / "pylock.toml"
    bad.parent.mkdir()
    text = pylock.read_text()
    h = res.packages[0].hashes[0].split(":")[1]
    bad.write_text(text.replace(h, "0" * 64))
    q = subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--target",
                        str(tmp_path / "t"), "-r", str(bad)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=600)
    assert q.returncode != 0 and "hash" in q.stdout.lower(), q.stdout


def test_a_package_without_a_hash_gets_no_pylock_and_the_lock_says_why():
    """PEP 751 requires a hash for every file: a set where the index served none for one
    distribution gets no pylock.toml (packaging's validator refused it with a traceback before)."""
    from packaging.pylock import Pylock, PylockValidationError

    res = _fixture_lock()
    res.packages.append(Locked("six", "1.17.0", [], "https://example.invalid/simple/six/six-1.17.0-py2.py3-none-any.whl"))
    with pytest.raises(PylockValidationError):  # the truth: what the packages we would write look like to packaging
        Pylock.from_dict({"lock-version": "1.0", "created-by": "x", "packages": [
            {"name": "six", "version": "1.17.0", "wheels": [{"name": "six-1.17.0-py2.py3-none-any.whl",
                                                              "url": "https://example.invalid/six.whl",
                                                              "hashes": {}}]}]})
    from preflight.outputs.lock import unhashed

    assert unhashed(res) == ["six"] and render_pylock(res) == ""
    assert "six==1.17.0  # no hash" in render_lock(res)


@pytest.mark.realenv
def test_a_find_links_wheel_is_hashed_from_the_file(tmp_path, monkeypatch):
    """pip reports no hash for a wheel from a --find-links directory (pip.conf's find-links): the
    lock takes the file's own sha256 (checked with sha256sum), so both lock files are written."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                    str(wheels), "six==1.17.0"], check=True, timeout=300)
    whl = next(wheels.glob("six-*.whl"))
    truth = subprocess.check_output(["sha256sum", str(whl)], universal_newlines=True).split()[0]
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    py = "%d.%d" % sys.version_info[:2]
    res = resolve_lock(["six==1.17.0"], py, pip_python=sys.executable, use_uv=False)
    six = next(p for p in res.packages if p.name.lower() == "six")
    assert six.hashes == ["sha256:" + truth] and six.url.startswith("file://")
    assert "sha256" in render_pylock(res)
