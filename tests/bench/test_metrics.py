"""Metrics and the checker on hand-made histories, including violations that must be caught."""

from __future__ import annotations

import math
from dataclasses import replace

from elect.contract import Characteristics
from elect_bench.judging.checker import Violation, check, check_promise
from elect_bench.judging.history import FaultRecord, History
from elect_bench.judging.measures import (
    Summary,
    balanced,
    balanced_from,
    disruptions,
    failovers,
    leaderless,
    max_led,
    overlaps,
    percentile,
    total,
)


def acq(member: str, role: str, token: int, t: float) -> dict[str, object]:
    return {"ts": t, "mono": t, "member": member, "role": role, "event": "acquired", "token": token}


def rev(member: str, role: str, token: int, t: float) -> dict[str, object]:
    return {"ts": t, "mono": t, "member": member, "role": role, "event": "revoked", "token": token}


def fen(member: str, role: str, token: int, t: float, until: float) -> dict[str, object]:
    return {"ts": t, "mono": t, "member": member, "role": role, "event": "fenced", "token": token, "until": until}


def test_crash_failover_gap_and_no_overlap() -> None:
    # a leads r and s; a is SIGKILLed at 10.0; b acquires r at 11.2 and s at 11.5.
    h = History([acq("a", "r", 1, 1.0), acq("a", "s", 1, 1.0), acq("b", "r", 2, 11.2), acq("b", "s", 2, 11.5)],
                [FaultRecord(10.0, "kill", "a")], end=20.0)
    fos = failovers(h, h.faults[0])
    assert [(f.role, f.successor, round(f.latency or 0, 3)) for f in fos] == [("r", "b", 1.2), ("s", "b", 1.5)]
    ivs = h.intervals()
    assert leaderless(ivs["r"], 0.0, 20.0) == [(0.0, 1.0), (10.0, 11.2)]
    assert overlaps(ivs["r"]) == []
    assert check(h, exclusive=True, leaderless_bound=2.0) == []


def test_frozen_leader_ends_at_its_own_deadline() -> None:
    # a is paused at 5; its deadline was 5.8; b takes over at 6.0; a wakes at 9 and prints fenced until=5.8.
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 6.0), fen("a", "r", 1, 9.0, 5.8)],
                [FaultRecord(5.0, "pause", "a"), FaultRecord(9.0, "resume", "a")], end=12.0)
    ivs = h.intervals()["r"]
    assert [(i.member, i.start, i.end, i.ended_by) for i in ivs] == [("a", 1.0, 5.8, "fenced"),
                                                                     ("b", 6.0, 12.0, "open")]
    assert check(h, exclusive=True) == []
    assert math.isclose(total(leaderless(ivs, 1.0, 12.0)), 0.2)


def test_overlap_in_an_exclusive_mode_is_a_violation() -> None:
    # a's deadline (until) is after b's acquisition: both believed they led for 0.3 s.
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 6.0), fen("a", "r", 1, 9.0, 6.3)], end=10.0)
    found = check(h, exclusive=True)
    assert [(v.kind, v.role, round(v.at, 3)) for v in found] == [("overlap", "r", 6.0)]
    assert "a, b both led for 0.300 s" in str(found[0])
    assert check(h, exclusive=False) == []  # non-exclusive modes may overlap


def test_a_non_exclusive_promise_is_held_to_its_overlap_bound() -> None:
    # NELI full promises overlaps of at most T + one heartbeat interval; the harness checks what each method promises.
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 6.0), fen("a", "r", 1, 9.0, 8.5)], end=10.0)
    full = Characteristics(exclusive=False, max_overlap=2.2, max_failover=None, graceful_handover=True, token="t")
    assert [v.kind for v in check_promise(h, full)] == ["overlap"]
    assert "(bound 2.2 s)" in str(check_promise(h, full)[0])
    assert check_promise(h, replace(full, max_overlap=3.0)) == []
    assert check_promise(h, replace(full, max_overlap=None)) == []  # no bound stated


