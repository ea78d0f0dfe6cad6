"""``matrix refresh`` under the user's pip configuration with real pip, offline: a local PEP 503
index (file://) with tiny wheels, a pip config file that points at it and carries a machine-wide
constraint (like /etc/xdg/pip's torch<=2.14.1), and one release whose wheel is broken. The refresh
must read the releases above the constraint, report pip's real error for the broken one, and keep
(write) everything else it read."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from preflight.matrix.refresh import RefreshError, refresh


def _wheel(folder, name, version, requires=(), broken=False):
    fn = os.path.join(folder, "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version))
    if broken:
        with open(fn, "wb") as fh:
            fh.write(b"this is not a zip file")
        return
    di = "%s-%s.dist-info" % (name.replace("-", "_"), version)
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\nRequires-Python: >=3.8\n%s" % (
        name, version, "".join("Requires-Dist: %s\n" % r for r in requires))
    with zipfile.ZipFile(fn, "w") as z:
        z.writestr("%s/__init__.py" % name.replace("-", "_"), "")
        z.writestr("%s/METADATA" % di, meta)
        z.writestr("%s/WHEEL" % di, "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("%s/RECORD" % di, "")


@pytest.fixture
def pip_site(tmp_path, monkeypatch):
    index = tmp_path / "simple" / "demo-torch"
    index.mkdir(parents=True)
    _wheel(str(index), "demo-torch", "2.14.1", ["numpy"])
    _wheel(str(index), "demo-torch", "2.15.0", ["numpy", "cuda-toolkit==13.2.2"])
    _wheel(str(index), "demo-torch", "2.16.0", broken=True)
    links = "".join('<a href="%s">%s</a>\n' % (f, f) for f in sorted(os.listdir(str(index))))
    (index / "index.html").write_text("<html><body>%s</body></html>" % links)
    (tmp_path / "simple" / "index.html").write_text('<a href="demo-torch/">demo-torch</a>')
    cons = tmp_path / "constraints.txt"
    cons.write_text("demo-torch<=2.14.1\n")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = file://%s/simple\nconstraint = %s\nno-cache-dir = true\n" % (tmp_path, cons))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    home = tmp_path / "home"  # no user-level pip configuration or cache from this machine's account
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for k in list(os.environ):
        if k.startswith("PIP_") and k != "PIP_CONFIG_FILE":
            monkeypatch.delenv(k)
    mdir = tmp_path / "matrices"
    (mdir / "metadata").mkdir(parents=True)
    return str(mdir)


def test_refresh_under_a_constraint_keeps_what_it_read(pip_site):
    # the same pip, asked plainly, refuses the release above the constraint: the configuration is live
    plain = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                            "--quiet", "demo-torch===2.15.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
    assert plain.returncode != 0
    with pytest.raises(RefreshError) as info:
        refresh(pip_site, {"demo-torch": ">=2.0"})
    exc = info.value
    # pip's real error for the broken release, not a made-up one
    assert len(exc.failures) == 1 and "demo-torch==2.16.0" in exc.failures[0] and "ERROR" in exc.failures[0]
    with open(os.path.join(pip_site, "metadata", "demo-torch.json")) as fh:
        rel = json.load(fh)["releases"]
    # both readable releases are written, the one above the constraint included, with their real metadata
    assert sorted(rel) == ["2.14.1", "2.15.0"] and exc.count == 2
    assert rel["2.15.0"]["requires_dist"] == ["cuda-toolkit==13.2.2", "numpy"]
    assert "b/metadata/demo-torch.json" in exc.diff
