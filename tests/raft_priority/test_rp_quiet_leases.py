"""raft:// at rest: the leaderships of quiet partitions follow one shared deadline per quorum of node links, renewed
once for all of them, and a partition whose group wakes goes back to a deadline of its own without a gap.

Three electors in this process over gRPC on loopback (ports from the OS); the test reads the electors' bookkeeping
on their driver threads (`Driver.call`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import elect
from elect.events import Event, Fenced, Revoked
from elect.roles import Role
from elect_bench.methods import METHODS, Group
from elect_cluster.waiting import wait_until
from raft_priority.elector import RaftElector

IDS = ("a", "b", "c")
P = 12
ET = 1.0
BOUND = 30.0  # generous: a noisy 2-core machine shared with other test runs
_unique = itertools.count()


@pytest.fixture
def electors() -> Iterator[tuple[dict[str, RaftElector], list[Event]]]:
    urls = METHODS["raft"].member_urls(Group(IDS, P, f"quiet-leases-{next(_unique)}"), ET, {})
    made = {i: elect.connect(urls[i], list(range(P)), member=i) for i in IDS}
    ended: list[Event] = []
    try:
        for e in made.values():
            e.subscribe(lambda ev: ended.append(ev) if isinstance(ev, (Fenced, Revoked)) else None)
            e.start()
        yield {i: e for i, e in made.items() if isinstance(e, RaftElector)}, ended
    finally:
        for e in made.values():
            e.stop(2)


@dataclass(frozen=True)
class Renewal:
    """How an elector renews its leaderships, read on its driver thread."""

    own: frozenset[Role]  # each on a deadline of its own
    shared: frozenset[Role]  # following a quiet quorum's shared deadline
    deadlines: int  # how many shared deadlines those follow


def _renewal(e: RaftElector) -> Renewal:
    def look(now: float) -> Renewal:
        renewals = e._renewing()
        shared = renewals.shared_by()
        return Renewal(frozenset(renewals.leased), frozenset(shared), len(set(shared.values())))
    assert e.driver is not None
    return e.driver.call(look, timeout=5)


def _deadline(e: RaftElector, role: Role) -> float:
    lead = e.leadership(role)
    assert lead is not None and lead.deadline is not None, f"{e.member} no longer leads {role!r}"
    return lead.deadline


def test_quiet_partitions_share_one_deadline_and_a_woken_one_takes_its_own_without_a_gap(
        electors: tuple[dict[str, RaftElector], list[Event]]) -> None:
    els, ended = electors

    def all_shared() -> bool:
        led = sum(len(e.leading()) for e in els.values())
        views = [_renewal(e) for e in els.values()]
        return led == P and all(not v.own and v.deadlines <= 1 for v in views) and \
            sum(len(v.shared) for v in views) == P

    wait_until(all_shared, BOUND, what="every led role on its node's one shared deadline")
    ended.clear()  # the start's elections and rebalancing are over: nothing ends from here on
    e = next(x for x in els.values() if x.leading())
    role = min(e.leading(), key=str)
    token, first = e.leadership(role).token, _deadline(e, role)  # type: ignore[union-attr]
    wait_until(lambda: _deadline(e, role) > first + 0.2, BOUND, what="the shared deadline renewed")

    # wake the partition's group on its leader, as any per-group event does: its role leaves the shared deadline
    # and is renewed from the group's own lease from then on, then rejoins once the group is quiet again
    assert e.driver is not None and e.host is not None
    host = e.host
    e.driver.call(lambda now: host.groups[int(role)].wake(now), timeout=5)
    wait_until(lambda: role in _renewal(e).own, BOUND, what="the woken partition's role on its own deadline")
    before = _deadline(e, role)
    wait_until(lambda: role in _renewal(e).shared, BOUND, what="the role back on the shared deadline")
    wait_until(lambda: _deadline(e, role) > before + 0.2, BOUND, what="renewed on after rejoining")
    assert e.leadership(role).token == token  # type: ignore[union-attr]
    assert ended == []  # no leadership lapsed or ended meanwhile


def test_roles_whose_leases_lapsed_with_their_groups_are_led_again_once_the_lease_holds(
        electors: tuple[dict[str, RaftElector], list[Event]]) -> None:
    """A quiet leader is not ticked: when its node acks stall, its lease runs out (its roles lapse, Fenced) without
    the group stepping down, and it leads on under the same term once acks count again. Its roles must then be led
    again (same token), not left without a leader while the group has one."""
    els, _ = electors
    wait_until(lambda: sum(len(e.leading()) for e in els.values()) == P, BOUND, what="every role led")
    e = next(x for x in els.values() if x.leading())
    role = min(e.leading(), key=str)
    token = e.leadership(role).token  # type: ignore[union-attr]
    assert e.driver is not None
    e._fence(role)  # as the deadline timer does when the lease ran out ...
    e.driver.call(lambda now: e._lapsed(role, now + 60), timeout=5)  # ... and the core's lease had too, then
    wait_until(lambda: e.is_leader(role), BOUND, what=f"{role!r} led again by {e.member}")
    assert e.leadership(role).token == token  # type: ignore[union-attr]
