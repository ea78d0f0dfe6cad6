"""The report layer: every format of every reporting command, read back by an independent reader.

JSON is validated against the published schema with ``jsonschema``; JUnit XML is read with
``junitparser``; Prometheus text with ``prometheus_client``'s own parser; Markdown is rendered with
``markdown-it-py``. Secrets must be absent from every format; the atomic writer and --status-dir
are checked on real files.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from markdown_it import MarkdownIt
from prometheus_client.parser import text_string_to_metric_families

from helpers import validate_report
from preflight.atomic import OutputError, write_atomic
from preflight.report import Report
from preflight.report.jsonreport import Redacted
from preflight.report.render import FORMATS, render, to_text
from preflight.result import Result, Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HF = "hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
WANDB = "0123456789abcdef0123456789abcdef01234567"
SIZES = [{"size_mib": 1, "time_us": 80.0, "algbw_gbps": 13.1, "busbw_gbps": 19.66, "iters": 50},
         {"size_mib": 64, "time_us": 1900.0, "algbw_gbps": 35.3, "busbw_gbps": 52.95, "iters": 20}]


def sample_report(**kw) -> Report:
    """A report with every status, a root failure and one it causes, NCCL sizes, vLLM timings,
    and secrets in a message, evidence, a fix, the target and a section."""
    rows = [
        Result("host.os", "host", Status.PASS, "Linux", {"kernel": "6.1"}, duration_s=0.01),
        Result("host.cpu", "host", Status.WARN, "2 CPUs", {"usable": 2}, fix="give the job more CPUs | 8 per GPU"),
        Result("packages.torch", "packages", Status.FAIL, "torch missing; HF_TOKEN=%s" % HF, {"WANDB_API_KEY": WANDB},
               fix="pip install 'torch==2.11.0' --index-url https://bob:pw123@mirror/simple"),
        Result("imports.torch", "imports", Status.FAIL, "cannot import torch", fix="install torch first",
               caused_by=["packages.torch"]),
        Result("gpu.nvml", "gpu", Status.ERROR, "check crashed: KeyError: 'x'", {"traceback": "..."}),
        Result("nccl.allreduce", "nccl", Status.PASS, "2 ranks", {"sizes": SIZES, "init_s": 1.2}, duration_s=3.5),
        Result("vllm.generate", "vllm", Status.PASS, "generated 64 tokens",
               {"import_s": 9.5, "engine_start_s": 31.25, "generate_s": 0.42, "tokens_per_s": 152.4}),
        Result("config.compose", "config", Status.SKIP, "skipped: imports.torch failed", caused_by=["imports.torch"]),
    ]
    args = dict(results=rows, stages=["host", "packages", "imports", "gpu", "nccl", "vllm", "config"],
                target={"python": "/opt/venv/bin/python", "version": "3.12.3"},
                verl={"version": "0.9.1", "chosen_by": "installed"},
                machine={"host": {"os": {"name": "Ubuntu 24.04"}, "arch": "x86_64", "glibc": "2.39",
                                  "cpu": {"usable": 2}},
                         "nvml": {"driver": "580.65.06", "cuda_driver": 13000, "device_count": 1,
                                  "devices": [{"index": 0, "name": "NVIDIA H200", "capability": "9.0",
                                               "memory_total_mib": 143771}], "pairs": []}},
                tool_version="0.1.0", matrix_version="2026.11.29", started_at=1796000000.0, duration_s=42.5,
                sections={"launch": {"spec": {"env": {"HF_TOKEN": HF}},
                                     "config": Redacted({"data.prompt_key": "prompt"})}})
    args.update(kw)
    return Report(**args)


def _no_secret(text: str) -> None:
    assert HF not in text and WANDB not in text and "pw123" not in text


def _render(report, fmt, tmp_path):
    out = tmp_path / ("r." + {"console": "txt", "json": "json", "markdown": "md", "junit": "xml",
                             "prometheus": "prom"}[fmt])
    render(report, fmt, str(out))
    return out.read_text()


# ---- each format, read by its own reader ------------------------------------------------------

def test_json_validates_and_orders_next_steps(tmp_path):
    doc = validate_report(_render(sample_report(), "json", tmp_path))
    assert doc["$schema"] == "urn:verl-preflight:schema:report-1" and doc["command"] == "check"
    assert doc["verdict"] == "not_ready" and doc["exit_code"] == 1 and doc["ready"] is False
    assert doc["summary"] == {"pass": 3, "warn": 1, "fail": 2, "skip": 1, "error": 1}
    steps = doc["next_steps"]
    # root causes (packages.torch, gpu.nvml) before the consequence (imports.torch, caused by packages.torch)
    assert [s["ids"] for s in steps] == [["packages.torch"], ["gpu.nvml"], ["imports.torch"]]
    assert [s["root"] for s in steps] == [True, True, False]
    assert steps[0]["blocks"] == ["imports.torch"] and steps[2]["blocks"] == ["config.compose"]
    assert doc["machine"]["nvml"]["devices"][0]["capability"] == "9.0"
    assert doc["launch"]["config"] == {"data.prompt_key": "prompt"}  # the owner's redaction is kept
    _no_secret(json.dumps(doc))


def test_schema_rejects_what_it_should(tmp_path):
    import jsonschema

    doc = json.loads(_render(sample_report(), "json", tmp_path))
    for broken in ({**doc, "verdict": "maybe"}, {k: v for k, v in doc.items() if k != "$schema"},
                   {**doc, "results": [{**doc["results"][1], "fix": None}]},
                   {**doc, "machine": {"nvml": {"devices": []}}}):
        with pytest.raises(jsonschema.ValidationError):
            validate_report(broken)


def test_junit_one_testcase_per_row(tmp_path):
    report = sample_report()
    _no_secret(_render(report, "junit", tmp_path))
    xml = JUnitXml.fromfile(str(tmp_path / "r.xml"))
    cases = {c.name: c for suite in xml for c in suite}
    assert sorted(cases) == sorted(r.id for r in report.results)
    kind = {r.id: r.status for r in report.results}
    for name, case in cases.items():
        got = [type(x) for x in case.result]
        want = {Status.FAIL: [Failure], Status.ERROR: [Error], Status.SKIP: [Skipped]}.get(kind[name], [])
        assert got == want, name
        assert case.classname == "verl-preflight.%s" % name.split(".")[0]
    assert "pip install" in cases["packages.torch"].result[0].text  # the fix is the failure's text
    suites = {s.name: s for s in xml}
    assert set(suites) == set(report.stages)
    assert (suites["imports"].failures, suites["gpu"].errors, suites["config"].skipped) == (1, 1, 1)
    xml.update_statistics()
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (8, 2, 1, 1)


def test_prometheus_parsed_by_prometheus_client(tmp_path):
    report = sample_report()
    text = _render(report, "prometheus", tmp_path)
    _no_secret(text)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    val = {f: [(s.labels, s.value) for s in fams[f].samples] for f in fams}
    assert val["verl_preflight_ready"] == [({"command": "check"}, 0.0)]
    assert val["verl_preflight_last_run_timestamp_seconds"][0][1] == pytest.approx(1796000042.5)
    per_check = {}
    for labels, v in val["verl_preflight_check_status"]:
        per_check.setdefault(labels["check"], {})[labels["status"]] = v
    assert {c: [s for s, v in d.items() if v == 1] for c, d in per_check.items()} == \
        {r.id: [r.status.value] for r in report.results}
    bus = {int(l["size_bytes"]): v for l, v in val["verl_preflight_nccl_busbw_bytes_per_second"]}
    assert bus == {s["size_mib"] << 20: pytest.approx(s["busbw_gbps"] * 1e9) for s in SIZES}
    phases = {l["phase"]: v for l, v in val["verl_preflight_vllm_seconds"]}
    assert phases == {"import": 9.5, "engine_start": 31.25, "generate": 0.42}
    stages = {(l["stage"], l["status"]) for l, v in val["verl_preflight_stage_status"] if v == 1}
    assert stages == {("host", "ready"), ("packages", "failed"), ("imports", "failed"), ("gpu", "failed"),
                      ("nccl", "ready"), ("vllm", "ready"), ("config", "skipped")}
    assert not [f for f in os.listdir(str(tmp_path)) if f.endswith(".tmp")]


def test_markdown_renders_short_and_redacted(tmp_path):
    report = sample_report()
    text = _render(report, "markdown", tmp_path)
    _no_secret(text)
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert html.count("<table>") == 1
    body_rows = html.split("<tbody>")[1].count("<tr>")
    assert body_rows == sum(r.status not in (Status.PASS, Status.SKIP) for r in report.results)
    assert "give the job more CPUs | 8 per GPU" in html  # a pipe inside a cell does not split it
    assert "<strong>Next steps</strong>" in html and html.index("packages.torch") < html.index("imports.torch")
    assert len(text.splitlines()) < 40


def test_console_text_ends_with_next_steps(tmp_path):
    text = _render(sample_report(), "console", tmp_path)
    _no_secret(text)
    steps = text[text.index("Next steps"):]
    assert [line.split(":")[0] for line in steps.splitlines() if line[:1].isdigit()] == \
        ["1. packages.torch", "2. gpu.nvml", "3. imports.torch"]
    assert "pip install 'torch==2.11.0'" in text  # one line, quotes intact
    ready = _render(sample_report(results=sample_report().results[:1]), "console", tmp_path)
    assert "Next steps" not in ready and "READY" in ready


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_to_stdout(fmt, capsys):
    render(sample_report(), fmt)
    out = capsys.readouterr().out
    assert out.strip() and out.endswith("\n")
    _no_secret(out)


# ---- the atomic writer ------------------------------------------------------------------------

def test_atomic_writer_replaces_or_leaves_the_old_file(tmp_path):
    target = tmp_path / "m.prom"
    target.write_text("old\n")
    write_atomic(str(target), "new\n", "--output")
    assert target.read_text() == "new\n"
    assert oct(os.stat(str(target)).st_mode & 0o777) == oct(0o666 & ~_umask())
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f").write_text("keep\n")
    os.chmod(str(ro), 0o500)
    try:
        if os.access(str(ro), os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(OutputError, match="--output .*: cannot write"):
            write_atomic(str(ro / "f"), "lost\n", "--output")
        assert (ro / "f").read_text() == "keep\n"
    finally:
        os.chmod(str(ro), 0o700)
    assert sorted(os.listdir(str(tmp_path))) == ["m.prom", "ro"]


def test_atomic_writer_error_on_a_missing_directory(tmp_path):
    with pytest.raises(OutputError, match="--json .*/nope/r.json: directory .*/nope does not exist"):
        write_atomic(str(tmp_path / "nope" / "r.json"), "{}", "--json")


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


# ---- every reporting command, every format ----------------------------------------------------

def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "preflight"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    d = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d / "v")], check=True)
    return str(d / "v" / "bin" / "python")


def _command_args(command, bare_python, *options):
    """The command line of ``command`` with ``options`` before any '--' launch words."""
    argv = {
        "check": ["check", "--python", bare_python, "--stage", "host,python,packages"],
        "resolve": ["resolve", "--verl", "0.9.1", "--gpu", "H100", "--driver", "535.183.01", "--python", "3.12"],
        "config": ["config", "--python", bare_python, "--verl", "0.9.1", "--", "data.train_batch_size=60",
                   "actor_rollout_ref.rollout.n=12", "trainer.n_gpus_per_node=7"],
    }[command]
    cut = argv.index("--") if "--" in argv else len(argv)
    return argv[:cut] + list(options) + argv[cut:]


def check_document(fmt, text, command):
    """Read ``text`` with the format's independent reader; return (ready, row ids)."""
    if fmt == "json":
        doc = validate_report(text)
        assert doc["command"] == command
        return doc["ready"], {r["id"] for r in doc["results"]}
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        from junitparser.junitparser import JUnitXml as X

        xml = X.fromelem(ET.fromstring(text.encode("utf-8")))
        ids = {c.name for s in xml for c in s}
        bad = any(isinstance(x, (Failure, Error)) for s in xml for c in s for x in c.result)
        return not bad, ids
    if fmt == "prometheus":
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        ready = fams["verl_preflight_ready"].samples[0]
        assert ready.labels == {"command": command}
        return ready.value == 1, {s.labels["check"] for s in fams["verl_preflight_check_status"].samples}
    if fmt == "markdown":
        html = MarkdownIt("commonmark").enable("table").render(text)
        assert "verl-preflight %s" % command in html
        head = text.splitlines()[0]  # "### verl-preflight <command>: <headline>"
        assert head.endswith((": READY", ": NOT READY", ": OK", ": WOULD FAIL", ": NO ERROR FOUND", ": ERRORS FOUND")), head
        return head.endswith((": READY", ": OK", ": NO ERROR FOUND")), None
    return ("NOT READY" not in text and "WOULD FAIL" not in text and "No stack works" not in text), None


