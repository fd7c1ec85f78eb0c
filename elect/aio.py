"""The asyncio face of an elector, for asyncio services.

Wraps any `Elector`: blocking calls run in a worker thread, and callbacks (plain or `async def`) run on
the event loop. The elector's event thread waits for each callback to finish, so a `Revoked` coroutine
that awaits in-flight work still holds the successor back, as it does in the synchronous API.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from elect.config import connect as _connect
from elect.config import from_config as _from_config
from elect.contract import Characteristics, Elector, Leadership, Requirements, Unsubscribe
from elect.events import Event
from elect.roles import Role

AsyncCallback = Callable[[Event], Awaitable[object] | object]


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
        loop = asyncio.get_running_loop()

        async def call(event: Event) -> None:
            result = callback(event)
            if inspect.isawaitable(result):
                await result

        def on_event(event: Event) -> None:
            if loop.is_closed():
                return
            future = asyncio.run_coroutine_threadsafe(call(event), loop)
            future.result()  # the barrier: the elector's event thread waits for the callback

        return self.sync.subscribe(on_event)

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


def connect(url: str, roles: Iterable[Role] | Role | None = None, *, member: str | None = None,
            require: Requirements | Mapping[str, Any] | None = None, **options: Any) -> AsyncElector:
    """`elect.connect` for asyncio: same arguments, an `AsyncElector` back (not yet started)."""
    return AsyncElector(_connect(url, roles, member=member, require=require, **options))


def from_config(config: Mapping[str, Any] | str | Path) -> AsyncElector:
    """`elect.from_config` for asyncio."""
    return AsyncElector(_from_config(config))
