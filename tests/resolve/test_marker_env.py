"""pip's resolver given a target's marker environment (preflight/target/pip_markers.py, through
preflight.proofs.prove_live) against independent truths, on a PEP 691 index on 127.0.0.1 that
serves each wheel's PEP 658 metadata (so no wheel is fetched):

* the native resolve: pip 26 under CPython 3.11 given 3.9's environment gives the install set pip
  26 run under the target's own CPython 3.9 gave, for a real stack (verl 0.4.0 + vLLM 0.8.5, whose
  ``numba==0.61.2; python_version > "3.9"`` only 3.9's markers skip): the 197 distributions
  pip's reports named, recorded live from PyPI by tools/markers_fidelity.py into
  tests/data/marker_env/ (VERL_PREFLIGHT_MARKERS_NATIVE=1 also runs the native pip on it here);
* packaging's own marker evaluation, for targets this machine has no interpreter of (3.14,
  aarch64), on a small index whose requirements name python_version, python_full_version and
  platform_machine;
* and the plain run (the same pip without the environment), which must get them wrong."""

import hashlib
import json
import os
import re

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from envs import real_env
from loopback_http import serve
from preflight import marker_env, proof_refresh, proofs

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "data", "marker_env", "0.4.0-vllm-py3.9.json")


def _metadata(d):
    lines = ["Metadata-Version: 2.1", "Name: %s" % d["name"], "Version: %s" % d["version"]]
    if d.get("requires_python"):
        lines.append("Requires-Python: %s" % d["requires_python"])
    lines += ["Provides-Extra: %s" % e for e in d.get("provides_extra") or []]
    lines += ["Requires-Dist: %s" % r for r in d.get("requires_dist") or []]
    return ("\n".join(lines) + "\n").encode()


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _index(dists):
    """A loopback PEP 691 index of ``dists`` (dicts: name, version, wheel, requires_python,
    requires_dist, provides_extra) whose files announce PEP 658 metadata; (server, URL)."""
    meta = {d["wheel"]: _metadata(d) for d in dists}
    by = {}
    for d in dists:
        by.setdefault(_norm(d["name"]), []).append(d)

    def routes(h):
        m = re.match(r"^/simple/([^/]+)/$", h.path)
        if m:
            fs = [{"filename": d["wheel"], "url": "/files/%s" % d["wheel"],
                   "hashes": {"sha256": hashlib.sha256(d["wheel"].encode()).hexdigest()},
                   "requires-python": d.get("requires_python"),
                   "core-metadata": {"sha256": hashlib.sha256(meta[d["wheel"]]).hexdigest()}}
                  for d in by.get(_norm(m.group(1)), [])]
            if not fs:
                return 404, b"", {}
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": m.group(1), "files": fs}).encode()
            return 200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"}
        m = re.match(r"^/files/(.+)\.metadata$", h.path)
        if m and m.group(1) in meta:
            return 200, meta[m.group(1)], {}
        return 404, b"", {}

    srv, url, _ = serve(routes)
    return srv, url + "/simple"


@pytest.fixture(scope="module")
def pip26():
    """pip 26.1.2 under CPython 3.11 (the recorder's)."""
    return real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])


def _prove(reqs, python, arch, url, pip, **kw):
    return proofs.prove_live(reqs, python, arch, index_url=url, pip_python=pip, metadata_index=False, timeout=120,
                             **kw)


#: A small index: what ``app`` pulls in depends on python_version, python_full_version and
#: platform_machine (as torch's nvidia-* wheels and vLLM's numba pins do).
SMALL = [dict(name="app", version="1.0", wheel="app-1.0-py3-none-any.whl", requires_python=">=3.8",
              requires_dist=['old-py==1; python_version < "3.10"', 'new-py==1; python_version >= "3.10"',
                             'cuda-rt==1; platform_machine == "x86_64" and sys_platform == "linux"',
                             'arm-rt==1; platform_machine == "aarch64"',
                             'micro-fix==1; python_full_version < "3.9.2"',
                             'py314==1; python_version >= "3.14" and implementation_name == "cpython"'])] + [
    dict(name=n, version="1", wheel="%s-1-py3-none-any.whl" % n.replace("-", "_"), requires_python=None,
         requires_dist=[]) for n in ("old-py", "new-py", "cuda-rt", "arm-rt", "micro-fix", "py314")]


