"""raft:// in real processes over gRPC on loopback: crash, restart, rebalance, pause; plus the wire codec
and the URL rules. Members are `elect member` processes (elect_bench.members.MemberProcess)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import elect
from elect_bench.members import Line, MemberProcess
from elect_bench.methods import METHODS
from elect_bench.methods import Group as MethodGroup
from elect_cluster.waiting import wait_until
from raft_priority.messages import (
    NODE,
    Heartbeat,
    HeartbeatResponse,
    Message,
    NodeBeat,
    NodeBeatAck,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from raft_priority.wire.codec import decode, encode

IDS = ("a", "b", "c")
P = 6
ET = 1.0
BOUND = 15.0  # generous: a noisy 2-core machine shared with other test runs
_unique = itertools.count()


class Cluster:
    """Three raft:// nodes as processes; nodes can be killed, paused and restarted with their state."""

    def __init__(self, tmp: Path, **params: str) -> None:
        self.tmp = tmp
        group = MethodGroup(IDS, P, f"rp-grpc-{next(_unique)}")
        self.urls = METHODS["raft"].member_urls(group, ET, {"data_dir": str(tmp / "state"), **params})
        self.procs: dict[str, MemberProcess] = {}
        self.all: list[MemberProcess] = []

    def start(self, node: str) -> MemberProcess:
        proc = MemberProcess(self.urls[node], node, list(range(P)), log_dir=self.tmp)
        self.procs[node] = proc
        self.all.append(proc)
        proc.start()
        return proc

    def live(self) -> list[MemberProcess]:
        return [p for p in self.procs.values() if p.alive]

    def holders(self, role: int) -> list[str]:
        return [p.member_id for p in self.live() if str(role) in p.log.leading()]

    def settled(self, on: Iterable[str] = IDS, timeout: float = BOUND) -> dict[int, str]:
        """Wait until every role has exactly one leader among live nodes, all in ``on``; role -> leader."""
        allowed = set(on)

        def one_each() -> dict[int, str] | None:
            h = {r: self.holders(r) for r in range(P)}
            if all(len(v) == 1 and v[0] in allowed for v in h.values()):
                return {r: v[0] for r, v in h.items()}
            return None

        return wait_until(one_each, timeout, what=f"exactly one leader per role, among {sorted(allowed)}")

    def close(self) -> None:
        for proc in self.all:
            with contextlib.suppress(Exception):
                proc.kill()


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[type[Cluster]]:
    made: list[Cluster] = []

    class Tracked(Cluster):
        def __init__(self, **params: str) -> None:
            super().__init__(tmp_path / f"c{len(made)}", **params)
            made.append(self)

    try:
        yield Tracked  # type: ignore[misc]
    finally:
        for c in made:
            c.close()


def acquired_after(proc: MemberProcess, role: int, mono: float) -> Line | None:
    return next((line for line in proc.log.lines
                 if line["event"] == "acquired" and line["role"] == str(role) and line["mono"] >= mono), None)


def test_sigkill_of_a_leader_moves_each_of_its_partitions(make_cluster: type[Cluster]) -> None:
    c = make_cluster()
    for node in IDS:
        c.start(node)
    leaders = c.settled()
    victim = c.procs[leaders[0]]
    led = sorted(r for r, n in leaders.items() if n == victim.member_id)
    tokens = {r: max(line["token"] for line in victim.log.lines if line["role"] == str(r)) for r in led}
    at = victim.log.lines[-1]["mono"]
    victim.kill()
    survivors = [p for p in c.procs.values() if p is not victim]

    def taken() -> bool:
        return all(any(acquired_after(p, r, at) for p in survivors) for r in led)

    wait_until(taken, BOUND, what=f"survivors acquiring {led} after SIGKILL of {victim.member_id}")
    for r in led:
        line = next(x for p in survivors if (x := acquired_after(p, r, at)) is not None)
        assert line["token"] > tokens[r]
    assert len(c.settled()) == P
    for p in survivors:  # a peer killed mid-stream is not a TLS server refusing plaintext: no hint about TLS
        assert "closes every connection at once" not in p.stderr_path.read_text(errors="replace")


