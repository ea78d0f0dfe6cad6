"""Outputs: spec (lock + environment.json), install (venv, idempotent, incomplete marker), image
(Dockerfile, hadolint), bootstrap.sh (shellcheck, exit codes, a real provisioning run).

The real stack here is verl 0.9.1 with torch 2.13.0 CPU and no rollout engine (a GPU stack cannot
install on this machine kind); the GPU stack for an H200 is locked for real (metadata only) and
rendered into a Dockerfile, but not installed.

The spec -> install -> check -> bootstrap chain and the H200 lock run as on a machine with uv
(``UV`` names the cached lock-tools env's uv 0.13.9): uv's lock and install cost a tenth of pip's
CPU. pip's own lock is tested against a real resolver in tests/outputs/test_pylock.py and the
metadata-index test, its lock with index credentials in tests/faults/test_faults_leak.py, and an
install by pip is interrupted here (test_interrupted_install_is_reported_incomplete)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envs import real_env
from preflight.outputs.lock import parse_lock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
CPU_STACK = ["--verl", "0.9.1", "--no-backend", "--torch", "2.13.0", "--torch-index", "none", "--python", "3.11",
             "--no-probe"]


def pf(pyz, *args, timeout=900, env=None):
    return subprocess.run([sys.executable, "-I", "-S", pyz] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def uv_env():
    """The environment of a machine with uv: ``UV`` names lock-tools' uv (see the module doc)."""
    py = real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])
    return dict(os.environ, UV=os.path.join(os.path.dirname(py), "uv"))


