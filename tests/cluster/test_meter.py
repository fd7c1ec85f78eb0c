"""Counting relays: the framers count exactly under any chunking, and real clients are counted through relays.

The harness reports infrastructure load from these counts, so each real-traffic test is exact wherever the
protocol allows (only ZooKeeper's background pings make a bound necessary).
"""

from __future__ import annotations

import random
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from kazoo.client import KazooClient

from elect.etcd_gateway import Gateway, b64
from elect_bench.relays import (
    Counts,
    Framer,
    GrpcFramer,
    HttpFramer,
    KafkaFramer,
    Meter,
    ZooKeeperFramer,
    framer_for,
)
from elect_cluster.endpoints import Endpoints
from elect_cluster.kafka_broker import api_versions, metadata_brokers
from elect_cluster.waiting import wait_until

TIMEOUT = 60.0  # generous: the machine is small and busy

# ------------------------------------------------------------------------------------------ wire builders


def kafka_request(api_key: int, version: int, correlation: int, client_id: str | None, body: bytes = b"") -> bytes:
    cid = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    payload = struct.pack(">hhi", api_key, version, correlation) + cid + body
    return struct.pack(">i", len(payload)) + payload


def zk_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


ZK_CONNECT = zk_frame(struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + bytes(16) + b"\x00")
ZK_EXISTS = zk_frame(struct.pack(">ii", 1, 3) + struct.pack(">i", 1) + b"/" + b"\x00")
ZK_PING = zk_frame(struct.pack(">ii", -2, 11))

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def grpc_message(body: bytes, compressed: int = 0) -> bytes:
    return bytes([compressed]) + struct.pack(">I", len(body)) + body


