"""BaseElector: the state, deadlines and event ordering every implementation inherits."""

from __future__ import annotations

import threading
import time

import pytest

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.errors import NotStarted
from elect.events import Acquired, Event, Fenced, Revoked
from elect.roles import Role
from elect_cluster.waiting import wait_until


class Driver(BaseElector):
    """A driver whose algorithm is the test itself: it calls the transitions by hand."""

    scheme = "test"

    @property
    def characteristics(self) -> Characteristics:
        return Characteristics(True, 0.0, 1.0, True, "test")

    def _on_start(self) -> None: ...
    def _on_stop(self, timeout: float | None) -> None:
        for role in list(self.leading()):
            self._revoke(role)
    def _on_resign(self, role: Role) -> None:
        self._revoke(role)
    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None: ...


def collect(e: BaseElector) -> list[Event]:
    seen: list[Event] = []
    e.subscribe(seen.append)
    return seen


def test_a_lapsed_deadline_fences_on_the_members_own_clock() -> None:
    e = Driver("a", ["r"])
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
    e = Driver("a", ["r"])
    e.start()
    try:
        e._acquire("r", 1, time.monotonic() - 0.001)  # as if the process froze past its deadline
        assert not e.is_leader("r") and e.leading() == frozenset()
    finally:
        e.stop()


def test_renewal_after_the_deadline_fences_first_then_reacquires_with_new_token() -> None:
    e = Driver("a", ["r"])
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
    e = Driver("a", ["r", "s"])
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
    e = Driver("a", ["r", "s"])
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
    e = Driver("a", ["r"])

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
    e = Driver("a", ["r"])
    seen = collect(e)
    with pytest.raises(NotStarted):
        e.resign("r")
    with e:
        e._acquire("r", 1)
    assert [type(x) for x in seen] == [Acquired, Revoked]
    with pytest.raises(RuntimeError, match="already started"):
        e.start()
