"""The group-membership decisions of a NELI member (`neli.membership`): pure, time as `now`."""

from __future__ import annotations

from neli.membership import Membership, Move, Parking


def test_a_hand_over_parks_where_the_broker_keeps_partitions_and_rejoins_when_due() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    assert m.hand_over(10.0, in_group=True) is Move.PARK
    m.parked(owned=False)
    assert m.parking is Parking.JOINING
    assert m.hand_over(10.5, in_group=True) is Move.STAY  # parked already: it comes back when that ends
    assert m.due(11.9, leading=False) is Move.STAY
    assert m.due(12.0, leading=False) is Move.REJOIN
    assert m.on_leader_topic and m.rejoin_at is None


def test_a_hand_over_leaves_without_a_parking_topic_and_not_while_out_of_the_group() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=False)
    assert m.hand_over(0.0, in_group=False) is Move.STAY
    assert m.hand_over(0.0, in_group=True) is Move.LEAVE
    m.left()
    assert m.due(2.0, leading=False) is Move.REJOIN


def test_parking_waits_for_the_revocation_and_then_for_the_rebalance_that_sees_it() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    m.hand_over(0.0, in_group=True)
    m.parked(owned=True)
    assert m.parking is Parking.REVOKING
    m.revoked(owned=False)
    assert m.parking is Parking.JOINING
    m.assigned(ours=True)  # a rebalance from before parking: librdkafka revokes it again
    assert m.parking is Parking.REVOKING
    m.revoked(owned=False)
    m.assigned(ours=False)
    assert m.parking is Parking.PARKED


def test_a_stop_parks_first_and_finishes_once_parked_and_leading_nothing() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    assert m.stop(0.0, joined=True, stop_by=None) is Move.PARK
    m.parked(owned=False)
    assert m.due(1.0, leading=False) is Move.STAY  # not parked yet
    m.assigned(ours=False)
    assert m.due(1.1, leading=True) is Move.STAY  # still leading
    assert m.due(1.2, leading=False) is Move.FINISH


def test_a_stop_gives_up_waiting_for_parking_and_for_its_leaderships_at_its_limits() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    assert m.stop(0.0, joined=True, stop_by=3.0) is Move.PARK
    m.parked(owned=False)
    assert m.park_by == 3.0  # the stop's own limit comes before five session timeouts
    assert m.due(2.9, leading=True) is Move.STAY
    assert m.due(3.1, leading=True) is Move.FINISH


def test_a_stop_before_joining_leaves_at_once_and_never_rejoins() -> None:
    m = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    m.hand_over(0.0, in_group=True)
    m.parked(owned=False)
    assert m.stop(0.5, joined=False, stop_by=None) is Move.STAY  # parked already: leave once parked
    assert m.due(3.0, leading=False) is Move.STAY  # past its rejoin, but stopping: it waits to be parked
    m2 = Membership(rejoin=2.0, session_timeout=1.0, can_park=True)
    assert m2.stop(0.0, joined=False, stop_by=None) is Move.LEAVE
    m2.left()
    assert m2.due(5.0, leading=False) is Move.FINISH
