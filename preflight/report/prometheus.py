"""The report as Prometheus text exposition format, for node_exporter's textfile collector.

Write it with ``--format prometheus --output /var/lib/node_exporter/textfile/verl_preflight.prom``:
the file is replaced atomically (a ``.tmp`` file in the same directory, then a rename), as the
collector requires, and carries no sample timestamps (the collector rejects them); the run's time
is the ``verl_preflight_last_run_timestamp_seconds`` gauge instead. Every series carries a
``command`` label, so ``check`` and ``config`` runs can share a directory in different files.

Metrics (all gauges, base units):

- ``verl_preflight_info{command,version,matrix_version,verl}`` 1
- ``verl_preflight_ready{command}`` 1 ready, 0 not
- ``verl_preflight_exit_code{command}``
- ``verl_preflight_last_run_timestamp_seconds{command}``: end of the run, Unix time
- ``verl_preflight_run_duration_seconds{command}``
- ``verl_preflight_check_status{command,stage,check,status}``: 1 for the row's status, 0 for the
  four others (pass, warn, fail, skip, error)
- ``verl_preflight_stage_status{command,stage,status}``: 1 for ready, failed or skipped
- ``verl_preflight_stage_duration_seconds{command,stage}``: each stage's wall clock (stages may
  overlap: vLLM's import runs while the gpu and nccl stages do)
- ``verl_preflight_nccl_busbw_bytes_per_second{command,check,size_bytes}`` and
  ``..._algbw_...``: the all_reduce sweep of the nccl stage (1 GB/s = 1e9 B/s, as nccl-tests)
- ``verl_preflight_vllm_seconds{command,check,phase}`` (import, engine_start, generate) and
  ``verl_preflight_vllm_tokens_per_second{command,check}``: the generation probe's timings
"""

from typing import Dict, List, Optional, Tuple

from ..result import Status
from . import Report
from .status import stage_word

__all__ = ["render", "stage_status"]

_MIB = 1 << 20


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Dict[str, object]) -> str:
    return "{%s}" % ",".join('%s="%s"' % (k, _label(v)) for k, v in labels.items())


def _num(v: float) -> str:
    if v != v:
        return "NaN"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def stage_status(report: Report, stage: str) -> Optional[str]:
    """``ready``, ``failed`` or ``skipped`` for a stage of ``report`` (None: it has no rows).
    Failed: a row failed or errored; skipped: every row was skipped; else ready."""
    rows = report.by_stage().get(stage) or []
    return stage_word(rows) if rows else None


class _Out:
    def __init__(self) -> None:
        self.families: List[Tuple[str, str, List[str]]] = []

    def family(self, name: str, help_text: str) -> List[str]:
        samples: List[str] = []
        self.families.append((name, help_text, samples))
        return samples

    def text(self) -> str:
        out: List[str] = []
        for name, help_text, samples in self.families:
            if not samples:
                continue
            out.append("# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", "\\n")))
            out.append("# TYPE %s gauge" % name)
            out.extend(samples)
        return "\n".join(out) + "\n"


def render(report: Report) -> str:
    """Prometheus text (format 0.0.4) of an already redacted ``report``."""
    cmd = report.command
    o = _Out()
    o.family("verl_preflight_info", "verl-preflight and matrix versions of the last run").append(
        "verl_preflight_info%s 1" % _labels({"command": cmd, "version": report.tool_version,
                                              "matrix_version": report.matrix_version,
                                              "verl": report.verl.get("version") or ""}))
    o.family("verl_preflight_ready", "1 when the last run found the machine ready (no check failed)").append(
        "verl_preflight_ready%s %d" % (_labels({"command": cmd}), int(report.ready)))
    o.family("verl_preflight_exit_code", "exit code of the last run (0 ready, 1 not ready)").append(
        "verl_preflight_exit_code%s %d" % (_labels({"command": cmd}), report.exit_code))
    o.family("verl_preflight_last_run_timestamp_seconds", "Unix time the last run ended").append(
        "verl_preflight_last_run_timestamp_seconds%s %s" % (_labels({"command": cmd}),
                                                            _num(round(report.started_at + report.duration_s, 3))))
    o.family("verl_preflight_run_duration_seconds", "wall time of the last run").append(
        "verl_preflight_run_duration_seconds%s %s" % (_labels({"command": cmd}), _num(round(report.duration_s, 3))))
    checks = o.family("verl_preflight_check_status", "1 for the status of each check of the last run, 0 for the others")
    for r in report.results:
        for s in Status:
            checks.append("verl_preflight_check_status%s %d" % (
                _labels({"command": cmd, "stage": r.stage, "check": r.id, "status": s.value}), int(r.status == s)))
    stages = o.family("verl_preflight_stage_status", "1 for the status of each stage of the last run "
                                                     "(ready, failed, skipped), 0 for the others")
    for stage in report.stages:
        st = stage_status(report, stage)
        if st is None:
            continue
        for state in ("ready", "failed", "skipped"):
            stages.append("verl_preflight_stage_status%s %d" % (
                _labels({"command": cmd, "stage": stage, "status": state}), int(st == state)))
    walls = o.family("verl_preflight_stage_duration_seconds", "wall clock of each stage of the last run (stages "
                                                              "may overlap)")
    for stage in report.stages:
        wall = (report.stage_timings.get(stage) or {}).get("wall_s")
        if isinstance(wall, (int, float)):
            walls.append("verl_preflight_stage_duration_seconds%s %s" % (_labels({"command": cmd, "stage": stage}),
                                                                         _num(wall)))
    bus = o.family("verl_preflight_nccl_busbw_bytes_per_second", "NCCL all_reduce bus bandwidth per message size "
                                                                 "(nccl-tests busbw)")
    alg = o.family("verl_preflight_nccl_algbw_bytes_per_second", "NCCL all_reduce algorithm bandwidth per message "
                                                                 "size (bytes / time)")
    phases = o.family("verl_preflight_vllm_seconds", "vLLM/SGLang generation probe: seconds per phase")
    tps = o.family("verl_preflight_vllm_tokens_per_second", "vLLM/SGLang generation probe: generated tokens per second")
    for r in report.results:
        ev = r.evidence or {}
        for row in ev.get("sizes") or []:
            if not isinstance(row, dict) or row.get("size_mib") is None:
                continue
            lab = {"command": cmd, "check": r.id, "size_bytes": int(row["size_mib"]) * _MIB}
            if isinstance(row.get("busbw_gbps"), (int, float)):
                bus.append("verl_preflight_nccl_busbw_bytes_per_second%s %s" % (_labels(lab),
                                                                                _num(row["busbw_gbps"] * 1e9)))
            if isinstance(row.get("algbw_gbps"), (int, float)):
                alg.append("verl_preflight_nccl_algbw_bytes_per_second%s %s" % (_labels(lab),
                                                                                _num(row["algbw_gbps"] * 1e9)))
        if r.stage == "vllm":
            for key, phase in (("import_s", "import"), ("engine_start_s", "engine_start"), ("generate_s", "generate")):
                if isinstance(ev.get(key), (int, float)):
                    phases.append("verl_preflight_vllm_seconds%s %s" % (
                        _labels({"command": cmd, "check": r.id, "phase": phase}), _num(ev[key])))
            if isinstance(ev.get("tokens_per_s"), (int, float)):
                tps.append("verl_preflight_vllm_tokens_per_second%s %s" % (_labels({"command": cmd, "check": r.id}),
                                                                           _num(ev["tokens_per_s"])))
    return o.text()
