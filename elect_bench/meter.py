"""Counting TCP relays: what each member sends to its infrastructure (or its Raft peers), counted.

The benchmark compares the load each election method puts on the services it uses. Counters inside the
client libraries (kazoo, confluent-kafka, grpc, the etcd gateway) would need a hook in each and would
miss what those libraries send on their own (pings, metadata refreshes, retries, reconnects); a relay in
the path sees every byte. A relay parses only the client->server direction, just far enough to find
message boundaries, and forwards every chunk the moment it arrives: parsing never delays or alters the
traffic, and a stream it cannot parse is still relayed (the connection is then reported as unparsed).

Each protocol has a small pure incremental framer (``feed(data) -> messages finished``), so the counting
is unit-testable with any chunking. ``Meter`` serves any number of relays from one asyncio loop in a
daemon thread, so a synchronous harness can start, read and close it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import re
import socket
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, ClassVar, Self

__all__ = [
    "FRAMERS",
    "MAX_MESSAGE",
    "Counts",
    "Framer",
    "GrpcFramer",
    "HttpFramer",
    "KafkaFramer",
    "Meter",
    "ZooKeeperFramer",
    "framer_for",
]

log = logging.getLogger(__name__)

#: A length above this is taken for garbage, not a message: no protocol here sends 256 MiB at once.
MAX_MESSAGE = 256 * 1024 * 1024

Identify = Callable[[str], "str | None"]


@dataclass
class Counts:
    """What the clients of one owner sent through its relays so far."""

    messages: int = 0  # protocol messages client->server
    bytes: int = 0  # bytes client->server (counted even after a parse error: bytes need no parsing)
    unparsed: int = 0  # connections whose stream could not be parsed (still relayed, no longer counted)
    connections: int = 0  # connections accepted (reconnect churn shows here)


class _ParseError(Exception):
    """The stream is not the protocol the relay was told to expect."""


# --------------------------------------------------------------------------------------------- framers


class Framer:
    """Counts the messages in one client->server byte stream, fed in chunks of any size.

    ``feed`` never raises: a stream that does not parse sets ``error`` and is ignored from then on,
    because the relay must keep forwarding it whatever it is.
    """

    protocol: ClassVar[str] = ""

    def __init__(self) -> None:
        self.error: str | None = None
        self.messages = 0  # finished so far

    def feed(self, data: bytes | bytearray | memoryview) -> int:
        """Parse the next bytes of the stream; return how many messages they finished."""
        if self.error is not None or not data:
            return 0
        before = self.messages
        try:
            self._feed(bytes(data))
        except _ParseError as exc:
            self.error = str(exc)
        except Exception as exc:  # a framer bug must cost the count, never the traffic
            self.error = f"framer failed: {exc!r}"
        return self.messages - before

    def _feed(self, data: bytes) -> None:
        raise NotImplementedError


class _LengthPrefixed(Framer):
    """Frames of a 4-byte big-endian length and a payload; subclasses may look at the payload."""

    min_payload: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        self._size = bytearray()  # a length prefix split across chunks
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            if self._in_frame:
                take = min(self._left, end - pos)
                self._payload(data, pos, pos + take)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._end_frame()
                continue
            need = 4 - len(self._size)
            self._size += data[pos:pos + need]
            pos += min(need, end - pos)
            if len(self._size) < 4:
                return
            length = int.from_bytes(self._size, "big", signed=True)
            self._size.clear()
            if not self.min_payload <= length <= MAX_MESSAGE:
                raise _ParseError(f"{self.protocol}: implausible frame length {length}")
            self._left = length
            self._in_frame = True
            self._start_frame(length)
            if length == 0:
                self._end_frame()

    def _start_frame(self, length: int) -> None:
        """A frame of `length` payload bytes begins."""

    def _payload(self, data: bytes, start: int, stop: int) -> None:
        """`data[start:stop]` is the next piece of the current frame's payload."""

    def _end_frame(self) -> None:
        self._in_frame = False
        self.messages += 1


