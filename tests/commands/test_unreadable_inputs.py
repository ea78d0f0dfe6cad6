"""An input this user cannot read, or one of the wrong shape, is one line naming it and the fix,
never a traceback or a wrong diagnosis (new-user review BUG3-5). Unreadable: a file of root's mode
0600 read by uid 65534 (the kernel's own refusal is the truth); wrong shape: what PyYAML itself
reads at the file's top level."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _as_nobody(pyz, *args):
    if os.geteuid() != 0:
        pytest.skip("needs root (a second uid reads root's file)")
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-I", "-S",
                           pyz] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=120, env=dict(os.environ, HOME="/tmp", COLUMNS="400"), cwd="/")


def _one_line(p):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr and "please report" not in p.stderr
    return lines[0]


@pytest.fixture
def shared(pyz_file, tmp_path):
    """A directory uid 65534 can reach, holding the zipapp and a file of root's it cannot read."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(str(tmp_path), 0o755)
    os.chmod(str(d), 0o755)
    p = tmp_path
    while str(p) != "/":
        os.chmod(str(p), os.stat(str(p)).st_mode | 0o005)
        p = p.parent
    z = d / "preflight.pyz"
    z.write_bytes(open(pyz_file, "rb").read())
    os.chmod(str(z), 0o644)
    return d


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("cmd", ["explain", "config --file", "check --config"])
def test_an_input_this_user_cannot_read_is_named_as_such(shared, cmd):
    secret = shared / ("job.log" if cmd == "explain" else "saved.yaml")
    secret.write_text("trainer:\n  total_epochs: 1\n")
    os.chmod(str(secret), 0o600)
    cat = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(secret)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    assert cat.returncode != 0 and "Permission denied" in cat.stderr  # the truth: the kernel refuses uid 65534
    args = {"explain": ["explain", str(secret)],
            "config --file": ["config", "--no-startup", "--file", str(secret)],
            "check --config": ["check", "--stage", "config", "--config", str(secret)]}[cmd]
    p = _as_nobody(str(shared / "preflight.pyz"), *args)
    if cmd == "check --config":  # check reports it as the config stage's FAIL row (exit 1), others refuse (exit 2)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        line = [ln for ln in p.stdout.splitlines() if "FAIL" in ln and "compose" in ln][0]
    else:
        line = _one_line(p)
    assert str(secret) in line and "Permission denied" in line and "not valid" not in line, line


@pytest.mark.fault("WRONG")
@pytest.mark.parametrize("text", ["5\n", "- a\n- b\n", "import os\nprint(1)\n", "true\n"])
def test_a_saved_config_that_is_no_mapping_is_refused(pyz, tmp_path, text):
    import yaml  # the truth: what PyYAML reads at the top level

    top = yaml.safe_load(text)
    assert not isinstance(top, dict)
    f = tmp_path / "saved.yaml"
    f.write_text(text)
    p = subprocess.run([sys.executable, "-I", "-S", pyz, "config", "--no-startup", "--file", str(f)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    line = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    assert p.returncode == 2 and "not a mapping of config keys" in line and str(f) in line, (p.stdout[-2000:], p.stderr)


def test_any_unreadable_path_reaching_the_command_line_is_one_line():
    """The backstop for inputs no command reads itself: a real PermissionError (from open as uid
    65534 is not possible in-process, so the kernel's error for a directory opened as a file)."""
    from preflight.limits import access_message

    try:
        open("/", "rb")
    except OSError as exc:
        msg = access_message(exc)
    assert msg and msg.startswith("/: cannot be used (Is a directory)") and "name a file" in msg
    assert access_message(OSError(28, "No space left on device")) is None
