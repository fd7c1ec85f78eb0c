"""``elect cluster up|status|down`` as separate processes, the way a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elect_cluster.local import LocalCluster

from _infra_fixtures import process_alive

pytestmark = pytest.mark.infra


def _elect(*args: str, timeout: float = 150.0) -> subprocess.CompletedProcess[str]:
    # The `elect` console script is wired by the lead; this runs the same register()/run() code.
    return subprocess.run([sys.executable, "-m", "elect_cli.cluster", "cluster", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_up_status_down_from_separate_processes(tmp_path: Path) -> None:
    workdir = str(tmp_path / "cli")
    try:
        up = _elect("up", "--workdir", workdir, "--services", "kafka,etcd,zookeeper", "--timeout", "120",
                    "--json")
        assert up.returncode == 0, up.stderr
        endpoints = json.loads(up.stdout)
        assert endpoints["urls"]["etcd"] == f"etcd://{endpoints['etcd'][0]}/elect"

        status = _elect("status", "--workdir", workdir, "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert report["healthy"] and [m["service"] for m in report["members"]] == ["kafka", "etcd", "zookeeper"]
        pids = [m["pid"] for m in report["members"]]
        assert all(process_alive(p) for p in pids)  # they outlived the `up` process

        again = _elect("up", "--workdir", workdir, "--services", "kafka,etcd,zookeeper")
        assert again.returncode == 0 and "already up" in again.stdout
        assert "zookeeper://" in again.stdout

        human = _elect("status", "--workdir", workdir)
        assert human.returncode == 0 and "healthy" in human.stdout and "standalone" in human.stdout

        down = _elect("down", "--workdir", workdir)
        assert down.returncode == 0, down.stderr
        assert not any(process_alive(p) for p in pids)
        gone = _elect("status", "--workdir", workdir)
        assert gone.returncode == 3 and "no cluster running" in gone.stdout
    finally:
        LocalCluster(workdir).down()


def test_bad_arguments_and_errors_exit_non_zero(tmp_path: Path) -> None:
    bad = _elect("up", "--workdir", str(tmp_path), "--services", "kafka,redis")
    assert bad.returncode == 2 and "redis" in bad.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "elect_cli.cluster", "cluster", "up", "--workdir", str(tmp_path),
         "--services", "etcd"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "ELECT_ETCD_BIN": str(tmp_path / "none")})
    assert missing.returncode == 2 and "apt-get install etcd-server" in missing.stderr
