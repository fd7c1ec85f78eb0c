"""The one driver loop (`elect.driver`): the order it hands a core's output on in, and how it stops on its own.

The core here is a small recording state machine (pure logic), so what is checked is the driver's own rules: persist
before anything is sent, a refused persist or a failing command halts it and the IO is told, inputs never hold a due
wake-up back, and a call from the loop's own thread is refused rather than deadlocking.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

import pytest

from elect.core import Acquire, Ready
from elect.driver import Driver, Halted
from elect.roles import Role
from elect_cluster.waiting import wait_until


class Core:
    """Steps record the inputs; each input makes one message to send and, if asked, one state to persist."""

    def __init__(self, persist: bool = False, wake: float = math.inf) -> None:
        self.persist = persist
        self.wake = wake
        self.stepped: list[tuple[str, float]] = []
        self.ticks: list[float] = []
        self._ready: Ready[str, str] = Ready()

    def step_all(self, inputs: Iterable[str], now: float) -> None:
        for item in inputs:
            self.stepped.append((item, now))
            self._ready.messages.append(f"sent {item}")
            if self.persist:
                self._ready.persist["r"] = item
            if item == "lead":
                self._ready.changes.append(Acquire("r", 1, now + 1.0))

    def tick(self, now: float) -> None:
        self.ticks.append(now)

    def next_wakeup(self) -> float:
        return self.wake

    def has_ready(self) -> bool:
        return bool(self._ready)

    def ready(self) -> Ready[str, str]:
        return self._ready.take()


class IO:
    def __init__(self, refuse_persist: bool = False) -> None:
        self.refuse_persist = refuse_persist
        self.calls: list[str] = []
        self.halts: list[Exception] = []
        self.ended_ = threading.Event()

    def persist(self, states: dict[Role, str]) -> None:
        if self.refuse_persist:
            raise OSError(28, "No space left on device")
        self.calls.append(f"persist {sorted(states.values())}")

    def apply(self, ready: Ready[str, str], now: float) -> None:
        self.calls.append(f"apply {len(ready.changes)}")

    def send(self, messages: list[str], now: float) -> None:
        self.calls.append(f"send {messages}")

    def idle(self, now: float) -> float:
        return math.inf

    def halted(self, error: Exception) -> None:
        self.halts.append(error)

    def ended(self) -> None:
        self.ended_.set()


def test_a_turn_persists_then_applies_then_sends() -> None:
    core, io = Core(persist=True), IO()
    driver: Driver[str, str, str] = Driver(core, io, name="test")
    driver.turn(5.0, [["lead"]])
    assert core.stepped == [("lead", 5.0)] and core.ticks == [5.0]
    assert io.calls == ["persist ['lead']", "apply 1", "send ['sent lead']"]


def test_a_persist_the_disk_refuses_halts_the_loop_and_nothing_is_sent() -> None:
    core, io = Core(persist=True), IO(refuse_persist=True)
    driver: Driver[str, str, str] = Driver(core, io, name="test")
    driver.start()
    try:
        driver.receive(["vote"])
        wait_until(lambda: io.ended_.is_set(), 10.0, what="the loop ending")
    finally:
        driver.stop()
    assert [type(e) for e in io.halts] == [Halted] and "No space left" in str(io.halts[0])
    assert isinstance(driver.halted, Halted)
    assert not any(call.startswith("send") for call in io.calls)
    assert driver.post(lambda now: None) is False  # nothing more is driven


def test_a_posted_command_that_raises_halts_the_loop() -> None:
    """A core that raised half-way through is in a state nobody can vouch for: fail-stop, and say why."""
    core, io = Core(), IO()
    driver: Driver[str, str, str] = Driver(core, io, name="test")
    driver.start()

    def broken(now: float) -> None:
        raise ValueError("a bug")

    try:
        assert driver.post(broken)
        wait_until(lambda: io.ended_.is_set(), 10.0, what="the loop ending")
    finally:
        driver.stop()
    assert len(io.halts) == 1 and isinstance(io.halts[0], ValueError)


def test_a_calls_error_goes_to_its_caller_and_the_loop_goes_on() -> None:
    core, io = Core(), IO()
    driver: Driver[str, str, str] = Driver(core, io, name="test")
    driver.start()

    def question(now: float) -> int:
        raise KeyError("no such role")

    try:
        with pytest.raises(KeyError):
            driver.call(question, timeout=10)
        assert driver.call(lambda now: 42, timeout=10) == 42
    finally:
        driver.stop()
    assert io.halts == []


def test_inputs_never_hold_a_due_wake_up_back() -> None:
    """Stepping stops at the first batch after which the core's wake-up is due; the rest waits for the next turn."""
    core = Core(wake=-math.inf)  # due at once
    driver: Driver[str, str, str] = Driver(core, IO(), name="test")
    left = driver._step_until_due([["a"], ["b"], ["c"]], 1.0)
    assert [item for item, _ in core.stepped] == ["a"] and left == [["b"], ["c"]]
    core.wake = math.inf
    assert driver._step_until_due(left, 1.0) == [] and [item for item, _ in core.stepped] == ["a", "b", "c"]


def test_a_call_from_the_loops_own_thread_is_refused() -> None:
    core, io = Core(), IO()
    driver: Driver[str, str, str] = Driver(core, io, name="test")
    driver.start()
    seen: list[BaseException] = []

    def nested(now: float) -> None:
        try:
            driver.call(lambda now: None)
        except RuntimeError as exc:
            seen.append(exc)

    try:
        driver.call(nested, timeout=10)
    finally:
        driver.stop()
    assert len(seen) == 1 and "deadlock" in str(seen[0])
