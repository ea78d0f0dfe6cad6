"""install --system-site-packages from a Python that is itself a venv (the H200 nodes' python3 is
/opt/torch/.venv/bin/python3): the new venv must see that venv's packages, as Python's own venv
module does not (checked here first, so the test fails if Python ever changes that)."""

import os
import subprocess
import sys

from preflight.outputs.install import _see_base_venv


def _venv(*args):
    subprocess.run(list(args), check=True, capture_output=True)


def _imports(py, mod):
    return subprocess.run([py, "-c", "import %s" % mod], capture_output=True).returncode == 0


def test_system_site_packages_sees_a_base_venv(tmp_path):
    base = tmp_path / "base"
    _venv(sys.executable, "-m", "venv", "--without-pip", str(base))
    base_py = str(base / "bin" / "python")
    site = subprocess.run([base_py, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "pf_base_marker.py"), "w") as fh:
        fh.write("VALUE = 42\n")
    assert _imports(base_py, "pf_base_marker")

    new = tmp_path / "new"
    _venv(base_py, "-m", "venv", "--without-pip", "--system-site-packages", str(new))
    new_py = str(new / "bin" / "python")
    assert not _imports(new_py, "pf_base_marker"), "Python's venv now sees a base venv: _see_base_venv is moot"

    said = []
    _see_base_venv(base_py, str(new), said.append)
    assert _imports(new_py, "pf_base_marker")
    assert said and base_py in said[0]


def test_no_pth_when_the_base_is_not_a_venv(tmp_path):
    base_py = getattr(sys, "_base_executable", None) or sys.executable
    probe = subprocess.run([base_py, "-c", "import sys; print(sys.prefix != sys.base_prefix)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if probe == "True":  # the test runner's own interpreter is a venv whose base we cannot reach
        base_py = os.path.join(sys.base_prefix, "bin", "python3")
    new = tmp_path / "new"
    _venv(base_py, "-m", "venv", "--without-pip", "--system-site-packages", str(new))
    said = []
    _see_base_venv(base_py, str(new), said.append)
    assert said == []
    assert not list(new.glob("lib/python*/site-packages/_preflight_base_venv.pth"))
