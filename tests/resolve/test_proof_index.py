"""The loopback metadata index (preflight/proof_index.py) under pip's real resolver, against a
small PEP 691 index on 127.0.0.1 whose host serves HTTP ranges (as files.pythonhosted.org does)
but announces no PEP 658 metadata (as this project's index does): pip proves the set without
fetching a whole wheel, a second proof reads nothing upstream, pip's refusals come out as
"does not install" with pip's reason, and a deadline as "unproven (timed out after N s)"."""

import hashlib
import io
import json
import os
import re
import time
import zipfile

import pytest

from envs import real_env
from loopback_http import serve
from preflight import proofs
from preflight.proof_index import wheel_metadata

#: (name, version, Requires-Dist lines) of the wheels the upstream serves.
WHEELS = [("alpha", "1.0", ["beta>=2"]), ("beta", "1.0", []), ("beta", "2.0", ["gamma"]), ("gamma", "0.5", [])]


def _metadata(name, version, requires):
    lines = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version, "Requires-Python: >=3.8"]
    return ("\n".join(lines + ["Requires-Dist: %s" % r for r in requires]) + "\n").encode()


def _wheel(name, version, requires):
    """A wheel whose 2 MiB payload (stored, not deflated) comes first, METADATA after it."""
    buf = io.BytesIO()
    di = "%s-%s.dist-info" % (name, version)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("%s/blob.bin" % name, hashlib.sha256(name.encode()).digest() * 65536, zipfile.ZIP_STORED)
        zf.writestr("%s/METADATA" % di, _metadata(name, version, requires))
        zf.writestr("%s/WHEEL" % di, "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("%s/RECORD" % di, "")
    return buf.getvalue()


def _upstream(ranges=True, page_delay=0.0):
    files = {"%s-%s-py3-none-any.whl" % (n, v): _wheel(n, v, r) for n, v, r in WHEELS}
    log = []

    def routes(h):
        m = re.match(r"^/simple/([^/]+)/$", h.path)
        if m:
            time.sleep(page_delay)
            fs = [{"filename": fn, "url": "http://%s/files/%s" % (h.headers["Host"], fn),
                   "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
                  for fn, data in sorted(files.items()) if fn.split("-")[0] == m.group(1)]
            if not fs:
                return 404, b"", {}
            body = json.dumps({"meta": {"api-version": "1.0"}, "name": m.group(1), "files": fs}).encode()
            return 200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"}
        fn = h.path.rsplit("/", 1)[-1]
        if fn not in files:
            return 404, b"", {}
        data, rng = files[fn], h.headers.get("Range")
        log.append((fn, rng if ranges else None))
        if rng and ranges:
            a, b = rng[len("bytes="):].split("-")
            lo, hi = (max(0, len(data) - int(b)), len(data) - 1) if a == "" else (int(a), min(int(b), len(data) - 1))
            return 206, data[lo:hi + 1], {"Content-Range": "bytes %d-%d/%d" % (lo, hi, len(data))}
        return 200, data, {}

    srv, url, _ = serve(routes)
    return srv, url + "/simple", files, log


@pytest.fixture
def upstream():
    srv, url, files, log = _upstream()
    yield url, files, log
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def pip():
    """A python whose pip (26.1.2) skips the wheel download in a dry run once it has the metadata
    (pip 23.2, this suite's own, still downloads every wheel at the end of its resolve)."""
    return real_env("lock-tools", ["pip==26.1.2", "uv==0.13.9"])


def _prove(pip, reqs, url, cache, timeout=60.0):
    return proofs.prove_live(reqs, "3.11", index_url=url, pip_python=pip, cache_dir=cache, timeout=timeout)


@pytest.mark.realenv
def test_pip_proves_through_the_metadata_index_without_a_whole_wheel(pip, upstream, tmp_path):
    url, files, log = upstream
    p = _prove(pip, ["alpha==1.0"], url, str(tmp_path))
    assert p["status"] == "proven", p.get("reason") or p.get("error")
    assert p["installed"] == {"alpha": "1.0", "beta": "2.0", "gamma": "0.5"}  # pip's resolver chose beta 2 for >=2
    assert log and all(rng for _, rng in log), log  # only range requests reached the wheels' host
    fetched = sum(1 for _ in log)
    assert p["bytes"] < sum(len(d) for d in files.values()) / 2
    again = _prove(pip, ["alpha==1.0"], url, str(tmp_path))  # the second proof reads metadata from the cache
    assert again["status"] == "proven" and again["installed"] == p["installed"]
    assert len(log) == fetched and again["bytes"] == 0, again["metadata"]


def test_metadata_is_the_wheels_own_with_and_without_ranges(tmp_path):
    for ranges in (True, False):
        srv, url, files, log = _upstream(ranges=ranges)
        try:
            fn = "beta-2.0-py3-none-any.whl"
            got = wheel_metadata(url.replace("/simple", "/files/") + fn, timeout=20)
            with zipfile.ZipFile(io.BytesIO(files[fn])) as zf:
                assert got == zf.read("beta-2.0.dist-info/METADATA")
            if ranges:  # the tail only: zip directory and METADATA, never the payload
                assert log and all(r for _, r in log) and len(log) <= 2, log
            else:
                assert log == [(fn, None)]
        finally:
            srv.shutdown()
            srv.server_close()


@pytest.mark.realenv
def test_a_conflict_is_does_not_install_with_pips_reason(pip, upstream, tmp_path):
    url, _, _ = upstream
    p = _prove(pip, ["alpha==1.0", "beta==1.0"], url, str(tmp_path))  # alpha needs beta>=2
    assert p["status"] == "failed" and p["refusal"] == "ResolutionImpossible", p
    assert "beta" in p["error"]
    q = _prove(pip, ["delta==1"], url, str(tmp_path))  # the index has no such project
    assert q["status"] == "failed" and q["refusal"] == "no matching distribution" and q["no_wheel"] == ["delta==1"]


@pytest.mark.realenv
def test_a_deadline_is_unproven_timed_out_never_works(pip, tmp_path):
    srv, url, _, _ = _upstream(page_delay=60)
    try:
        t = time.monotonic()
        p = _prove(pip, ["alpha==1.0"], url, str(tmp_path), timeout=10)
        assert time.monotonic() - t < 40
    finally:
        srv.shutdown()
        srv.server_close()
    assert p["status"] == "unproven" and p["reason"].startswith("timed out after 10 s"), p


def test_resolution_too_deep_is_a_refusal():
    # pip's words (pip/_internal/exceptions.py ResolutionTooDeepError, pip 24.1+): the resolver gave up
    lines = ["error: resolution-too-deep", "", "\u00d7 Dependency resolution exceeded maximum depth",
             "\u2570\u2500> Pip cannot resolve the current dependencies as the dependency graph is too complex "
             "for pip to solve efficiently."]
    text, names = proofs.failure_facts(lines)
    assert proofs.refused_by_resolver(lines, names) == "ResolutionTooDeep"
    assert "exceeded maximum depth" in text
    assert not proofs.refused_by_resolver(["ERROR: Exception:", "OSError: [Errno 28] No space left on device"])


def test_the_cache_is_bounded(tmp_path):
    from preflight.proof_index import prune

    for i in range(10):
        (tmp_path / ("f%d" % i)).write_bytes(b"x" * 1000)
        os.utime(str(tmp_path / ("f%d" % i)), (i, i))
    assert prune(str(tmp_path), 4500) == 6000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f6", "f7", "f8", "f9"]


def test_pages_keep_every_wheel_pips_tags_admit():
    """A page leaves out only wheels no tag pip uses for the target admits: the truth is
    packaging.tags (what pip's --python-version/--platform/--abi build) over real file names."""
    from packaging.tags import compatible_tags, cpython_tags
    from packaging.utils import parse_wheel_filename

    from preflight.proof_index import MetadataIndex

    names = ["torch-2.4.0-cp310-cp310-manylinux1_x86_64.whl", "torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl",
             "torch-2.4.0-cp310-none-macosx_11_0_arm64.whl", "torch-2.4.0-cp310-cp310-win_amd64.whl",
             "torch-2.9.0-cp310-cp310-manylinux_2_28_aarch64.whl", "vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl",
             "numpy-1.26.4-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
             "numpy-1.26.4-pp39-pypy39_pp73-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
             "numpy-2.1.0-cp310-cp310-musllinux_1_2_x86_64.whl", "six-1.17.0-py2.py3-none-any.whl",
             "triton-3.0.0-1-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
             "nvidia_nccl_cu12-2.20.5-py3-none-manylinux2014_x86_64.whl", "numpy-1.26.4.tar.gz"]
    for arch in ("x86_64", "aarch64"):
        plats = proofs.platform_tags(proofs.DEFAULT_GLIBC, arch)
        ix = MetadataIndex(python="3.10", platforms=plats)
        pip_tags = set(cpython_tags((3, 10), ["cp310", "abi3", "none"], plats)) | \
            set(compatible_tags((3, 10), "cp310", plats))
        for n in names:
            fits = n.endswith(".whl") and bool(parse_wheel_filename(n)[3] & pip_tags)
            assert ix.may_fit(n) == fits, (arch, n)  # equal here; a superset by construction


@pytest.mark.realenv
def test_a_lock_through_the_metadata_index_is_the_lock_without_it(pip, upstream, monkeypatch):
    """spec's lock (outputs/lock.resolve_lock) reads the index through the loopback metadata index
    when the index is PyPI's (here the loopback upstream stands for it): the same set, the same
    hashes and the upstream's own wheel URLs (never the index's per-run token) as pip reading the
    upstream directly, and only range requests reach the wheels' host."""
    from preflight.outputs import lock

    url, files, log = upstream
    monkeypatch.setattr(proofs, "PYPI", url)
    via = lock.resolve_lock(["alpha==1.0"], "3.11", index_url=url, pip_python=pip)
    assert log and all(rng for _, rng in log), log
    monkeypatch.setattr(proofs, "PYPI", "https://pypi.invalid/simple")  # not PyPI's: read directly
    direct = lock.resolve_lock(["alpha==1.0"], "3.11", index_url=url, pip_python=pip)
    assert any(rng is None for _, rng in log)  # pip downloaded whole wheels this time
    got = [(p.name, p.version, p.hashes, p.url) for p in via.packages]
    assert got == [(p.name, p.version, p.hashes, p.url) for p in direct.packages]
    assert [(n, v) for n, v, _, _ in got] == [("alpha", "1.0"), ("beta", "2.0"), ("gamma", "0.5")]
    for name, version, hashes, u in got:
        fn = "%s-%s-py3-none-any.whl" % (name, version)
        assert hashes == ["sha256:" + hashlib.sha256(files[fn]).hexdigest()]
        assert u == url.rsplit("/simple", 1)[0] + "/files/" + fn