class ZooKeeperFramer(_LengthPrefixed):
    """ZooKeeper: every frame is one request (the connect request, pings and closeSession included)."""

    protocol = "zookeeper"
    min_payload = 8  # a request header is xid + type; the connect request is longer still


class KafkaFramer(_LengthPrefixed):
    """Kafka: every frame is one request; the first one's header names the client (``client.id``).

    A broker advertises one address, so one relay serves every member and the client id tells them apart.
    Each request's api_key and api_version are checked for sign, which catches most non-Kafka streams early.
    """

    protocol = "kafka"
    min_payload = 8  # api_key, api_version, correlation_id

    def __init__(self) -> None:
        super().__init__()
        self.client_id: str | None = None
        self.client_id_known = False  # the first request's header has been read
        self._head = bytearray()
        self._want = 0  # header bytes of the current frame to collect
        self._stage = 0  # 0: api_key and version, 1: client_id's length, 2: client_id
        self._frame_length = 0

    def _start_frame(self, length: int) -> None:
        self._head.clear()
        self._frame_length = length
        self._stage, self._want = 0, 4

    def _payload(self, data: bytes, start: int, stop: int) -> None:
        while start < stop and len(self._head) < self._want:
            take = min(stop - start, self._want - len(self._head))
            self._head += data[start:start + take]
            start += take
            if len(self._head) == self._want:
                self._header_part()

    def _header_part(self) -> None:
        """The next field of the request header is complete: check it, and decide what else to read."""
        head = self._head
        if self._stage == 0:
            api_key = int.from_bytes(head[0:2], "big", signed=True)
            api_version = int.from_bytes(head[2:4], "big", signed=True)
            if api_key < 0 or api_version < 0:
                raise _ParseError(f"kafka: implausible request header (api_key {api_key}, version {api_version})")
            if not self.client_id_known:
                self._stage, self._want = 1, 10  # correlation_id, then the client_id's length
        elif self._stage == 1:
            size = int.from_bytes(head[8:10], "big", signed=True)
            if size < -1 or 10 + size > self._frame_length:
                raise _ParseError(f"kafka: implausible client_id length {size}")
            if size <= 0:
                self._identified(None if size == -1 else "")
            else:
                self._stage, self._want = 2, 10 + size
        else:
            self._identified(bytes(head[10:]).decode("utf-8", "replace"))

    def _identified(self, client_id: str | None) -> None:
        self.client_id = client_id
        self.client_id_known = True

    def _end_frame(self) -> None:
        if not self.client_id_known:  # a first frame too short to carry a client_id (header v0)
            self._identified(None)
        super()._end_frame()


