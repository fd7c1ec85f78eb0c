"""The raft:// network: one gRPC server per node and one long-lived client stream per peer.

* :class:`PeerLink` -- one per peer: a bounded outbox and a sender thread that keeps one client stream
  (``Raft/Deliver``) open, reconnecting with a short backoff. Nothing queues without bound: when the
  outbox is full the oldest batch is dropped, and a broken stream drops what was waiting (Raft
  retries: heartbeats repeat, campaigns time out and start again).
* :class:`Transport` -- the gRPC server (every partition's group of this node behind one endpoint) and
  the links to every peer; batches are encoded by :mod:`raft_priority.wire.codec`.
* :class:`Tls` -- mutual TLS (options ``ca``, ``cert``, ``key``): the server requires a client certificate
  signed by the CA, and takes batches only from the member its certificate names; a link dials peer ``b``
  expecting a certificate that names ``b``. So a node without a certificate of the cluster's CA, or with one
  naming another member, can neither vote nor lead; what refused it is logged on both sides, once per reason.

Steady-state cost per node grows with the number of peers (one stream and a few batches per timer
slot each), not with the number of partitions.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# gRPC's core would log every failed handshake at every retry; this module says why once per reason instead
# (set GRPC_VERBOSITY=INFO to see gRPC's own lines)
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import grpc

from raft_priority.messages import Message
from raft_priority.wire import raft_pb2 as pb
from raft_priority.wire.codec import MalformedBatch, decode, encode, parse

log = logging.getLogger("elect.raft")

METHOD = "/elect.raft.v1.Raft/Deliver"
ADMIN = "/elect.raft.v1.Raft/Admin"
"""Membership requests and answers, JSON both ways (`raft_priority.admin`): rare, and read by people and tools."""

Admin = Callable[[dict[str, object]], dict[str, object]]


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
        # a channel of its own: a fresh one (`PeerLink.kick`) would otherwise share the old one's connection and
        # wait out its reconnect backoff all the same
        ("grpc.use_local_subchannel_pool", 1),
    ]


def _server_options() -> list[tuple[str, int]]:
    return [
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 200),
        ("grpc.http2.min_ping_interval_without_data_ms", 200),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.so_reuseport", 0),
    ]


@dataclass(frozen=True)
class Tls:
    """PEM bytes of the cluster's CA and of this node's certificate and key."""

    ca: bytes
    cert: bytes
    key: bytes

    @classmethod
    def load(cls, ca: str, cert: str, key: str) -> Tls:
        return cls(Path(ca).read_bytes(), Path(cert).read_bytes(), Path(key).read_bytes())

    def server(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                           require_client_auth=True)

    def channel(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def certificate_names(context: grpc.ServicerContext) -> set[str]:
    """The names (common name, DNS names) in the client certificate of a call; empty without TLS."""
    auth = context.auth_context()
    return {v.decode(errors="replace") for k in ("x509_common_name", "x509_subject_alternative_name")
            for v in auth.get(k, ())}


class _Once:
    """Log each distinct reason once (a refused peer retries every backoff; the log must not fill up)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def warn(self, reason: str, text: str) -> None:
        with self._lock:
            if reason in self._seen or len(self._seen) >= 100:  # reasons can carry what a stranger sent: bounded
                return
            self._seen.add(reason)
        log.warning("%s", text)


