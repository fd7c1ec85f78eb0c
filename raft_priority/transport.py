"""gRPC transport and driver of the raft:// elector: one server per node, batches per peer, one loop.

* :func:`encode` / :func:`decode` -- core messages <-> one ``Batch`` per peer (raft.proto). Heartbeats
  and their responses, nearly all steady-state traffic, travel as packed columns.
* :class:`PeerLink` -- one per peer: a bounded outbox and a sender thread that keeps one client stream
  (``Raft/Deliver``) open, reconnecting with a short backoff. Nothing queues without bound: when the
  outbox is full the oldest batch is dropped, and a broken stream drops what was waiting (Raft
  retries: heartbeats repeat, campaigns time out and start again).
* :class:`Transport` -- the gRPC server (every partition's group of this node behind one endpoint) and
  the links to every peer.
* :class:`Driver` -- the one thread that owns the :class:`~raft_priority.host.NodeHost`: it steps
  received batches, ticks at ``host.next_deadline()`` (rounded up to a timer granularity so that many
  groups' timers share one wake-up), and handles each :class:`~raft_priority.messages.Output` in the
  order the core requires: persist (fsync), leadership changes, then send. Heartbeat acknowledgements
  may wait up to ``ack_delay`` to ride along with the node's next batch to that peer (its own
  heartbeats), which halves the number of batches; nothing else waits. A handler may *hold* a
  group: its TimeoutNow messages then wait until released (the successor must not start before the
  old leader's Revoked callbacks returned).

Steady-state cost per node grows with the number of peers (one stream and a few batches per timer
slot each), not with the number of partitions beyond the core's own per-group work.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, TypeVar

import grpc

from raft_priority.host import NodeHost
from raft_priority.messages import (
    Heartbeat,
    HeartbeatResponse,
    Message,
    Output,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from raft_priority.storage import HardStateLog, HardStateStore
from raft_priority.wire import raft_pb2 as pb

log = logging.getLogger("elect.raft")

METHOD = "/elect.raft.v1.Raft/Deliver"
INF = math.inf
T = TypeVar("T")


# ---------------------------------------------------------------------------------------------- codec


def encode(msgs: Sequence[Message], cluster: str, src: str, dst: str) -> pb.Batch:
    """One batch holding ``msgs`` (all from ``src`` to ``dst``, any groups)."""
    batch = pb.Batch(cluster=cluster, src=src, dst=dst)
    hb_group: list[int] = []
    hb_term: list[int] = []
    hb_sent: list[float] = []
    hb_closed: list[int] = []
    hb_len: list[int] = []
    hb_succ: list[int] = []
    r_group: list[int] = []
    r_term: list[int] = []
    r_echo: list[float] = []
    r_index: list[int] = []
    r_lterm: list[int] = []
    for m in msgs:
        t = type(m)
        if t is Heartbeat:
            assert isinstance(m, Heartbeat)
            hb_group.append(m.group)
            hb_term.append(m.term)
            hb_sent.append(m.sent_at)
            hb_closed.append(m.transfer_closed)
            hb_len.append(len(m.succession))
            hb_succ.extend(m.succession)
        elif t is HeartbeatResponse:
            assert isinstance(m, HeartbeatResponse)
            r_group.append(m.group)
            r_term.append(m.term)
            r_echo.append(m.echo)
            r_index.append(m.last_log_index)
            r_lterm.append(m.last_log_term)
        elif t is PreVoteRequest:
            assert isinstance(m, PreVoteRequest)
            batch.pre_votes.add(group=m.group, term=m.term, last_log_index=m.last_log_index,
                                last_log_term=m.last_log_term)
        elif t is PreVoteResponse:
            assert isinstance(m, PreVoteResponse)
            batch.pre_vote_responses.add(group=m.group, term=m.term, granted=m.granted)
        elif t is VoteRequest:
            assert isinstance(m, VoteRequest)
            batch.votes.add(group=m.group, term=m.term, last_log_index=m.last_log_index,
                            last_log_term=m.last_log_term, force=m.force, transfer_seq=m.transfer_seq)
        elif t is VoteResponse:
            assert isinstance(m, VoteResponse)
            batch.vote_responses.add(group=m.group, term=m.term, granted=m.granted)
        elif t is TimeoutNow:
            assert isinstance(m, TimeoutNow)
            batch.timeout_nows.add(group=m.group, term=m.term, transfer_seq=m.transfer_seq)
        else:
            raise TypeError(f"cannot encode {m!r}")
    if hb_group:
        h = batch.heartbeats
        h.group.extend(hb_group)
        h.term.extend(hb_term)
        h.sent_at.extend(hb_sent)
        h.transfer_closed.extend(hb_closed)
        h.succession_len.extend(hb_len)
        h.succession.extend(hb_succ)
    if r_group:
        r = batch.heartbeat_responses
        r.group.extend(r_group)
        r.term.extend(r_term)
        r.echo.extend(r_echo)
        r.last_log_index.extend(r_index)
        r.last_log_term.extend(r_lterm)
    return batch


def decode(batch: pb.Batch) -> list[Message]:
    """The core messages of one batch, in a fixed order: heartbeat traffic first, then elections."""
    src, dst = batch.src, batch.dst
    out: list[Message] = []
    if batch.HasField("heartbeats"):
        h = batch.heartbeats
        succ = list(h.succession)
        pos = 0
        for g, t, s, c, n in zip(h.group, h.term, h.sent_at, h.transfer_closed, h.succession_len, strict=True):
            out.append(Heartbeat(g, src, dst, t, s, tuple(succ[pos:pos + n]) if n else (), c))
            pos += n
    if batch.HasField("heartbeat_responses"):
        r = batch.heartbeat_responses
        for g, t, e, i, lt in zip(r.group, r.term, r.echo, r.last_log_index, r.last_log_term, strict=True):
            out.append(HeartbeatResponse(g, src, dst, t, e, i, lt))
    for p in batch.pre_votes:
        out.append(PreVoteRequest(p.group, src, dst, p.term, p.last_log_index, p.last_log_term))
    for q in batch.pre_vote_responses:
        out.append(PreVoteResponse(q.group, src, dst, q.term, q.granted))
    for v in batch.votes:
        out.append(VoteRequest(v.group, src, dst, v.term, v.last_log_index, v.last_log_term, v.force, v.transfer_seq))
    for w in batch.vote_responses:
        out.append(VoteResponse(w.group, src, dst, w.term, w.granted))
    for x in batch.timeout_nows:
        out.append(TimeoutNow(x.group, src, dst, x.term, x.transfer_seq))
    return out


# ---------------------------------------------------------------------------------------------- links


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
        handler = grpc.stream_unary_rpc_method_handler(self._deliver, request_deserializer=pb.Batch.FromString,
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

    def _deliver(self, requests: Iterator[pb.Batch], context: grpc.ServicerContext) -> pb.Ack:
        for batch in requests:
            if batch.cluster != self.cluster or batch.dst != self.node or batch.src not in self.links:
                self.rejected += 1
                continue
            msgs = decode(batch)
            self.received += len(msgs)
            self._receive(msgs)
        return pb.Ack()


# ---------------------------------------------------------------------------------------------- driver


class OutputHandler(Protocol):
    """What the driver calls back, always on its own thread."""

    def on_output(self, driver: Driver, out: Output, now: float) -> None:
        """Deliver ``out.changes`` / ``out.hints`` (persist already done; messages not yet sent)."""

    def on_idle(self, driver: Driver, now: float, out: Output) -> float:
        """Housekeeping after each loop (its output is flushed after); return the latest time to be
        called again (INF: no need)."""


class Driver:
    """The one thread that owns a :class:`NodeHost`.

    Other threads talk to it through :meth:`receive` (message batches from the transport) and
    :meth:`submit` (a function run on the driver thread with ``(now, out)``; its result comes back in a
    Future). The inbox is bounded: when ``max_inbox`` batches wait, new batches are dropped.
    """

    def __init__(self, host: NodeHost, store: HardStateLog | HardStateStore,
                 send: Callable[[Mapping[str, list[Message]]], None], handler: OutputHandler, *,
                 granularity: float, max_inbox: int = 256, ack_delay: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.ack_delay = ack_delay
        self.store = store
        self.granularity = granularity
        self.clock = clock
        self.max_inbox = max_inbox
        self.dropped = 0
        self.iterations = 0
        self.held: dict[int, TimeoutNow | None] = {}
        self._deferred: dict[str, list[Message]] = {}
        self._deferred_due = INF
        self._send = send
        self._handler = handler
        self._cond = threading.Condition()
        self._inbox: list[list[Message]] = []
        self._commands: list[tuple[Callable[[float, Output], object], Future[object]]] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"raft-driver-{host.node}", daemon=True)

    # -- from other threads --
    def start(self) -> None:
        self._thread.start()

    def receive(self, msgs: list[Message]) -> None:
        with self._cond:
            if len(self._inbox) >= self.max_inbox:
                self.dropped += 1
                return
            self._inbox.append(msgs)
            self._cond.notify()

    def submit(self, fn: Callable[[float, Output], T]) -> Future[T]:
        fut: Future[T] = Future()
        with self._cond:
            if self._stopping:
                fut.set_exception(RuntimeError("the raft driver has stopped"))
                return fut
            self._commands.append((fn, fut))  # type: ignore[arg-type]
            self._cond.notify()
        return fut

    def call(self, fn: Callable[[float, Output], T], timeout: float | None = None) -> T:
        """Run ``fn`` on the driver thread and wait for its result (directly when already on it)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("Driver.call from the driver thread would deadlock")
        return self.submit(fn).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def on_driver_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # -- on the driver thread --
    def hold(self, group: int) -> None:
        """Keep ``group``'s TimeoutNow messages back until :meth:`release`."""
        self.held.setdefault(group, None)

    def release(self, group: int, out: Output) -> None:
        """Let ``group``'s newest held TimeoutNow go out (with ``out``'s other messages)."""
        if group not in self.held:
            return
        msg = self.held.pop(group)
        g = self.host.groups.get(group)
        if msg is not None and g is not None and g.transfer_to == msg.dst and g.term == msg.term:
            out.messages.append(msg)

    def flush(self, out: Output, now: float) -> None:
        """Handle one Output: persist, changes, send (holding TimeoutNows of held groups)."""
        if out.persist:
            self.store.save(out.persist)
        if out.changes or out.hints:
            self._handler.on_output(self, out, now)
        if out.messages:
            held, deferred, delay = self.held, self._deferred, self.ack_delay
            batches: dict[str, list[Message]] = {}
            for m in out.messages:
                t = type(m)
                if t is HeartbeatResponse and delay > 0:
                    d = deferred.get(m.dst)
                    if d is None:
                        deferred[m.dst] = [m]
                        if now + delay < self._deferred_due:
                            self._deferred_due = now + delay
                    else:
                        d.append(m)
                    continue
                if held and isinstance(m, TimeoutNow) and m.group in held:
                    held[m.group] = m
                    continue
                b = batches.get(m.dst)
                if b is None:
                    batches[m.dst] = [m]
                else:
                    b.append(m)
            for dst, b in batches.items():  # acks waiting for this peer ride along
                d = deferred.pop(dst, None)
                if d is not None:
                    b[:0] = d
            if not deferred:
                self._deferred_due = INF
            if batches:
                self._send(batches)
        out.clear()

    def _flush_deferred(self, now: float) -> None:
        """Send acknowledgements that waited ``ack_delay`` without a batch to ride along with."""
        if self._deferred and now >= self._deferred_due:
            batches, self._deferred = self._deferred, {}
            self._deferred_due = INF
            self._send(batches)

    def _run(self) -> None:
        host, out, g = self.host, Output(), self.granularity
        wake = -INF
        extra = INF
        while True:
            with self._cond:
                while not self._inbox and not self._commands and not self._stopping:
                    limit = min(wake, extra, self._deferred_due) - self.clock()
                    if limit <= 0:
                        break
                    self._cond.wait(limit)
                if self._stopping:
                    for _, fut in self._commands:
                        fut.cancel()
                    self._commands.clear()
                    return
                inbox, self._inbox = self._inbox, []
                commands, self._commands = self._commands, []
            now = self.clock()
            self.iterations += 1
            try:
                for msgs in inbox:
                    host.step_all(msgs, now, out)
                if now >= wake:
                    host.tick(now, out)
                self.flush(out, now)
                for fn, fut in commands:
                    if fut.set_running_or_notify_cancel():
                        try:
                            fut.set_result(fn(now, out))
                        except BaseException as exc:  # the caller sees it
                            fut.set_exception(exc)
                        self.flush(out, now)
                extra = self._handler.on_idle(self, now, out)
                self.flush(out, now)
                self._flush_deferred(now)
            except Exception:
                log.exception("raft driver %s: unexpected error; continuing", host.node)
                out.clear()
                extra = self.clock() + g
            d = host.next_deadline()
            wake = math.ceil(d / g) * g if d < INF else INF