_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) \S+ HTTP/\d\.\d")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class HttpFramer(Framer):
    """HTTP/1.1 requests on a keep-alive connection: one per request head.

    Bodies are skipped by Content-Length or chunked transfer coding without being buffered, and the
    request is counted when its head is complete, so a long-lived chunked upload (a watch) counts once,
    when it starts. A request that switches protocols (Upgrade, CONNECT) ends the counting: what follows
    is no longer HTTP/1.1 as far as the relay can tell.
    """

    protocol = "http"
    MAX_HEAD = 64 * 1024
    MAX_LINE = 4096

    _HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER = range(5)

    def __init__(self) -> None:
        super().__init__()
        self._state = self._HEAD
        self._buf = bytearray()  # an unfinished head or line
        self._left = 0  # body (or chunk + CRLF) bytes still to skip

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            state = self._state
            if state in (self._BODY, self._CHUNK_DATA):
                take = min(self._left, end - pos)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = self._HEAD if state == self._BODY else self._CHUNK_SIZE
                continue
            if state == self._HEAD:
                block, pos = self._until(data, pos, b"\r\n\r\n", self.MAX_HEAD)
                if block is not None:
                    self._head(block.lstrip(b"\r\n"))
            else:
                line, pos = self._until(data, pos, b"\r\n", self.MAX_LINE)
                if line is None:
                    continue
                if state == self._CHUNK_SIZE:
                    self._chunk_size(line)
                elif not line:  # the empty line after the trailers ends the request
                    self._state = self._HEAD

    def _until(self, data: bytes, pos: int, sep: bytes, limit: int) -> tuple[bytes | None, int]:
        """The bytes up to `sep` (which may straddle chunks) and the position after it, else (None, end)."""
        if not self._buf:
            idx = data.find(sep, pos, pos + limit + len(sep))
            if idx >= 0:
                return data[pos:idx], idx + len(sep)
            if len(data) - pos > limit:
                raise _ParseError(f"http: no end of {sep!r} within {limit} bytes")
            self._buf += data[pos:]
            return None, len(data)
        old = len(self._buf)
        piece = data[pos:pos + limit - old + len(sep)]
        self._buf += piece
        idx = self._buf.find(sep, max(0, old - len(sep) + 1))
        if idx >= 0:
            block = bytes(self._buf[:idx])
            self._buf.clear()
            return block, pos + idx + len(sep) - old
        if len(self._buf) > limit:
            raise _ParseError(f"http: no end of {sep!r} within {limit} bytes")
        return None, pos + len(piece)

    def _head(self, head: bytes) -> None:
        if not head:  # empty lines between requests are allowed
            return
        lines = head.split(b"\r\n")
        match = _REQUEST_LINE.fullmatch(lines[0])
        if match is None:
            raise _ParseError(f"http: not a request line: {lines[0][:80]!r}")
        length: int | None = None
        switching = match.group(1) == b"CONNECT"
        chunked = False
        for line in lines[1:]:
            if line[:1] in (b" ", b"\t"):  # obsolete line folding continues the previous header
                continue
            name, colon, value = line.partition(b":")
            if not colon or _TOKEN.fullmatch(name) is None:
                raise _ParseError(f"http: not a header line: {line[:80]!r}")
            name, value = name.lower(), value.strip()
            if name == b"content-length":
                if not value.isdigit() or (length is not None and length != int(value)):
                    raise _ParseError(f"http: bad Content-Length {value[:40]!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
                if not chunked:
                    raise _ParseError(f"http: request body of unknown length ({value[:40]!r})")
            elif name == b"upgrade":
                switching = True
        self.messages += 1
        if switching:
            raise _ParseError("http: the request switches protocols; the rest is not counted")
        if chunked:
            self._state = self._CHUNK_SIZE
        elif length:
            self._state, self._left = self._BODY, length

    def _chunk_size(self, line: bytes) -> None:
        text = line.split(b";", 1)[0].strip()
        if _HEX.fullmatch(text) is None:
            raise _ParseError(f"http: bad chunk size {line[:40]!r}")
        size = int(text, 16)
        if size == 0:
            self._state = self._TRAILER
        else:
            self._state, self._left = self._CHUNK_DATA, size + 2  # the data and its CRLF


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM = 0x0, 0x1, 0x3
_END_STREAM, _PADDED = 0x1, 0x8


class _GrpcStream:
    """gRPC length-prefixed messages (compressed flag, 4-byte length, message) of one HTTP/2 stream."""

    __slots__ = ("left", "prefix")

    def __init__(self) -> None:
        self.prefix = bytearray()
        self.left = 0  # message bytes still to come; 0 while reading a prefix

    def feed(self, data: bytes, pos: int, end: int) -> int:
        done = 0
        while pos < end:
            if self.left:
                take = min(self.left, end - pos)
                pos += take
                self.left -= take
                done += self.left == 0
                continue
            take = min(5 - len(self.prefix), end - pos)
            self.prefix += data[pos:pos + take]
            pos += take
            if len(self.prefix) < 5:
                break
            flag, length = self.prefix[0], int.from_bytes(self.prefix[1:5], "big")
            self.prefix.clear()
            if flag > 1 or length > MAX_MESSAGE:
                raise _ParseError(f"grpc: implausible message prefix (flag {flag}, length {length})")
            if length == 0:
                done += 1
            else:
                self.left = length
        return done


class GrpcFramer(Framer):
    """gRPC over cleartext HTTP/2 with prior knowledge: counts the messages clients send on every stream.

    DATA frames are reassembled per stream (padding stripped); all other frames are skipped unread.
    """

    protocol = "grpc"

    def __init__(self) -> None:
        super().__init__()
        self._preface = 0  # preface bytes checked so far
        self._header = bytearray()  # a frame header split across chunks
        self._left = 0  # payload bytes of the current frame still to come
        self._in_frame = False
        self._stream_id = 0
        self._flags = 0
        self._type = 0
        self._stream: _GrpcStream | None = None  # set while in a DATA frame
        self._pad_pending = False  # the pad length byte is still to come
        self._data_left = 0  # message bytes (not padding) left in the current DATA frame
        self._streams: dict[int, _GrpcStream] = {}

    def _feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        if self._preface < len(_PREFACE):
            take = min(len(_PREFACE) - self._preface, end)
            if data[:take] != _PREFACE[self._preface:self._preface + take]:
                raise _ParseError("grpc: no HTTP/2 client preface (TLS or HTTP/1.1?)")
            self._preface += take
            pos = take
        while pos < end:
            if self._in_frame:
                take = min(self._left, end - pos)
                if self._stream is not None:
                    self._data(data, pos, pos + take)
                pos += take
                self._left -= take
                if self._left == 0:
                    self._end_frame()
                continue
            need = 9 - len(self._header)
            self._header += data[pos:pos + need]
            pos += min(need, end - pos)
            if len(self._header) == 9:
                self._start_frame()

    def _start_frame(self) -> None:
        header = self._header
        self._left = int.from_bytes(header[0:3], "big")
        self._type, self._flags = header[3], header[4]
        self._stream_id = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        header.clear()
        self._in_frame = True
        self._stream = None
        if self._type == _DATA:
            if self._stream_id == 0:
                raise _ParseError("grpc: DATA frame on stream 0")
            self._pad_pending = bool(self._flags & _PADDED)
            if self._pad_pending and self._left == 0:
                raise _ParseError("grpc: padded DATA frame without a pad length")
            self._data_left = self._left - self._pad_pending
            self._stream = self._streams.setdefault(self._stream_id, _GrpcStream())
        elif self._type == _RST_STREAM:
            self._streams.pop(self._stream_id, None)
        if self._left == 0:
            self._end_frame()

    def _data(self, data: bytes, pos: int, end: int) -> None:
        assert self._stream is not None
        if self._pad_pending and pos < end:
            pad = data[pos]
            pos += 1
            self._pad_pending = False
            if pad > self._data_left:
                raise _ParseError(f"grpc: pad length {pad} exceeds the DATA frame")
            self._data_left -= pad
        take = min(self._data_left, end - pos)
        if take:
            self._data_left -= take
            self.messages += self._stream.feed(data, pos, pos + take)

    def _end_frame(self) -> None:
        self._in_frame = False
        self._stream = None
        if self._type in (_DATA, _HEADERS) and self._flags & _END_STREAM:
            self._streams.pop(self._stream_id, None)


FRAMERS: dict[str, type[Framer]] = {
    f.protocol: f for f in (KafkaFramer, ZooKeeperFramer, HttpFramer, GrpcFramer)
}


def framer_for(protocol: str) -> Framer:
    """A new framer for one connection speaking `protocol` (one of ``FRAMERS``)."""
    try:
        return FRAMERS[protocol]()
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(FRAMERS))}") from None


# ---------------------------------------------------------------------------------------------- relay


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
