"""BaseElector: the state, deadlines and event ordering every implementation inherits."""

from __future__ import annotations

import math
import threading
import time

import pytest
from hand_driven import HandDriven

from elect.base import BaseElector
from elect.core import ExtendShared, Follow
from elect.errors import NotStarted
from elect.events import Acquired, Event, Fenced, Revoked
from elect_cluster.waiting import wait_until


def collect(e: BaseElector) -> list[Event]:
    seen: list[Event] = []
    e.subscribe(seen.append)
    return seen


def test_a_lapsed_deadline_fences_on_the_members_own_clock() -> None:
    e = HandDriven("a", ["r"])
    seen = collect(e)
    e.start()
    try:
        deadline = time.monotonic() + 0.2
        e._acquire("r", 5, deadline)
        assert e.is_leader("r")
        wait_until(lambda: len(seen) == 2, 5, what="Fenced after the deadline")
        assert not e.is_leader("r") and e.leadership("r") is None
        fenced = seen[1]
        assert isinstance(fenced, Fenced) and fenced.until == deadline and fenced.token == 5
    finally:
        e.stop()


def test_is_leader_is_false_the_instant_the_deadline_passes() -> None:
    e = HandDriven("a", ["r"])
    e.start()
    try:
        e._acquire("r", 1, time.monotonic() - 0.001)  # as if the process froze past its deadline
        assert not e.is_leader("r") and e.leading() == frozenset()
    finally:
        e.stop()


def test_renewal_after_the_deadline_fences_first_then_reacquires_with_new_token() -> None:
    e = HandDriven("a", ["r"])
    seen = collect(e)
    e.start()
    try:
        e._acquire("r", 1, time.monotonic() - 0.001)
        assert e._extend("r", time.monotonic() + 10) is False
        e._acquire("r", 2, time.monotonic() + 10)
        wait_until(lambda: len(seen) == 3, 5, what="three events")
        assert [type(x) for x in seen] == [Acquired, Fenced, Acquired] and seen[2].token == 2
    finally:
        e.stop()


def test_subscribers_joining_late_get_current_leaderships_first() -> None:
    e = HandDriven("a", ["r", "s"])
    e.start()
    try:
        e._acquire("r", 3)
        late = collect(e)
        e._acquire("s", 4)
        wait_until(lambda: len(late) == 2, 5, what="replay and live event")
        assert [(type(x), x.role) for x in late] == [(Acquired, "r"), (Acquired, "s")]
    finally:
        e.stop()


def test_revoke_waits_for_blocking_callbacks_but_not_on_the_event_thread() -> None:
    e = HandDriven("a", ["r", "s"])
    released = threading.Event()
    order: list[str] = []

    def slow(event: Event) -> None:
        if isinstance(event, Revoked) and event.role == "r":
            e.resign("s")  # re-entrant call from the event thread must not deadlock
            released.wait(5)
            order.append("callback done")

    e.subscribe(slow)
    e.start()
    try:
        e._acquire("r", 1)
        e._acquire("s", 1)
        threading.Timer(0.2, released.set).start()
        e.resign("r")
        order.append("resign returned")
        assert order == ["callback done", "resign returned"]
    finally:
        e.stop()


def test_a_raising_subscriber_does_not_stop_delivery() -> None:
    e = HandDriven("a", ["r"])

    def broken(event: Event) -> None:
        raise RuntimeError("bug in the application")

    e.subscribe(broken)
    seen = collect(e)
    e.start()
    try:
        e._acquire("r", 1)
        wait_until(lambda: seen, 5, what="delivery despite a broken subscriber")
    finally:
        e.stop()


def test_stop_ends_every_leadership_and_lifecycle_is_checked() -> None:
    e = HandDriven("a", ["r"])
    seen = collect(e)
    with pytest.raises(NotStarted):
        e.resign("r")
    with e:
        e._acquire("r", 1)
    assert [type(x) for x in seen] == [Acquired, Revoked]
    with pytest.raises(RuntimeError, match="already started"):
        e.start()


def test_leaderships_on_a_shared_deadline_are_renewed_together_and_lapse_together() -> None:
    e = HandDriven("a", ["r", "s", "t"])
    seen = collect(e)
    e.start()
    try:
        now = time.monotonic()
        e._acquire("r", 1, now + 0.3)
        e._acquire("s", 1, now + 0.3)
        e._acquire("t", 1, now + 30)
        e._apply_change(ExtendShared(now + 0.4, "quorum"))
        assert e._apply_change(Follow("r", "quorum")) and e._apply_change(Follow("s", "quorum"))
        e._apply_change(ExtendShared(now + 0.6, "quorum"))  # one step renews both
        assert [e.leadership(r).deadline for r in ("r", "s", "t")] == [  # type: ignore[union-attr]
            now + 0.6, now + 0.6, now + 30]
        wait_until(lambda: sum(isinstance(x, Fenced) for x in seen) == 2, 10, what="both fenced")
        fenced = {x.role: x for x in seen if isinstance(x, Fenced)}
        assert set(fenced) == {"r", "s"} and all(x.until == now + 0.6 for x in fenced.values())
        assert e.leading() == frozenset({"t"})
        e._apply_change(ExtendShared(time.monotonic() + 10, "quorum"))  # passed: it revives nobody
        assert e.leading() == frozenset({"t"})
    finally:
        e.stop()


def test_a_shared_deadline_never_moves_a_leadership_earlier_and_its_own_deadline_takes_over_from_it() -> None:
    e = HandDriven("a", ["r"])
    e.start()
    try:
        now = time.monotonic()
        e._acquire("r", 1, now + 5)
        e._apply_change(ExtendShared(now + 4, "early"))
        assert not e._apply_change(Follow("r", "early"))
        assert e.leadership("r").deadline == now + 5  # type: ignore[union-attr]
        e._apply_change(ExtendShared(now + 6, "later"))
        assert e._apply_change(Follow("r", "later"))
        # an earlier own deadline leaves it where the shared one had it; later moves it on
        assert e._extend("r", now + 5.5) and e.leadership("r").deadline == now + 6  # type: ignore[union-attr]
        e._apply_change(ExtendShared(now + 9, "later"))
        assert e.leadership("r").deadline == now + 6  # type: ignore[union-attr]
        assert e._extend("r", now + 7) and e.leadership("r").deadline == now + 7  # type: ignore[union-attr]
    finally:
        e.stop()


def test_a_revoked_leadership_leaves_its_shared_deadline() -> None:
    e = HandDriven("a", ["r"])
    seen = collect(e)
    e.start()
    try:
        now = time.monotonic()
        e._acquire("r", 1, now + 5)
        e._apply_change(ExtendShared(now + 5, "q"))
        assert e._apply_change(Follow("r", "q"))
        e._revoke("r")
        assert e.leadership("r") is None
        assert e._held.next_deadline() == math.inf  # nothing left for its timer to fence
        wait_until(lambda: len(seen) == 2, 5, what="Revoked")
        assert [type(x) for x in seen] == [Acquired, Revoked]
    finally:
        e.stop()
