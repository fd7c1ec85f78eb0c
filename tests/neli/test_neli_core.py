"""The pure NELI core on virtual time: no broker, no threads, every rule checked directly."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from elect.core import Acquire, Extend, Fence, LeadershipChange, Revoke
from neli.core import Assigned, Foreign, NeliCore, Publish, Received, Unassigned
from neli.heartbeat import Heartbeat, HeartbeatRecord

Produced = Publish | LeadershipChange

M = 4


def core(mode: str = "fast", *, member: str = "a", roles: tuple[int | str, ...] = (0, 4, 1), overlap: bool = False,
         timeout: float = 0.6) -> NeliCore:
    return NeliCore(group="g", member=member, instance=f"{member}-1", mode=mode,  # type: ignore[arg-type]
                    partitions=M, interval=0.1, timeout=timeout, overlap=overlap, release_margin=0.1, roles=roles)


def beat(c: NeliCore, sent: float, epoch: int = 1, *, member: str | None = None, instance: str | None = None,
         group: str = "g", wall: float | None = None, released: bool = False) -> HeartbeatRecord:
    """A record as read back (its sender's wall clock is `sent` unless given)."""
    return HeartbeatRecord(group=group, member=member or c.member, instance=instance or c.instance, epoch=epoch,
                           sent=sent, wall=sent if wall is None else wall, released=released)


def own(c: NeliCore, sent: float, epoch: int = 1) -> Heartbeat:
    """A heartbeat of `c`'s as its core publishes it (the driver stamps the wall clock)."""
    return Heartbeat(group="g", member=c.member, instance=c.instance, epoch=epoch, sent=sent)


def announced(c: NeliCore, partition: int, token: int, sent: float, epoch: int = 1) -> Publish:
    """The claim a full-mode member publishes as a leadership begins (`NeliCore._announce`)."""
    return Publish(partition, Heartbeat(group="g", member=c.member, instance=c.instance, epoch=epoch, sent=sent,
                                        token=token))


def taken(c: NeliCore) -> list[Produced]:
    """What the core produced since the last call, changes first (the order the elector handles them in)."""
    ready = c.ready()
    return [*ready.changes, *ready.messages]


def assign(c: NeliCore, partitions: Iterable[int], now: float) -> list[Produced]:
    c.step(Assigned(tuple(partitions)), now)
    return taken(c)


def revoke(c: NeliCore, partitions: Iterable[int], now: float, *, lost: bool = False) -> list[Produced]:
    c.step(Unassigned(tuple(partitions), lost), now)
    return taken(c)


def received(c: NeliCore, partition: int, offset: int, heartbeat: HeartbeatRecord, now: float,
             wall: float, caught_up: bool = True, *, gap: bool = False) -> list[Produced]:
    """`heartbeat` read at `offset`; the records before it since the last one read were read too, as other
    records (`Foreign`), unless `gap`: then they were skipped unread."""
    own = c._owned.get(partition)
    if not gap and own is not None and own.next_offset is not None:
        for skipped in range(own.next_offset, offset):
            c.step(Foreign(partition, skipped), now)
    c.step(Received(partition, offset, heartbeat, wall, caught_up), now)
    return taken(c)


def tick(c: NeliCore, now: float) -> list[Produced]:
    c.tick(now)
    return taken(c)


def set_roles(c: NeliCore, roles: Iterable[int], now: float) -> list[Produced]:
    c.set_roles(roles, now)
    return taken(c)


def resign(c: NeliCore, roles: Iterable[int], now: float) -> list[Produced]:
    c.resign(roles, now)
    return taken(c)


def of(outputs: list[Produced], kind: type) -> list[Produced]:
    return [o for o in outputs if isinstance(o, kind)]


def test_fast_owner_leads_its_roles_from_its_first_own_heartbeat() -> None:
    c = core()
    out = assign(c, [0], now=10.0)
    assert out == [Publish(0, own(c, 10.0))]  # heartbeat at once on assignment
    out = received(c, 0, offset=7, heartbeat=beat(c, 10.0), now=10.01, wall=10.01)
    assert out == [Acquire(0, 7, 10.6), Acquire(4, 7, 10.6)]  # roles 0 and 4 map to partition 0 of 4
    out = received(c, 0, offset=8, heartbeat=beat(c, 10.1), now=10.11, wall=10.11)
    assert out == [Extend(0, pytest.approx(10.7)), Extend(4, pytest.approx(10.7))]


def test_fast_counts_only_its_own_current_heartbeats() -> None:
    c = core()
    assign(c, [0], 10.0)
    foreign = [beat(c, 10.0, member="b", instance="b-1"),  # the successor's heartbeat
               beat(c, 10.0, instance="a-0"),  # a previous run of this member
               beat(c, 10.0, epoch=0),  # an earlier assignment of this partition
               beat(c, 10.0, group="other")]  # another group sharing the topic
    for i, hb in enumerate(foreign):
        assert received(c, 0, i, hb, 10.05, 10.05) == []
    assert c.leading_partitions() == frozenset()


def test_fast_publishes_to_owned_partitions_only_and_on_schedule() -> None:
    c = core()
    assign(c, [1, 2], 0.0)
    out = tick(c, 0.0)
    assert {o.partition for o in of(out, Publish)} == {1, 2}  # type: ignore[attr-defined]
    assert of(tick(c, 0.05), Publish) == []
    assert len(of(tick(c, 0.1), Publish)) == 2


def test_a_round_brought_forward_beats_every_owned_partition_and_the_next_keeps_the_interval() -> None:
    c = core()
    assign(c, [1, 2], 0.0)
    tick(c, 0.0)
    c.beat_now(0.05)
    assert sorted(o.partition for o in of(taken(c), Publish)) == [1, 2]  # type: ignore[attr-defined]
    assert of(tick(c, 0.1), Publish) == []  # the round at 0.1 came early
    assert len(of(tick(c, 0.16), Publish)) == 2  # the next one an interval after it
    stopped = core()
    assign(stopped, [1], 0.0)
    taken(stopped)
    stopped.stop()
    stopped.beat_now(0.05)
    assert of(taken(stopped), Publish) == []  # a stopping member publishes nothing, early or not


def test_an_assignment_beside_partitions_held_beats_them_all_at_once() -> None:
    """The consumer's fetch waits on the partitions held before; a heartbeat round to them ends it, and the next fetch
    reads the new ones. A first assignment only heartbeats to what it was given."""
    c = core()
    assign(c, [1, 2], 0.0)
    tick(c, 0.0)
    out = assign(c, [3], 0.04)
    assert sorted(o.partition for o in of(out, Publish)) == [1, 2, 3, 3]  # type: ignore[attr-defined]
    assert of(tick(c, 0.1), Publish) == []  # the round at 0.1 came early
    assert len(of(tick(c, 0.15), Publish)) == 3
    first = core()
    assert sorted(o.partition for o in of(assign(first, [1, 2], 0.0), Publish)) == [1, 2]  # type: ignore[attr-defined]


def test_heartbeats_stopping_fence_at_the_deadline_and_resume_with_a_new_token() -> None:
    c = core()
    assign(c, [0], 0.0)
    received(c, 0, 5, beat(c, 0.0), 0.01, 0.01)
    assert tick(c, 0.59) == [Publish(0, own(c, 0.59))]
    out = tick(c, 0.7)
    assert of(out, Fence) == [Fence(0, 0.6), Fence(4, 0.6)]  # `until` is the deadline, not now
    # a heartbeat sent before the lapse arriving late does not revive the leadership
    assert received(c, 0, 6, beat(c, 0.5), 0.71, 0.71) == []
    out = received(c, 0, 9, beat(c, 0.7), 0.72, 0.72)
    assert out == [Acquire(0, 9, pytest.approx(1.3)), Acquire(4, 9, pytest.approx(1.3))]


def test_frozen_process_fences_before_anything_else_when_it_wakes() -> None:
    c = core()
    assign(c, [0], 0.0)
    received(c, 0, 5, beat(c, 0.0), 0.01, 0.01)
    # frozen from 0.05 to 5.0; the socket buffer then delivers a heartbeat sent just before the freeze
    out = received(c, 0, 6, beat(c, 0.05), 5.0, 5.0)
    assert out == [Fence(0, 0.6), Fence(4, 0.6)]


def test_orderly_revoke_revokes_and_lost_partitions_fence() -> None:
    c = core()
    assign(c, [0, 1], 0.0)
    received(c, 0, 5, beat(c, 0.0), 0.01, 0.01)
    received(c, 1, 3, beat(c, 0.0, epoch=2), 0.01, 0.01)
    assert of(revoke(c, [0], 0.2), Revoke) == [Revoke(0), Revoke(4)]  # (and a release: see below)
    assert revoke(c, [1], 0.3, lost=True) == [Fence(1, 0.3)]
    assert c.owned == frozenset()


def test_tokens_strictly_increase_across_owners() -> None:
    a, b = core(member="a"), core(member="b")
    assign(a, [0], 0.0)
    first = of(received(a, 0, 11, beat(a, 0.0), 0.01, 0.01), Acquire)[0]
    revoke(a, [0], 1.0)
    assign(b, [0], 1.5)
    # b's first own heartbeat lands after a's in the partition's log, so its offset is larger
    second = of(received(b, 0, 40, beat(b, 1.5), 1.51, 1.51), Acquire)[0]
    assert second.token > first.token  # type: ignore[attr-defined]


def test_roles_added_and_removed_while_leading() -> None:
    c = core(roles=(0,))
    assign(c, [0], 0.0)
    received(c, 0, 5, beat(c, 0.0), 0.01, 0.01)
    assert set_roles(c, [0, 4, 2], 0.02) == [Acquire(4, 5, 0.6)]  # 2 rides on partition 2, not owned
    assert set_roles(c, [4, 2], 0.03) == [Revoke(0)]
    assert resign(c, [4], 0.04) == [Revoke(4)]
    assert c.leading_roles() == frozenset()


def test_full_mode_publishes_everywhere_and_leads_on_its_own_record() -> None:
    c = core("full", timeout=2.0)
    assert assign(c, [2], 0.0) == [Publish(2, own(c, 0.0))]  # at once on assignment, to lead without a round's wait
    assert {o.partition for o in of(tick(c, 0.0), Publish)} == set(range(M))  # type: ignore[attr-defined]
    # no role of (0, 4, 1) rides on partition 2: leading it acquires nothing
    assert received(c, 2, 30, beat(c, 0.0), 0.1, 0.1) == [announced(c, 2, 30, 0.1)]
    c2 = core("full", roles=(2, 6), timeout=2.0)
    assign(c2, [2], 0.0)
    # another member's record starts nothing: two members reading it would share its offset as a token
    assert received(c2, 2, 30, beat(c2, 999.0, member="b", instance="b-1", wall=100.0), 0.1, 100.1) == []
    out = received(c2, 2, 31, beat(c2, 0.0), 0.1, 0.1)
    assert out == [Acquire(2, 31, pytest.approx(2.0)), Acquire(6, 31, pytest.approx(2.0)), announced(c2, 2, 31, 0.1)]
    # then any group record keeps it alive: another's, sent 0.5 s ago by the wall clock, dates 1.0 on our clock
    assert received(c2, 2, 32, beat(c2, 999.0, member="b", instance="b-1", wall=100.0), 1.5, 100.5) == [
        Extend(2, pytest.approx(3.0)), Extend(6, pytest.approx(3.0))]
    # an old record (sent 5 s ago by the wall clock) is not evidence of anything now
    assert received(c2, 2, 33, beat(c2, 0.0, member="b", instance="b-1", wall=95.0), 1.6, 100.0) == []
    # a record of this member's from before the assignment (epoch 0) starts nothing either
    c3 = core("full", roles=(2,), timeout=2.0)
    assign(c3, [2], 0.0)
    assert received(c3, 2, 29, beat(c3, 0.0, epoch=0), 0.1, 0.1) == []


def test_full_mode_leaders_claim_their_token() -> None:
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    beats = {p.partition: p.heartbeat for p in of(tick(c, 0.1), Publish)}  # type: ignore[attr-defined]
    assert beats[2].token == 30 and beats[2].epoch == 1
    assert all(beats[k].token is None and beats[k].epoch == 0 for k in (0, 1, 3))


def claim(c: NeliCore, sent: float, token: int, member: str = "b") -> HeartbeatRecord:
    return HeartbeatRecord(group="g", member=member, instance=f"{member}-1", epoch=3, sent=999.0, wall=sent,
                           token=token)


def test_full_mode_a_leader_reading_a_newer_claim_stands_down_and_stays_down_while_it_is_fresh() -> None:
    # the soak's shape: a member lapsed, another took the partition, then the first read its own old
    # records late and led again under a token older than the other's
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    assert received(c, 2, 40, claim(c, 0.5, token=35), 0.6, 0.6) == [Fence(2, 0.6)]
    # its own next record would start a leadership under a newer token; not while the claim is fresh
    assert received(c, 2, 41, beat(c, 0.7), 0.8, 0.8) == []
    received(c, 2, 45, claim(c, 1.5, token=35), 1.6, 1.6)  # the claimant still leads: fresh until 3.5
    assert received(c, 2, 50, beat(c, 3.4), 3.45, 3.45) == []
    assert received(c, 2, 51, beat(c, 3.6), 3.65, 3.65) == [
        Acquire(2, 51, pytest.approx(5.6)), announced(c, 2, 51, 3.65)]


def test_full_mode_older_or_stale_claims_change_nothing() -> None:
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    assert of(received(c, 2, 31, claim(c, 0.1, token=20), 0.2, 0.2), Fence) == []  # older: the other stands down
    assert received(c, 2, 32, claim(c, -5.0, token=31), 0.3, 0.3) == []  # sent 5 s ago: says nothing about now
    assert c.leading_roles() == frozenset({2})


def test_full_mode_a_fresh_assignment_is_not_held_back_by_a_claim() -> None:
    # a member the group dropped may still claim; the new owner's first record is newer than that claim
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    assert received(c, 2, 30, claim(c, 0.0, token=20), 0.01, 0.01) == []
    assert received(c, 2, 31, beat(c, 0.0), 0.02, 0.02) == [
        Acquire(2, 31, pytest.approx(2.0)), announced(c, 2, 31, 0.02)]


def test_full_mode_a_lagging_member_starts_only_on_a_record_read_at_the_partitions_end() -> None:
    # the recheck soak's shape: a member behind the topic read its own record while another's newer claim
    # waited unread behind it, and led under the older token after the other had started
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    assert received(c, 2, 30, beat(c, 0.0), 0.01, 0.01, caught_up=False) == []  # more is known to follow
    assert received(c, 2, 31, claim(c, 0.005, token=31), 0.02, 0.02) == []  # the newer claim is read first
    # its next own record, read at the end, starts it under a token above the claim's (full mode may overlap;
    # its tokens keep their order)
    assert received(c, 2, 32, beat(c, 0.1), 0.11, 0.11) == [
        Acquire(2, 32, pytest.approx(2.1)), announced(c, 2, 32, 0.11)]


def test_full_mode_a_member_that_stays_behind_starts_one_interval_after_its_first_deferral() -> None:
    c = core("full", roles=(2,), timeout=2.0)  # interval 0.1
    assign(c, [2], 0.0)
    assert received(c, 2, 30, beat(c, 0.0), 0.01, 0.01, caught_up=False) == []
    assert received(c, 2, 31, beat(c, 0.05), 0.06, 0.06, caught_up=False) == []  # still within the interval
    assert received(c, 2, 32, beat(c, 0.1), 0.12, 0.12, caught_up=False) == [
        Acquire(2, 32, pytest.approx(2.1)), announced(c, 2, 32, 0.12)]


def test_full_mode_an_own_record_read_late_waits_as_one_read_short_of_the_end() -> None:
    # kafka-full seed 155 of `elect bench sim-neli` (first model): a member paused with a fetch answer in its socket
    # resumed and led on its own record, read "at the end" of a stale answer, after another had led on a later one
    c = core("full", roles=(2,), timeout=2.0)  # interval 0.1
    assign(c, [2], 0.0)
    assert received(c, 2, 30, beat(c, 0.0), 0.5, 0.5) == []  # sent 0.5 s ago: the end it knew of is stale
    assert received(c, 2, 31, beat(c, 0.55), 0.56, 0.56) == [Acquire(2, 31, pytest.approx(2.55)),
                                                            announced(c, 2, 31, 0.56)]


def test_full_mode_the_wait_for_the_end_starts_anew_after_reads_stall() -> None:
    # kafka-full seed 811: a member read short of the end, was cut off, and back 1.5 s later led at once on its own
    # old record, the one interval of waiting counted from before the cut, under a token older than another's
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    assert received(c, 2, 30, beat(c, 0.0), 0.01, 0.01, caught_up=False) == []
    assert received(c, 2, 33, beat(c, 0.2), 1.5, 1.5, caught_up=False) == []  # after the stall: it waits again
    assert received(c, 2, 40, claim(c, 1.45, token=35), 1.51, 1.51) == []  # and reads the newer claim first
    assert c.leading_roles() == frozenset()


def test_full_mode_a_new_leadership_claims_its_token_at_once() -> None:
    # kafka-full seed 4775: a successor paused before its next beat left its claim unwritten, and a dropped owner
    # led on other members' records for 2.59 s beside it (the stated bound T + interval: 2.2 s)
    c = core("full", roles=(2,), timeout=2.0)
    assign(c, [2], 0.0)
    out = received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    assert out == [Acquire(2, 30, pytest.approx(2.0)), announced(c, 2, 30, 0.01)]
    fast = core("fast", roles=(2,))  # fast mode's owners alone write their partition: nothing to announce
    assign(fast, [2], 0.0)
    assert of(received(fast, 2, 30, beat(fast, 0.0), 0.01, 0.01), Publish) == []


def test_full_mode_overlap_leads_out_T_after_an_orderly_revoke() -> None:
    c = core("full", roles=(2,), overlap=True, timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    taken(c)
    assert revoke(c, [2], 0.5) == []  # still leading: the successor may take a moment
    assert c.leading_roles() == frozenset({2})
    assert tick(c, 1.8) == [Publish(k, own(c, 1.8, epoch=0)) for k in range(M)]  # released: no claim
    assert of(tick(c, 1.95), Revoke) == [Revoke(2)]  # just before T runs out


def test_full_mode_overlap_ends_when_the_successor_claims() -> None:
    c = core("full", roles=(2,), overlap=True, timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    revoke(c, [2], 0.5)
    assert received(c, 2, 40, claim(c, 0.6, token=38), 0.7, 0.7) == [Revoke(2)]  # handed over in order
    assert c.leading_roles() == frozenset()
    lost = core("full", roles=(2,), overlap=True, timeout=2.0)
    assign(lost, [2], 0.0)
    received(lost, 2, 30, beat(lost, 0.0), 0.01, 0.01)
    revoke(lost, [2], 0.5, lost=True)
    assert received(lost, 2, 40, claim(lost, 0.6, token=38), 0.7, 0.7) == [Fence(2, 0.7)]


def test_full_mode_overlap_lost_partition_fences_at_T() -> None:
    c = core("full", roles=(2,), overlap=True, timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    assert of(revoke(c, [2], 0.5, lost=True), Fence) == []
    assert of(tick(c, 1.95), Revoke) == []
    assert of(tick(c, 2.0), Fence) == [Fence(2, 2.0)]


def test_full_mode_reassigned_before_release_restarts_with_a_new_token() -> None:
    c = core("full", roles=(2,), overlap=True, timeout=2.0)
    assign(c, [2], 0.0)
    received(c, 2, 30, beat(c, 0.0), 0.01, 0.01)
    revoke(c, [2], 0.5)
    assert of(assign(c, [2], 1.0), Revoke) == [Revoke(2)]
    assert received(c, 2, 50, beat(c, 1.0, epoch=2), 1.01, 1.01) == [
        Acquire(2, 50, 3.0), announced(c, 2, 50, 1.01, epoch=2)]


def test_next_wakeup_covers_heartbeats_and_deadlines() -> None:
    c = core()
    assign(c, [0], 0.0)
    tick(c, 0.0)
    assert c.next_wakeup() == pytest.approx(0.1)
    received(c, 0, 5, beat(c, 0.0), 0.01, 0.01)
    c.stop()
    assert c.next_wakeup() == pytest.approx(0.6)


def test_fast_mode_cannot_overlap() -> None:
    with pytest.raises(ValueError):
        core(overlap=True)


def test_fast_leader_fences_when_another_member_claims_its_partition() -> None:
    # a leads partition 0; the group hands it to b without a's revoke (a dropped member that has not
    # noticed yet): b's heartbeats appear on partition 0 and a fences at once, before b may lead.
    c = core()
    assign(c, [0], 10.0)
    received(c, 0, 7, beat(c, 10.0), 10.01, 10.01)
    received(c, 0, 19, beat(c, 11.9), 11.91, 11.91)  # renewed until 12.5
    assert c.leading_partitions() == {0}
    out = received(c, 0, 20, beat(c, 12.0, member="b", instance="b-1"), 12.01, 12.01)
    assert out == [Fence(0, 12.01), Fence(4, 12.01)]
    # its own heartbeats keep coming back, but the claim is contested while b's heartbeats are fresh
    assert received(c, 0, 21, beat(c, 12.05), 12.06, 12.06) == []
    assert c.leading_partitions() == frozenset()


def test_fast_owner_waits_for_another_claim_to_go_quiet_before_it_leads() -> None:
    c = core(member="b", roles=(0,))
    assign(c, [0], 10.0)
    # the previous owner a still heartbeats here (sent 10.0 by its wall clock)
    assert received(c, 0, 5, beat(c, 10.0, member="a", instance="a-1"), 10.02, 10.02) == []
    assert received(c, 0, 6, beat(c, 10.0), 10.03, 10.03) == []  # own evidence, but contested until 10.6
    out = received(c, 0, 9, beat(c, 10.6), 10.61, 10.61)  # a's heartbeat is now timeout old
    assert out == [Acquire(0, 9, pytest.approx(11.2))]


def test_fast_another_members_claim_holds_an_owner_back_for_claim_timeout_not_timeout() -> None:
    # a leads until its own record sent at 10.0 is timeout (0.6) old on its clock: 10.6. b dates a's record by the
    # two wall clocks; waiting exactly timeout left no margin (b's clock 5 % fast led 28 ms before a fenced, in the
    # kafka-fast-848 drift soak), so b waits claim_timeout (0.7): a's wall clock may be 0.1 s behind b's, here
    # 0.08, and b still leads only after a stopped
    c = NeliCore(group="g", member="b", instance="b-1", mode="fast", partitions=M, interval=0.1, timeout=0.6,
                 claim_timeout=0.7, roles=(0,))
    assign(c, [0], 10.0)
    assert received(c, 0, 5, beat(c, 9.92, member="a", instance="a-1"), 10.02, 10.02) == []  # sent 10.0 really
    assert received(c, 0, 6, beat(c, 10.0), 10.03, 10.03) == []
    assert received(c, 0, 8, beat(c, 10.55), 10.56, 10.56) == []  # a's record is "0.64 old": a leads until 10.6
    out = received(c, 0, 9, beat(c, 10.63), 10.64, 10.64)
    assert out == [Acquire(0, 9, pytest.approx(11.23))]  # after 10.6, when a fenced
    with pytest.raises(ValueError, match="claim_timeout"):
        NeliCore(group="g", member="b", instance="b-1", mode="fast", partitions=M, interval=0.1, timeout=0.6,
                 claim_timeout=0.5)


def test_fast_old_records_of_a_departed_owner_do_not_delay_acquisition() -> None:
    # on assignment the tail of the partition is read: a dead owner's records, sent long ago
    c = core(member="b", roles=(0,))
    assign(c, [0], 20.0)
    assert received(c, 0, 5, beat(c, 1.0, member="a", instance="a-1", wall=15.0), 20.01, 20.01) == []
    assert received(c, 0, 6, beat(c, 20.0), 20.02, 20.02) == [Acquire(0, 6, pytest.approx(20.6))]


def test_fast_a_fresh_record_appended_after_the_token_fences_though_sent_before_the_leadership_began() -> None:
    """A late record of a departed owner cannot be told from a live owner's claim that the log put after this
    member's (a frozen broker appends in any order): the leader fences, and leads again once the claim is stale."""
    c = core(member="b", roles=(0,))
    assign(c, [0], 20.0)
    received(c, 0, 6, beat(c, 20.0), 20.02, 20.02)
    # a's last record, sent before b's leadership began, arrives late
    assert received(c, 0, 7, beat(c, 19.0, member="a", instance="a-1", wall=19.9), 20.05, 20.05) == [Fence(0, 20.05)]
    assert received(c, 0, 8, beat(c, 20.1), 20.11, 20.11) == []  # a's claim is fresh until 20.5
    assert received(c, 0, 9, beat(c, 20.5), 20.51, 20.51) == [Acquire(0, 9, pytest.approx(21.1))]


def test_fast_an_owner_giving_a_partition_up_in_order_releases_it_after_its_revoke() -> None:
    c = core()
    assign(c, [0, 1], 10.0)
    received(c, 0, 7, beat(c, 10.0), 10.01, 10.01)  # leads 0 (roles 0, 4); 1 is owned, not led yet
    c.stop()  # publishes no more heartbeats
    out = revoke(c, [0, 1], 10.3)
    released = [Publish(0, Heartbeat(group="g", member="a", instance="a-1", epoch=1, sent=10.3, released=True)),
                Publish(1, Heartbeat(group="g", member="a", instance="a-1", epoch=2, sent=10.3, released=True))]
    assert out == [Revoke(0), Revoke(4), *released]  # the driver publishes after the changes (and callbacks)
    assign(c, [2], 11.0)
    assert of(revoke(c, [2], 11.5, lost=True), Publish) == []  # lost: nothing to say
    full = core("full")
    assign(full, [0], 10.0)
    assert not any(p.heartbeat.released for p in of(revoke(full, [0], 10.3), Publish))  # type: ignore[attr-defined]


def test_fast_a_successor_does_not_wait_for_the_claims_of_a_member_that_released() -> None:
    c = core(member="b", roles=(0,))
    assign(c, [0], 10.0)
    a = {"member": "a", "instance": "a-1"}
    assert received(c, 0, 5, beat(c, 9.95, **a), 10.02, 10.02) == []  # a's last heartbeat: contested to 10.55
    assert received(c, 0, 6, beat(c, 10.0, **a, released=True), 10.02, 10.02) == []
    assert received(c, 0, 7, beat(c, 10.0), 10.03, 10.03) == [Acquire(0, 7, pytest.approx(10.6))]
    # a's record sent before its release, read late, holds nothing back; one sent after it (a back with a new
    # assignment) is a claim again, and fences
    assert received(c, 0, 8, beat(c, 9.97, **a), 10.04, 10.04) == []
    assert received(c, 0, 9, beat(c, 10.1, **a, epoch=2), 10.11, 10.11) == [Fence(0, 10.11)]


def test_fast_a_release_ends_one_senders_claim_not_anothers() -> None:
    c = core(member="b", roles=(0,))
    assign(c, [0], 10.0)
    received(c, 0, 5, beat(c, 9.95, member="a", instance="a-1"), 10.02, 10.02)
    received(c, 0, 6, beat(c, 9.9, member="z", instance="z-1"), 10.02, 10.02)  # a zombie: fresh until 10.5
    received(c, 0, 7, beat(c, 10.0, member="a", instance="a-1", released=True), 10.02, 10.02)
    assert received(c, 0, 8, beat(c, 10.0), 10.03, 10.03) == []  # z's claim stands
    assert received(c, 0, 9, beat(c, 10.5), 10.51, 10.51) == [Acquire(0, 9, pytest.approx(11.1))]


def test_the_wall_clock_is_stamped_as_a_heartbeat_is_sent() -> None:
    c = core()
    sent = own(c, 12.5, epoch=3)
    assert Heartbeat.decode(sent.encode(wall=1700000000.25)) == beat(c, 12.5, epoch=3, wall=1700000000.25)
    assert Heartbeat.decode(b"not a heartbeat") is None
    gone = Heartbeat(group="g", member="a", instance="a-1", epoch=3, sent=12.5, released=True)
    assert Heartbeat.decode(gone.encode(wall=5.0)) == beat(c, 12.5, epoch=3, wall=5.0, released=True)


def test_unled_names_an_owned_partition_held_back_for_long_and_what_holds_it() -> None:
    c = core()  # roles 0, 4 on partition 0, role 1 on partition 1; partition 2 has none
    assign(c, [0, 1, 2], 10.0)
    received(c, 0, 5, beat(c, 10.0), 10.1, 10.1)  # partition 0 leads
    received(c, 1, 6, beat(c, 10.0, member="b", instance="b-1"), 10.1, 10.1)  # b still heartbeats partition 1
    assert c.unled(10.5, 3.0) == []
    found = dict(c.unled(14.0, 3.0))
    assert list(found) == [1]  # partition 0 led since; partition 2 has no role to lead
    assert "unled for 4.0 s" in found[1] and "contested" in found[1]
    c.tick(20.0)  # partition 0's leadership lapsed at 10.6: unled since then
    assert dict(c.unled(20.0, 3.0)).keys() == {0, 1}


def test_records_skipped_unread_hold_an_owner_back_for_a_timeout() -> None:
    """A member whose reads jumped past records (its consumer's position moved) may have missed another owner's
    fresh claim (the KIP-848 soak's overlap): it does not start on its own record read after the gap until a claim
    sent by then would be stale. Where the reads start is the driver's to say (`Assigned.starts`)."""
    c = core()
    c.step(Assigned((0,), (5,)), 10.0)
    taken(c)
    assert received(c, 0, 9, beat(c, 10.0), now=10.05, wall=10.05, gap=True) == []  # 5-8 read by nobody
    assert c.skipped == [(0, 9, 5)]
    out = received(c, 0, 10, beat(c, 10.6), now=10.66, wall=10.66)  # the skipped records are a timeout old
    assert out == [Acquire(0, 10, pytest.approx(11.2)), Acquire(4, 10, pytest.approx(11.2))]


def test_records_skipped_unread_end_a_leadership_at_once() -> None:
    c = core()
    assign(c, [0, 1], 10.0)
    received(c, 0, 7, beat(c, 10.0), now=10.01, wall=10.01)
    received(c, 1, 3, beat(c, 10.0, epoch=2), now=10.01, wall=10.01)
    # offset 8 skipped: partition 0 (roles 0 and 4) ends; its own record, sent before the gap, starts nothing
    assert received(c, 0, 9, beat(c, 10.15), now=10.2, wall=10.2, gap=True) == [Fence(0, 10.2), Fence(4, 10.2)]
    assert c.leading_partitions() == frozenset({1})  # partition 1 (role 1) leads on
    c.step(Foreign(2, 50), 10.3)  # a partition it does not own: nothing to do
    assert taken(c) == []


def test_a_record_that_is_no_heartbeat_counts_among_the_offsets_read() -> None:
    """A shared topic carries other records: their offsets are read too, so the next heartbeat's is no gap."""
    c = core()
    c.step(Assigned((0,), (5,)), 10.0)
    taken(c)
    c.step(Foreign(0, 5), 10.01)
    assert received(c, 0, 6, beat(c, 10.0), now=10.02, wall=10.02) != [] and c.skipped == []


def test_fast_owner_waits_for_the_end_before_leading_on_its_own_record() -> None:
    """A broker frozen for a second appends what its sockets held in any order: another owner's claim sent before
    this member's record may sit after it (the KIP-848 soak: two owners led together for 2 ms). An own record read
    short of the partition's end starts nothing; the claim behind it is read first."""
    c = core()
    assign(c, [0], 10.0)
    other = beat(c, 10.0, member="b", instance="b-1")
    assert received(c, 0, 5, other, now=10.61, wall=10.61) == []  # stale by now
    assert received(c, 0, 6, beat(c, 10.01), now=10.611, wall=10.611, caught_up=False) == []
    later = beat(c, 10.3, member="b", instance="b-1")  # sent before the own record was read, appended after it
    assert received(c, 0, 7, later, now=10.612, wall=10.612) == []  # contested until 10.9
    assert received(c, 0, 8, beat(c, 10.85), now=10.86, wall=10.86) == []
    out = received(c, 0, 9, beat(c, 10.95), now=10.96, wall=10.96)
    assert out == [Acquire(0, 9, pytest.approx(11.55)), Acquire(4, 9, pytest.approx(11.55))]


def test_fast_leader_fences_on_a_fresh_claim_appended_after_its_token_though_sent_before_it_led() -> None:
    c = core()
    assign(c, [0], 10.0)
    assert of(received(c, 0, 5, beat(c, 10.0), now=10.55, wall=10.55), Acquire)
    claim = beat(c, 10.01, member="b", instance="b-1")  # sent before this leadership began (10.55), fresh
    assert received(c, 0, 6, claim, now=10.56, wall=10.56) == [Fence(0, 10.56), Fence(4, 10.56)]
    c2 = core()
    assign(c2, [0], 10.0)
    received(c2, 0, 5, beat(c2, 10.0), now=10.55, wall=10.55)
    stale = beat(c2, 9.9, member="b", instance="b-1")  # appended after the token too, but a timeout old
    assert received(c2, 0, 6, stale, now=10.56, wall=10.56) == []