class PeerLink:
    """The way to one peer: a bounded outbox drained by one long-lived client stream.

    ``send`` never blocks. ``max_pending`` bounds the outbox (oldest dropped first). While the peer is
    unreachable everything for it is dropped; the stream is retried every ``backoff`` seconds, or at once on a
    fresh channel when the peer is heard from (`kick`).
    """

    def __init__(self, peer: str, address: str, *, election_timeout: float, max_pending: int = 64,
                 node: str = "", tls: Tls | None = None) -> None:
        self.peer = peer
        self.node = node
        self.tls = tls
        self.refused: str | None = None  # why the peer refused this node, if it did (TLS, identity)
        self._once = _Once()
        self.address = address
        self.max_pending = max_pending
        self.backoff = max(0.05, min(0.5, election_timeout / 4))
        self.sent = 0
        self.dropped = 0
        self.connected = False
        self._quick_closes = 0  # streams in a row the peer closed within QUICK of their start
        self._cond = threading.Condition()
        self._pending: deque[bytes] = deque()
        self._closed = False
        self._generation = 0
        self._kicked = False
        self._options = _channel_options(election_timeout)
        self._channel, self._call = self._dial()
        self._thread = threading.Thread(target=self._run, name=f"raft-link-{peer}", daemon=True)

    def _dial(self) -> tuple[grpc.Channel, grpc.StreamUnaryMultiCallable]:
        if self.tls is None:
            channel = grpc.insecure_channel(self.address, options=self._options)
        else:  # the peer's certificate must name the peer we mean to reach
            channel = grpc.secure_channel(self.address, self.tls.channel(),
                                          options=[*self._options, ("grpc.ssl_target_name_override", self.peer)])
        return channel, channel.stream_unary(METHOD, request_serializer=None, response_deserializer=pb.Ack.FromString)

    def start(self) -> None:
        self._thread.start()

    def kick(self) -> None:
        """The peer was just heard from: if the stream to it is down, retry now on a fresh channel. gRPC's own
        reconnect backoff (up to 0.6 s) would otherwise keep a restarted peer from hearing this node for that long
        after it spoke, and a raft leader from hearing its answers (raft's hand-back after a rolling restart waited
        for it). The heartbeats of a quiet group woken by the peer's greeting are sent at once, so they wait for
        the new stream: dropped, the group would go quiet again without the peer."""
        with self._cond:
            if not self.connected and not self._closed:
                self._kicked = True
                self.connected = True  # what is sent meanwhile waits in the outbox for the new stream, not dropped
                self._cond.notify_all()

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
            channel = self._channel
        channel.close()
        if self._thread.ident is not None:  # started (a transport that could not listen never starts its links)
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
            began = time.monotonic()
            try:
                # wait_for_ready: the call starts once the channel connects (channel backoff applies)
                with self._cond:
                    self.connected = True
                self._call(self._requests(generation), wait_for_ready=False)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                details = (exc.details() if isinstance(exc, grpc.Call) else None) or ""
                self._explain(code, details, time.monotonic() - began)
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
                if not self._kicked:
                    self._cond.wait(self.backoff)
                if self._closed:
                    return
                old = None
                if self._kicked:  # a fresh channel connects at once, where the old one waits out its backoff
                    self._kicked = False
                    old, (self._channel, self._call) = self._channel, self._dial()
            if old is not None:
                old.close()


    _TLS_WORDS = ("ssl", "tls", "handshake", "certificate", "peer name")

    #: A stream the peer closes within this long of its start counts as closed at once; QUICK_CLOSES of them in a
    #: row are what a TLS server does to a plaintext client. One is not: a peer killed mid-stream closes it too.
    QUICK = 0.5
    QUICK_CLOSES = 3

    def _explain(self, code: grpc.StatusCode | None, details: str, lived: float) -> None:
        """Say once per reason why the peer would not take this node's batches: it refused this node's identity,
        the TLS handshake failed (no certificate, another CA, a certificate that does not name the peer), or, in
        plaintext, the peer closed every connection at once (a TLS server does that to a plaintext client).
        ``lived``: how long the stream that failed had run."""
        me = f"raft://{self.node}" if self.node else "raft"
        if code is grpc.StatusCode.PERMISSION_DENIED:
            self.refused = details
            self._once.warn(details, f"{me}: {self.peer} refused this node: {details}")
            return
        if code is grpc.StatusCode.UNAVAILABLE and any(w in details.lower() for w in self._TLS_WORDS):
            self.refused = f"TLS with {self.peer} failed: {details}"
            self._once.warn(details, f"{me}: TLS with {self.peer} at {self.address} failed (a certificate not "
                                     f"signed by the cluster's CA, or not naming {self.peer}?): {details}")
            return
        closed = code is grpc.StatusCode.UNAVAILABLE and any(
            w in details.lower() for w in ("socket closed", "connection reset", "end of tcp stream"))
        self._quick_closes = self._quick_closes + 1 if closed and lived < self.QUICK else 0
        if self.tls is None and self._quick_closes >= self.QUICK_CLOSES:
            self.refused = f"{self.peer} closed the connection at once"
            self._once.warn("plaintext", f"{me}: {self.peer} at {self.address} closes every connection at once: "
                                         "if the cluster uses mutual TLS, give this node ca=, cert= and key=")