def tool(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.skip("%s not installed (./test.sh installs it)" % name)
    return path


@pytest.fixture(scope="module")
def cpu_spec(pyz, tmp_path_factory, uv_env):
    out = str(tmp_path_factory.mktemp("spec"))
    p = pf(pyz, "spec", *CPU_STACK, "-o", out, env=uv_env)
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.realenv
def test_spec_lock_is_complete_hashed_and_reproducible(pyz, cpu_spec, tmp_path, uv_env):
    text = open(os.path.join(cpu_spec, "requirements.lock")).read()
    pins = parse_lock(text)
    assert pins["verl"] == "0.9.1" and pins["torch"] == "2.13.0+cpu"
    assert "cachetools" in pins and "uvicorn" in pins          # the verl-core extra is in
    assert "vllm" not in pins and "torchvision" not in pins
    entries = [l for l in text.splitlines() if l and not l.startswith(("#", " ", "-"))]
    assert len(entries) == len(pins) > 100
    # each pin is followed by its sha256 (uv lists one per file of that version, pip one)
    import re

    assert len(re.findall(r"^\S+==\S+ \\\n    --hash=sha256:[0-9a-f]{64}", text, re.M)) == len(pins)
    env = json.load(open(os.path.join(cpu_spec, "environment.json")))
    import hashlib

    assert env["lock_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert env["stack"]["top_level"] == ["verl[verl-core]==0.9.1", "torch==2.13.0"]
    assert env["machine"]["arch"] and env["tool"]["name"] == "verl-preflight"
    assert any(r["choice"] == "verl" for r in env["matrix_rows"])
    # same inputs, same bytes
    again = str(tmp_path / "again")
    assert pf(pyz, "spec", *CPU_STACK, "-o", again, env=uv_env).returncode == 0
    for f in ("requirements.lock", "pylock.toml", "environment.json"):
        assert open(os.path.join(again, f)).read() == open(os.path.join(cpu_spec, f)).read(), f
    # pylock.toml (PEP 751) pins the same set, valid by packaging's reader
    from packaging.pylock import Pylock

    try:
        import tomllib
    except ImportError:  # pragma: no cover
        import tomli as tomllib
    with open(os.path.join(cpu_spec, "pylock.toml"), "rb") as fh:
        lock = Pylock.from_dict(tomllib.load(fh))
    assert {str(p.name): str(p.version) for p in lock.packages} == {
        k.replace("_", "-").replace(".", "-"): v for k, v in pins.items()}


@pytest.fixture(scope="module")
def installed(pyz, cpu_spec, tmp_path_factory, uv_env):
    """The spec's lock installed once, from nothing, then checked: (prefix, the run, its report's rows).
    The suite's one full install: install's and bootstrap.sh's tests both judge it."""
    base = tmp_path_factory.mktemp("installed")
    prefix = str(base / "env")
    p = pf(pyz, "install", "--lock", os.path.join(cpu_spec, "requirements.lock"), "--python", "3.11", "--prefix",
           prefix, "--no-backend", "--", "--stage", "python,packages,imports", "--json", str(base / "r.json"), env=uv_env)
    rows = {r["id"]: r for r in json.load(open(str(base / "r.json")))["results"]} if p.returncode == 0 else {}
    return prefix, p, rows


@pytest.mark.realenv
def test_install_then_check_then_noop(pyz, cpu_spec, installed, uv_env):
    prefix, p, rows = installed
    lock = os.path.join(cpu_spec, "requirements.lock")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    for rid in ("python.interpreter", "python.version", "packages.verl", "packages.verl-requirements",
                "packages.consistency", "imports.verl-classes.RayPPOTrainer",
                "imports.verl-classes.ActorRolloutRefWorker"):
        assert rows[rid]["status"] == "pass", (rid, rows[rid]["message"])
    assert all(r["status"] in ("pass", "warn", "skip") for r in rows.values())
    assert os.path.exists(os.path.join(prefix, ".verl-preflight-installed"))
    assert not os.path.exists(os.path.join(prefix, ".verl-preflight-incomplete"))
    site = os.path.join(prefix, "lib", "python3.11", "site-packages")
    before = sorted(os.listdir(site))
    stamp = os.stat(site).st_mtime
    p2 = pf(pyz, "install", "--lock", lock, "--python", "3.11", "--prefix", prefix, "--no-check", env=uv_env)
    assert p2.returncode == 0 and "nothing changed" in p2.stderr
    assert sorted(os.listdir(site)) == before and os.stat(site).st_mtime == stamp


@pytest.mark.realenv
def test_interrupted_install_is_reported_incomplete(pyz, cpu_spec, tmp_path):
    prefix = str(tmp_path / "env")
    lock = os.path.join(cpu_spec, "requirements.lock")
    proc = subprocess.Popen([sys.executable, "-I", "-S", pyz, "install", "--lock", lock, "--python", "3.11",
                             "--prefix", prefix, "--no-check"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    site = os.path.join(prefix, "lib", "python3.11", "site-packages")
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until pip is writing packages
        if os.path.isdir(site) and len(os.listdir(site)) > 5:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert os.path.exists(os.path.join(prefix, ".verl-preflight-incomplete"))
    out = str(tmp_path / "r.json")
    pf(pyz, "check", "--python", os.path.join(prefix, "bin", "python"), "--stage", "python", "--json", out)
    r = {x["id"]: x for x in json.load(open(out))["results"]}["python.interpreter"]
    assert r["status"] == "fail" and "incomplete" in r["message"] and "install" in r["fix"]


def test_install_refuses_a_foreign_prefix(pyz, tmp_path):
    (tmp_path / "data.txt").write_text("keep me")
    lock = tmp_path / "x.lock"
    lock.write_text("packaging==25.0 --hash=sha256:" + "0" * 64 + "\n")
    p = pf(pyz, "install", "--lock", str(lock), "--python", "3.11", "--prefix", str(tmp_path), "--no-check")
    assert p.returncode == 2 and "is not a virtual environment" in p.stderr
    assert (tmp_path / "data.txt").read_text() == "keep me" and not (tmp_path / "bin").exists()


def test_install_missing_lock_is_one_line(pyz, tmp_path):
    p = pf(pyz, "install", "--lock", str(tmp_path / "nope.lock"), "--python", "3.11", "--prefix", str(tmp_path / "e"))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "nope.lock" in p.stderr


@pytest.mark.parametrize("content,words", [(b"", "no pinned requirement (name==version)"),
                                           (b"trainer:\n  logger: [console]\n", "line 1: not a requirement"),
                                           (b"# only a comment\n", "no pinned requirement (name==version)")])
def test_install_lock_that_pins_nothing_is_one_line(pyz, tmp_path, content, words):
    lock = tmp_path / "my.yaml"
    lock.write_bytes(content)
    p = pf(pyz, "install", "--lock", str(lock), "--python", "3.11", "--prefix", str(tmp_path / "v"), "--dry-run")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert words in p.stderr and not (tmp_path / "v").exists()


@pytest.mark.parametrize("content,words", [
    (b"six==1.17.0 --hash=sha256:\xff\xfe\n", "byte 0xff at offset 26"),  # a lock mangled on its way
    (bytes(range(256)) * 64, "byte 0x80 at offset 128"),  # a binary file named by mistake
    (b"\xef\xbb\xbfsix==1.17.0\n" + b"\xc3\x28\n", "byte 0xc3 at offset 15"),  # a BOM, then a broken sequence
])
@pytest.mark.parametrize("dry", [False, True])
def test_install_lock_that_is_not_text_is_one_line_and_makes_nothing(pyz, tmp_path, content, words, dry):
    lock = tmp_path / "bad.lock"
    lock.write_bytes(content)
    prefix = tmp_path / "venv"
    p = pf(pyz, "install", "--lock", str(lock), "--python", "3.11", "--prefix", str(prefix), "--no-check",
           *(["--dry-run"] if dry else []))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "--lock %s: not UTF-8 text (%s)" % (lock, words) in p.stderr and "Traceback" not in p.stderr
    assert not prefix.exists()


@pytest.mark.realenv
def test_h200_image_for_verl_091(pyz_file, tmp_path, uv_env):
    out = str(tmp_path / "img")
    p = pf(pyz_file, "image", "--verl", "0.9.1", "--gpu", "H200", "--driver", "580.95.05", "--python", "3.12", "-o", out,
           "--build", env=uv_env)
    assert p.returncode == 0, p.stderr[-2000:]
    df = open(os.path.join(out, "Dockerfile")).read()
    # the base image comes from the matrix row of torch 2.11's cu130 variant
    from preflight import matrix

    row = [r for r in matrix.load().curated["base_images"]["base"] if r["variant"] == "cu130"][0]
    from preflight.outputs.dockerfile import base_reference

    assert "FROM %s\n" % base_reference(row) in df and "@sha256:" in df
    assert "--require-hashes" in df and "python3.12 -m venv" in df
    assert not [l for l in df.splitlines() if l.startswith("HEALTHCHECK")]  # no periodic GPU check
    pins = parse_lock(open(os.path.join(out, "requirements.lock")).read())
    assert pins["torch"] == "2.11.0" and pins["vllm"] == "0.24.0" and pins["verl"] == "0.9.1"
    assert os.path.exists(os.path.join(out, "preflight.pyz"))
    # no container engine on this machine kind: the exact command is printed, nothing is faked
    assert "docker build -t verl:0.9.1 %s" % out in p.stderr
    lint = subprocess.run([tool("hadolint"), os.path.join(out, "Dockerfile")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    assert lint.returncode == 0, lint.stdout


def test_top_level_dockerfile_lints():
    lint = subprocess.run([tool("hadolint"), os.path.join(ROOT, "Dockerfile")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    assert lint.returncode == 0, lint.stdout


def test_bootstrap_shellcheck():
    p = subprocess.run([tool("shellcheck"), "-s", "sh", os.path.join(ROOT, "bootstrap.sh")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    assert p.returncode == 0, p.stdout


def bootstrap(*args, env=None):
    return subprocess.run(["sh", os.path.join(ROOT, "bootstrap.sh")] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=900, env=env)


def test_bootstrap_exit_codes(pyz_file, tmp_path):
    import hashlib

    digest = hashlib.sha256(open(pyz_file, "rb").read()).hexdigest()
    assert bootstrap("--help").returncode == 0
    assert bootstrap("--bogus").returncode == 2
    assert bootstrap("--pyz", str(tmp_path / "missing.pyz")).returncode == 2
    bad = bootstrap("--pyz", pyz_file, "--sha256", "0" * 64, "--check-only")
    assert bad.returncode == 4 and "expected" in bad.stderr
    out = str(tmp_path / "r.json")
    log = str(tmp_path / "boot.log")
    ok = bootstrap("--pyz", pyz_file, "--sha256", digest, "--check-only", "--python", sys.executable, "--json", out,
                   "--log", log, "--", "--stage", "host")
    data = json.load(open(out))
    assert ok.returncode == data["exit_code"] in (0, 1)
    assert "check --python" in open(log).read()
    dry = bootstrap("--pyz", pyz_file, "--dry-run", "--verl", "0.9.1", "--prefix", str(tmp_path / "p"))
    assert dry.returncode == 0 and "install --verl 0.9.1" in dry.stderr and "dry run" in dry.stdout + dry.stderr
    assert not (tmp_path / "p").exists()
    env = dict(os.environ, PATH="/nonexistent")
    assert subprocess.run(["/bin/sh", os.path.join(ROOT, "bootstrap.sh"), "--pyz", pyz_file], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).returncode == 3


@pytest.mark.realenv
def test_bootstrap_provisions_and_is_idempotent(pyz_file, installed, tmp_path, uv_env):
    """bootstrap.sh resolves the same stack itself (no lock given) and finds it already in the prefix
    that ``install --lock`` of the spec made: spec, install and bootstrap name one stack. Both runs
    change nothing (the first installs nothing; the second only checks), the first reports ready, and the
    log keeps both. (The from-nothing install is the
    ``installed`` fixture's; bootstrap runs the same ``install`` command.)"""
    prefix = installed[0]
    assert installed[1].returncode == 0, installed[1].stderr[-2000:]
    site = os.path.join(prefix, "lib", "python3.11", "site-packages")
    before = sorted(os.listdir(site))
    args = ["--pyz", pyz_file, "--verl", "0.9.1", "--prefix", prefix, "--install-args", " ".join(CPU_STACK[2:]),
            "--json", str(tmp_path / "r.json"), "--log", str(tmp_path / "log"), "--", "--stage", "python,packages,imports"]
    first = bootstrap(*args, env=uv_env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.load(open(str(tmp_path / "r.json")))["ready"] is True
    assert "nothing changed" in first.stdout
    log1 = open(str(tmp_path / "log")).read()
    second = bootstrap("--pyz", pyz_file, "--prefix", prefix, "--check-only", "--log", str(tmp_path / "log"), "--",
                       "--stage", "python", env=uv_env)
    assert second.returncode == 0, second.stderr[-2000:]
    log2 = open(str(tmp_path / "log")).read()
    assert log2.startswith(log1) and len(log2) > len(log1) and log2.count("nothing changed") == 1  # both runs kept
    assert sorted(os.listdir(site)) == before


def test_pip_crash_names_its_exception():
    """pip's own crash logs 'ERROR: Exception:' then the traceback: the lock error must name the exception
    (here real pip's output, its install command made to raise)."""
    from preflight.outputs.lock import _pip_error

    code = ("import sys\nfrom pip._internal.cli.main import main\nfrom pip._internal.commands import install\n"
            "def boom(*a, **k):\n    raise RuntimeError('disk gone')\n"
            "install.InstallCommand.run = boom\nsys.exit(main(['install', '--dry-run', 'x']))\n")
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert proc.returncode != 0 and "ERROR: Exception:" in proc.stderr, proc.stderr
    msg = _pip_error(proc.stderr)
    assert msg.startswith("ERROR: Exception:") and "RuntimeError: disk gone" in msg, msg
    plain = "ERROR: Could not find a version that satisfies the requirement x==9\nERROR: No matching distribution found for x==9\n"
    assert _pip_error(plain) == "ERROR: No matching distribution found for x==9"
