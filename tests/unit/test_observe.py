"""`Elector.observe` on memory://: whom a member sees lead the roles it contends for, and where it cannot."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest
from hand_driven import HandDriven

import elect
import elect.aio
from elect.contract import Requirements
from elect.errors import NotStarted, NotSupported, UnsatisfiedRequirement
from elect.observe import LeaderChanged
from elect.roles import Role
from elect_cluster.waiting import wait_until

_groups = itertools.count()


def group_url() -> str:
    return f"memory://observe-{next(_groups)}-{time.monotonic_ns()}"


class Seen:
    """What an observer was told, in order."""

    def __init__(self) -> None:
        self.items: list[LeaderChanged] = []
        self._lock = threading.Lock()

    def __call__(self, changed: LeaderChanged) -> None:
        with self._lock:
            self.items.append(changed)

    def of(self, role: Role) -> list[tuple[str | None, int | None]]:
        with self._lock:
            return [(c.leader, c.token) for c in self.items if c.role == role]


def test_an_observer_sees_the_leader_then_nobody_then_the_successor() -> None:
    url = group_url()
    a, b = elect.connect(url, ["r"], member="a"), elect.connect(url, ["r"], member="b")
    seen_a, seen_b = Seen(), Seen()
    a.observe(seen_a)  # before start: observers hear everything from the first leader on
    b.observe(seen_b)
    with a, b:
        wait_until(lambda: seen_b.of("r") == [("a", 1)], 10, what="b sees a lead r")
        assert seen_a.of("r") == [("a", 1)]  # a member sees itself lead too
        a.resign("r")
        wait_until(lambda: b.is_leader("r"), 10, what="b takes r over")
        wait_until(lambda: seen_b.of("r")[-1] == ("b", 2), 10, what="b sees itself lead r")
        expected = [("a", 1), (None, None), ("b", 2)]  # the handover: nobody leads while a's callbacks run
        assert seen_a.of("r") == expected and seen_b.of("r") == expected
    assert all(c.member == "b" for c in seen_b.items) and all(c.mono > 0 and c.ts > 0 for c in seen_b.items)


def test_a_late_observer_gets_what_is_known_first_and_unsubscribing_ends_it() -> None:
    url = group_url()
    a, b = elect.connect(url, ["r", "s"], member="a"), elect.connect(url, ["r", "s"], member="b")
    with a, b:
        wait_until(lambda: len(a.leading()) + len(b.leading()) == 2, 10, what="both roles led")
        seen = Seen()
        stop = b.observe(seen)
        wait_until(lambda: len(seen.items) == 2, 10, what="the replay of both roles")
        leaders = {c.role: c.leader for c in seen.items}
        assert leaders == {r: ("a" if a.is_leader(r) else "b") for r in ("r", "s")}
        stop()
        leader = a if a.is_leader("r") else b
        leader.resign("r")
        wait_until(lambda: (b if leader is a else a).is_leader("r"), 10, what="r handed over")
        assert len(seen.items) == 2  # nothing after unsubscribing


def test_roles_added_later_are_reported_from_what_the_group_knows_and_removed_ones_no_more() -> None:
    url = group_url()
    a, b = elect.connect(url, ["r"], member="a"), elect.connect(url, ["s"], member="b")
    seen = Seen()
    b.observe(seen)
    with a, b:
        wait_until(lambda: a.is_leader("r") and b.is_leader("s"), 10, what="each leads its role")
        assert seen.of("r") == []  # b does not contend for r: not its business
        b.add_roles(["r"])
        wait_until(lambda: seen.of("r") == [("a", 1)], 10, what="b told who leads the role it just added")
        b.remove_roles(["r"])
        a.resign("r")  # a is the only contender left: it gets r back
        wait_until(lambda: a.leadership("r") is not None and a.leadership("r").token == 2,  # type: ignore[union-attr]
                   10, what="a leads r again")
        assert seen.of("r") == [("a", 1)]


def test_a_slow_observer_holds_no_handover_back() -> None:
    url = group_url()
    a, b = elect.connect(url, ["r"], member="a"), elect.connect(url, ["r"], member="b")
    release = threading.Event()
    b.observe(lambda changed: release.wait(30))  # blocks its own thread only
    try:
        with a, b:
            wait_until(lambda: a.is_leader("r"), 10, what="a leads r")
            began = time.monotonic()
            a.resign("r")
            wait_until(lambda: b.is_leader("r"), 10, what="b takes r over while the observer blocks")
            assert time.monotonic() - began < 5
            release.set()
    finally:
        release.set()


def test_observe_on_a_stopped_elector_raises_not_started() -> None:
    e = elect.connect(group_url(), ["r"], member="a")
    with e:
        pass
    with pytest.raises(NotStarted):
        e.observe(Seen())


class Blind(HandDriven):
    """A method that does not say whom it sees lead (the default)."""

    scheme = "blind"
    unobservable = "it keeps its members apart"


def test_a_method_that_cannot_see_leaders_says_so() -> None:
    blind = Blind("a", ["r"])
    assert not blind.characteristics.observes_leaders  # the default promises nothing
    with pytest.raises(NotSupported, match="blind:// cannot observe who leads: it keeps its members apart"):
        blind.observe(Seen())
    with pytest.raises(UnsatisfiedRequirement, match="observation of who leads"):
        Requirements(observes_leaders=True).check("blind", blind.characteristics)
    e = elect.connect(group_url(), ["r"], member="a", require={"observes_leaders": True})
    assert e.characteristics.observes_leaders


def test_async_observers_run_on_the_loop() -> None:
    async def main() -> list[tuple[str | None, int | None]]:
        url = group_url()
        seen: list[tuple[str | None, int | None]] = []
        loop_thread = threading.get_ident()
        threads: set[int] = set()

        async def on_change(changed: LeaderChanged) -> None:
            threads.add(threading.get_ident())
            seen.append((changed.leader, changed.token))

        async with elect.aio.connect(url, ["r"], member="a") as a:
            a.observe(on_change)
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.05)  # poll the loop-side list; the bound is the loop count
        assert threads == {loop_thread}
        return seen

    assert asyncio.run(main())[0] == ("a", 1)
