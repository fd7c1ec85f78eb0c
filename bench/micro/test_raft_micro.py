"""Micro-benchmarks of raft:// hot paths (pytest-benchmark). In the suite each runs once as a test
(`--benchmark-disable` is the default); measure with:

    python -m pytest bench/micro/test_raft_micro.py --benchmark-enable
"""

from __future__ import annotations

import random
from typing import Any

from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.host import NodeHost
from raft_priority.messages import (
    Heartbeat,
    HeartbeatResponse,
    Message,
    PreVoteResponse,
    VoteResponse,
)
from raft_priority.priorities import assign_priorities
from raft_priority.storage import HardStateLog
from raft_priority.wire import raft_pb2 as pb
from raft_priority.wire.codec import decode, encode

GROUPS = 1000


def _steady_host(node: str = "b") -> NodeHost:
    """A follower of 1000 groups (leader: a), as in the 3 x 1000 idle benchmark."""
    assignment = assign_priorities(["a", "b", "c"], GROUPS, 3)
    host = NodeHost(node, RaftConfig.improved(), random.Random(1))
    for g, prios in enumerate(assignment):
        host.add_group(GroupSpec(g, prios), 0.0)
    return host


def test_core_steps_a_heartbeat_batch_of_1000_groups(benchmark: Any) -> None:
    host = _steady_host()
    clock = [1.0]

    def step() -> None:
        clock[0] += 0.1
        now = clock[0]
        batch = [Heartbeat(g, "a", "b", 1, now, (2, 1)) for g in range(GROUPS)]
        host.step_all(batch, now)
        assert len(host.ready().messages) == GROUPS

    benchmark(step)
    assert all(g.leader == "a" for g in host.groups.values())


def test_core_heartbeat_round_of_a_1000_group_leader(benchmark: Any) -> None:
    """One heartbeat round as the leader of 1000 groups: tick (heartbeats out) and one ack per group."""
    host = NodeHost("a", RaftConfig.improved(), random.Random(1))
    for g in range(GROUPS):
        host.add_group(GroupSpec(g, {"a": 3, "b": 2, "c": 1}), 0.0)
    for g, group in host.groups.items():  # elect a everywhere: b grants the pre-vote and the vote
        group.campaign(2.0)
        host.step(PreVoteResponse(g, "b", "a", group.term + 1, True), 2.0)
        host.step(VoteResponse(g, "b", "a", group.term, True), 2.0)
    host.ready()
    clock = [2.0]

    def round_trip() -> None:
        clock[0] += 0.1
        now = clock[0]
        host.tick(now)
        acks = [HeartbeatResponse(m.group, "b", "a", m.term, now, 0, 0) for m in host.ready().messages if m.dst == "b"]
        assert len(acks) == GROUPS
        host.step_all(acks, now)
        host.ready()

    benchmark(round_trip)
    assert len(host.leading(clock[0])) == GROUPS


def test_codec_round_trips_a_1000_group_batch(benchmark: Any) -> None:
    msgs: list[Message] = [Heartbeat(g, "a", "b", 3, 12.5, (2, 1)) for g in range(GROUPS // 2)]
    msgs += [HeartbeatResponse(g, "a", "b", 3, 12.5, 0, 1) for g in range(GROUPS // 2)]

    def round_trip() -> list[Message]:
        return decode(pb.Batch.FromString(encode(msgs, "c", "a", "b").SerializeToString()))

    assert len(benchmark(round_trip)) == GROUPS


def test_assign_priorities_for_10000_partitions(benchmark: Any) -> None:
    nodes = [f"n{i}" for i in range(100)]
    result = benchmark(assign_priorities, nodes, 10_000, 3, "balanced")
    assert len(result) == 10_000
    primaries: dict[str, int] = {}
    for prios in result:
        best = max(prios, key=lambda n: prios[n])
        primaries[best] = primaries.get(best, 0) + 1
    assert max(primaries.values()) == 100


def test_hard_state_log_saves_300_votes_with_one_fsync(benchmark: Any, tmp_path: Any) -> None:
    from raft_priority.messages import HardState

    log = HardStateLog(tmp_path, "n0")
    term = [0]

    def save() -> None:
        term[0] += 1
        log.save({g: HardState(term[0], "n1") for g in range(300)})

    benchmark(save)
    assert HardStateLog(tmp_path, "n0").load_all()[299].term == term[0]
