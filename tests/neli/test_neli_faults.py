"""NELI under real faults: `elect member` processes, the real broker, SIGKILL, SIGSTOP and a network cut.

Bounds are generous (a loaded 2-core machine), conditions are awaited with deadlines, and every process
is stopped even when a test fails.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from kafka_proxy import KafkaProxy

from elect.kafka_wire import api_versions
from elect_bench.members import Line, MemberProcess
from elect_cluster.endpoints import Endpoints
from elect_cluster.kafka_broker import find_tansu
from elect_cluster.ports import free_port
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra

SESSION = 1.0
HEARTBEAT_TIMEOUT = 0.75  # the fast-mode default for a 1 s session
SLACK = 0.75  # scheduling delay a busy machine may add to a timer
BOUND = 30.0  # for anything that involves a rebalance


class Members:
    """Member processes of one fresh group; `close` stops them all, whatever happened."""

    def __init__(self, servers: str, tmp: Path, mode: str = "fast", **params: object) -> None:
        name = f"neli-{mode}-{uuid.uuid4().hex[:8]}"
        query = "&".join(f"{k}={v}" for k, v in {"group": name, "mode": mode, "partitions": 6,
                                                   "session_timeout": SESSION, **params}.items())
        self.url = f"kafka://{servers}/{name}?{query}"
        self.tmp = tmp
        self.all: list[MemberProcess] = []

    def start(self, member_id: str, roles: Sequence[str | int]) -> MemberProcess:
        m = MemberProcess(self.url, member_id, roles, log_dir=self.tmp)
        self.all.append(m)
        m.start()
        return m

    def close(self) -> None:
        for m in self.all:
            m.resume()
            m.kill()


@pytest.fixture
def members(infra: Endpoints, tmp_path: Path) -> Iterator[Members]:
    group = Members(",".join(infra.kafka), tmp_path)
    try:
        yield group
    finally:
        group.close()


def settled(group: list[MemberProcess], roles: list[str], timeout: float = BOUND) -> dict[str, MemberProcess]:
    """Wait until every role has exactly one leader; return who leads what."""
    def leaders() -> dict[str, MemberProcess] | None:
        found: dict[str, list[MemberProcess]] = {r: [m for m in group if m.alive and r in m.log.leading()]
                                                for r in roles}
        if all(len(v) == 1 for v in found.values()):
            return {r: v[0] for r, v in found.items()}
        return None
    return wait_until(leaders, timeout, what=f"one leader for each of {roles}")


def acquired(m: MemberProcess, role: str, start: int = 0) -> Line:
    return m.log.wait_for(lambda ln: ln["event"] == "acquired" and ln["role"] == role, BOUND, start=start,
                          what=f"{m.member_id} acquiring {role}")


ROLES = [0, 1, 2, 3, 4, 5]
NAMES = [str(r) for r in ROLES]


def test_sigkill_of_an_owner_moves_its_roles_to_survivors(members: Members) -> None:
    group = [members.start(name, ROLES) for name in ("a", "b", "c")]
    leaders = settled(group, NAMES)
    victim = leaders["0"]
    lost = sorted(r for r, m in leaders.items() if m is victim)
    tokens = {r: max(ln["token"] for ln in victim.log.lines if ln["role"] == r) for r in lost}
    survivors = [m for m in group if m is not victim]
    marks = {m.member_id: len(m.log.lines) for m in survivors}
    killed = time.monotonic()
    victim.kill()
    after = settled(survivors, NAMES)
    for role in lost:
        heir = after[role]
        line = acquired(heir, role, marks[heir.member_id])
        assert line["token"] > tokens[role]
        assert line["mono"] - killed < BOUND


def test_sigstop_longer_than_the_heartbeat_timeout_fences_first_on_waking(members: Members) -> None:
    group = [members.start(name, ROLES) for name in ("a", "b")]
    leaders = settled(group, NAMES)
    frozen = leaders["0"]
    other = next(m for m in group if m is not frozen)
    led = sorted(r for r, m in leaders.items() if m is frozen)
    mark = len(frozen.log.lines)
    paused = time.monotonic()
    frozen.pause()
    try:
        for role in led:  # the group gives the frozen member's roles away meanwhile
            acquired(other, role)
        wait_until(lambda: all(r in other.log.leading() for r in led), BOUND, what="the other member leading all")
        resumed = time.monotonic()
    finally:
        frozen.resume()
    wait_until(lambda: all(r not in frozen.log.leading() for r in led), BOUND, what="the woken member to fence")
    after = frozen.log.lines[mark:]
    first = after[:len(led)]
    assert [ln["event"] for ln in first] == ["fenced"] * len(led), after  # before anything as a leader
    for ln in first:
        assert ln["mono"] >= resumed - 0.05  # emitted after waking ...
        assert ln["until"] <= paused + HEARTBEAT_TIMEOUT + SLACK  # ... for a leadership that ended while frozen
        successor = next(x for x in other.log.lines if x["event"] == "acquired" and x["role"] == ln["role"]
                         and x["mono"] > paused)
        assert successor["mono"] >= ln["until"], "the successor started before the frozen leader's deadline"


# --------------------------------------------------------------------------- a member cut off the broker
@pytest.fixture
def proxied_broker(tmp_path: Path) -> Iterator[tuple[str, KafkaProxy]]:
    """A broker of its own whose advertised address is a proxy, so one member can be cut off."""
    port = free_port()
    proxy = KafkaProxy(("127.0.0.1", port))
    url = f"tcp://127.0.0.1:{port}"
    log = open(tmp_path / "tansu.log", "w")  # noqa: SIM115 - closed in finally
    broker = subprocess.Popen([find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url",
                               f"tcp://127.0.0.1:{proxy.port}", "--storage-engine", "memory://tansu/",
                               "--cluster-id", "neli-cut"], stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, cwd=tmp_path)
    try:
        wait_until(lambda: api_versions("127.0.0.1", port, 1.0), 30, what="the proxied broker",
                   ignore=(Exception,))
        yield f"127.0.0.1:{proxy.port}", proxy
    finally:
        proxy.close()
        broker.kill()
        broker.wait()
        log.close()


def test_member_cut_off_the_broker_fences_itself_within_the_heartbeat_timeout(
        proxied_broker: tuple[str, KafkaProxy], tmp_path: Path) -> None:
    servers, proxy = proxied_broker
    group = Members(servers, tmp_path)
    try:
        members = [group.start(name, ROLES) for name in ("a", "b")]
        leaders = settled(members, NAMES)
        cut = leaders["0"]
        other = next(m for m in members if m is not cut)
        led = sorted(r for r, m in leaders.items() if m is cut)
        mark = len(cut.log.lines)
        began = time.monotonic()
        proxy.cut(cut.member_id)
        fenced = [cut.log.wait_for(lambda ln, r=r: ln["event"] == "fenced" and ln["role"] == r, BOUND, start=mark,
                                   what=f"{cut.member_id} fencing {r}") for r in led]
        for ln in fenced:
            assert ln["until"] <= began + HEARTBEAT_TIMEOUT + SLACK, ln
            assert ln["mono"] <= began + HEARTBEAT_TIMEOUT + SLACK, ln  # on its own clock, no broker needed
        for ln in fenced:  # the other member takes over, after the cut-off leader stopped
            successor = acquired(other, ln["role"])
            assert successor["mono"] >= ln["until"], (ln, successor)
        proxy.heal(cut.member_id)
    finally:
        group.close()


def test_members_recreate_their_topic_when_the_broker_comes_back_empty(tmp_path: Path) -> None:
    # Tansu keeps its log in memory: killed and started again it knows no topic. The members
    # create the topic again with the group's partition count (never a broker default). (Whether the group
    # then forms again on the restarted Tansu is not reliable: left out here, see bench/infra.yaml.)
    from elect_cluster.local import LocalCluster
    from neli.options import KafkaOptions
    from neli.topic import admin_client, partition_count

    with LocalCluster(tmp_path / "broker", services=("kafka",), broker="tansu") as cluster:
        group = Members(",".join(cluster.endpoints.kafka), tmp_path)
        try:
            roles: list[str | int] = list(range(6))
            a, b = group.start("a", roles), group.start("b", roles)
            wait_until(lambda: len(a.log.leading() | b.log.leading()) == 6, BOUND, 0.05, what="every role led")
            cluster.kill("kafka", 0)
            cluster.start_member("kafka", 0)
            topic = group.url.split("/")[3].split("?")[0]
            options = KafkaOptions(servers=tuple(cluster.endpoints.kafka), topic=topic)
            wait_until(lambda: partition_count(admin_client(options), options, time.monotonic() + 5) == 6,
                       2 * BOUND, 0.5, what="the members to create their topic again with 6 partitions")
        finally:
            group.close()