def every_split(framer: type[Framer], stream: bytes, expected: int,
                check: Callable[[Framer], None] | None = None) -> None:
    """Whole, split in two at every byte boundary, and byte by byte: the same count and no error."""
    feeds: list[list[bytes]] = [[stream], [stream[i:i + 1] for i in range(len(stream))]]
    feeds += [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    for chunks in feeds:
        f = framer()
        counted = sum(f.feed(c) for c in chunks)
        assert f.error is None, (f.error, [len(c) for c in chunks])
        assert counted == expected == f.messages, [len(c) for c in chunks]
        if check is not None:
            check(f)


# ------------------------------------------------------------------------------------------------ framers


def test_kafka_frames_and_client_id_under_any_split() -> None:
    stream = (kafka_request(18, 3, 1, "member-7") + kafka_request(3, 1, 2, "member-7", struct.pack(">i", 0))
              + kafka_request(12, 4, 3, "member-7", b"x" * 300))

    def check(f: Framer) -> None:
        assert isinstance(f, KafkaFramer) and f.client_id_known and f.client_id == "member-7"

    every_split(KafkaFramer, stream, 3, check)


def test_kafka_client_id_is_known_once_the_first_header_is_in() -> None:
    request = kafka_request(18, 3, 1, "m1", b"\x00" * 5)
    f = KafkaFramer()
    assert f.feed(request[:15]) == 0 and not f.client_id_known
    assert f.feed(request[15:16]) == 0 and f.client_id_known and f.client_id == "m1"  # before the frame ends
    assert f.feed(request[16:]) == 1
    null = KafkaFramer()
    assert null.feed(kafka_request(18, 0, 1, None)) == 1 and null.client_id_known and null.client_id is None


def test_zookeeper_frames_under_any_split() -> None:
    every_split(ZooKeeperFramer, ZK_CONNECT + ZK_EXISTS + ZK_PING + ZK_EXISTS, 4)


HTTP_STREAM = (
    b"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"key\":\"a\"}"
    b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    b"\r\n"  # a stray empty line between requests is allowed
    b"POST /v3/watch HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n1A\r\n" + b"z" * 26 + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
    b"PUT /x HTTP/1.0\r\nContent-Length: 0\r\n\r\n"
)


def test_http_requests_with_bodies_and_chunks_under_any_split() -> None:
    every_split(HttpFramer, HTTP_STREAM, 4)


def test_http_long_lived_chunked_request_counts_once() -> None:
    f = HttpFramer()
    assert f.feed(b"POST /v3/watch HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 1
    for _ in range(100):
        assert f.feed(b"10\r\n" + b"{}" * 8 + b"\r\n") == 0
    assert f.error is None and f.messages == 1


def test_grpc_padded_data_and_interleaved_streams_under_any_split() -> None:
    big = grpc_message(b"b" * 40)
    stream = (
        PREFACE + h2_frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64")  # SETTINGS
        + h2_frame(1, 4, 1, b"hdr1") + h2_frame(1, 4, 3, b"hdr3")  # HEADERS on streams 1 and 3
        # stream 1, padded: pad length 3, two whole messages (one empty), 3 pad bytes
        + h2_frame(0, 0x8, 1, b"\x03" + grpc_message(b"abc") + grpc_message(b"") + b"\x00\x00\x00")
        + h2_frame(0, 0, 3, big[:7])  # stream 3: half a message...
        + h2_frame(0, 0, 1, grpc_message(b"q")[:2])  # ...stream 1: the start of another...
        + h2_frame(6, 0, 0, b"pingpong")  # PING, skipped
        + h2_frame(0, 0x8, 3, b"\x02" + big[7:] + b"\x00\x00")  # ...stream 3 finished (padded)
        + h2_frame(0, 0x1, 1, grpc_message(b"q")[2:])  # ...stream 1 finished, END_STREAM
        + h2_frame(0, 0x8 | 0x1, 5, b"\x00" + grpc_message(b"z"))  # zero padding, stream 5 in one frame
        + h2_frame(3, 0, 3, b"\x00\x00\x00\x08")  # RST_STREAM
    )
    every_split(GrpcFramer, stream, 5)


def test_garbage_sets_error_without_exceptions_and_stops_counting() -> None:
    http_request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    bad = {
        KafkaFramer: http_request,  # an absurd length
        ZooKeeperFramer: b"\xff\xff\xff\xff",  # a negative length
        HttpFramer: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # a TLS client hello
        GrpcFramer: http_request,  # no preface
    }
    for kind, garbage in bad.items():
        f = kind()
        assert f.feed(garbage) == 0 and f.error, kind
        assert f.feed(kafka_request(18, 0, 1, "x") + http_request + PREFACE) == 0
    rng = random.Random(7)
    for kind in (KafkaFramer, ZooKeeperFramer, HttpFramer, GrpcFramer):
        f = kind()
        for _ in range(50):
            f.feed(rng.randbytes(rng.randrange(1, 5000)))  # must not raise, whatever it makes of it
    overlong = HttpFramer()
    assert overlong.feed(b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000) == 0 and overlong.error
    kafka = KafkaFramer()
    assert kafka.feed(struct.pack(">ihhih", 10, 18, 0, 1, 50)) == 0 and kafka.error  # client_id past the frame
    upgrade = HttpFramer()
    assert upgrade.feed(b"GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n") == 1 and upgrade.error  # counted, then not
    with pytest.raises(ValueError, match="unknown protocol"):
        framer_for("smtp")


# ----------------------------------------------------------------------------------------- relay helpers


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            while data := sock.recv(65536):
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@pytest.fixture
def echo() -> Iterator[str]:
    """A TCP echo server that answers a half-close by finishing and closing its side."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def meter() -> Iterator[Meter]:
    with Meter() as m:
        yield m


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=TIMEOUT)


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def dropped(sock: socket.socket) -> bool:
    """The peer closed (or reset) the connection without sending anything more."""
    try:
        return read_all(sock) == b""
    except ConnectionResetError:
        return True


def settle(meter: Meter, owner: str, messages: int) -> Counts:
    """The owner's counts once at least `messages` were counted (then the caller checks exactness)."""
    return wait_until(lambda: (c := meter.counts().get(owner, Counts())).messages >= messages and c,
                      TIMEOUT, what=f"{messages} messages counted for {owner}")


# ------------------------------------------------------------------------------------ relays, local peers


def test_relay_forwards_both_ways_passes_half_close_on_and_counts(meter: Meter, echo: str) -> None:
    relay = meter.relay("a", echo, "zookeeper")
    stream = ZK_CONNECT + ZK_EXISTS * 3 + b"\x00\x00"  # and the start of a fifth frame
    big = zk_frame(bytes(range(256)) * 4000)  # ~1 MB: exercises flow control
    with connect(relay) as sock:
        sock.sendall(stream)
        sock.sendall(big)
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock) == stream + big
    counts = settle(meter, "a", 5)
    assert counts == Counts(messages=5, bytes=len(stream) + len(big), unparsed=0, connections=1)


def test_unparsable_stream_is_still_relayed_and_reported(meter: Meter, echo: str) -> None:
    relay = meter.relay("b", echo, "kafka")
    garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10
    with connect(relay) as sock:
        sock.sendall(garbage)
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock) == garbage
    counts = wait_until(lambda: (c := meter.counts()["b"]).unparsed and c, TIMEOUT, what="unparsed")
    assert counts == Counts(messages=0, bytes=len(garbage), unparsed=1, connections=1)


def test_unreachable_target_closes_the_client(meter: Meter) -> None:
    with socket.socket() as spare:  # an OS-chosen port that nobody listens on once closed
        spare.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{spare.getsockname()[1]}"
    relay = meter.relay("c", dead, "http")
    with connect(relay) as sock:
        assert dropped(sock)


def test_kafka_identify_attributes_connections_by_client_id(meter: Meter, echo: str) -> None:
    relay = meter.relay("broker", echo, "kafka", identify=lambda c: c if c.startswith("m") else None)
    for client_id in ("m1", "probe", None, "m1"):
        request = kafka_request(18, 0, 1, client_id)
        with connect(relay) as sock:
            sock.sendall(request[:9])  # the header arrives in pieces
            sock.sendall(request[9:] + request)
            sock.shutdown(socket.SHUT_WR)
            assert read_all(sock) == request * 2
    m1 = settle(meter, "m1", 4)
    broker = settle(meter, "broker", 4)
    size = len(kafka_request(18, 0, 1, "m1"))
    assert m1 == Counts(messages=4, bytes=4 * size, connections=2)
    assert broker == Counts(messages=4, bytes=2 * len(kafka_request(18, 0, 1, "probe")) + 2 * (size - 2),
                            connections=2)


