"""ZEP006 priority decay, round by round at exact times, and improvements (a) and (b)."""

from __future__ import annotations

import random

import pytest
from rp_harness import Bench

from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.messages import Heartbeat, PreVoteRequest

ZEP = RaftConfig.zep006()
P3 = {"a": 3, "b": 2, "c": 1}
P5 = {"a": 5, "b": 4, "c": 3, "d": 2, "e": 1}


def campaign_time(cfg: RaftConfig, priorities: dict[str, int], node: str, limit: float = 30.0) -> float:
    """When a follower that never hears anybody first sends a pre-vote (tick exactly at deadlines)."""
    g = RaftGroup(GroupSpec(0, priorities), node, cfg, random.Random(0), 0.0)
    while g.next_tick <= limit:
        now = g.next_tick
        g.tick(now)
        if any(isinstance(m, PreVoteRequest) for m in g.ready().messages):
            return now
    raise AssertionError("never campaigned")


@pytest.mark.parametrize("node,expected", [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0), ("e", 5.0)])
def test_zep006_campaigns_once_node_priority_reaches_target(node: str, expected: float) -> None:
    assert campaign_time(ZEP, P5, node) == pytest.approx(expected)


@pytest.mark.parametrize("node,expected", [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0), ("e", 3.0)])
def test_priority_decay_of_two(node: str, expected: float) -> None:
    assert campaign_time(RaftConfig.zep006(priority_decay=2), P5, node) == pytest.approx(expected)


@pytest.mark.parametrize("node,expected", [("a", 1.0), ("b", 1.25), ("c", 1.5), ("e", 2.0)])
def test_shorter_decay_rounds_b(node: str, expected: float) -> None:
    assert campaign_time(RaftConfig.zep006(decay_interval=0.25), P5, node) == pytest.approx(expected)


def test_target_steps_down_each_round_and_a_late_tick_catches_up() -> None:
    g = RaftGroup(GroupSpec(0, P5), "d", ZEP, random.Random(0), 0.0)
    seen = []
    for t in (1.0, 2.0, 3.0):
        assert g.next_tick == pytest.approx(t)
        g.tick(t)
        seen.append(g.target_priority())
    assert seen == [4, 3, 2] and g.ready().messages == [] and g.next_tick == pytest.approx(4.0)
    g2 = RaftGroup(GroupSpec(0, P5), "e", ZEP, random.Random(0), 0.0)
    g2.tick(9.0)  # the driver was late: all rounds due by now happen at once
    assert g2.state is RaftState.PRE_CANDIDATE


def _crash_leader_at(bench: Bench, t: float, *nodes: str) -> float:
    bench.run_to(t)
    last = max(m.sent_at for m in bench.sent if isinstance(m, Heartbeat))
    for n in nodes:
        bench.crash(n)
    return last


def test_zep006_step_by_step_after_the_primary_dies() -> None:
    b = Bench(P3, ZEP)
    last = _crash_leader_at(b, 1.95, "a")  # a led from 1.0; last heartbeat 1.9
    assert last == pytest.approx(1.9)
    assert (b["b"].next_tick, b["b"].target_priority()) == (pytest.approx(2.9), 3)
    b.run_to(2.95)  # first timeout: 2 < 3, wait one more round
    assert (b["b"].next_tick, b["b"].target_priority(), b["b"].state) == (pytest.approx(3.9), 2, RaftState.FOLLOWER)
    assert (b["c"].next_tick, b["c"].target_priority()) == (pytest.approx(3.9), 2)
    b.run_to(3.95)  # second round: target 2 reached, b wins
    assert b.events("acquired")[-1] == ("b", "acquired", 2, pytest.approx(3.9))
    assert b["c"].target_priority() == 3  # heard a leader: reset to the group's highest priority


def test_fast_failover_a_when_the_primary_leader_dies() -> None:
    for cfg, expected in ((ZEP, 1.9 + 2.0), (RaftConfig.zep006(fast_failover=True), 1.9 + 1.0)):
        b = Bench(P3, cfg)
        _crash_leader_at(b, 1.95, "a")
        b.run_to(6.0)
        assert b.events("acquired")[-1] == ("b", "acquired", 2, pytest.approx(expected))


def test_fast_failover_knows_the_live_members_and_skips_dead_ones() -> None:
    # leader a (5) and the next in line b (4) die together; c (3) is the best survivor
    results = {}
    for name, cfg in {
        "zep006": ZEP,
        "a": RaftConfig.zep006(fast_failover=True),
        "a+b": RaftConfig.zep006(fast_failover=True, decay_interval=0.25),
    }.items():
        b = Bench(P5, cfg)
        last = _crash_leader_at(b, 1.95, "a", "b")
        b.run_to(8.0)
        node, _, _, at = b.events("acquired")[-1]
        results[name] = (node, round(at - last, 6))
    assert results == {"zep006": ("c", 3.0), "a": ("c", 2.0), "a+b": ("c", 1.25)}


def test_fast_failover_when_the_leader_was_not_the_primary() -> None:
    # a (5) is down for good; b (4) leads; when b dies, c (3) is next in line among the live
    for cfg, rounds in ((ZEP, 3.0), (RaftConfig.zep006(fast_failover=True), 1.0)):
        b = Bench(P5, cfg)
        b.crash("a")
        b.run_to(3.0)
        assert b.leaders() == ["b"]
        last = _crash_leader_at(b, 3.95, "b")
        b.run_to(10.0)
        node, _, _, at = b.events("acquired")[-1]
        assert (node, round(at - last, 6)) == ("c", rounds)


def test_succession_lists_live_followers_best_first() -> None:
    b = Bench(P5, RaftConfig.zep006(fast_failover=True))
    b.run_to(1.45)
    b.crash("c")  # its last ack: to the heartbeat of 1.4
    b.run_to(3.0)
    by_time = {round(m.sent_at, 6): m.succession for m in b.sent if isinstance(m, Heartbeat)}
    assert by_time[1.4] == by_time[2.3] == (4, 3, 2, 1)  # live until it missed one ET of acks
    assert by_time[2.5] == by_time[2.9] == (4, 2, 1)


def test_stock_raft_ignores_priorities() -> None:
    cfg = RaftConfig.stock()
    winners = set()
    for seed in range(30):
        b = Bench(P3, cfg, seed=seed)
        b.run_to(3.0)
        winners.update(b.leaders())
    assert winners == {"a", "b", "c"}


@pytest.mark.parametrize("first", ["b", "c"])
def test_two_members_campaigning_at_once_do_not_split_the_votes(first: str) -> None:
    # a leads and dies; the driver of b was late (a busy machine), so b and c campaign in the same instant. Each
    # would grant the other's pre-vote and the two candidates of one term would split the votes; instead c, the
    # lower priority, yields its round and b wins the first term after a's.
    b = Bench(P3, RaftConfig.zep006(fast_failover=True, decay_interval=0.25))
    _crash_leader_at(b, 1.95, "a")
    assert b["b"].next_tick == pytest.approx(2.9)  # and c's round comes at 3.15
    b.now = 3.2
    for node in (first, "c" if first == "b" else "b"):
        b.out(node, lambda g: g.tick(b.now))
    b.flush()
    assert b.events("acquired")[-1] == ("b", "acquired", 2, pytest.approx(3.2))
    assert b["c"].term == 2 and b.leaders() == ["b"]
