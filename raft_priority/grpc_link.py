"""The raft:// network: one gRPC server per node and one long-lived client stream per peer.

* :class:`PeerLink` -- one per peer: a bounded outbox and a sender thread that keeps one client stream
  (``Raft/Deliver``) open, reconnecting with a short backoff. Nothing queues without bound: when the
  outbox is full the oldest batch is dropped, and a broken stream drops what was waiting (Raft
  retries: heartbeats repeat, campaigns time out and start again).
* :class:`Transport` -- the gRPC server (every partition's group of this node behind one endpoint) and
  the links to every peer; batches are encoded by :mod:`raft_priority.wire.codec`.

Steady-state cost per node grows with the number of peers (one stream and a few batches per timer
slot each), not with the number of partitions.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import grpc

from raft_priority.messages import Message
from raft_priority.wire import raft_pb2 as pb
from raft_priority.wire.codec import MalformedBatch, decode, encode, parse

log = logging.getLogger("elect.raft")

METHOD = "/elect.raft.v1.Raft/Deliver"


def _channel_options(election_timeout: float) -> list[tuple[str, int]]:
    backoff = max(50, min(500, int(election_timeout * 250)))
    keepalive = max(500, int(election_timeout * 1000))
    return [
        ("grpc.initial_reconnect_backoff_ms", backoff),
        ("grpc.min_reconnect_backoff_ms", backoff),
        ("grpc.max_reconnect_backoff_ms", backoff * 2),
        ("grpc.keepalive_time_ms", keepalive),
        ("grpc.keepalive_timeout_ms", keepalive),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.enable_retries", 0),
    ]


def _server_options() -> list[tuple[str, int]]:
    return [
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 200),
        ("grpc.http2.min_ping_interval_without_data_ms", 200),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.so_reuseport", 0),
    ]


class PeerLink:
    """The way to one peer: a bounded outbox drained by one long-lived client stream.

    ``send`` never blocks. ``max_pending`` bounds the outbox (oldest dropped first). While the peer is
    unreachable everything for it is dropped; the stream is retried every ``backoff`` seconds.
    """

    def __init__(self, peer: str, address: str, *, election_timeout: float, max_pending: int = 64) -> None:
        self.peer = peer
        self.address = address
        self.max_pending = max_pending
        self.backoff = max(0.05, min(0.5, election_timeout / 4))
        self.sent = 0
        self.dropped = 0
        self.connected = False
        self._cond = threading.Condition()
        self._pending: deque[bytes] = deque()
        self._closed = False
        self._generation = 0
        self._channel = grpc.insecure_channel(address, options=_channel_options(election_timeout))
        self._call = self._channel.stream_unary(METHOD, request_serializer=None,
                                                response_deserializer=pb.Ack.FromString)
        self._thread = threading.Thread(target=self._run, name=f"raft-link-{peer}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, data: bytes) -> None:
        with self._cond:
            if self._closed or not self.connected:
                self.dropped += 1
                return
            if len(self._pending) >= self.max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append(data)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
        self._channel.close()
        self._thread.join(5)

    def _requests(self, generation: int) -> Iterator[bytes]:
        while True:
            with self._cond:
                while not self._pending and not self._closed and generation == self._generation:
                    self._cond.wait(1.0)
                if self._closed or generation != self._generation:
                    return
                data = self._pending.popleft()
                self.sent += 1
            yield data

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                self._generation += 1
                generation = self._generation
            try:
                # wait_for_ready: the call starts once the channel connects (channel backoff applies)
                with self._cond:
                    self.connected = True
                self._call(self._requests(generation), wait_for_ready=False)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    log.debug("raft link to %s: %s", self.peer, exc)
            except ValueError:  # the channel was closed under us
                pass
            with self._cond:
                self.connected = False
                self._generation += 1
                self.dropped += len(self._pending)
                self._pending.clear()
                self._cond.notify_all()
                if self._closed:
                    return
                self._cond.wait(self.backoff)


class Transport:
    """The node's gRPC server and its links to every peer."""

    def __init__(self, node: str, listen: str, peers: Mapping[str, str], cluster: str,
                 receive: Callable[[list[Message]], None], *, election_timeout: float) -> None:
        self.node = node
        self.listen = listen
        self.cluster = cluster
        self.received = 0
        self.rejected = 0
        self._receive = receive
        self.links = {p: PeerLink(p, addr, election_timeout=election_timeout) for p, addr in peers.items()}
        self._pool = ThreadPoolExecutor(max_workers=2 * len(self.links) + 4, thread_name_prefix=f"raft-rx-{node}")
        self._server = grpc.server(self._pool, options=_server_options(),
                                   maximum_concurrent_rpcs=4 * len(self.links) + 8)
        # Requests arrive as bytes and are parsed in _deliver: grpc's own deserializer would log a traceback per
        # undecodable message, so anyone reaching the port could flood the log.
        handler = grpc.stream_unary_rpc_method_handler(self._deliver, request_deserializer=None,
                                                       response_serializer=pb.Ack.SerializeToString)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("elect.raft.v1.Raft", {"Deliver": handler}),))

    def start(self) -> None:
        try:
            port = self._server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.listen}: {exc}") from exc
        if port == 0:
            raise OSError(f"cannot listen on {self.listen} (in use?)")
        self._server.start()
        for link in self.links.values():
            link.start()

    def send(self, batches: Mapping[str, list[Message]]) -> None:
        for dst, msgs in batches.items():
            link = self.links.get(dst)
            if link is not None and msgs:
                link.send(encode(msgs, self.cluster, self.node, dst).SerializeToString())

    def stop(self, grace: float = 0.2) -> None:
        for link in self.links.values():
            link.close()
        self._server.stop(grace).wait(5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _deliver(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> pb.Ack:
        """Step every batch of one peer's stream. What is not a batch of this cluster to this node from a known
        peer is counted in `rejected` and dropped; the stream, and the server, go on."""
        for data in requests:
            try:
                batch = parse(data)
                if batch.cluster != self.cluster or batch.dst != self.node or batch.src not in self.links:
                    self.rejected += 1
                    continue
                msgs = decode(batch)
            except MalformedBatch as exc:
                self.rejected += 1
                log.debug("raft server %s: dropped %s", self.node, exc)
                continue
            self.received += len(msgs)
            self._receive(msgs)
        return pb.Ack()
