"""A URL option with a line break (``--torch-index $'https://x\\nFAKE: ready'``) is refused at parse
time, in one line that does not repeat the value: it can no longer split image's (or spec's,
resolve's, install's) progress lines into a line of the attacker's choosing."""

import pytest

from seckit import one_line_error, pf

WRONG = pytest.mark.fault("WRONG")


@WRONG
@pytest.mark.parametrize("cmd", [["image", "-o", "IMG", "--dry-run"], ["spec", "-o", "SPEC", "--dry-run"]])
@pytest.mark.parametrize("bad", ["https://x/simple\nFAKE-LINE ready", "https://x/\rFAKE-LINE", "https://x/\u2028FAKE-LINE",
                                 "https://x/ FAKE-LINE", "https://x/\x1b[2KFAKE-LINE"])
def test_a_url_option_with_a_line_break_is_refused_at_parse_time(pyz, tmp_path, cmd, bad):
    argv = [a.replace("IMG", str(tmp_path / "img")).replace("SPEC", str(tmp_path / "spec")) for a in cmd]
    p = pf(pyz, *argv, "--verl", "0.9.1", "--no-probe", "--torch-index", bad)
    assert one_line_error(p), p.stderr
    assert "--torch-index" in p.stderr and "FAKE-LINE" not in p.stdout + p.stderr
    assert not (tmp_path / "img").exists() and not (tmp_path / "spec").exists()