def test_token_that_did_not_increase_is_a_violation() -> None:
    h = History([acq("a", "r", 5, 1.0), rev("a", "r", 5, 2.0), acq("b", "r", 5, 2.1)], end=3.0)
    assert [(v.kind, v.since) for v in check(h, exclusive=True)] == [("token", 1.0)]  # since: a's acquisition


def test_resuming_ones_own_leadership_under_the_same_token_is_allowed_but_not_after_another() -> None:
    # a loses the store at 2 and fences; back at 3 it finds its claim standing and resumes with token 5.
    resumed = History([acq("a", "r", 5, 1.0), fen("a", "r", 5, 2.5, 2.0), acq("a", "r", 5, 3.0)], end=4.0)
    assert check(resumed, exclusive=True) == []
    # once b has led in between, a's old token may not come back
    stale = History([acq("a", "r", 5, 1.0), fen("a", "r", 5, 2.5, 2.0), acq("b", "r", 6, 2.6), rev("b", "r", 6, 2.9),
                     acq("a", "r", 5, 3.0)], end=4.0)
    assert [v.kind for v in check(stale, exclusive=True)] == ["token"]


def test_disruptions_after_an_infrastructure_fault() -> None:
    # the store's leader dies at 10; a's lease on r lapses (fenced, until 10.8) and b takes r at 11.4;
    # a keeps s throughout; t is dropped by c at 10.5 and never led again.
    h = History([acq("a", "r", 1, 1.0), acq("a", "s", 1, 1.0), acq("c", "t", 1, 1.0), fen("a", "r", 1, 11.0, 10.8),
                 acq("b", "r", 2, 11.4), rev("c", "t", 1, 10.5)], [FaultRecord(10.0, "infra", "etcd[0]")], end=20.0)
    lost = disruptions(h, h.faults[0])
    assert [(d.role, d.failed, d.successor, None if d.latency is None else round(d.latency, 3)) for d in lost] == [
        ("r", "a", "b", 1.4), ("t", "c", None, None)]


def test_leaderless_longer_than_the_bound_after_healing_is_a_violation() -> None:
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 14.0)], [FaultRecord(5.0, "kill", "a")], end=20.0)
    found = check(h, exclusive=True, leaderless_bound=3.0)
    assert [(v.kind, v.at) for v in found] == [("leaderless", 5.0)]


def test_three_way_overlap_and_distribution() -> None:
    h = History([acq("a", "r", 1, 0.0), acq("b", "r", 2, 1.0), acq("c", "r", 3, 1.5), rev("b", "r", 2, 2.0),
                 rev("a", "r", 1, 3.0), acq("a", "s", 1, 0.0), acq("a", "t", 1, 0.0)], end=4.0)
    ivs = h.intervals()
    assert overlaps(ivs["r"]) == [(1.0, 3.0, frozenset({"a", "b", "c"}))]
    assert max_led(ivs, 0.5) == 3 and max_led(ivs, 3.5) == 2
    assert balanced(2, 6, 3) and not balanced(3, 6, 3)


def test_a_violation_is_a_record_in_results_and_old_text_still_reads() -> None:
    v = Violation("token", "r1", 3.25, "token 4 after 5", since=1.0)
    assert Violation.from_json(v.to_json()) == v
    assert Violation.from_json("token on r1 at 3.250: token 4 after 5") == replace(v, since=None)
    unsettled = Violation.from_json("unsettled: the group had not been quiet for 2 s")
    assert (unsettled.kind, unsettled.role) == ("unsettled", "")
    assert unsettled.detail == "the group had not been quiet for 2 s"
    assert str(unsettled) == "unsettled: the group had not been quiet for 2 s"
    assert str(Violation("unsettled", "", 7.0, "never quiet")) == "unsettled at 7.000: never quiet"


def test_percentiles() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5 and percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))
    s = Summary.of([0.1 * i for i in range(1, 101)])
    assert s.n == 100 and math.isclose(s.max, 10.0) and math.isclose(s.p50, 5.05)