def _truth(python, arch, full=None):
    """The set packaging's own marker evaluation says ``app`` installs on the target."""
    env = marker_env.target_environment(python, arch, full)
    deps = [Requirement(r) for r in SMALL[0]["requires_dist"]]
    return {"app": "1.0", **{d.name: "1" for d in deps if Marker(str(d.marker)).evaluate(dict(env, extra=""))}}


@pytest.mark.realenv
@pytest.mark.parametrize("python,arch,full", [("3.14", "aarch64", None), ("3.8", "x86_64", "3.8.18"),
                                              ("3.9", "x86_64", "3.9.1")])
def test_given_environment_is_packagings_truth_where_no_native_interpreter_exists(pip26, python, arch, full):
    srv, url = _index(SMALL)
    try:
        p = _prove(["app==1.0"], python, arch, url, pip26, full_version=full)
        plain = _prove(["app==1.0"], python, arch, url, pip26, give_markers=False) if python == "3.14" else None
    finally:
        srv.shutdown()
        srv.server_close()
    assert p["status"] == "proven", p.get("reason") or p.get("error")
    assert p["installed"] == _truth(python, arch, full)
    assert p["markers"] == "cpython %s %s (marker environment given to pip 26.1.2)" % (full or python + ".0", arch)
    assert proofs.markers_problem(p, python, arch) is None
    assert "REPORT" in p["command"] and "app==1.0" in p["command"]  # pip's line, recorded; argv had none of it
    if plain is not None:  # the same pip without the environment resolves for CPython 3.11 on x86_64, and says
        assert plain["status"] == "unproven" and plain["installed"] != p["installed"]  # it proves nothing
        assert plain["installed"] == _truth("3.11", "x86_64", "3.11.7")


@pytest.fixture(scope="module")
def real_index():
    with open(FIXTURE, encoding="utf-8") as fh:
        doc = json.load(fh)
    srv, url = _index(doc["dists"])
    yield doc, url
    srv.shutdown()
    srv.server_close()


@pytest.mark.realenv
def test_given_environment_resolves_a_real_stack_as_the_native_interpreter_did(pip26, real_index):
    doc, url = real_index
    reqs = [r for r in doc["requirements"] if " @ " not in r]
    g = _prove(reqs, "3.9", "x86_64", url, pip26, full_version=doc["full_version"])
    assert g["status"] == "proven", g.get("reason") or g.get("error")
    # the truth: pip 26.0.1 run natively under CPython 3.9.18 on PyPI (tools/markers_fidelity.py)
    assert doc["status"]["native"] == "proven" and doc["pip"]["native"] == "26.0.1"
    assert sorted("%s==%s" % kv for kv in g["installed"].items()) == doc["native"]
    assert len(doc["native"]) == 197 and g["installed"]["numba"] == "0.60.0"  # the python_version == "3.9" pin


@pytest.mark.realenv
@pytest.mark.skipif(os.environ.get("VERL_PREFLIGHT_MARKERS_NATIVE") != "1",
                    reason="the native CPython 3.9 resolve of 197 distributions (about 15 s): set "
                           "VERL_PREFLIGHT_MARKERS_NATIVE=1")
def test_the_native_resolve_on_the_loopback_index_is_the_recorded_one(real_index):
    doc, url = real_index
    native = real_env("pip26-py39", ["pip==26.0.1"], python_minor="3.9")
    reqs = [r for r in doc["requirements"] if " @ " not in r]
    n = _prove(reqs, "3.9", "x86_64", url, native, give_markers=False)
    assert n["status"] == "proven" and n["markers"].startswith("cpython 3.9."), n.get("reason") or n.get("error")
    assert sorted("%s==%s" % kv for kv in n["installed"].items()) == doc["native"]


