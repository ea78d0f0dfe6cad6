"""Pure-Python sdists (issue 24): the purity reader (preflight/sdist_purity.py) on real sdists
that setuptools' own PEP 517 hook (``setuptools.build_meta.build_sdist``) builds here, the
download through the loopback index (a PEP 691 upstream on 127.0.0.1), and the recorded proofs
of stacks needing one (pyairports) replayed offline: one verdict for every Python, and every
format naming the source build."""

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from preflight import proofs, sdist_purity
from preflight.sdist_purity import PURE_BUILD_NEEDS, SdistError, judge_sdist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _project(root, name, setup_py="", pyproject=None, files=None):
    d = root / name
    (d / name).mkdir(parents=True)
    (d / name / "__init__.py").write_text("VALUE = 1\n")
    (d / "setup.py").write_text(setup_py or "from setuptools import setup\nsetup(name=%r, version='1.0', "
                                            "packages=[%r])\n" % (name, name))
    if pyproject is not None:
        (d / "pyproject.toml").write_text(pyproject)
    for rel, text in (files or {}).items():
        (d / rel).write_text(text)
    return d


def _sdist(d):
    """The sdist setuptools' PEP 517 hook builds from project ``d`` (bytes, filename)."""
    out = d / "dist"
    out.mkdir()
    p = subprocess.run([sys.executable, "-c", "import setuptools.build_meta as b; print(b.build_sdist(%r))" % str(out)],
                       cwd=str(d), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    fn = p.stdout.strip().splitlines()[-1]
    return (out / fn).read_bytes(), fn


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("sdists")
    pure = _sdist(_project(root, "purepkg", pyproject='[build-system]\nrequires = ["setuptools>=40.8"]\n'
                                                     'build-backend = "setuptools.build_meta"\n'))
    ext = _sdist(_project(root, "cextpkg", setup_py=textwrap.dedent("""\
        from setuptools import Extension, setup
        setup(name="cextpkg", version="1.0", packages=["cextpkg"],
              ext_modules=[Extension("cextpkg._speed", ["cextpkg/_speed.c"])])
        """), files={"cextpkg/_speed.c": "int f(void) { return 1; }\n"}))
    maturin = _sdist(_project(root, "rustypkg", pyproject='[build-system]\nrequires = ["maturin>=1,<2"]\n'
                                                         'build-backend = "maturin"\n'))
    skbuild = _sdist(_project(root, "skpkg", pyproject='[build-system]\nrequires = ["scikit-build-core"]\n'
                                                      'build-backend = "scikit_build_core.build"\n'))
    legacy = _sdist(_project(root, "oldpkg"))
    return {"pure": pure, "ext": ext, "maturin": maturin, "skbuild": skbuild, "legacy": legacy}


def _with_member(data, member, content=b"", link=None):
    """The tar.gz ``data`` re-packed with one more member (a symlink to ``link`` when given)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as src, tarfile.open(fileobj=buf, mode="w:gz") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m) if m.isfile() else None)
        ti = tarfile.TarInfo(member)
        if link is not None:
            ti.type, ti.linkname = tarfile.SYMTYPE, link
            dst.addfile(ti)
        else:
            ti.size = len(content)
            dst.addfile(ti, io.BytesIO(content))
    return buf.getvalue()


def test_a_pure_sdist_is_pure(built):
    for key, backend in (("pure", "setuptools.build_meta"), ("legacy", "setuptools.build_meta:__legacy__")):
        data, fn = built[key]
        got = judge_sdist(data, fn)
        assert got["pure"] and got["backend"] == backend, got
        assert "pure Python" in got["why"] and got["members"] >= 3


def test_a_c_extension_is_not_pure(built):
    data, fn = built["ext"]
    names = tarfile.open(fileobj=io.BytesIO(data)).getnames()
    assert any(n.endswith("_speed.c") for n in names)  # setuptools put the extension's source in
    got = judge_sdist(data, fn)
    assert not got["pure"] and "_speed.c" in got["why"], got
    # the setup.py alone also says so (an Extension without its source in the archive)
    top = names[0].split("/")[0]
    stripped = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as src, tarfile.open(fileobj=stripped, mode="w:gz") as dst:
        for m in src.getmembers():
            if not m.name.endswith(".c"):
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    got = judge_sdist(stripped.getvalue(), fn)
    assert not got["pure"] and "setup.py declares an extension" in got["why"] and top, got


@pytest.mark.parametrize("key,backend", [("maturin", "maturin"), ("skbuild", "scikit_build_core.build")])
def test_a_compiling_backend_is_not_pure(built, key, backend):
    data, fn = built[key]
    got = judge_sdist(data, fn)
    assert not got["pure"] and got["backend"] == backend and backend in got["why"], got


def test_native_build_files_are_not_pure(built):
    data, fn = built["pure"]
    top = tarfile.open(fileobj=io.BytesIO(data)).getnames()[0].split("/")[0]
    for member in ("Cargo.toml", "src/CMakeLists.txt", "kernels/k.cu", "m/_x.pyx"):
        got = judge_sdist(_with_member(data, "%s/%s" % (top, member), b"x"), fn)
        assert not got["pure"] and member.rsplit("/", 1)[-1] in got["why"], (member, got)


def test_a_symlink_member_is_refused(built):
    data, fn = built["pure"]
    top = tarfile.open(fileobj=io.BytesIO(data)).getnames()[0].split("/")[0]
    with pytest.raises(SdistError, match="link member"):
        judge_sdist(_with_member(data, top + "/evil", link="/etc/passwd"), fn)
    with pytest.raises(SdistError, match="odd member name"):
        judge_sdist(_with_member(data, "../outside", b"x"), fn)
    # a zip sdist's symlink (the mode bits in external_attr) is refused too
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("z-1.0/setup.py", "from setuptools import setup\nsetup()\n")
        link = zipfile.ZipInfo("z-1.0/evil")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
    with pytest.raises(SdistError, match="link member"):
        judge_sdist(buf.getvalue(), "z-1.0.zip")


def test_an_oversized_sdist_is_refused(built, monkeypatch):
    data, fn = built["pure"]
    monkeypatch.setattr(sdist_purity, "MAX_ARCHIVE", len(data) - 1)
    with pytest.raises(SdistError, match="over the"):
        judge_sdist(data, fn)
    monkeypatch.setattr(sdist_purity, "MAX_ARCHIVE", 32 << 20)
    top = tarfile.open(fileobj=io.BytesIO(data)).getnames()[0].split("/")[0]
    bomb = _with_member(data, top + "/zeros.bin", b"\0" * (4 << 20))  # 4 MiB unpacked, a few KiB packed
    assert len(bomb) < 64 << 10
    monkeypatch.setattr(sdist_purity, "MAX_UNPACKED", 1 << 20)
    with pytest.raises(SdistError, match="unpacks to more than"):
        judge_sdist(bomb, fn)


# ---- through the loopback index ------------------------------------------------------------
@pytest.fixture
def upstream(built):
    files = {"purepkg": [("purepkg-1.0.tar.gz", built["pure"][0])],
             "cextpkg": [("cextpkg-1.0.tar.gz", built["ext"][0]), ("cextpkg-0.9-py3-none-any.whl", b"PK")]}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            parts = self.path.strip("/").split("/")
            if parts[0] == "simple" and len(parts) == 2 and parts[1] in files:
                body = json.dumps({"meta": {"api-version": "1.0"}, "name": parts[1], "files": [
                    {"filename": fn, "url": "http://%s/files/%s" % (self.headers["Host"], fn), "hashes": {},
                     "size": len(data)} for fn, data in files[parts[1]]]}).encode()
                return self._send(200, body)
            for fs in files.values():
                for fn, data in fs:
                    if parts == ["files", fn]:
                        return self._send(200, data)
            return self._send(404, b"")

        def _send(self, code, body):
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/simple" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_sdists_are_judged_through_the_index(upstream, tmp_path):
    from preflight.proof_index import MetadataIndex

    with MetadataIndex(upstream, cache_dir=str(tmp_path), python="3.11",
                       platforms=proofs.platform_tags()) as ix:
        assert proofs.sdist_only("purepkg", ix=ix) is True
        assert proofs.sdist_only("cextpkg==1.0", ix=ix) is True  # 1.0 has only an sdist
        assert proofs.sdist_only("cextpkg", ix=ix) is False  # 0.9 has a wheel
        got = proofs.judge_sdists(ix, ["purepkg", "cextpkg==1.0"])
        with pytest.raises(ValueError):
            ix.download(upstream.replace("/simple", "/files/unnamed.tar.gz"), 1 << 20)
    assert got["purepkg"]["pure"] and got["purepkg"]["filename"] == "purepkg-1.0.tar.gz"
    assert not got["cextpkg==1.0"]["pure"] and "_speed.c" in got["cextpkg==1.0"]["why"]
    assert "_speed.c" in proofs.build_needs("cextpkg==1.0", got["cextpkg==1.0"]["why"])


def test_a_page_keeps_sdists_only_for_a_no_binary_project(upstream, tmp_path):
    from preflight.proof_index import MetadataIndex

    with MetadataIndex(upstream, cache_dir=str(tmp_path), python="3.11", platforms=proofs.platform_tags()) as ix:
        assert json.loads(ix.page("purepkg"))["files"] == []  # binary-only: pip never sees the sdist
        ix.sdist_projects.add("purepkg")
        fs = json.loads(ix.page("purepkg"))["files"]
        assert [f["filename"] for f in fs] == ["purepkg-1.0.tar.gz"] and ix.token in fs[0]["url"]
        assert "core-metadata" not in fs[0]  # pip builds an sdist's metadata; the index announces none


def test_the_native_command_builds_only_the_named_sdists():
    cmd = proofs.pip_command("py", ["outlines==0.0.46"], "3.10", "x86_64", "R", no_binary=["pyairports"])
    i = cmd.index("--only-binary=:all:")
    assert cmd.index("--no-binary") > i and cmd[cmd.index("--no-binary") + 1] == "pyairports"  # pip's later wins
    assert "--use-feature=inprocess-build-deps" in cmd and "--platform" not in cmd and "--python-version" not in cmd


# ---- the recorded proofs, replayed offline --------------------------------------------------
def _index():
    with open(os.path.join(ROOT, "matrices", "proofs.json")) as fh:
        return json.load(fh)["proofs"]


def test_recorded_source_builds_are_pure_sdists_built_natively():
    rows = {pid: r for pid, r in _index().items() if r["status"] == "proven" and r.get("source_builds")}
    assert rows
    for pid, row in rows.items():
        with open(os.path.join(ROOT, row["file"])) as fh:
            doc = json.load(fh)
        by = {i["name"].lower(): i for i in doc["install"]}
        for name in row["source_builds"]:
            assert row["build_needs"][name] == PURE_BUILD_NEEDS, pid
            assert row["sdist_purity"][name].startswith("pure Python"), pid
            assert by[name.lower()]["wheel"].endswith(".tar.gz"), pid  # pip took the sdist, nothing else
            assert "--no-binary" in doc["command"] and name in doc["command"], pid
        assert "natively under CPython %s" % row["python"] in row["resolver"], pid
        assert row["native"].startswith("CPython %s." % row["python"]), pid
        assert row["binary_only"]["refusal"], pid  # what pip's binary-only resolve said first


def test_pyairports_stacks_say_the_same_on_every_python(matrix):
    from preflight.resolve import resolve

    seen = {}
    for v in matrix.verl_versions():
        for py in ("3.10", "3.11", "3.12"):
            r = resolve(matrix, v, "vllm", python=py, _options=False)
            p = r.proof or {}
            if "pyairports" in (p.get("source_builds") or []) or "pyairports" in " ".join(p.get("no_wheel") or []):
                seen[(v, py)] = r.verdict
                assert r.verdict == "works", (v, py, p.get("status"), p.get("error", "")[-200:])
                assert any("pyairports" in w and "from source" in w for w in r.warnings), (v, py)
    assert len({py for _, py in seen}) == 3, seen


@pytest.mark.parametrize("fmt", ["json", "markdown", "console"])
def test_every_format_names_the_source_build(tmp_path, fmt):
    out = str(tmp_path / "out")
    args = ["--no-probe", "--verl", "0.2", "--backend", "vllm", "--python", "3.11"]
    p = subprocess.run([sys.executable, "-m", "preflight", "resolve"] + args + (
        ["--format", fmt, "--output", out] if fmt != "console" else []), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    text = p.stdout if fmt == "console" else open(out).read()
    assert "pyairports" in text and "from source" in text, text[-3000:]
    if fmt == "json":
        proof = json.loads(text)["resolution"]["proof"]
        assert proof["status"] == "proven" and proof["source_builds"] == ["pyairports"]
        assert proof["build_needs"]["pyairports"] == PURE_BUILD_NEEDS


@pytest.mark.parametrize("kind", ["pax", "gnu-longname"])
def test_an_oversized_extended_header_is_refused(kind, tmp_path):
    """A pax header (or a GNU long name) of 2 MiB, a few KiB packed: refused from its size, before
    tarfile parses it into copies of itself (the security review's 200 MiB pax comment took 1.2 GB)."""
    buf = io.BytesIO()
    fmt = tarfile.PAX_FORMAT if kind == "pax" else tarfile.GNU_FORMAT
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt) as tf:
        for name, body in (("p-1.0/setup.py", b"from setuptools import setup\nsetup()\n"), ("p-1.0/p.py", b"")):
            info = tarfile.TarInfo(name if kind == "pax" else "p-1.0/" + "d" * (2 << 20) + ".py")
            if kind == "pax":
                info.pax_headers = {"comment": "A" * (2 << 20)}
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    data = buf.getvalue()
    assert len(data) < 64 << 10
    with pytest.raises(SdistError, match="header of"):
        judge_sdist(data, "p-1.0.tar.gz")
