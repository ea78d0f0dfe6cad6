"""tools/build_pyz.py on a fresh machine builds nothing from source: the pip command that fetches a
vendored sdist (PyYAML's, for its pure ``lib/yaml``) takes that sdist and nothing else as source. Real
pip decides, offline, over a local --find-links folder: a pure sdist whose build backend needs a build
tool, offered first as an sdist only (pip must refuse to build it) and then as a wheel (pip fetches the
sdist and prepares its metadata with the wheel)."""

import importlib.util
import io
import os
import subprocess
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_spec = importlib.util.spec_from_file_location("build_pyz", os.path.join(ROOT, "tools", "build_pyz.py"))
build_pyz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_pyz)

# An in-tree PEP 517 backend: preparing metadata imports the build tool (as PyYAML's imports setuptools
# and Cython); building a wheel is never asked of it.
BACKEND = '''
import os
import buildtool  # noqa: F401  (the build requirement, installed by pip into the isolated environment)


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "purepkg-1.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\\nName: purepkg\\nVersion: 1.0\\n")
    return "purepkg-1.0.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit("build_wheel must not run: only the sdist is wanted")
'''


def _sdist(folder, name, files):
    path = os.path.join(folder, "%s-1.0.tar.gz" % name)
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("%s-1.0/%s" % (name, rel))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _links(tmp_path, tool_as_wheel):
    links = tmp_path / "links"
    links.mkdir()
    _sdist(str(links), "purepkg", {
        "PKG-INFO": "Metadata-Version: 2.1\nName: purepkg\nVersion: 1.0\n",
        "pyproject.toml": '[build-system]\nrequires = ["buildtool"]\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": BACKEND,
        "purepkg/__init__.py": "",
    })
    # the build tool as an sdist (could only be used by building it) ...
    _sdist(str(links), "buildtool", {"PKG-INFO": "Metadata-Version: 2.1\nName: buildtool\nVersion: 1.0\n",
                                     "setup.py": "raise SystemExit('buildtool was built from source')\n"})
    if tool_as_wheel:  # ... and as a wheel
        with zipfile.ZipFile(str(links / "buildtool-1.0-py3-none-any.whl"), "w") as z:
            z.writestr("buildtool/__init__.py", "")
            z.writestr("buildtool-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: buildtool\nVersion: 1.0\n")
            z.writestr("buildtool-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                         "Tag: py3-none-any\n")
            z.writestr("buildtool-1.0.dist-info/RECORD", "")
    return str(links)


def _download(tmp_path, links):
    dest = tmp_path / "dest"
    cmd = build_pyz.download_command("purepkg", "1.0", str(dest), sdist=True)
    cmd += ["--no-index", "--find-links", links, "--no-cache-dir"]
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                          timeout=300)
    return proc, sorted(os.listdir(str(dest))) if dest.exists() else []


def test_the_sdist_download_builds_no_build_tool_from_source(tmp_path):
    proc, got = _download(tmp_path, _links(tmp_path, tool_as_wheel=False))
    assert proc.returncode != 0 and got == [], proc.stdout
    assert "No matching distribution found for buildtool" in proc.stdout, proc.stdout
    assert "built from source" not in proc.stdout


def test_the_sdist_download_takes_the_sdist_with_its_build_tool_as_a_wheel(tmp_path):
    proc, got = _download(tmp_path, _links(tmp_path, tool_as_wheel=True))
    assert proc.returncode == 0, proc.stdout
    assert got == ["purepkg-1.0.tar.gz"]

