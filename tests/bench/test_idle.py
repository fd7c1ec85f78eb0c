"""`elect bench` on an idle scenario: real raft:// member processes at rest, CPU and RSS per node for each
partitions count, through the same command, table and report as any scenario (tiny shapes, a short window)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_idle_cost_per_node_for_each_partitions_count(tmp_path: Path) -> None:
    spec = tmp_path / "tiny-idle.yaml"
    spec.write_text("kind: idle\nname: tiny-idle\nmethods: [raft]\nnodes: 2\npartitions: [2, 4]\nwindow: 1.5\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "elect", "bench", str(spec), "--out", str(out)],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cpu/node" in done.stdout and "wrote" in done.stdout
    data = json.loads((out / "results.json").read_text())
    assert [(c["partitions"], c["error"]) for c in data["cells"]] == [(2, ""), (4, "")]
    for cell in data["cells"]:
        assert set(cell["cpu"]) == set(cell["rss_mb"]) == {"n0", "n1"}
        assert all(0 <= share < 1 for share in cell["cpu"].values()) and max(cell["cpu"].values()) > 0
        assert all(mb > 10 for mb in cell["rss_mb"].values())  # a Python process with gRPC
        assert sum(cell["leading"].values()) == cell["partitions"]  # every partition led, once
        assert cell["window"] >= 1.5
    report = (out / "report.md").read_text()
    assert report.startswith("# elect idle cost: tiny-idle") and "| raft | 2 | 4 |" in report
    assert (out / "idle.png").stat().st_size > 0 and "idle.png" in report  # CPU and RSS against partitions
