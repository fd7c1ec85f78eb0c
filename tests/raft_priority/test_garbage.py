"""Garbage sent to a raft:// member's port must not crash it or change who leads (issue 14, item 5).

Three `elect member` processes over gRPC on loopback settle; then one member's port receives random bytes,
an HTTP/2 preface followed by garbage, a truncated gRPC message, a gRPC message declaring 100 MB, gRPC calls to
the raft service whose payload is not a valid batch, and many connections opened and dropped. Every member
must still be alive, no member may print an event (a leader that missed its peers' acknowledgements for an
election timeout would fence itself, so silence also shows the server kept serving its peers), and the member
must still hand a role over when asked.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from elect.config import parse_url, spec_from_url
from elect_bench.members import MemberProcess
from elect_bench.methods import METHODS
from elect_bench.methods import Group as MethodGroup
from elect_cluster.waiting import wait_until
from raft_priority.grpc_link import METHOD
from raft_priority.messages import Heartbeat, VoteRequest
from raft_priority.wire import raft_pb2 as pb
from raft_priority.wire.codec import MalformedBatch, decode, encode, parse

IDS = ("a", "b", "c")
P = 6
ET = 1.0
BOUND = 20.0  # generous: a noisy 2-core machine shared with other test runs
QUIET = 3 * ET  # settled: no member printed anything for this long
WINDOW = 3 * ET  # after the garbage: long enough for a leader cut off from its peers to fence itself

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS = 0x0, 0x1, 0x4
END_STREAM, END_HEADERS = 0x1, 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """One HPACK header field, literal without indexing, new name (RFC 7541 6.2.2); names and values < 127 bytes."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def _grpc_call_opening(stream: int = 1) -> bytes:
    """Preface, empty SETTINGS and the HEADERS of a call to Raft/Deliver: what a gRPC client sends first."""
    headers = b"".join(_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", METHOD), (":authority", "garbage"),
        ("content-type", "application/grpc"), ("te", "trailers")))
    return PREFACE + _frame(SETTINGS, 0, 0, b"") + _frame(HEADERS, END_HEADERS, stream, headers)


def _grpc_message(payload: bytes, declared: int | None = None) -> bytes:
    """A gRPC length-prefixed message (uncompressed); `declared` overrides the length it claims."""
    return b"\x00" + struct.pack(">I", len(payload) if declared is None else declared) + payload


def _send_raw(port: int, data: bytes) -> None:
    """Connect, send `data`, read what the server answers until it closes or pauses for 0.2 s, then close."""
    with socket.create_connection(("127.0.0.1", port), timeout=2.0) as sock, contextlib.suppress(OSError):
        sock.sendall(data)
        sock.settimeout(0.2)
        while sock.recv(65536):
            pass


class Members:
    """Three raft:// members as processes, all killed at the end whatever happened."""

    def __init__(self, tmp: Path) -> None:
        group = MethodGroup(IDS, P, "rp-garbage")
        # rebalance off: once every role is led, nothing but a fault moves it, so any event below is the garbage's
        self.urls = METHODS["raft"].member_urls(group, ET, {"data_dir": str(tmp / "state"), "rebalance": "off"})
        self.procs = {i: MemberProcess(self.urls[i], i, list(range(P)), log_dir=tmp) for i in IDS}

    def port(self, node: str) -> int:
        host = parse_url(self.urls[node]).hosts[0]
        return int(host.rpartition(":")[2])

    def cluster_id(self, node: str) -> str:
        return str(spec_from_url(self.urls[node]).options.cluster_id(node))

    def leaders(self) -> dict[int, str] | None:
        holders = {r: [i for i, p in self.procs.items() if str(r) in p.log.leading()] for r in range(P)}
        return {r: h[0] for r, h in holders.items()} if all(len(h) == 1 for h in holders.values()) else None

    def quiet_for(self, seconds: float) -> bool:
        last = max((line["mono"] for p in self.procs.values() for line in p.log.lines), default=time.monotonic())
        return time.monotonic() - last >= seconds

    def marks(self) -> dict[str, int]:
        return {i: len(p.log.lines) for i, p in self.procs.items()}

    def new_lines(self, marks: dict[str, int]) -> list[dict[str, object]]:
        return [line for i, p in self.procs.items() for line in p.log.lines[marks[i]:]]

    def diagnosis(self) -> str:
        return "\n".join(f"--- {i} (alive={p.alive}):\n{p.stderr_tail()}" for i, p in self.procs.items())


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    m = Members(tmp_path)
    try:
        for proc in m.procs.values():
            proc.start()
        yield m
    finally:
        for proc in m.procs.values():
            with contextlib.suppress(Exception):
                proc.kill()