@pytest.mark.parametrize("command", ["check", "resolve", "config"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_commands_write_every_format(command, fmt, bare_python, tmp_path):
    out = tmp_path / "out"
    p = cli(*_command_args(command, bare_python, "--format", fmt, "--output", str(out), "--json",
                           str(tmp_path / "r.json")))
    assert p.returncode in (0, 1), p.stderr
    doc = validate_report((tmp_path / "r.json").read_text())
    ready, ids = check_document(fmt, out.read_text(), command)
    assert ready == doc["ready"] and p.returncode == doc["exit_code"]
    if ids is not None:
        assert ids == {r["id"] for r in doc["results"]}
    if fmt == "console":  # the console view went to the file, not twice
        assert p.stdout == "" and out.read_text().strip()
    else:
        assert p.stdout.strip(), "the console summary still shows with --output"


@pytest.mark.parametrize("fmt", ["json", "markdown", "junit", "prometheus"])
def test_format_to_stdout_keeps_stdout_clean(fmt, bare_python):
    p = cli("check", "--python", bare_python, "--stage", "host,python", "--format", fmt)
    ready, _ = check_document(fmt, p.stdout, "check")
    assert p.returncode == (0 if ready else 1)
    assert "host" in p.stderr  # the console view went to stderr
    q = cli("check", "--python", bare_python, "--stage", "host,python", "--format", fmt, "-q")
    assert q.stderr == "" and check_document(fmt, q.stdout, "check")[0] == ready


def test_two_stdout_outputs_are_a_usage_error():
    p = cli("check", "--stage", "host", "--format", "junit", "--json", "-")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "both write to stdout" in p.stderr


@pytest.mark.realenv
def test_data_command_every_format(tmp_path):
    from test_data_parquet import GOOD_ROWS, verl_py as _verl_py, write_parquet  # noqa: F401

    from envs import real_env
    from test_data_parquet import VERL_CORE

    py = real_env("verl091-core", VERL_CORE)
    good = write_parquet(py, tmp_path / "train.parquet", rows=GOOD_ROWS)
    raw = write_parquet(py, tmp_path / "raw.parquet", columns={"question": ["q"], "answer": ["a"]})
    for fmt in FORMATS:
        out = tmp_path / ("d." + fmt)
        p = cli("data", "--python", py, good, raw, "--format", fmt, "--output", str(out), "--json",
                str(tmp_path / "d.json"))
        doc = validate_report((tmp_path / "d.json").read_text())
        assert p.returncode == 1 == doc["exit_code"] and doc["next_steps"]
        assert check_document(fmt, out.read_text(), "data")[0] is False


# ---- --status-dir -----------------------------------------------------------------------------

from preflight.outputs.owned import MANIFEST  # noqa: E402  (status files are recorded there)


def test_status_dir_one_file_per_stage(bare_python, tmp_path):
    d = tmp_path / "status"
    d.mkdir()
    (d / "gpu").write_text("ready\n")  # a previous run's answer must not survive
    p = cli("check", "--python", bare_python, "--verl", "0.9.1", "--stage", "host,python,packages,imports",
            "--status-dir", str(d), "--json", str(tmp_path / "r.json"), "-q")
    doc = validate_report((tmp_path / "r.json").read_text())
    assert p.stdout == "" and p.returncode == doc["exit_code"]
    want = {}
    for stage in doc["stages"]:
        rows = [r for r in doc["results"] if r["stage"] == stage]
        want[stage] = ("failed" if any(r["status"] in ("fail", "error") for r in rows) else
                       "skipped" if all(r["status"] == "skip" for r in rows) else "ready")
    got = {f: (d / f).read_text() for f in os.listdir(str(d)) if f != MANIFEST}
    from preflight.stages import STAGE_NAMES

    unselected = {s: "skipped\n" for s in STAGE_NAMES if s not in doc["stages"]}  # gpu's old "ready" is gone
    assert unselected.get("gpu") == "skipped\n"
    assert got == dict({s: w + "\n" for s, w in want.items()}, verdict=doc["verdict"] + "\n", **unselected)
    assert "failed\n" in got.values()  # a bare interpreter has no verl: the packages stage fails


def test_status_file_is_written_when_its_stage_ends(tmp_path, ctx_factory):
    """Files appear stage by stage, before the run ends (what an init container waits on)."""
    from preflight.report.status import StatusDir
    from preflight.runner import run

    d = tmp_path / "s"
    status = StatusDir(str(d))
    seen = []

    def progress(event, result):
        status.progress(event, result)
        if event.startswith("start:"):
            seen.append((event[6:], sorted(set(os.listdir(str(d))) - {MANIFEST})))

    ctx = ctx_factory()
    run(ctx, ["host", "python"], progress)
    first_python = next(files for cid, files in seen if cid.startswith("python."))
    assert first_python == ["host"] and (d / "host").read_text() in ("ready\n", "failed\n")
    assert sorted(set(os.listdir(str(d))) - {MANIFEST}) == ["host", "python"]
    time.sleep(0)


def test_schema_ships_in_the_zipapp(pyz):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from preflight.report.jsonreport import load_schema, "
            "SCHEMA_ID; s = load_schema(); print(s['$id'] == SCHEMA_ID)")
    p = subprocess.run([sys.executable, "-I", "-S", "-c", code, pyz], stdout=subprocess.PIPE, universal_newlines=True)
    assert p.stdout.strip() == "True"


def test_fixes_name_a_command_that_runs_from_here(pyz, bare_python, tmp_path):
    """A fix that says 'preflight install' is spelled as the tool was run: the zipapp path after
    the interpreter, or 'python -m preflight' from a checkout; the spelled command then runs."""
    import shlex

    exe = os.path.basename(sys.executable)
    for argv, want in (([sys.executable, "-I", "-S", pyz], "%s %s install" % (exe, pyz)),
                       ([sys.executable, "-m", "preflight"], "%s -m preflight install" % exe)):
        out = tmp_path / "r.json"
        subprocess.run(argv + ["check", "--python", bare_python, "--stage", "packages", "-q", "--json", str(out)],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        fix = {r["id"]: r for r in validate_report(out.read_text())["results"]}["packages.verl"]["fix"]
        assert want in fix and "preflight install" not in fix.replace(want, ""), fix
        cmd = shlex.split(want)[:-1] + ["--version"]  # the spelled command, without 'install'
        if cmd[0] == exe:
            cmd[0] = sys.executable
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
        assert p.returncode == 0 and p.stdout.startswith("verl-preflight"), (cmd, p.stdout)


def test_gpu_run_reports():
    """The reports of a real GPU run (bench/gpu_report_formats.sh), read back by the independent
    readers: NCCL busbw per message size in the Prometheus text equals the JSON evidence.

    Default: the reports of the 2 x H200 run of 2026-11-30 (vLLM 0.24.0 from the wheelhouse,
    tests/data/gpu_run_h200x2); PREFLIGHT_GPU_REPORTS points at a fresh run's folder instead."""
    d = os.environ.get("PREFLIGHT_GPU_REPORTS") or os.path.join(os.path.dirname(__file__), "..", "data", "gpu_run_h200x2")
    doc = validate_report(open(os.path.join(d, "report.json")).read())
    assert doc["machine"]["nvml"].get("device_count", 0) >= 1
    fams = {f.name: f for f in text_string_to_metric_families(open(os.path.join(d, "report.prom")).read())}
    rows = {r["id"]: r for r in doc["results"]}
    sizes = [s for r in rows.values() for s in (r["evidence"].get("sizes") or [])]
    if sizes:
        bus = {int(s.labels["size_bytes"]): s.value for s in fams["verl_preflight_nccl_busbw_bytes_per_second"].samples}
        assert bus == {s["size_mib"] << 20: pytest.approx(s["busbw_gbps"] * 1e9) for s in sizes}
    JUnitXml.fromfile(os.path.join(d, "report.junit"))
    MarkdownIt("commonmark").enable("table").render(open(os.path.join(d, "report.markdown")).read())
    status = {f: open(os.path.join(d, "status", f)).read().strip() for f in os.listdir(os.path.join(d, "status"))}
    assert status["verdict"] == doc["verdict"] and set(status) - {"verdict"} == set(doc["stages"])


@pytest.mark.parametrize("command", ["check", "cluster", "config", "data", "rehearse", "explain"])
@pytest.mark.parametrize("status", [Status.PASS, Status.FAIL])
def test_one_headline_in_console_and_markdown(command, status):
    """The console and the markdown word the verdict the same way (READY/NOT READY for a machine,
    OK/WOULD FAIL for a launch), and the word agrees with the JSON's ``ready``."""
    from preflight.report import LAUNCH_COMMANDS
    from preflight.report.launch import verdict

    rep = Report(results=[Result(id="x.y", stage="config" if command in LAUNCH_COMMANDS else "host", status=status,
                                 message="m", fix=None if status is Status.PASS else "do z")],
                 stages=["config"], command=command)
    pair = ("NO ERROR FOUND", "ERRORS FOUND") if command == "explain" else \
        ("OK", "WOULD FAIL") if command in LAUNCH_COMMANDS else ("READY", "NOT READY")
    assert rep.headline == pair[0 if json.loads(to_text(rep, "json"))["ready"] else 1]
    md = to_text(rep, "markdown").splitlines()[0]
    assert md.endswith(": " + rep.headline), md
    console = verdict(rep).plain if command in LAUNCH_COMMANDS else to_text(rep, "console")
    assert rep.headline in console and not (pair[1] in console and status is Status.PASS), console