def test_close_with_a_client_connected_is_prompt_and_leaves_no_thread(echo: str) -> None:
    before = {t for t in threading.enumerate() if t.name == "elect-meter"}
    meter = Meter().start()
    relay = meter.relay("d", echo, "http")
    sock = connect(relay)
    try:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert sock.recv(100) == b"GET / HTTP/1.1\r\n\r\n"  # the connection is established end to end
        started = time.monotonic()
        meter.close()
        assert time.monotonic() - started < 5.0
        meter.close()  # idempotent
        assert not {t for t in threading.enumerate() if t.name == "elect-meter"} - before
        assert dropped(sock)
        with pytest.raises(RuntimeError, match="closed"):
            meter.relay("d", echo, "http")
    finally:
        sock.close()


# ------------------------------------------------------------------------------------ relays, real peers


@pytest.fixture
def grpc_server() -> Iterator[str]:
    from concurrent.futures import ThreadPoolExecutor

    def total(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        return str(sum(len(r) for r in requests)).encode()

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler("meter.Test", {
        "Total": grpc.stream_unary_rpc_method_handler(total),  # no (de)serializers: raw bytes
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
    })
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def test_grpc_messages_are_counted_exactly(meter: Meter, grpc_server: str) -> None:
    relay = meter.relay("raft-a", grpc_server, "grpc")
    m, k = 25, 7
    messages = [b"x" * i for i in range(m - 1)] + [b"y" * 200_000]  # an empty one, and one over many frames
    with grpc.insecure_channel(relay, options=[("grpc.enable_http_proxy", 0)]) as channel:
        total = channel.stream_unary("/meter.Test/Total")
        assert total(iter(messages), timeout=TIMEOUT) == str(sum(map(len, messages))).encode()
        echo = channel.unary_unary("/meter.Test/Echo")
        for i in range(k):
            assert echo(b"ping %d" % i, timeout=TIMEOUT) == b"ping %d" % i
        counts = settle(meter, "raft-a", m + k)
    assert counts.messages == m + k and counts.unparsed == 0
    assert counts.bytes > sum(map(len, messages))


@pytest.mark.infra
def test_zookeeper_requests_are_counted(meter: Meter, infra: Endpoints) -> None:
    relay = meter.relay("zk-a", infra.zookeeper[0], "zookeeper")
    client = KazooClient(hosts=relay, timeout=30.0)
    client.start(timeout=TIMEOUT)
    try:
        connected = meter.counts()["zk-a"].messages
        assert connected >= 1  # the connect request
        n = 30
        for i in range(n):
            assert client.exists("/") is not None if i % 2 else client.get("/") is not None
        counted = settle(meter, "zk-a", connected + n).messages - connected
        assert n <= counted <= n + 3  # + kazoo's pings, if one fell due
    finally:
        client.stop()
        client.close()
    counts = meter.counts()["zk-a"]
    assert counts.unparsed == 0 and counts.connections >= 1


@pytest.mark.infra
def test_etcd_gateway_requests_are_counted_exactly(meter: Meter, infra: Endpoints) -> None:
    relay = meter.relay("etcd-a", infra.etcd[0], "http")
    gateway = Gateway((relay,))
    try:
        gateway.call("kv/put", {"key": b64("meter/test"), "value": b64("v")}, timeout=TIMEOUT)
        n = 20
        for _ in range(n):
            gateway.call("kv/range", {"key": b64("meter/test")}, timeout=TIMEOUT)
        counts = settle(meter, "etcd-a", n + 1)
        assert counts.messages == n + 1 == gateway.requests
        assert counts.unparsed == 0 and counts.connections == 1  # keep-alive: one connection
    finally:
        gateway.close()


@pytest.mark.infra
def test_kafka_requests_are_counted_exactly_and_by_client_id(meter: Meter, infra: Endpoints) -> None:
    relay = meter.relay("kafka-a", infra.kafka[0], "kafka")
    host, port = relay.rsplit(":", 1)
    assert api_versions(host, int(port), timeout=TIMEOUT)
    assert metadata_brokers(host, int(port), timeout=TIMEOUT)
    header = 2 + 2 + 4 + 2 + len("elect-probe")
    assert settle(meter, "kafka-a", 2) == Counts(messages=2, bytes=(4 + header) + (4 + header + 4), connections=2)

    shared = meter.relay("broker", infra.kafka[0], "kafka", identify=lambda c: c if c.startswith("m") else None)
    for client_id in ("m1", "elect-probe"):
        request = kafka_request(18, 0, 5, client_id)
        with connect(shared) as sock:
            sock.sendall(request)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            answer = sock.recv(size, socket.MSG_WAITALL)
            assert struct.unpack(">ih", answer[:6]) == (5, 0)  # correlation id, no error
    assert settle(meter, "m1", 1) == Counts(messages=1, bytes=len(kafka_request(18, 0, 5, "m1")), connections=1)
    assert settle(meter, "broker", 1).messages == 1
