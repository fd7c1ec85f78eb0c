"""Work while leading (`run`, `hold`) and `drain`, on memory:// and on a hand-driven BaseElector."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator

import pytest
from hand_driven import HandDriven

import elect
import elect.aio
from elect.base import BaseElector
from elect.contract import Leadership
from elect.errors import ConfigError
from elect.events import Acquired, Event
from elect_cluster.waiting import wait_until

_groups = itertools.count()


@pytest.fixture
def url() -> str:
    return f"memory://work-{next(_groups)}-{time.monotonic_ns()}"


@pytest.fixture
def stopped() -> Iterator[list[BaseElector]]:
    """Electors a test started; stopped at the end whatever happened."""
    started: list[BaseElector] = []
    yield started
    for e in started:
        e.stop(5)


def member(url: str, name: str, roles: list[elect.Role], started: list[BaseElector]) -> BaseElector:
    e = elect.connect(url, roles, member=name)
    assert isinstance(e, BaseElector)
    started.append(e)
    return e


def acquisitions(e: elect.Elector) -> list[tuple[float, int]]:
    """(monotonic time, token) of each Acquired, as the elector emits them."""
    seen: list[tuple[float, int]] = []
    e.subscribe(lambda ev: seen.append((ev.mono, ev.token)) if isinstance(ev, Acquired) else None)
    return seen


class Worker:
    """fn for `run`: works until told to stop, then takes `finish` seconds (in-flight work) and notes the time."""

    def __init__(self, finish: float = 0.0, raises: int = 0) -> None:
        self.finish = finish
        self.raises = raises
        self.started: list[Leadership] = []
        self.started_at: list[float] = []
        self.returned: list[tuple[int, float]] = []

    def __call__(self, lead: Leadership, stop: threading.Event) -> None:
        self.started.append(lead)
        self.started_at.append(time.monotonic())
        if self.raises:
            self.raises -= 1
            raise RuntimeError("the application's bug")
        stop.wait()
        time.sleep(self.finish)  # the in-flight work a successor must wait for
        self.returned.append((lead.token, time.monotonic()))


def test_the_successor_acquires_only_after_fn_returned(url: str, stopped: list[BaseElector]) -> None:
    a, b = member(url, "a", ["r"], stopped), member(url, "b", ["r"], stopped)
    work = Worker(finish=0.3)
    running = a.run("r", work)
    a.start()
    b_acquired = acquisitions(b)
    b.start()
    wait_until(lambda: work.started, 20, what="fn called under a's leadership")
    assert work.started[0].token == 1 and work.started[0].role == "r" and work.started[0].member == "a"
    a.resign("r")
    wait_until(lambda: b_acquired, 20, what="b acquiring")
    assert work.returned and b_acquired[0][0] >= work.returned[0][1], (work.returned, b_acquired)
    assert running.calls == 1 and running.failures == 0


def test_fn_runs_again_for_each_new_leadership(url: str, stopped: list[BaseElector]) -> None:
    a, b = member(url, "a", ["r"], stopped), member(url, "b", ["r"], stopped)
    work = Worker()
    a.start()
    with a.run(["r"], work):
        # the first call is made on the role's worker thread: a resign before that thread got going ends the
        # leadership first, and then rightly no call is made for it (CI saw [3] for [1, 3] on a busy machine)
        wait_until(lambda: work.started, 20, what="the first call")
        b.start()
        a.resign("r")
        wait_until(lambda: b.is_leader("r"), 20, what="b leading r")
        b.resign("r")  # back to a under a newer token
        wait_until(lambda: len(work.started) == 2, 20, what="a second call")
        assert [lead.token for lead in work.started] == [1, 3]
        assert [token for token, _ in work.returned] == [1]


def test_one_worker_per_role(url: str, stopped: list[BaseElector]) -> None:
    a = member(url, "a", ["r", "s", 7], stopped)
    work = Worker()
    a.start()
    running = a.run(["r", "s", 7], work)
    wait_until(lambda: len(work.started) == 3, 20, what="a call per role")
    assert {lead.role for lead in work.started} == {"r", "s", 7}
    assert running.cancel(timeout=5)  # tells every call to stop and waits for them
    assert len(work.returned) == 3 and a.leading() == {"r", "s", 7}  # cancelling work is not resigning


def test_a_raising_fn_is_logged_and_the_role_resigned(url: str, stopped: list[BaseElector],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    a, b = member(url, "a", ["r"], stopped), member(url, "b", ["r"], stopped)
    a.start()
    b.start()
    work = Worker(raises=1)
    running = a.run("r", work)
    wait_until(lambda: b.is_leader("r"), 20, what="b taking the role a's failed work resigned")
    assert running.failures == 1 and a.running and "the application's bug" in caplog.text
    wait_until(lambda: "r" in a.roles, 20, what="a contending for r again after its hold-off")
    b.resign("r")  # back to a: fn runs again (after the back-off) and works this time
    wait_until(lambda: len(work.started) == 2, 20, what="the next call")
    assert a.is_leader("r") and running.failures == 1


def test_a_fn_that_always_fails_does_not_spin(url: str, stopped: list[BaseElector]) -> None:
    a = member(url, "a", ["r"], stopped)  # alone: every resign gives the role straight back
    a.start()
    work = Worker(raises=1000)
    a.run("r", work)
    wait_until(lambda: len(work.started) >= 5, 10, what="five calls")
    gaps = [later - earlier for earlier, later in itertools.pairwise(work.started_at)]
    for n, gap in enumerate(gaps[:4]):  # back-off 0.1, 0.2, 0.4, 0.8 s
        assert gap >= 0.1 * 2**n * 0.9, gaps
    assert [lead.token for lead in work.started[:5]] == [1, 2, 3, 4, 5]  # each call under a new leadership


def test_a_lone_members_failing_work_is_held_off_not_looped(url: str, stopped: list[BaseElector],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The getting-started program with a bug in its work (issue 54): a lone member released the role and took it
    straight back, token 1, 2, 3 every 0.1-0.2 s, a traceback each time. Released, the role is left alone for the
    back-off; each failure is one record, the traceback with the first."""
    a = member(url, "a", ["r"], stopped)
    tokens = acquisitions(a)
    a.start()
    work = Worker(raises=1000)
    a.run("r", work)
    wait_until(lambda: len(work.started) >= 4, 10, what="four calls")
    times = [t for t, _ in tokens]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    for n, gap in enumerate(gaps[:3]):  # each acquisition a hold-off after the last: 0.1, 0.2, 0.4 s
        assert gap >= 0.1 * 2**n * 0.9, gaps
    records = [r for r in caplog.records if "work for 'r'" in r.getMessage()]
    assert len(records) >= 3 and records[0].exc_info is not None and all(r.exc_info is None for r in records[1:])
    assert "raised again (2 in a row)" in records[1].getMessage()


