"""The package as users get it: ``pip install .`` into a fresh venv gives a working ``preflight``
command and ``python -m preflight`` (matrices and the report schema as package data), and the
zipapp keeps its vendored libraries inside the package (``preflight/_vendor``)."""

import os
import subprocess
import sys
import zipfile

import pytest

from helpers import validate_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600,
                          **kw)


def _repo_matrix_files():
    out = set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "matrices")):
        for f in files:
            if f.endswith((".toml", ".json", ".md", ".yaml")):
                out.add(os.path.relpath(os.path.join(dirpath, f), os.path.join(ROOT, "matrices")))
    return out


@pytest.mark.realenv  # builds a wheel with setuptools from the package index (build isolation)
def test_pip_install_gives_a_working_preflight(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py, exe = str(venv / "bin" / "python"), str(venv / "bin" / "preflight")
    p = _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", ROOT], cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    from preflight import matrix

    ver = _run([exe, "--version"], cwd=str(tmp_path))
    assert ver.returncode == 0 and ver.stdout.strip() == "verl-preflight 0.1.0 (matrix %s)" % matrix.load().version
    out = tmp_path / "r.json"
    chk = _run([exe, "check", "--stage", "host,python", "-q", "--json", str(out)], cwd=str(tmp_path))
    doc = validate_report(out.read_text())
    assert chk.returncode == doc["exit_code"] and doc["target"]["python"] == py
    mod = _run([py, "-m", "preflight", "resolve", "--verl", "0.9.1", "--gpu", "H100", "--driver", "580.65.06",
                "--python", "3.12", "--format", "json", "-q"], cwd=str(tmp_path))
    assert mod.returncode == 0 and validate_report(mod.stdout)["resolution"]["ok"] is True
    site = _run([py, "-c", "import preflight, os; print(os.path.dirname(preflight.__file__))"],
                cwd=str(tmp_path)).stdout.strip()
    assert site != os.path.join(ROOT, "preflight")  # the installed copy, not the checkout
    installed = set()
    for dirpath, _, files in os.walk(os.path.join(site, "_matrices")):
        installed |= {os.path.relpath(os.path.join(dirpath, f), os.path.join(site, "_matrices")) for f in files
                      if not f.endswith((".pyc",))}
    assert installed == _repo_matrix_files()
    assert os.path.isfile(os.path.join(site, "schema", "report-1.json"))
    # config composes with the installed package's stored verl configs and its own Hydra (new-user B2)
    cfg = _run([exe, "config", "--no-startup", "--verl", "0.9.1", "--json", "-", "-q", "--",
                "data.train_batch_size=7"], cwd=str(tmp_path))
    rows = {r["id"]: r for r in validate_report(cfg.stdout)["results"]}
    assert rows["config.compose"]["status"] == "pass", rows["config.compose"]


def test_zipapp_vendors_inside_the_package(pyz_file):
    with zipfile.ZipFile(pyz_file) as z:
        names = z.namelist()
        vendor_txt = z.read("preflight/_vendor/vendor.txt").decode()
    assert [n for n in names if not n.startswith("preflight/")] == ["__main__.py"]
    assert not [n for n in names if n.rsplit("/", 1)[-1] == "example.py"]
    with open(os.path.join(ROOT, "tools", "vendor.txt")) as fh:
        assert vendor_txt == fh.read()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import preflight, rich, packaging, tomli, pynvml; "
            "print('\\n'.join(m.__file__ for m in (rich, packaging, tomli, pynvml)))")
    p = _run([sys.executable, "-I", "-S", "-c", code, pyz_file])
    assert p.returncode == 0, p.stderr
    assert all(f.startswith(os.path.join(pyz_file, "preflight", "_vendor")) for f in p.stdout.split()), p.stdout


def test_completion_generated_at_build_time(pyz_file, tmp_path):
    """bash completion from the argparse parser (shtab at build time): it parses, and completing
    ``preflight check --fo`` offers --format, ``preflight re`` offers resolve."""
    p = _run([sys.executable, "-I", "-S", pyz_file, "--completion", "bash"])
    assert p.returncode == 0 and p.stdout.startswith("#")
    script = tmp_path / "preflight.bash"
    script.write_text(p.stdout)
    probe = ('source %s; complete -p preflight >/dev/null || exit 3; f=$(complete -p preflight | '
             'sed "s/.*-F \\([^ ]*\\).*/\\1/"); '
             'for line in "check --fo" "re"; do COMP_WORDS=(preflight $line); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); '
             'COMP_LINE="preflight $line"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); $f preflight "${COMP_WORDS[-1]}" '
             '"${COMP_WORDS[-2]}"; echo "${COMPREPLY[*]}"; done' % script)
    out = _run(["bash", "-c", probe])
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert "--format" in first.split() and second.split() == ["rehearse", "resolve"]
    z = _run([sys.executable, "-I", "-S", pyz_file, "--completion", "zsh"])
    assert z.returncode == 0 and z.stdout.startswith("#compdef preflight")
