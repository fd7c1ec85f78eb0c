from __future__ import annotations

import asyncio

import elect.aio
from elect.events import Acquired, Event, Revoked


def test_async_api_with_coroutine_callbacks_holding_the_handover() -> None:
    async def main() -> None:
        order: list[str] = []

        async def on_event(event: Event) -> None:
            if isinstance(event, Revoked):
                await asyncio.sleep(0.2)  # in-flight work the successor must wait for
                order.append(f"{event.member} finished")
            elif isinstance(event, Acquired):
                order.append(f"{event.member} acquired {event.token}")

        a = elect.aio.connect("memory://aio", ["r"], member="a")
        b = elect.aio.connect("memory://aio", ["r"], member="b")
        a.subscribe(on_event)
        b.subscribe(on_event)
        async with a:
            await b.start()
            assert a.is_leader("r") and not b.is_leader("r")
            await a.resign("r")
            assert b.is_leader("r")
            stream = b.events()
            first = await anext(stream)
            assert isinstance(first, Acquired) and first.member == "b"
            await stream.aclose()
            await b.stop()
        # b's stop handed r back to a, which then stopped too
        assert order == ["a acquired 1", "a finished", "b acquired 2", "b finished", "a acquired 3", "a finished"]

    asyncio.run(main())