def test_restart_keeps_the_leadership_and_calls_fn_again(url: str, stopped: list[BaseElector]) -> None:
    a, b = member(url, "a", ["r"], stopped), member(url, "b", ["r"], stopped)
    a.start()
    b.start()
    work = Worker(raises=3)
    running = a.run("r", work, on_error="restart")
    wait_until(lambda: len(work.started) == 4, 10, what="three failed calls and a fourth")
    assert {lead.token for lead in work.started} == {1} and a.is_leader("r") and not b.is_leader("r")
    gaps = [later - earlier for earlier, later in itertools.pairwise(work.started_at)]
    for n, gap in enumerate(gaps):  # back-off 0.1, 0.2, 0.4 s under the one leadership
        assert gap >= 0.1 * 2**n * 0.9, gaps
    assert running.failures == 3 and running.calls == 4


def test_on_error_is_checked(url: str, stopped: list[BaseElector]) -> None:
    a = member(url, "a", ["r"], stopped)
    with pytest.raises(ConfigError, match="on_error: must be one of release, restart"):
        a.run("r", Worker(), on_error="retry")


def test_grace_bounds_how_long_the_successor_waits(url: str, stopped: list[BaseElector]) -> None:
    a, b = member(url, "a", ["r"], stopped), member(url, "b", ["r"], stopped)
    a.start()
    b_acquired = acquisitions(b)
    b.start()
    work = Worker(finish=3.0)
    a.run("r", work, grace=0.3)
    wait_until(lambda: work.started, 20, what="fn called")
    began = time.monotonic()
    a.resign("r")
    wait_until(lambda: b_acquired, 20, what="b acquiring once the grace ran out")
    assert 0.25 <= b_acquired[0][0] - began < 2.5 and not work.returned


def test_run_refuses_what_it_cannot_do(url: str, stopped: list[BaseElector]) -> None:
    a = member(url, "a", ["r"], stopped)
    with pytest.raises(ConfigError, match="does not contend for"):
        a.run("other", Worker())
    with pytest.raises(ConfigError, match="grace"):
        a.run("r", Worker(), grace=0)
    with pytest.raises(ConfigError, match="at least one role"):
        a.run([], Worker())


def test_a_grace_where_nothing_would_honour_it_is_refused() -> None:
    class NoHandover(HandDriven):
        @property
        def characteristics(self) -> elect.Characteristics:
            return elect.Characteristics(False, 2.0, 1.0, False, "test")

    e = NoHandover("a", ["r"])
    with pytest.raises(elect.NotSupported, match="no graceful handover"):
        e.run("r", Worker(), grace=1.0)
    e.run("r", Worker())  # the stop signal still works there


def test_stop_fires_at_the_deadline_even_while_the_event_thread_is_busy() -> None:
    e = HandDriven("a", ["r", "s"])
    release = threading.Event()

    def busy(event: Event) -> None:
        if isinstance(event, Acquired) and event.role == "s":
            release.wait(10)  # another role's callback holds the event thread

    e.subscribe(busy)
    stops: list[float] = []
    e.run("r", lambda lead, stop: stops.append(time.monotonic()) if stop.wait(10) else None)
    e.start()
    try:
        e._acquire("s", 1)
        deadline = time.monotonic() + 0.3
        e._acquire("r", 1, deadline)
        wait_until(lambda: stops, 20, what="stop at the deadline")
        assert deadline <= stops[0] < deadline + 1.0
    finally:
        release.set()
        e.stop()


