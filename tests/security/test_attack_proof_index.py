"""Attacks of another local user (uid 65534) on the loopback proof index (preflight/proof_index.py)
run by root: a planted cache (F2), a link in the cache (F3), a swap during prune (F4), requests to
root's index and whole-file downloads (F5), upstream redirects (F6). Loopback servers only."""

import hashlib
import io
import json
import os
import socket
import stat
import sys
import urllib.error
import urllib.request
import zipfile

import pytest

from loopback_http import serve
from preflight import proof_index, proofs
from preflight.proof_index import MetadataIndex, prune, wheel_metadata

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant files owned by uid 65534")


def _wheel(name="six", version="1.17.0"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("%s/blob.bin" % name, b"x" * 300000)
        zf.writestr("%s-%s.dist-info/METADATA" % (name, version),
                    "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    return buf.getvalue()


_serve = serve


@pytest.fixture
def upstream():
    """A PEP 691 index naming six's wheel on itself, served whole (no ranges)."""
    whl = _wheel()

    def routes(h):
        if h.path == "/simple/six/":
            doc = {"meta": {"api-version": "1.1"}, "name": "six", "files": [
                {"filename": "six-1.17.0-py2.py3-none-any.whl", "size": len(whl),
                 "url": "http://%s/f/six-1.17.0-py2.py3-none-any.whl" % h.headers["Host"], "hashes": {}}]}
            return 200, json.dumps(doc).encode(), {"Content-Type": proof_index.JSON_TYPE}
        if h.path == "/f/six-1.17.0-py2.py3-none-any.whl":
            return 200, whl, {}
        return 404, b"", {}

    srv, base, log = _serve(routes)
    yield base + "/simple", log, whl
    srv.shutdown()
    srv.server_close()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d/simple" % port


def _page_path(cache, upstream, name="six"):
    h = hashlib.sha256(("%s/%s" % (upstream, name)).encode()).hexdigest()
    return os.path.join(cache, "pages", h[:2], h)


def _files(d):
    return sorted(os.path.join(r, n) for r, _, ns in os.walk(d) for n in ns)


FAKE = json.dumps({"meta": {"api-version": "1.0"}, "name": "six", "files": [
    {"filename": "six-9.9.9-py3-none-any.whl", "url": "http://evil.example/six-9.9.9-py3-none-any.whl",
     "hashes": {}}]}).encode()


@root_only
def test_f2_a_cache_another_user_made_is_never_read(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o1777)  # /tmp-like: anybody may create entries
    cache = shared / "verl-preflight" / "proof-index"
    up = _dead_url()
    page = _page_path(str(cache), up)
    os.makedirs(os.path.dirname(page))
    with open(page, "wb") as fh:
        fh.write(FAKE)
    for p in [str(shared / "verl-preflight")] + [os.path.join(str(cache), *x) for x in
                                                 [(), ("pages",), ("pages", os.path.basename(os.path.dirname(page)))]]:
        os.chown(p, NOBODY, NOBODY)
    os.chown(page, NOBODY, NOBODY)
    with MetadataIndex(up, cache_dir=str(cache)) as ix:
        code, body = _get(ix.url + "/six/")
        assert ix.cache_dir != str(cache)
        private = ix.cache_dir
    assert code == 502 and b"evil.example" not in body  # the upstream is down: no page, never the planted one
    assert len(ix.notes) == 1 and "not this user's own" in ix.notes[0] and str(cache) in ix.notes[0]
    assert not os.path.exists(private)  # the private cache went with the run
    assert open(page, "rb").read() == FAKE  # theirs is left alone


@root_only
def test_f2_a_file_another_user_owns_inside_own_cache_is_not_served(tmp_path):
    cache = tmp_path / "cache"
    up = _dead_url()
    page = _page_path(str(cache), up)
    os.makedirs(os.path.dirname(page))
    with open(page, "wb") as fh:
        fh.write(FAKE)
    os.chown(page, NOBODY, NOBODY)
    with MetadataIndex(up, cache_dir=str(cache)) as ix:
        assert ix.cache_dir == str(cache) and not ix.notes
        code, body = _get(ix.url + "/six/")
    assert code == 502 and b"evil.example" not in body


@root_only
def test_f3_a_link_another_user_planted_in_the_cache_is_never_written_through(tmp_path, upstream):
    url, _, _ = upstream
    cache, victim = tmp_path / "cache", tmp_path / "victim"
    victim.mkdir()
    page = _page_path(str(cache), url)
    os.makedirs(os.path.join(str(cache), "pages"))
    link = os.path.dirname(page)
    os.symlink(str(victim), link)
    os.lchown(link, NOBODY, NOBODY)
    with MetadataIndex(url, cache_dir=str(cache)) as ix:
        code, body = _get(ix.url + "/six/")
    assert code == 200 and b"six-1.17.0" in body  # served from upstream
    assert os.listdir(str(victim)) == [] and os.path.islink(link)  # nothing written where the link points


def test_f4_prune_never_follows_a_link_swapped_in_after_its_walk(tmp_path, monkeypatch):
    cache, victim = tmp_path / "cache", tmp_path / "victim"
    (cache / "pages" / "zz").mkdir(parents=True)
    victim.mkdir()
    for i in range(3):
        (cache / "pages" / "zz" / ("f%d" % i)).write_bytes(b"x" * 100)
        (victim / ("f%d" % i)).write_bytes(b"precious")
    (cache / "pages" / "link").symlink_to(str(victim))  # a link inside the tree is never walked
    real = proof_index._prune_walk

    def walk_then_swap(d):
        got = real(d)
        os.rename(str(cache / "pages" / "zz"), str(tmp_path / "moved"))
        os.symlink(str(victim), str(cache / "pages" / "zz"))
        return got

    monkeypatch.setattr(proof_index, "_prune_walk", walk_then_swap)
    assert prune(str(cache), 0) == 0
    assert sorted(os.listdir(str(victim))) == ["f0", "f1", "f2"]
    assert all((victim / n).read_bytes() == b"precious" for n in os.listdir(str(victim)))
    monkeypatch.setattr(proof_index, "_prune_walk", real)
    os.unlink(str(cache / "pages" / "zz"))
    os.rename(str(tmp_path / "moved"), str(cache / "pages" / "zz"))
    assert prune(str(cache), 150) == 200  # without a swap it frees its own files, never the link's
    assert sorted(os.listdir(str(victim))) == ["f0", "f1", "f2"]


def test_f5_only_the_runs_secret_path_is_answered(tmp_path, upstream):
    url, log, _ = upstream
    cache = tmp_path / "cache"
    with MetadataIndex(url, cache_dir=str(cache)) as ix:
        base = ix.url[:-len("/simple")].rsplit("/", 1)[0]
        assert len(ix.token) >= 24 and ix.url == "%s/%s/simple" % (base, ix.token)
        for probe in ("/simple/six/", "/%s/simple/six/" % ("A" * len(ix.token)), "/%s/simple/six/" % ix.token[:-1],
                      "/files/127.0.0.1/f/six-1.17.0-py2.py3-none-any.whl.metadata"):
            assert _get(base + probe)[0] == 404, probe
        assert log == [] and _files(str(cache)) == []  # nothing fetched, nothing written
        code, body = _get(ix.url + "/six/")
        assert code == 200
        host = url.split("/")[2]
        other = "%s/%s/files/%s/etc/passwd.whl.metadata" % (base, ix.token, host)
        assert _get(other)[0] == 404 and not any("passwd" in p for p in log)  # a path no page named: never fetched
        f = json.loads(body)["files"][0]
        code, meta = _get(base + f["url"] + ".metadata")
        assert code == 200 and b"Version: 1.17.0" in meta


def test_f5_a_whole_download_is_bounded_by_the_pages_size(tmp_path, upstream):
    url, log, whl = upstream
    wurl = url.replace("/simple", "/f/six-1.17.0-py2.py3-none-any.whl")
    assert b"Name: six" in wheel_metadata(wurl, 10, max_bytes=len(whl))
    with pytest.raises(OSError, match="over the"):
        wheel_metadata(wurl, 10, max_bytes=len(whl) - 1)
    assert proof_index.WHOLE_MAX >= 1 << 30 and wheel_metadata.__defaults__[2] == proof_index.WHOLE_DEFAULT


def test_f5_a_range_answered_with_more_than_asked_is_refused(tmp_path):
    whl = _wheel()
    srv, base, log = _serve(lambda h: (206, whl + b"\0" * (proof_index.TAIL + 10), {
        "Content-Range": "bytes 0-%d/%d" % (len(whl) - 1, len(whl))}))
    try:
        with pytest.raises(OSError, match="with more"):
            wheel_metadata(base + "/f/six-1.17.0-py2.py3-none-any.whl", 10)
    finally:
        srv.shutdown()
        srv.server_close()


def test_f5_pip_gets_the_index_url_in_its_environment_never_argv(tmp_path):
    rec = tmp_path / "rec.json"
    fake_pip = tmp_path / "pip.py"  # records the argv and PIP_INDEX_URL it was started with, then fails
    fake_pip.write_text("import json, os, sys\njson.dump({'argv': sys.argv, 'env': os.environ.get('PIP_INDEX_URL'), "
                        "'cmd': open('/proc/self/cmdline', 'rb').read().decode()}, open(%r, 'w'))\nsys.exit(1)\n"
                        % str(rec))
    launcher = tmp_path / "py"
    launcher.write_text("#!/bin/sh\nshift 2\nexec %s %s \"$@\"\n" % (sys.executable, fake_pip))
    os.chmod(str(launcher), stat.S_IRWXU)
    secret = "http://127.0.0.1:9/Sekr3tT0ken/simple"
    import time

    from types import SimpleNamespace

    ix = SimpleNamespace(url=secret, token="Sekr3tT0ken", errors=[], sdist_projects=set())  # the loopback index as _run_pip reads it
    row = proofs._run_pip({}, str(launcher), "26.1", ["six"], "3.11", "x86_64", proofs.PYPI, 20.0,
                          time.monotonic(), ix)
    got = json.loads(rec.read_text())
    assert row["status"] == "unproven"
    assert got["env"] == secret and "Sekr3tT0ken" not in got["cmd"] and "--index-url" not in got["argv"]
    assert "--isolated" not in got["argv"]  # it would make pip ignore PIP_INDEX_URL
    assert "--index-url" in proofs.pip_command("p", ["six"], "3.11", "x86_64", "r")  # upstream itself: unchanged


def test_f6_a_redirect_to_another_host_or_to_http_is_refused(tmp_path):
    target_srv, target, tlog = _serve(lambda h: (200, FAKE, {"Content-Type": proof_index.JSON_TYPE}))
    srv, base, log = _serve(lambda h: (302, b"", {"Location": target + "/simple/six/"}))
    try:
        with MetadataIndex(base + "/simple", cache_dir=str(tmp_path / "c")) as ix:
            code, body = _get(ix.url + "/six/")
        assert code == 502 and b"refused" in body and log == ["/simple/six/"] and tlog == []
    finally:
        for s in (srv, target_srv):
            s.shutdown()
            s.server_close()
    from preflight import wheel_metadata

    h = wheel_metadata._Redirects(lambda: {"files.pythonhosted.org"})
    req = urllib.request.Request("https://pypi.org/simple/six/")
    ok = h.redirect_request(req, None, 302, "Found", {}, "https://files.pythonhosted.org/x.whl")
    assert ok is not None and ok.full_url == "https://files.pythonhosted.org/x.whl"
    for bad in ("http://files.pythonhosted.org/x.whl", "https://evil.example/x.whl"):
        with pytest.raises(urllib.error.HTTPError, match="refused"):
            h.redirect_request(req, None, 302, "Found", {}, bad)