def _garbage(m: Members, target: str) -> None:
    """Everything a stray or hostile client might send to `target`'s port."""
    port = m.port(target)
    rng = random.Random(14)
    for size in (1, 7, 24, 100, 4096, 70_000):
        _send_raw(port, rng.randbytes(size))
    _send_raw(port, PREFACE + rng.randbytes(512))
    _send_raw(port, PREFACE + _frame(SETTINGS, 0, 0, b"") + _frame(HEADERS, END_HEADERS, 1, rng.randbytes(64)))
    _send_raw(port, _grpc_call_opening() + _frame(DATA, 0, 1, _grpc_message(b"\x0a\x03abc", declared=100)[:9]))
    _send_raw(port, _grpc_call_opening() + _frame(DATA, 0, 1, _grpc_message(b"x" * 64, declared=100 * 2**20)))
    _send_raw(port, _grpc_call_opening() + _frame(DATA, END_STREAM, 1, _grpc_message(rng.randbytes(200))))
    for i in range(200):  # connections opened and dropped: at once, mid-preface, mid-call, reset
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as sock:
            if i % 4 == 1:
                sock.sendall(PREFACE[: i % len(PREFACE)])
            elif i % 4 == 2:
                sock.sendall(_grpc_call_opening())
            elif i % 4 == 3:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    # Well-framed calls through a real gRPC client: payloads that are not a batch, a batch of another cluster,
    # and a batch that names this cluster but whose packed columns disagree in length. Each is dropped and the
    # call answered, as a stream from a peer would go on after one bad batch.
    sibling = next(i for i in IDS if i != target)
    odd = pb.Batch(cluster=m.cluster_id(target), src=sibling, dst=target)
    odd.heartbeats.group.extend([0, 1])
    odd.heartbeats.term.extend([1])
    stranger = pb.Batch(cluster="another", src=sibling, dst=target)
    stranger.votes.add(group=0, term=10**6, last_log_index=0, last_log_term=0)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        deliver = channel.stream_unary(METHOD, request_serializer=None, response_deserializer=None)
        payloads = [b"\xff" * 10, rng.randbytes(1000), b"\x0a\xff\xff\xff\xff\x0f", stranger.SerializeToString(),
                    odd.SerializeToString()]
        for payload in payloads:
            assert _answered(deliver, [payload]) == b""  # an empty Ack
        assert _answered(deliver, payloads) == b""  # all on one stream


def _answered(deliver: Any, requests: list[bytes]) -> bytes:
    """The call's answer. The calls opened and dropped above hold the member's call slots until its server has
    reaped them (its limit on concurrent calls, 4 per peer + 8, is what bounds such a flood): on a busy machine a
    call made right after is refused RESOURCE_EXHAUSTED for a moment, so poll until one is taken."""

    def once() -> tuple[bytes] | None:
        try:
            return (deliver(iter(requests), timeout=5),)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                return None
            raise

    return wait_until(once, 30, what="the member taking calls again once the dropped ones are reaped")[0]


def test_garbage_to_a_member_port_neither_crashes_it_nor_moves_leadership(members: Members) -> None:
    m = members
    before = wait_until(lambda: m.leaders() if m.quiet_for(QUIET) else None, BOUND + QUIET,
                        what=f"exactly one leader per role, and no event for {QUIET} s")
    target = before[0]
    marks = m.marks()

    _garbage(m, target)

    # The observation window: a deliberate wait, ended early (failing) by the first event the target prints; the
    # others' lines since the garbage are checked right after it.
    with pytest.raises(TimeoutError):
        line = m.procs[target].log.wait_for(lambda _l: True, WINDOW, start=marks[target], what="any event")
        pytest.fail(f"{target} printed an event after the garbage: {line}\n{m.diagnosis()}")
    assert not m.new_lines(marks), f"leadership changed after the garbage: {m.new_lines(marks)}\n{m.diagnosis()}"
    assert all(p.alive for p in m.procs.values()), m.diagnosis()
    assert m.leaders() == before

    # The member still answers: a resign hands its role over to a peer, under a newer token.
    role = str(next(r for r, n in before.items() if n == target))
    token = max(int(line["token"]) for line in m.procs[target].log.lines if line["role"] == role)
    mark = m.marks()
    m.procs[target].resign(role)
    m.procs[target].log.wait_for(lambda x: x["role"] == role and x["event"] == "revoked", BOUND, start=mark[target],
                                 what=f"{target} revoking {role}")
    successor = wait_until(lambda: next((line for i in IDS if i != target for line in m.procs[i].log.lines[mark[i]:]
                                         if line["role"] == role and line["event"] == "acquired"), None),
                           BOUND, what=f"a peer acquiring {role} after {target} resigned it")
    assert int(successor["token"]) > token


# ---------------------------------------------------------------------------------------------- unit

GOOD_BATCH = encode([Heartbeat(0, "b", "a", 3, 1.5, (2, 1), 0), Heartbeat(1, "b", "a", 3, 1.5),
                     VoteRequest(2, "b", "a", 4, 0, 1, False, 0)], "cl", "b", "a").SerializeToString()


@given(st.one_of(st.binary(max_size=512),
                 st.tuples(st.integers(0, len(GOOD_BATCH)), st.binary(max_size=16)).map(
                     lambda cut: GOOD_BATCH[:cut[0]] + cut[1] + GOOD_BATCH[cut[0] + len(cut[1]):])))
@example(b"\xff" * 10)
@example(b"\x0a\xff\xff\xff\xff\x0f")
def test_any_bytes_are_a_batch_of_messages_or_malformed(data: bytes) -> None:
    """What the server does with a request: parse, then decode; MalformedBatch is the one way to say no."""
    with contextlib.suppress(MalformedBatch):
        decode(parse(data))


def test_a_batch_whose_columns_disagree_is_malformed_as_a_whole() -> None:
    batch = parse(GOOD_BATCH)
    assert len(decode(batch)) == 3
    batch.heartbeats.term.append(9)
    with pytest.raises(MalformedBatch):
        decode(batch)
    batch = parse(GOOD_BATCH)
    batch.heartbeats.succession.append(7)  # more successors than succession_len accounts for
    with pytest.raises(MalformedBatch):
        decode(batch)