def test_a_member_killed_and_restarted_twice_believes_in_each_life_only() -> None:
    # a leads r, is killed at 10, restarted, leads r again from 20 (token 3), is killed again at 30; b fills in.
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 11.0), rev("b", "r", 2, 19.9), acq("a", "r", 3, 20.0),
                 acq("b", "r", 4, 31.0)],
                [FaultRecord(10.0, "kill", "a"), FaultRecord(30.0, "kill", "a")], end=40.0)
    ivs = [(i.member, i.start, i.end, i.ended_by) for i in h.intervals()["r"]]
    assert ivs == [("a", 1.0, 10.0, "killed"), ("b", 11.0, 19.9, "revoked"), ("a", 20.0, 30.0, "killed"),
                   ("b", 31.0, 40.0, "open")]
    assert check(h, exclusive=True) == []
    assert [round(f.latency or 0, 3) for f in failovers(h, h.faults[1])] == [1.0]


def test_a_survivor_already_leading_beside_the_victim_is_a_failover_of_zero() -> None:
    # non-exclusive mode: b led r beside a before a was killed; r was never leaderless
    h = History([acq("a", "r", 1, 1.0), acq("b", "r", 2, 2.0)], [FaultRecord(5.0, "kill", "a")], end=10.0)
    assert [(f.successor, f.latency) for f in failovers(h, h.faults[0])] == [("b", 0.0)]


def test_a_paused_leader_that_wins_its_role_back_has_recovered_it() -> None:
    # a leads r, is paused at 10 until 13; no survivor takes r; a wakes, fences (belief ended at 11) and wins
    # r back at 13.5. Recovery is 3.5 s, not "until some survivor's later acquire" (b at 50).
    h = History([acq("a", "r", 1, 1.0), fen("a", "r", 1, 13.0, until=11.0), acq("a", "r", 2, 13.5),
                 acq("b", "r", 3, 50.0)], [FaultRecord(10.0, "pause", "a")], end=60.0)
    assert [(f.successor, f.latency) for f in failovers(h, h.faults[0])] == [("a", 3.5)]


def test_a_disruption_owns_only_what_ended_before_the_next_fault() -> None:
    # a leads r across an outage at 10 and keeps it; a second outage at 20 makes a fence at 21 and win r back.
    h = History([acq("a", "r", 1, 1.0), fen("a", "r", 1, 21.0, until=21.0), acq("a", "r", 2, 22.0)],
                [FaultRecord(10.0, "infra", "store[0]"), FaultRecord(20.0, "infra", "store[1]")], end=30.0)
    assert disruptions(h, h.faults[0], until=20.0) == []
    assert [f.latency for f in disruptions(h, h.faults[1])] == [2.0]


def test_tokens_are_checked_only_where_the_method_has_them() -> None:
    # an anchor without a fencing token prints 0 for every leadership: not a violation of a promise it never made
    h = History([acq("a", "r", 0, 1.0), rev("a", "r", 0, 2.0), acq("b", "r", 0, 3.0)], [], end=5.0)
    assert [v.kind for v in check(h, exclusive=True)] == ["token"]
    assert check(h, exclusive=True, tokens=False) == []


def test_time_to_balance_after_a_return_counts_from_the_last_imbalance() -> None:
    # b leads r0..r3 while a is away; a is back at 10.0 and gets r0 at 13.0 (1 to 3), loses it to b at 14.0, takes
    # r1 at 16.0 (1 to 3 again) and r0 at 17.0: 2 to 2, balanced for good from 17.0.
    lines = [acq("b", f"r{i}", 1, 1.0) for i in range(4)]
    lines += [rev("b", "r0", 1, 12.9), acq("a", "r0", 2, 13.0), fen("a", "r0", 2, 14.0, 14.0), acq("b", "r0", 3, 14.0),
              rev("b", "r1", 1, 15.9), acq("a", "r1", 2, 16.0), rev("b", "r0", 3, 16.9), acq("a", "r0", 4, 17.0)]
    ivs = History(lines, end=20.0).intervals()
    roles = ["r0", "r1", "r2", "r3"]
    assert balanced_from(ivs, roles, 2, 10.0, 20.0) == 17.0
    assert balanced_from(ivs, roles, 2, 17.5, 20.0) == 17.5  # already balanced at the start of the window
    assert balanced_from(ivs, roles, 2, 10.0, 16.5) is None  # not balanced at the end of the window