def test_restarted_node_rejoins_without_disturbing_healthy_leaders(make_cluster: type[Cluster]) -> None:
    c = make_cluster(rebalance="off")
    for node in IDS:
        c.start(node)
    leaders = c.settled()
    victim = leaders[0]
    c.procs[victim].kill()
    survivors = [n for n in IDS if n != victim]
    after = c.settled(on=survivors)
    marks = {n: len(c.procs[n].log.lines) for n in survivors}
    back = c.start(victim)
    # Healthy leaders stay put: no survivor may gain or lose a leadership while the node rejoins.
    for n in survivors:
        with pytest.raises(TimeoutError):
            line = c.procs[n].log.wait_for(lambda _l: True, 4 * ET if n == survivors[0] else 0.1, start=marks[n],
                                           what="any event")
            pytest.fail(f"{n} was disturbed by the rejoin: {line}")
    assert not back.log.lines, "the rejoined node took leadership from a healthy leader"
    assert c.settled() == after
    # The rejoined node takes part: with another node gone, it and the last one must lead everything.
    c.procs[survivors[0]].kill()
    c.settled(on=[victim, survivors[1]])
    assert back.log.leading(), "the rejoined node never led after the other node was killed"


def test_rebalancing_gives_a_restarted_primary_its_partitions_back(make_cluster: type[Cluster]) -> None:
    c = make_cluster()  # improvements on: rebalance with a hysteresis of 3 ET
    for node in IDS:
        c.start(node)
    primary = {r: IDS[r % len(IDS)] for r in range(P)}  # balanced priorities over sorted node ids
    # A node that starts late (a busy machine) finds its partitions led by others; rebalancing hands them back
    # after the hysteresis, so the cold start ends with every partition on its primary.
    wait_until(lambda: c.settled() == primary, BOUND + 3 * ET, what="every partition led by its primary")
    victim = "a"
    c.procs[victim].kill()
    c.settled(on=[n for n in IDS if n != victim])
    back = c.start(victim)
    own = {str(r) for r, n in primary.items() if n == victim}
    wait_until(lambda: back.log.leading() == own, BOUND + 3 * ET, what=f"{victim} leading its partitions {own} again")
    wait_until(lambda: c.settled() == primary, BOUND, what="every partition led by its primary again")
    for line in back.log.lines:
        assert line["role"] in own, f"the restarted primary took a partition that is not its own: {line}"


def test_sigstopped_leader_reports_fenced_first_when_it_wakes(make_cluster: type[Cluster]) -> None:
    c = make_cluster()
    for node in IDS:
        c.start(node)
    leaders = c.settled()
    victim = c.procs[leaders[0]]
    led = sorted(str(r) for r, n in leaders.items() if n == victim.member_id)
    mark = len(victim.log.lines)
    victim.pause()
    others = [p for p in c.procs.values() if p is not victim]
    wait_until(lambda: all(any(r in p.log.leading() for p in others) for r in led), BOUND,
               what="the others taking over from the frozen leader")
    victim.resume()
    for r in led:
        line = victim.log.wait_for(lambda x, r=r: x["role"] == r, BOUND, start=mark, what=f"{r}'s first event on wake")
        assert line["event"] == "fenced", f"first event for {r} after SIGCONT: {line}"
        successor = next(x for p in others for x in p.log.lines if x["role"] == r and x["event"] == "acquired"
                         and x["mono"] > line["until"] - 5)
        assert successor["mono"] >= line["until"], (line, successor)  # no overlap: lease ended first
        assert line["until"] < line["mono"]
    c.settled()


# ---------------------------------------------------------------------------------------------- unit


def test_codec_round_trip_keeps_every_field() -> None:
    msgs: list[Message] = [
        Heartbeat(3, "a", "b", 7, 12.5, (3, 1), 2),
        Heartbeat(4, "a", "b", 8, 12.75),
        HeartbeatResponse(5, "a", "b", 9, 1.25, 4, 2),
        PreVoteRequest(6, "a", "b", 10, 1, 1),
        PreVoteResponse(7, "a", "b", 11, True),
        VoteRequest(8, "a", "b", 12, 0, 1, True, 3),
        VoteResponse(9, "a", "b", 13, False),
        TimeoutNow(10, "a", "b", 14, 5, True),
        Heartbeat(11, "a", "b", 15, 13.0, (2,), 0, True),
        HeartbeatResponse(12, "a", "b", 15, 13.0, 0, 0, True),
        NodeBeat(NODE, "a", "b", 0, 14.5, 2**62 - 1, 2**64 - 1),
        NodeBeatAck(NODE, "a", "b", 0, 14.25, 7, 12345),
    ]
    batch = encode(msgs, "cl", "a", "b")
    back = decode(type(batch).FromString(batch.SerializeToString()))
    assert sorted(map(repr, back)) == sorted(map(repr, msgs))
    assert isinstance(back[-1], NodeBeatAck)  # the node links' messages come last, after every group's