class Transport:
    """The node's gRPC server and its links to every peer."""

    def __init__(self, node: str, listen: str, peers: Mapping[str, str], cluster: str,
                 receive: Callable[[list[Message]], None], *, election_timeout: float, tls: Tls | None = None,
                 admin: Admin | None = None) -> None:
        self.node = node
        self.tls = tls
        self.election_timeout = election_timeout
        self._admin = admin
        self._links_lock = threading.Lock()
        self._once = _Once()
        self.listen = listen
        self.cluster = cluster
        self.received = 0
        self.rejected = 0
        self._receive = receive
        self.links = {p: PeerLink(p, addr, election_timeout=election_timeout, node=node, tls=tls)
                      for p, addr in peers.items()}
        # room for the members a cluster may grow to (12) without a new pool
        self._pool = ThreadPoolExecutor(max_workers=2 * max(len(self.links), 12) + 4,
                                        thread_name_prefix=f"raft-rx-{node}")
        self._server = grpc.server(self._pool, options=_server_options(),
                                   maximum_concurrent_rpcs=4 * max(len(self.links), 12) + 8)
        # Requests arrive as bytes and are parsed in _deliver: grpc's own deserializer would log a traceback per
        # undecodable message, so anyone reaching the port could flood the log.
        handler = grpc.stream_unary_rpc_method_handler(self._deliver, request_deserializer=None,
                                                       response_serializer=pb.Ack.SerializeToString)
        admin_handler = grpc.unary_unary_rpc_method_handler(self._on_admin, request_deserializer=None,
                                                            response_serializer=None)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("elect.raft.v1.Raft", {"Deliver": handler,
                                                                         "Admin": admin_handler}),))
        self._started = False

    def start(self) -> None:
        try:
            port = (self._server.add_insecure_port(self.listen) if self.tls is None else
                    self._server.add_secure_port(self.listen, self.tls.server()))
        except RuntimeError as exc:  # gRPC's words: "Failed to bind to address ..."
            raise OSError(f"cannot listen on {self.listen}: the port is taken, or the address is not one of this "
                          "machine's") from exc
        if port == 0:
            raise OSError(f"cannot listen on {self.listen}: the port is taken, or the address is not one of this "
                          "machine's")
        self._server.start()
        self._started = True
        for link in self.links.values():
            link.start()

    def set_peers(self, peers: Mapping[str, str]) -> None:
        """Links to exactly these peers (id -> HOST:PORT): new ones opened, gone ones closed, moved ones re-dialled.
        Closing waits for a link's thread, so it happens off the caller's thread (the driver's)."""
        closing: list[PeerLink] = []
        with self._links_lock:
            links = dict(self.links)
            for p, link in list(links.items()):
                if peers.get(p) != link.address:
                    closing.append(links.pop(p))
            for p, address in peers.items():
                if p not in links and p != self.node:
                    link = PeerLink(p, address, election_timeout=self.election_timeout, node=self.node, tls=self.tls)
                    links[p] = link
                    if self._started:
                        link.start()
            self.links = links  # replaced whole: readers on other threads see one or the other
        if closing:
            def close_all() -> None:
                for lk in closing:
                    lk.close()

            threading.Thread(target=close_all, name=f"raft-unlink-{self.node}", daemon=True).start()

    def _on_admin(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """One membership request (JSON) answered by the elector, or a JSON error."""
        if self._admin is None:
            return json.dumps({"error": "this node takes no membership requests"}).encode()
        try:
            raw = json.loads(request)
            if not isinstance(raw, dict):
                raise ValueError("a request is a JSON object")
            answer = self._admin(raw)
        except Exception as exc:  # a request from anyone must not kill the server; say what went wrong
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        return json.dumps(answer).encode()

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
        peer is counted in `rejected` and dropped; the stream, and the server, go on. Under TLS a stream whose
        batches claim another member than the client certificate names is refused (PERMISSION_DENIED, which the
        sender logs)."""
        names = certificate_names(context) if self.tls is not None else None
        for data in requests:
            try:
                batch = parse(data)
                if batch.cluster != self.cluster or batch.dst != self.node or batch.src not in self.links:
                    self.rejected += 1
                    if batch.cluster != self.cluster and batch.src in self.links:
                        self._once.warn(f"cluster {batch.src}", f"raft://{self.node}: drops batches from "
                                        f"{batch.src!r} of another cluster (its peers or their addresses differ from "
                                        "this node's, or its cluster= name or its weights= do)")
                    continue
                if names is not None and batch.src not in names:
                    self.rejected += 1
                    why = (f"{self.node} refuses batches from {batch.src!r}: the client certificate names "
                           f"{', '.join(sorted(names)) or 'nobody'}")
                    self._once.warn(why, f"raft://{why}")
                    context.abort(grpc.StatusCode.PERMISSION_DENIED, why)
                msgs = decode(batch)
            except MalformedBatch as exc:
                self.rejected += 1
                log.debug("raft server %s: dropped %s", self.node, exc)
                continue
            self.received += len(msgs)
            link = self.links.get(batch.src)
            if link is not None and not link.connected:
                link.kick()  # it is up: the way back to it need not wait for its backoff
            self._receive(msgs)
        return pb.Ack()
