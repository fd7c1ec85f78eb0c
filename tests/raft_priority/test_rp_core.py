"""Unit tests of the pure election core: votes, PreVote, CheckQuorum, persistence, log restriction."""

from __future__ import annotations

import random

import pytest
from rp_harness import Bench

from elect.core import Acquire, Revoke
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.messages import (
    HardState,
    Heartbeat,
    HeartbeatResponse,
    PreVoteRequest,
    PreVoteResponse,
    VoteRequest,
    VoteResponse,
)

P3 = {"a": 3, "b": 2, "c": 1}
ZEP = RaftConfig.zep006()


def elected(cfg: RaftConfig = ZEP) -> Bench:
    b = Bench(P3, cfg)
    b.run_to(1.0)  # the primary campaigns at exactly one ET
    assert b.leaders() == ["a"]
    return b


def lone(cfg: RaftConfig = ZEP, node: str = "b", hs: HardState | None = None) -> RaftGroup:
    return RaftGroup(GroupSpec(7, P3), node, cfg, random.Random(1), 0.0, hs)


def test_cold_start_primary_wins_at_one_et_with_term_as_token() -> None:
    b = elected()
    assert b.events() == [("a", "acquired", 1, 1.0)]
    assert b["b"].leader == "a" and b["c"].leader == "a"
    assert b["b"].term == b["c"].term == 1


def test_messages_carry_group_and_addresses() -> None:
    b = elected()
    hb = [m for m in b.sent if isinstance(m, Heartbeat)]
    assert {(m.group, m.src, m.dst, m.term) for m in hb} == {(0, "a", "b", 1), (0, "a", "c", 1)}


def test_one_vote_per_term_and_it_is_persisted_before_the_grant() -> None:
    g = lone()
    g.step(VoteRequest(7, "a", "b", 5, 0, 0), 2.0)
    out = g.ready()
    assert out.persist[7] == HardState(5, "a")
    assert [(type(m), m.granted) for m in out.messages] == [(VoteResponse, True)]  # type: ignore[attr-defined]
    g.step(VoteRequest(7, "c", "b", 5, 0, 0), 5.0)  # same term, other candidate, lease over
    out2 = g.ready()
    assert [m.granted for m in out2.messages] == [False]  # type: ignore[attr-defined]
    g.step(VoteRequest(7, "a", "b", 5, 0, 0), 5.0)  # a retransmission is granted again
    out3 = g.ready()
    assert [m.granted for m in out3.messages] == [True]  # type: ignore[attr-defined]


def test_restart_keeps_the_vote() -> None:
    g = lone(hs=HardState(5, "a"))
    g.step(VoteRequest(7, "c", "b", 5, 0, 0), 10.0)
    assert [m.granted for m in g.ready().messages] == [False]  # type: ignore[attr-defined]


def test_restarted_member_honours_a_lease_it_may_have_acked() -> None:
    g = lone(hs=HardState(5, None))  # restarted at t=0 with a past term
    g.step(VoteRequest(7, "c", "b", 6, 0, 0), 0.5)
    assert g.ready().messages == [] and g.term == 5
    g.step(VoteRequest(7, "c", "b", 6, 0, 0), 0.95)
    assert [m.granted for m in g.ready().messages] == [True]  # type: ignore[attr-defined]


def test_majority_needed() -> None:
    b = Bench({"a": 5, "b": 4, "c": 3, "d": 2, "e": 1}, ZEP)
    b.crash("c")
    b.crash("d")
    b.run_to(1.0)
    assert b.leaders() == ["a"]  # 3 of 5
    b2 = Bench({"a": 5, "b": 4, "c": 3, "d": 2, "e": 1}, ZEP)
    for n in "cde":
        b2.crash(n)
    b2.run_to(20.0)
    assert b2.leaders() == []


def test_log_position_restriction() -> None:
    g = lone()
    g.set_log_position(10, 3)
    for (idx, term), ok in {(9, 3): False, (10, 2): False, (10, 3): True, (1, 4): True}.items():
        g2 = lone()
        g2.set_log_position(10, 3)
        g2.step(VoteRequest(7, "a", "b", 5, idx, term), 2.0)
        assert [m.granted for m in g2.ready().messages] == [ok]  # type: ignore[attr-defined]
        g.step(PreVoteRequest(7, "a", "b", 5, idx, term), 2.0)
        assert [m.granted for m in g.ready().messages] == [ok]  # type: ignore[attr-defined]


def test_stale_primary_cannot_win_and_an_up_to_date_member_does() -> None:
    b = Bench(P3, ZEP)
    b["a"].set_log_position(5, 1)
    b["b"].set_log_position(9, 1)
    b["c"].set_log_position(9, 1)
    b.run_to(2.5)
    assert b.leaders() == ["b"]  # a campaigned at 1.0 and was refused; b's turn came at 2.0