def test_a_batch_without_the_quiet_columns_decodes_as_not_quiet() -> None:
    """A node without quiescence (an older one, or quiesce=off) leaves the columns out."""
    batch = encode([Heartbeat(1, "a", "b", 2, 1.0), HeartbeatResponse(1, "a", "b", 2, 1.0)], "cl", "a", "b")
    assert not batch.heartbeats.quiesce and not batch.heartbeat_responses.quiet
    back = decode(batch)
    assert [getattr(m, "quiesce", getattr(m, "quiet", None)) for m in back] == [False, False]


@pytest.mark.parametrize(("query", "parameter"), [
    ("peers=b@127.0.0.1:2&heartbeat_interval=0.5", "heartbeat_interval"),
    ("peers=b@127.0.0.1:2&replication=3", "replication"),
    ("peers=b@127.0.0.1:2,b@127.0.0.1:3", "peers"),
    ("peers=a@127.0.0.1:2", "peers"),
    ("peers=b@127.0.0.1:1", "peers"),
    ("peers=b@nowhere", "peers"),
    ("priority=off&rebalance=on", "rebalance"),
    ("priority=fast", "priority"),
    ("peers=b@127.0.0.1:2&ack_delay=0.4", "ack_delay"),
    ("priority=off&election_jitter=0", "election_jitter"),
    ("election_jitter=0.5", "election_jitter"),  # priority elections time out after a fixed ET
    ("priority=off&pre_vote=maybe", "pre_vote"),
])
def test_bad_urls_name_the_parameter(query: str, parameter: str) -> None:
    with pytest.raises(elect.ConfigError) as err:
        elect.connect(f"raft://a@127.0.0.1:1?{query}")
    assert err.value.parameter == parameter, err.value


def test_url_needs_a_node_id_and_promises_match_the_mode() -> None:
    with pytest.raises(elect.ConfigError) as err:
        elect.connect("raft://127.0.0.1:1?peers=b@127.0.0.1:2")
    assert err.value.parameter == "member"
    base = "raft://a@127.0.0.1:1?peers=b@127.0.0.1:2,c@127.0.0.1:3&election_timeout=1"
    improved = elect.connect(base).characteristics
    plain = elect.connect(base + "&priority=zeebe&improvements=off").characteristics
    stock = elect.connect(base + "&priority=off").characteristics
    assert improved.exclusive and improved.max_overlap == 0 and improved.graceful_handover
    assert improved.max_failover is not None and plain.max_failover is not None and stock.max_failover is not None
    assert improved.max_failover < min(plain.max_failover, stock.max_failover)
    with pytest.raises(elect.UnsatisfiedRequirement):
        elect.connect(base + "&priority=off", require={"max_failover": 2.0})
    assert not elect.connect("pysyncobj://a@127.0.0.1:1000?peers=b@127.0.0.1:2000").characteristics.exclusive


def test_stock_raft_as_others_run_it() -> None:
    base = "raft://a@127.0.0.1:1?peers=b@127.0.0.1:2,c@127.0.0.1:3&election_timeout=1&priority=off"
    narrow = elect.connect(base + "&election_jitter=0.5")
    assert narrow.config.jitter == 0.5 and narrow.characteristics.max_failover == 2.75  # type: ignore[attr-defined]
    bare = elect.connect(base + "&pre_vote=off&check_quorum=off")
    assert not bare.config.pre_vote and not bare.config.check_quorum  # type: ignore[attr-defined]
    # no CheckQuorum, no leader lease: a cut-off leader leads on, so leadership is not exclusive
    assert not bare.characteristics.exclusive and bare.characteristics.max_overlap is None
    with pytest.raises(elect.UnsatisfiedRequirement):
        elect.connect(base + "&check_quorum=off", require={"exclusive": True})
