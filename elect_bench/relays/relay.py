"""The relays: one asyncio loop in a daemon thread forwards every connection and counts it per owner."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Self

from elect_bench.relays.framer import Framer
from elect_bench.relays.kafka import KafkaFramer
from elect_bench.relays.protocols import framer_for

log = logging.getLogger(__name__)

Identify = Callable[[str], "str | None"]


@dataclass
class Counts:
    """What the clients of one owner sent through its relays so far."""

    messages: int = 0  # protocol messages client->server
    bytes: int = 0  # bytes client->server (counted even after a parse error: bytes need no parsing)
    unparsed: int = 0  # connections whose stream could not be parsed (still relayed, no longer counted)
    connections: int = 0  # connections accepted (reconnect churn shows here)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    return host.strip("[]"), int(port)


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):  # the peer may already be gone
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclass(frozen=True)
class _Relay:
    owner: str
    target: tuple[str, int]
    protocol: str
    identify: Identify | None


class _Client(asyncio.Protocol):
    """The accepted side of a relayed connection: counts what it reads, then forwards it upstream."""

    def __init__(self, meter: Meter, relay: _Relay) -> None:
        self.meter = meter
        self.relay = relay
        self.framer: Framer | None = framer_for(relay.protocol)
        self.owner = relay.owner
        self.resolved = relay.identify is None  # False until the connection's owner is known
        self.held = Counts(connections=1)  # counted before the owner was known
        self.transport: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.pending: list[bytes] = []  # read before the upstream connection was up
        self.eof = False
        self.upstream_eof = False
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.meter._transports.add(transport)
        _nodelay(transport)
        transport.pause_reading()  # until there is somewhere to forward to
        if self.resolved:
            self.meter._add(self.owner, connections=1)
        self.meter._spawn(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.relay.target
        try:
            upstream, _ = await loop.create_connection(lambda: _Upstream(self), host, port)
        except OSError as exc:
            log.debug("relay for %s: cannot reach %s:%d: %s", self.owner, host, port, exc)
            if self.transport is not None:
                self.transport.abort()
            return
        assert isinstance(upstream, asyncio.Transport)
        if self.lost:
            upstream.abort()
            return
        self.upstream = upstream
        if self.pending:
            upstream.write(b"".join(self.pending))
            self.pending.clear()
        if self.eof:
            upstream.write_eof()
        elif self.transport is not None:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._count(data)
        upstream = self.upstream
        if upstream is None:
            self.pending.append(data)
        elif not upstream.is_closing():
            upstream.write(data)

    def _count(self, data: bytes) -> None:
        framer = self.framer
        messages = 0 if framer is None else framer.feed(data)
        unparsed = 0
        if framer is not None and framer.error is not None:
            log.info("relay for %s: stream not counted any more: %s", self.owner, framer.error)
            self.framer, unparsed = None, 1
        if not self.resolved:
            self.held.messages += messages
            self.held.bytes += len(data)
            self.held.unparsed += unparsed
            if self.framer is None or (isinstance(framer, KafkaFramer) and framer.client_id_known):
                self._resolve(framer.client_id if isinstance(framer, KafkaFramer) else None)
            return
        self.meter._add(self.owner, messages=messages, bytes=len(data), unparsed=unparsed)

    def _resolve(self, client_id: str | None) -> None:
        """Attribute the connection (and what was held back) to the member its client id names."""
        self.resolved = True
        if client_id is not None and self.relay.identify is not None:
            try:
                self.owner = self.relay.identify(client_id) or self.owner
            except Exception:
                log.exception("relay for %s: identify(%r) failed", self.owner, client_id)
        held = self.held
        self.meter._add(self.owner, messages=held.messages, bytes=held.bytes, unparsed=held.unparsed,
                        connections=held.connections)

    def eof_received(self) -> bool:
        self.eof = True
        if self.upstream is not None:
            self.upstream.write_eof()  # pass the half-close on; the answer may still come
            if self.upstream_eof:
                self._close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.resolved:
            self._resolve(None)
        if self.transport is not None:
            self.meter._transports.discard(self.transport)
        if self.upstream is not None:
            self.upstream.close()  # after flushing what the client sent

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.upstream is not None:
            self.upstream.close()


class _Upstream(asyncio.Protocol):
    """The connection to the target: forwards what it reads back to the client untouched."""

    def __init__(self, client: _Client) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.client.meter._transports.add(transport)
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        downstream = self.client.transport
        if downstream is not None and not downstream.is_closing():
            downstream.write(data)

    def eof_received(self) -> bool:
        client = self.client
        client.upstream_eof = True
        if client.transport is not None:
            client.transport.write_eof()
        if client.eof:
            client._close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.client.meter._transports.discard(self.transport)
        if self.client.transport is not None:
            self.client.transport.close()

    def pause_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.resume_reading()


class Meter:
    """Counting relays served by one asyncio event loop in a daemon thread.

    One loop for all relays keeps the cost at one thread however many members and services are measured;
    the counters are read from any thread through ``counts()``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _counts and the lifecycle fields
        self._counts: dict[str, Counts] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._servers: list[asyncio.Server] = []
        self._transports: set[asyncio.Transport] = set()  # touched only on the loop thread
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> Self:
        """Start the loop thread (once); returns self."""
        with self._lock:
            if self._closed:
                raise RuntimeError("meter is closed")
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._run, args=(self._loop,), name="elect-meter",
                                                daemon=True)
                self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def relay(self, owner: str, target: str, protocol: str, *, host: str = "127.0.0.1", port: int = 0,
              identify: Callable[[str], str | None] | None = None) -> str:
        """Listen on host:port (0 = OS-chosen) and forward each accepted connection to target "host:port";
        count what clients send as `protocol` messages for `owner`. Returns "host:port" of the listener.

        With `identify` (Kafka only), a connection's first request's client id is passed to it, and a name
        it returns takes that connection's counts instead of `owner`.
        """
        framer_for(protocol)  # reject an unknown protocol here, not in the loop
        if identify is not None and protocol != "kafka":
            raise ValueError("identify needs the client id of a Kafka request header (protocol 'kafka')")
        spec = _Relay(owner, _split(target), protocol, identify)
        loop = self._running_loop()
        with self._lock:
            self._counts.setdefault(owner, Counts())
        bound = asyncio.run_coroutine_threadsafe(self._listen(spec, host, port), loop).result(timeout=60)
        return f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"

    def counts(self) -> dict[str, Counts]:
        """owner -> a copy of its counters so far (a consistent snapshot, from any thread)."""
        with self._lock:
            return {owner: replace(c) for owner, c in self._counts.items()}

    def close(self) -> None:
        """Close every listener and connection and stop the thread; idempotent, never waits on peers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            log.warning("meter: shutdown incomplete: %r", exc)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout=10)

    # loop thread

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            loop, thread = self._loop, self._thread
            if self._closed or loop is None:
                raise RuntimeError("meter is closed" if self._closed else "meter not started: call start()")
        if thread is threading.current_thread():
            raise RuntimeError("Meter.relay is for other threads (it waits for the loop)")
        return loop

    async def _listen(self, spec: _Relay, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Client(self, spec), host, port, reuse_address=True)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()  # not wait_closed(): on 3.12+ that waits for the clients to leave
        for task in list(self._tasks):
            task.cancel()
        for transport in list(self._transports):
            transport.abort()
        await asyncio.sleep(0)  # let connection_lost callbacks run

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _add(self, owner: str, *, messages: int = 0, bytes: int = 0, unparsed: int = 0,
             connections: int = 0) -> None:
        with self._lock:
            counts = self._counts.get(owner)
            if counts is None:
                counts = self._counts[owner] = Counts()
            counts.messages += messages
            counts.bytes += bytes
            counts.unparsed += unparsed
            counts.connections += connections