def test_pre_vote_changes_no_state() -> None:
    g = lone()
    g.step(PreVoteRequest(7, "c", "b", 9, 0, 0), 2.0)
    out = g.ready()
    assert g.term == 0 and g.voted_for is None and not out.persist
    assert [(m.term, m.granted) for m in out.messages] == [(9, True)]  # type: ignore[attr-defined]


def test_followers_in_lease_refuse_pre_votes() -> None:
    b = elected()
    b["b"].step(PreVoteRequest(0, "c", "b", 2, 0, 0, 1, 1), 1.5)
    assert b["b"].ready().messages == []
    b.run_to(1.95)
    b.crash("a")  # last heartbeat b heard: 1.9 (one every 0.1 s from 1.0)
    b["b"].step(PreVoteRequest(0, "c", "b", 2, 0, 0, 1, 1), 1.9 + 0.9 - 0.01)
    assert b["b"].ready().messages == []  # W = ET * (1 - lease_margin) = 0.9
    b["b"].step(PreVoteRequest(0, "c", "b", 2, 0, 0, 1, 1), 1.9 + 0.9 + 0.01)
    assert [m.granted for m in b["b"].ready().messages] == [True]  # type: ignore[attr-defined]


def test_rejoining_node_does_not_disturb_a_healthy_leader() -> None:
    b = elected()
    b.cut("a", "c")
    b.cut("b", "c")
    b.run_to(12.0)  # c times out and pre-votes over and over, unheard
    assert b["c"].term == 1 and b["c"].state is RaftState.PRE_CANDIDATE
    b.blocked.clear()
    b.run_to(14.0)
    assert b.leaders() == ["a"] and b["a"].term == 1
    assert b.events() == [("a", "acquired", 1, 1.0)]


def test_heartbeats_at_interval_and_deadline_is_next_heartbeat() -> None:
    b = elected()
    b.run_to(2.05)
    beats = [m.sent_at for m in b.sent if isinstance(m, Heartbeat) and m.dst == "b"]  # type: ignore[attr-defined]
    assert beats == pytest.approx([1.0 + 0.1 * k for k in range(11)])
    assert b["a"].next_tick == pytest.approx(2.1)  # a driver's one timer: the next heartbeat
    assert b["b"].leader_lease_until == pytest.approx(2.0 + 0.9)


def test_check_quorum_fences_at_lease_end_even_when_noticed_late() -> None:
    b = elected()
    b.run_to(2.05)  # last heartbeat acked: sent at 2.0
    b.cut("a", "b")
    b.cut("a", "c")
    b.now = 7.0  # the leader's process was frozen: its first tick after the cut comes late
    b.out("a", lambda g: g.tick(7.0))
    assert b.events("fenced") == [("a", "fenced", 1, pytest.approx(2.0 + 0.9))]
    assert b["a"].state is RaftState.FOLLOWER and not b["a"].is_leader(7.0)


def test_max_drift_shortens_the_leaders_lease_and_not_the_voters_refusal() -> None:
    """With max_drift 0.1 the leader's lease is W / 1.1 after the acked round, on its clock, while voters refuse
    votes for W after they heard it: a voter whose clock runs up to 1.1 times as fast still refuses past the
    lease's end."""
    b = elected(RaftConfig.zep006(max_drift=0.1))
    b.run_to(2.05)  # last heartbeat acked: sent at 2.0
    b.cut("a", "b")
    b.cut("a", "c")
    b.now = 7.0
    b.out("a", lambda g: g.tick(7.0))
    assert b.events("fenced") == [("a", "fenced", 1, pytest.approx(2.0 + 0.9 / 1.1))]
    voter = elected(RaftConfig.zep006(max_drift=0.1))
    voter.run_to(1.95)
    voter.crash("a")  # last heartbeat b heard: 1.9
    voter["b"].step(PreVoteRequest(0, "c", "b", 2, 0, 0), 1.9 + 0.9 - 0.01)
    assert voter["b"].ready().messages == []  # still W = 0.9 on the voter's side


def test_max_drift_is_a_fraction_that_leaves_room_for_heartbeats() -> None:
    with pytest.raises(ValueError, match="max_drift"):
        RaftConfig.zep006(max_drift=-0.1)
    with pytest.raises(ValueError, match="half the leader's lease"):
        RaftConfig.zep006(heartbeat_interval=0.4, max_drift=0.5)  # 2 x 0.4 > 0.9 / 1.5


