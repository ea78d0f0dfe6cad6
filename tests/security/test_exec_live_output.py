"""Every live child output passes through redaction (issue 21, fault_cases_3.md l02): install's
pip/uv output on a terminal, a container build's output, shown as it comes, each line masked."""

import io
import os
import shutil
import subprocess
import sys
import time

import pytest
from helpers import plant_start_hook

from preflight.probes import child

LEAK = pytest.mark.fault("LEAK")
TOKEN = "hf_SeCrEtTokenAbCdEfGhIjKlMnOpQrStUv"
SIX = "six==1.17.0 \\\n    --hash=sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274\n"


class Clock(io.StringIO):
    """A sink that records when each write came."""

    def __init__(self):
        super().__init__()
        self.times = []

    def write(self, s):
        self.times.append((time.monotonic(), s))
        return super().write(s)


@LEAK
def test_run_live_masks_each_line_and_stays_live():
    """A token printed on stdout and stderr is masked; a progress line redrawn with \\r comes
    through before the child ends (live, not at the end)."""
    code = ("import sys, time\n"
            "print('telemetry: HF_TOKEN=%s', flush=True)\n"
            "sys.stderr.write('auth %s\\n'); sys.stderr.flush()\n"
            "for i in range(3):\n    sys.stdout.write('\\r%%d%%%%' %% (i * 50)); sys.stdout.flush(); time.sleep(0.3)\n"
            "print()\n" % (TOKEN, TOKEN))
    sink = Clock()
    t0 = time.monotonic()
    proc = child.run_live([sys.executable, "-c", code], sink, timeout=30)
    end = time.monotonic()
    text = sink.getvalue()
    assert proc.returncode == 0
    assert TOKEN not in text and "SeCrEt" not in text, text
    assert "telemetry: HF_TOKEN=" in text and "50%" in text and "100%" in text, text
    first = min(t for t, s in sink.times if "telemetry" in s)
    assert first - t0 < (end - t0) - 0.4, (first - t0, end - t0)  # shown while the child still ran


@LEAK
def test_a_token_split_across_reads_is_never_shown_in_halves():
    code = ("import os, time\nos.write(1, b'key hf_SeCrEtTokenAb'); time.sleep(0.4)\n"
            "os.write(1, b'CdEfGhIjKlMnOpQrStUv done\\n')\n")
    sink = io.StringIO()
    child.run_live([sys.executable, "-c", code], sink, timeout=30)
    assert "SeCrEt" not in sink.getvalue() and "done" in sink.getvalue(), sink.getvalue()


@LEAK
@pytest.mark.realenv
@pytest.mark.skipif(not shutil.which("script"), reason="needs script(1) for a terminal")
def test_l02_install_on_a_terminal_masks_a_hook_printing_a_token(pyz, tmp_path):
    """l02: a sitecustomize in the prefix prints HF_TOKEN at start-up; install of another lock on
    a terminal (script -qfc) shows pip's output live, the token masked."""
    lock1, lock2 = tmp_path / "a.lock", tmp_path / "b.lock"
    lock1.write_text(SIX)
    lock2.write_text("# another lock\n" + SIX)
    prefix = tmp_path / "pfx"
    p = subprocess.run([sys.executable, "-I", "-S", pyz, "install", "--lock", str(lock1), "--python", "3.11",
                        "--prefix", str(prefix), "--no-check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:]
    site = prefix / "lib" / "python3.11" / "site-packages"
    plant_start_hook(site, 'import os,sys; sys.stderr.write("telemetry: HF_TOKEN=%s\\n" % os.environ.get("HF_TOKEN"))\n')
    log = tmp_path / "tty.log"
    cmd = "%s -I -S %s install --lock %s --python 3.11 --prefix %s --no-check" % (
        sys.executable, pyz, lock2, prefix)
    p = subprocess.run(["script", "-qfc", cmd, str(log)], env=dict(os.environ, HF_TOKEN=TOKEN),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=600)
    text = log.read_bytes().decode("utf-8", "replace")
    assert p.returncode == 0, text[-2000:]
    assert "SeCrEt" not in text, text[-3000:]
    assert "telemetry: HF_TOKEN=" in text, text[-3000:]  # the hook's line is shown, masked
