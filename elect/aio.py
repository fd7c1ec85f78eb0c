"""The asyncio face of an elector, for asyncio services.

Wraps any `Elector`: blocking calls run in a worker thread, and callbacks (plain or `async def`) run on
the event loop. The elector's event thread waits for each callback to finish, so a `Revoked` coroutine
that awaits in-flight work still holds the successor back, as it does in the synchronous API.

`hold(role)` is `Elector.run` for a block of asyncio code: the stop signal is the cancellation of the task
inside the block, and the handover waits for the block to exit. It is built on `run` itself (one call of
`fn` that parks a thread until the block exits), so both share one barrier, one grace and one deadline rule.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from elect.config import connect as _connect
from elect.config import from_config as _from_config
from elect.contract import (
    Characteristics,
    Drained,
    Elector,
    Leadership,
    Requirements,
    Running,
    Transferred,
    Unsubscribe,
)
from elect.events import Event
from elect.observe import LeaderChanged
from elect.roles import Role

if TYPE_CHECKING:
    from elect.metrics import Metrics

AsyncCallback = Callable[[Event], Awaitable[object] | object]
AsyncObserveCallback = Callable[[LeaderChanged], Awaitable[object] | object]
T = TypeVar("T")


class AsyncElector:
    """An `Elector` driven from asyncio code."""

    def __init__(self, elector: Elector) -> None:
        self.sync = elector

    @property
    def member(self) -> str:
        return self.sync.member

    @property
    def characteristics(self) -> Characteristics:
        return self.sync.characteristics

    async def start(self) -> None:
        await asyncio.to_thread(self.sync.start)

    async def stop(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.sync.stop, timeout)

    async def resign(self, role: Role) -> None:
        await asyncio.to_thread(self.sync.resign, role)

    async def transfer(self, role: Role, to: str, timeout: float | None = None) -> Transferred:
        """`Elector.transfer`: hand `role` to member `to` and wait until it is seen leading it."""
        return await asyncio.to_thread(self.sync.transfer, role, to, timeout)

    async def drain(self, timeout: float | None = None) -> Drained:
        """`Elector.drain`: hand every led role over, wait for successors where the method can see them, stop."""
        return await asyncio.to_thread(self.sync.drain, timeout)

    def hold(self, role: Role, *, grace: float | None = None) -> Hold:
        """`async with e.hold(role) as lead:` waits until this member leads `role`, then runs the block under
        that leadership (`lead.token` guards its writes). The block is cancelled on `Revoked`, on `Fenced` and at
        the deadline at the latest; that cancellation ends the `async with` quietly (the code after it runs;
        `hold.stopped` says it happened), while a cancellation from elsewhere propagates. On `Revoked` the
        successor waits until the block exited, up to `grace` (see `Elector.run`). One leadership per `async with`:
        loop around it to work under each.
        """
        return Hold(self.sync, role, grace)

    async def add_roles(self, roles: Iterable[Role]) -> None:
        await asyncio.to_thread(self.sync.add_roles, list(roles))

    async def remove_roles(self, roles: Iterable[Role]) -> None:
        await asyncio.to_thread(self.sync.remove_roles, list(roles))

    def is_leader(self, role: Role) -> bool:
        return self.sync.is_leader(role)

    def leadership(self, role: Role) -> Leadership | None:
        return self.sync.leadership(role)

    def leading(self) -> frozenset[Role]:
        return self.sync.leading()

    def subscribe(self, callback: AsyncCallback) -> Unsubscribe:
        """Run `callback(event)` on the running loop for each event; coroutines are awaited in order."""
        return self.sync.subscribe(_on_loop(callback))

    def observe(self, callback: AsyncObserveCallback) -> Unsubscribe:
        """`Elector.observe` with `callback` (plain or `async def`) run on the running loop, in order."""
        return self.sync.observe(_on_loop(callback))

    def metrics(self) -> Metrics:
        """`Elector.metrics`: this elector's Prometheus metrics."""
        return self.sync.metrics()

    async def events(self) -> AsyncIterator[Event]:
        """Every event from now on (current leaderships first), for `async for`."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        unsubscribe = self.sync.subscribe(lambda e: loop.call_soon_threadsafe(queue.put_nowait, e))
        try:
            while True:
                yield await queue.get()
        finally:
            unsubscribe()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()


def _on_loop(callback: Callable[[T], Awaitable[object] | object]) -> Callable[[T], None]:
    """A callback for the elector's delivery thread that runs `callback` on the running loop and waits for it, so
    a `Revoked` coroutine still holds the successor back and deliveries stay in order."""
    loop = asyncio.get_running_loop()

    async def call(item: T) -> None:
        result = callback(item)
        if inspect.isawaitable(result):
            await result

    def deliver(item: T) -> None:
        if loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(call(item), loop)
        future.result()  # the barrier: the delivery thread waits for the callback

    return deliver


class _Entry:
    """One leadership handed to a `Hold`: what the block gets, and how the parked thread is let go."""

    def __init__(self, lead: Leadership, stop: threading.Event) -> None:
        self.lead = lead
        self.stop = stop
        self.exited = threading.Event()


class Hold:
    """The `async with` of `AsyncElector.hold` (single use)."""

    def __init__(self, elector: Elector, role: Role, grace: float | None) -> None:
        self._elector = elector
        self._role = role
        self._grace = grace
        self._running: Running | None = None
        self._entry: _Entry | None = None
        self._task: asyncio.Task[Any] | None = None
        self._inside = False
        self._cancelling = False
        self.stopped = False  # the block was cancelled because the leadership ended

    async def __aenter__(self) -> Leadership:
        if self._task is not None:
            raise RuntimeError("a Hold is entered once; call hold() again")
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        entered: asyncio.Future[_Entry] = loop.create_future()

        def deliver(entry: _Entry) -> None:  # on the loop
            if entered.done():  # the waiter gave up, or a later leadership of a finished hold: let it go
                entry.exited.set()
                entry.stop.set()
            else:
                entered.set_result(entry)

        def fn(lead: Leadership, stop: threading.Event) -> None:  # on the worker thread, one per leadership
            entry = _Entry(lead, stop)
            try:
                loop.call_soon_threadsafe(deliver, entry)
            except RuntimeError:  # the loop is closed: nobody will enter
                return
            stop.wait()
            if not entry.exited.is_set():
                try:
                    loop.call_soon_threadsafe(self._stop_block, entry)
                except RuntimeError:
                    return
            entry.exited.wait()  # the barrier: the handover waits for this (up to the grace)

        self._running = self._elector.run(self._role, fn, grace=self._grace)  # quick: takes the elector's lock
        try:
            entry = await entered
        except BaseException:
            self._running.cancel(timeout=0)
            if entered.done() and not entered.cancelled():
                late = entered.result()
                late.exited.set()
                late.stop.set()
            raise
        self._entry = entry
        self._inside = True
        if entry.stop.is_set():  # ended before the block began: cancel it at its first await
            loop.call_soon(self._stop_block, entry)
        return entry.lead

    def _stop_block(self, entry: _Entry) -> None:
        """On the loop, only while the task is suspended inside the block: the cancellation lands there."""
        if self._inside and entry is self._entry and self._task is not None and not self._cancelling:
            self._cancelling = True
            self.stopped = True
            self._task.cancel()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        self._inside = False
        entry = self._entry
        if entry is not None:
            entry.exited.set()  # lets the handover go ahead
        if self._running is not None:
            self._running.cancel(timeout=0)  # one leadership per hold: no call for the next one
        if self._cancelling and self._task is not None and self._task.uncancel() == 0:
            return exc_type is asyncio.CancelledError  # ours: end the block quietly
        return False


def connect(url: str, roles: Iterable[Role] | Role | None = None, *, member: str | None = None,
            require: Requirements | Mapping[str, Any] | None = None, **options: Any) -> AsyncElector:
    """`elect.connect` for asyncio: same arguments, an `AsyncElector` back (not yet started)."""
    return AsyncElector(_connect(url, roles, member=member, require=require, **options))


def from_config(config: Mapping[str, Any] | str | Path) -> AsyncElector:
    """`elect.from_config` for asyncio."""
    return AsyncElector(_from_config(config))