def test_stop_fires_on_fenced() -> None:
    e = HandDriven("a", ["r"])
    work = Worker()
    e.run("r", work)
    e.start()
    try:
        e._acquire("r", 4)
        wait_until(lambda: work.started, 20, what="fn called")
        e._fence("r")
        wait_until(lambda: work.returned, 20, what="fn told to stop by Fenced")
        assert work.returned[0][0] == 4
    finally:
        e.stop()


def test_drain_hands_every_role_over_and_names_the_successors(url: str, stopped: list[BaseElector]) -> None:
    a, b = member(url, "a", ["r", "s", "t"], stopped), member(url, "b", ["r", "s", "t"], stopped)
    work = Worker(finish=0.1)
    a.start()
    a.run(["r", "s", "t"], work)
    b.start()
    led = a.leading()
    assert led  # a started first: it leads some roles
    wait_until(lambda: len(work.started) == len(led), 20, what="a call per role led")  # (see above: no call else)
    drained = a.drain(timeout=5)
    assert drained.roles == led and drained.successors == {r: "b" for r in led} and drained.confirmed
    assert 0 < drained.seconds < 5 and not a.running and b.leading() == {"r", "s", "t"}
    assert len(work.returned) == len(led)  # every worker finished before its role was handed over


def test_the_last_member_drains_without_waiting_for_a_successor(url: str, stopped: list[BaseElector]) -> None:
    a = member(url, "a", ["r"], stopped)
    a.start()
    drained = a.drain(timeout=10)
    assert drained.roles == {"r"} and drained.successors == {} and drained.uncontended == {"r"}
    assert not drained.confirmed and drained.seconds < 5


def test_drain_waits_at_most_its_timeout_for_a_successor() -> None:
    class Blind(HandDriven):  # hands over but never sees anyone take over
        def _on_drain(self) -> bool:
            for role in self.leading():
                self._revoke(role)
            return True

    e = Blind("a", ["r"])
    e.start()
    e._acquire("r", 1)
    drained = e.drain(timeout=0.3)
    assert drained.roles == {"r"} and drained.successors == {} and drained.uncontended == frozenset()
    assert 0.25 <= drained.seconds < 3


def test_drain_where_the_method_cannot_see_successors() -> None:
    e = HandDriven("a", ["r"])
    e.start()
    e._acquire("r", 1)
    drained = e.drain()
    assert drained.roles == {"r"} and drained.successors is None and not drained.confirmed
    with pytest.raises(elect.NotStarted):
        e.drain()


def test_hold_cancels_the_block_on_revoke_and_the_successor_waits_for_it(url: str) -> None:
    async def main() -> None:
        a = elect.aio.connect(url, ["r"], member="a")
        b = elect.aio.connect(url, ["r"], member="b")
        async with a, b:
            b_acquired = acquisitions(b.sync)
            blocked = asyncio.Event()
            exited: list[float] = []

            async def work() -> bool:
                hold = a.hold("r")
                async with hold as lead:
                    assert lead.token == 1 and lead.member == "a"
                    blocked.set()
                    try:
                        await asyncio.Event().wait()  # works until cancelled
                    finally:
                        await asyncio.sleep(0.2)  # in-flight work, after the cancellation
                        exited.append(time.monotonic())
                return hold.stopped

            task = asyncio.create_task(work())
            await asyncio.wait_for(blocked.wait(), 5)
            await a.resign("r")
            assert await asyncio.wait_for(task, 5) is True  # ended quietly, and says why
            await asyncio.to_thread(wait_until, lambda: b_acquired, 20, what="b acquiring")
            assert b_acquired[0][0] >= exited[0]

    asyncio.run(main())


def test_hold_waits_for_the_role_and_lets_other_cancellations_through(url: str) -> None:
    async def main() -> None:
        a = elect.aio.connect(url, ["r"], member="a")
        b = elect.aio.connect(url, ["r"], member="b")
        async with a, b:
            waiting = asyncio.create_task(b.hold("r").__aenter__())  # a leads: b waits
            done, _ = await asyncio.wait({waiting}, timeout=0.2)
            assert not done
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting

            async def hold_b() -> int:
                token = 0
                async with b.hold("r") as lead:
                    token = lead.token
                return token

            task = asyncio.create_task(hold_b())
            await a.resign("r")
            assert await asyncio.wait_for(task, 5) == 2

            inside = asyncio.Event()

            async def hold_forever() -> None:
                async with b.hold("r"):
                    inside.set()
                    await asyncio.Event().wait()

            forever = asyncio.create_task(hold_forever())
            await asyncio.wait_for(inside.wait(), 5)
            forever.cancel()  # not ours: it propagates
            with pytest.raises(asyncio.CancelledError):
                await forever
            assert b.is_leader("r")  # the hold ended, the leadership did not

    asyncio.run(main())
