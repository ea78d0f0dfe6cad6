"""The console header of a cluster report: no ``verl: None (-)`` without a launch, and a node's
group header names the node once."""

import pytest

from preflight.cluster import label_nodes
from preflight.report import Report
from preflight.report.render import render
from preflight.result import Result, Status


def _report(verl):
    node = label_nodes([{"node_id": "a" * 56, "ip": "127.0.0.1", "alive": True, "head": True, "resources": {}}])[0]
    stage = "node %s" % node.name
    rows = [Result("cluster.nodes.n0", "cluster", Status.PASS, "1 node"),
            Result("n0.host.os", stage, Status.PASS, "Linux")]
    return Report(results=rows, stages=["cluster", stage], target={"python": "/usr/bin/python3", "version": "3.12.3"},
                  verl=verl, machine={}, tool_version="0.1.0", matrix_version="2026.11.29", started_at=0.0,
                  duration_s=1.0, command="cluster"), node.name


@pytest.mark.fault("WRONG")
def test_cluster_header_without_launch(tmp_path):
    report, name = _report({"version": None, "chosen_by": "-"})
    out = tmp_path / "r.txt"
    render(report, "console", str(out))
    text = out.read_text()
    assert "None" not in text and "verl:" not in text
    header = [l for l in text.splitlines() if l.startswith("node n0")]
    assert len(header) == 1 and header[0].count(name) == 1, header


@pytest.mark.fault("WRONG")
def test_header_names_verl_when_known(tmp_path):
    report, _ = _report({"version": "0.9.1", "chosen_by": "launch"})
    out = tmp_path / "r.txt"
    render(report, "console", str(out))
    assert "verl: 0.9.1 (launch)" in out.read_text()