def test_check_quorum_fences_a_cut_off_leader_before_anyone_else_can_win() -> None:
    b = elected()
    b.run_to(2.05)  # last heartbeat acked: sent at 2.0
    b.cut("a", "b")
    b.cut("a", "c")
    b.run_to(6.0)
    fenced = b.events("fenced")
    assert fenced == [("a", "fenced", 1, pytest.approx(2.0 + 0.9))]
    new = [e for e in b.events("acquired") if e[0] != "a"]
    assert new and new[0][3] >= fenced[0][3]


def test_higher_term_revokes() -> None:
    b = elected()
    b["a"].step(HeartbeatResponse(0, "b", "a", 4, 0.0), 1.5)
    out = b["a"].ready()
    assert out.changes == [Revoke(0, "higher term")]  # at the step's time, 1.5
    assert b["a"].term == 4 and out.persist[0] == HardState(4, None, b["a"].conf)


def test_leader_ignores_non_forced_votes_inside_its_lease() -> None:
    b = elected()
    b["a"].step(VoteRequest(0, "c", "a", 7, 0, 0), 1.5)
    assert b["a"].ready().messages == [] and b["a"].is_leader(1.5) and b["a"].term == 1


def test_stale_pre_vote_response_with_higher_term_is_adopted() -> None:
    g = lone()
    g.campaign(1.0)
    assert g.state is RaftState.PRE_CANDIDATE
    g.step(PreVoteResponse(7, "a", "b", 6, False), 1.1)
    assert g.term == 6 and g.state is RaftState.FOLLOWER
    assert g.next_tick == pytest.approx(2.0)  # still retries when its campaign would have timed out


def test_single_member_group_leads_alone_and_never_fences() -> None:
    g = RaftGroup(GroupSpec(1, {"a": 1}), "a", ZEP, random.Random(0), 0.0)
    g.tick(1.0)
    assert [type(c) for c in g.ready().changes] == [Acquire] and g.is_leader(1e9)
    assert g.next_tick == float("inf")


def test_stock_mode_randomizes_timeouts_in_et_to_2et() -> None:
    cfg = RaftConfig.stock()
    firsts = [RaftGroup(GroupSpec(0, P3), "a", cfg, random.Random(s), 0.0).next_tick for s in range(200)]
    assert all(1.0 <= d < 2.0 for d in firsts)
    assert max(firsts) - min(firsts) > 0.8


def test_stock_mode_draws_timeouts_from_the_jitter_it_is_given() -> None:
    cfg = RaftConfig.stock(election_jitter=0.25)
    firsts = [RaftGroup(GroupSpec(0, P3), "a", cfg, random.Random(s), 0.0).next_tick for s in range(200)]
    assert all(1.0 <= d < 1.25 for d in firsts) and max(firsts) - min(firsts) > 0.2
    with pytest.raises(ValueError, match="election_jitter"):
        RaftConfig.stock(election_jitter=0.0)


def test_vote_response_counting_ignores_other_terms() -> None:
    g = lone(cfg=ZEP.__class__.zep006(pre_vote=False))
    g.campaign(1.0)
    assert g.state is RaftState.CANDIDATE and g.term == 1 and g.ready().persist[7] == HardState(1, "b")
    g.step(VoteResponse(7, "a", "b", 0, True), 1.01)
    assert g.state is RaftState.CANDIDATE
    g.step(VoteResponse(7, "a", "b", 1, True), 1.02)
    assert g.state is RaftState.LEADER and [type(c) for c in g.ready().changes] == [Acquire]


def test_leaders_seen_follow_the_leader_and_expire_with_the_timeout() -> None:
    b = elected()
    b["b"].step(Heartbeat(0, "a", "b", 1, 1.5), 1.5)
    assert b["b"].ready().seen == []  # unchanged
    b["b"].tick(2.5)
    assert [(x.role, x.leader) for x in b["b"].ready().seen] == [(0, None)]


def test_a_restarted_member_refuses_a_late_transfers_forced_vote_too() -> None:
    """Found by `elect bench sim-raft` (seed 55638): a TimeoutNow reached a member back from a pause after its leader
    had abandoned that transfer and led again on a majority's ack of the abandonment; the member that gave that ack
    had since restarted, forgot it (not persisted), and granted the stale transfer's forced vote: a second leader
    0.1 ms before the first revoked. A restarted member refuses forced votes for `W` after start, as others."""
    g = lone(hs=HardState(5, "a"))  # restarted at t=0 with a past term
    g.step(VoteRequest(7, "c", "b", 6, 0, 0, force=True, transfer_seq=1), 0.5)
    assert g.ready().messages == [] and g.term == 5
    g.step(VoteRequest(7, "c", "b", 6, 0, 0, force=True, transfer_seq=1), 0.95)
    assert [m.granted for m in g.ready().messages] == [True]  # type: ignore[attr-defined]
