"""``matrix refresh --dir D --proofs`` reads D/proofs.json (rev-attack findings 3-5): a FIFO
another user planted there hung it, their link to a root-only file was followed, and a JSON list
ended in an internal error. It now reads through paths.read_regular (no blocking open, the links
rule for inputs) and refuses what is not a proofs index in one line; nothing is proven."""

import os

import pytest

from seckit import as_nobody, need_root, one_line_error, pf, reachable, shared_dir

HANG = pytest.mark.fault("HANG")
LEAK = pytest.mark.fault("LEAK")
CRASH = pytest.mark.fault("CRASH")


def _refresh(pyz, d):
    return pf(pyz, "matrix", "refresh", "--dir", d, "--proofs", "--dry-run", timeout=60)


@HANG
def test_a_planted_fifo_is_refused_at_once(pyz, tmp_path):
    need_root()
    reachable(str(tmp_path))
    d = shared_dir(str(tmp_path / "m"))
    as_nobody("mkfifo", os.path.join(d, "proofs.json"))
    p = _refresh(pyz, d)
    assert one_line_error(p) and "proofs.json" in p.stderr, p.stderr


@LEAK
def test_a_strangers_link_to_a_root_only_file_is_not_followed(pyz, tmp_path):
    need_root()
    reachable(str(tmp_path))
    secret = tmp_path / "root-only.json"
    secret.write_text('{"proofs": {"x": {"requirements": ["six==1.17.0"], "python": "3.11"}}}')
    os.chmod(str(secret), 0o600)
    d = shared_dir(str(tmp_path / "m"))
    as_nobody("ln", "-s", str(secret), os.path.join(d, "proofs.json"))
    p = _refresh(pyz, d)
    assert one_line_error(p) and "six" not in p.stdout + p.stderr, p.stdout + p.stderr


@CRASH
@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '{"proofs": [1]}', '{"proofs": {"x": 1}}'])
def test_what_is_not_a_proofs_index_is_one_line(pyz, tmp_path, text):
    d = tmp_path / "m"
    d.mkdir()
    (d / "proofs.json").write_text(text)
    p = _refresh(pyz, str(d))
    assert one_line_error(p) and "proofs.json" in p.stderr, p.stderr