@pytest.mark.realenv
@pytest.mark.skipif(os.environ.get("VERL_PREFLIGHT_MARKERS_NATIVE") != "1",
                    reason="a third resolve of the real stack (about 4 s): set VERL_PREFLIGHT_MARKERS_NATIVE=1")
def test_plain_pip_under_311_cannot_resolve_the_real_stack_for_39(pip26, real_index):
    doc, url = real_index
    reqs = [r for r in doc["requirements"] if " @ " not in r]
    p = _prove(reqs, "3.9", "x86_64", url, pip26, give_markers=False)
    assert p["status"] == "unproven" and p["recorded_status"] == "failed"  # it wanted numba 0.61.2 (3.10+)
    assert "numba" in (p.get("error") or "")


def test_target_environment_names_every_pep508_variable_and_refuses_bad_input():
    import packaging.markers as pm

    env = marker_env.target_environment("3.14", "aarch64")
    assert set(env) == set(pm.default_environment()) == set(marker_env.KEYS)
    assert env["python_full_version"] == "3.14.0" and env["platform_machine"] == "aarch64"
    assert marker_env.given_to(marker_env.describe(env, "26.1.2")) == "26.1.2"
    assert marker_env.given_to("cpython 3.11.7 x86_64") is None
    for bad in (("3", "x86_64", None), ("3.9", "x86_64", "3.10.1")):
        with pytest.raises(ValueError):
            marker_env.target_environment(*bad)


def test_the_launcher_argv_is_the_fixed_loader_and_a_silent_launcher_proves_nothing(tmp_path):
    from preflight.probes.process import ARGS_ENV, target_argv

    env = {}
    argv, events = proofs._launcher("/usr/bin/python3", ["install", "--report", "R", "secret-req==1"],
                                    marker_env.target_environment("3.14", "aarch64"), str(tmp_path), env)
    assert argv == target_argv("/usr/bin/python3") and "secret-req==1" not in " ".join(argv)
    with open(env[ARGS_ENV], encoding="utf-8") as fh:
        assert json.load(fh)["pip_args"][-1] == "secret-req==1"
    assert oct(os.stat(env[ARGS_ENV]).st_mode & 0o777) == "0o600"
    assert "no answer" in proofs._launcher_problem(events, 1)  # no event: the environment was not given
    with open(events, "w", encoding="utf-8") as fh:
        fh.write('@@PREFLIGHT@@ {"event": "pip_markers", "ok": false, "error": "environment lacks os_name"}\n')
    assert "environment lacks os_name" in proofs._launcher_problem(events, 3)
    with open(events, "w", encoding="utf-8") as fh:
        fh.write('@@PREFLIGHT@@ {"event": "pip_markers", "ok": true}\n')
    assert proofs._launcher_problem(events, 0) is None


def test_a_reproven_row_keeps_the_environment_its_markers_were_evaluated_in(tmp_path, monkeypatch):
    # matrix refresh (proof_refresh.reprove) rewrites rows from live proofs: a row proven with the target's
    # environment given to pip must stay valid for that target (markers_problem reads "markers")
    row = {"requirements": ["six"], "python": "3.14", "arch": "aarch64", "status": "failed", "installed": []}
    (tmp_path / "proofs.json").write_text(json.dumps({"proofs": {"x": row}}))
    live = dict(row, status="proven", installed={"six": "1.17.0"}, pip="26.1.2",
                markers=marker_env.describe(marker_env.target_environment("3.14", "aarch64"), "26.1.2"))
    monkeypatch.setattr(proofs, "prove_live", lambda *a, **k: live)
    assert proof_refresh.reprove(str(tmp_path)) == ["x py3.14 aarch64: failed -> proven"]
    new = json.loads((tmp_path / "proofs.json").read_text())["proofs"]["x"]
    assert new["markers"] == live["markers"] and proofs.markers_problem(new, "3.14", "aarch64") is None
