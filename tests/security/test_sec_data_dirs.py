"""``data DIR`` (and config's data directories): a directory of inputs is judged as a named file
is (reviewer's A05). Another user's link inside their directory to root's 0600 parquet, or their
link to root's 0700 directory, is refused before any read (``paths.dir_files``: ``foreign_link``
on the directory and ``file_problem`` on every file in it); root's rows never reach a report."""

import glob
import os
import subprocess

import pytest

import seckit
from seckit import as_nobody, need_root, one_line_error, pf, shared_dir

LEAK = pytest.mark.fault("LEAK")
WRONG = pytest.mark.fault("WRONG")
SECRET = "RootRow_Qx93"
DJ = sorted(glob.glob(os.path.expanduser("~/.cache/verl-preflight/test-envs/data-jinja-*/bin/python")))


def _parquet(path, source):
    if not DJ:
        pytest.skip("no cached data-jinja environment (pyarrow)")
    subprocess.run([DJ[0], "-c", "import sys, pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table("
                    "{'prompt': [[{'role': 'user', 'content': sys.argv[2]}]], 'data_source': [sys.argv[2]], "
                    "'reward_model': [{'ground_truth': sys.argv[2]}]}), sys.argv[1])", path, source], check=True)


@pytest.fixture
def setup(tmp_path):
    need_root()
    seckit.reachable(str(tmp_path))
    private = tmp_path / "rootonly"
    private.mkdir()
    os.chmod(str(private), 0o700)
    _parquet(str(private / "secret.parquet"), SECRET)
    os.chmod(str(private / "secret.parquet"), 0o600)
    return str(private), shared_dir(str(tmp_path / "shared"))


@LEAK
@pytest.mark.parametrize("how", ["link-inside-their-dir", "link-to-root-dir"])
def test_data_reads_no_directory_through_another_users_link(pyz, tmp_path, setup, how):
    private, shared = setup
    if how == "link-inside-their-dir":
        d = os.path.join(shared, "evedata")
        as_nobody("mkdir", d)
        as_nobody("ln", "-s", os.path.join(private, "secret.parquet"), os.path.join(d, "train.parquet"))
    else:
        d = os.path.join(shared, "dlink")
        as_nobody("ln", "-s", private, d)
    out = tmp_path / "r.json"
    p = pf(pyz, "data", d, "--python", DJ[0], "--json", str(out), timeout=300)
    assert SECRET not in p.stdout + p.stderr, (p.stdout + p.stderr)[-1500:]
    assert one_line_error(p) and "link of another user" in p.stderr, p.stderr
    assert not out.exists()


@WRONG
def test_their_own_readable_parquet_in_their_directory_is_still_read(pyz, tmp_path, setup):
    _, shared = setup
    d = os.path.join(shared, "evedata")
    as_nobody("mkdir", d)
    mine = str(tmp_path / "theirs.parquet")
    _parquet(mine, "openai/gsm8k")
    os.chown(mine, seckit.NOBODY, seckit.NOBODY)
    as_nobody("cp", mine, os.path.join(d, "train.parquet"))
    as_nobody("ln", "-s", os.path.join(d, "train.parquet"), os.path.join(d, "val.parquet"))
    p = pf(pyz, "data", d, "--python", DJ[0], timeout=300)
    assert p.returncode in (0, 1) and "train.parquet" in p.stdout, p.stdout + p.stderr


def test_dir_files_names_the_refused_entries(setup):
    private, shared = setup
    import sys
    sys.path.insert(0, seckit.ROOT)
    from preflight.paths import dir_files

    d = os.path.join(shared, "evedata")
    as_nobody("mkdir", d)
    as_nobody("ln", "-s", os.path.join(private, "secret.parquet"), os.path.join(d, "a.parquet"))
    as_nobody("mkfifo", os.path.join(d, "f.parquet"))
    why, ok, bad = dir_files(d, ".parquet")
    assert why is None and ok == [] and len(bad) == 1 and "a.parquet" in bad[0] and "link of another user" in bad[0]
    as_nobody("ln", "-s", private, os.path.join(shared, "dlink"))
    why, ok, bad = dir_files(os.path.join(shared, "dlink"), ".parquet")
    assert "link of another user" in why and ok == bad == []


def test_a_file_name_with_a_line_break_stays_on_one_line(pyz, tmp_path):
    """A parquet named 'nl<LF>FAKE PASS line.parquet' in a directory given to ``data`` (threat review
    W2): the console's summary and directory note print it escaped, so no line of the output is
    the name's forged text; rich markup in a name ('[bold]') is printed as text."""
    from envs import real_env

    py = real_env("data-jinja", ["pyarrow==19.0.1", "jinja2==3.1.6"])
    d = tmp_path / "d"
    d.mkdir()
    for name in ("nl\nFAKE PASS line.parquet", "[bold]x.parquet"):
        subprocess.run([py, "-c", "import sys, pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table("
                        "{'prompt': [[{'role': 'user', 'content': 'hi'}]], 'data_source': ['x']}), sys.argv[1])",
                        str(d / name)], check=True)
    p = pf(pyz, "data", "--python", py, str(d), env=dict(os.environ, COLUMNS="400"))
    lines = (p.stdout + p.stderr).splitlines()
    assert not any(l.startswith("FAKE PASS") for l in lines), p.stdout
    assert any("nl\\nFAKE PASS line.parquet" in l for l in lines) and "[bold]x.parquet" in p.stdout, p.stdout
