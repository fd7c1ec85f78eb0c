"""The driver of the raft:// elector: the one thread that owns a node's :class:`~raft_priority.host.NodeHost`.

It steps received batches, ticks at ``host.next_wakeup()`` (rounded up to a timer granularity so that
many groups' timers share one wake-up), and handles each ``Ready`` the host hands over in the order
`elect.core` requires: persist (fsync), leadership changes, then send. Heartbeat acknowledgements may
wait up to ``ack_delay`` to ride along with the node's next batch to that peer (its own heartbeats),
which halves the number of batches; nothing else waits. A handler may *hold* a group: its TimeoutNow
messages then wait until released (the successor must not start before the old leader's Revoked
callbacks returned).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Protocol, TypeVar, cast

from elect.core import Ready
from raft_priority.host import NodeHost
from raft_priority.messages import HardState, HeartbeatResponse, Message, NodeBeatAck, TimeoutNow
from raft_priority.storage import HardStateLog, HardStateStore

log = logging.getLogger("elect.raft")

INF = math.inf
T = TypeVar("T")


class Halted(Exception):
    """The driver stopped on its own: the node's term and vote could not be persisted (a full or read-only disk).
    A node that went on would keep in memory a vote the disk does not have, grant it again (the core repeats a
    grant without a new save) and, restarted, could give that term's vote to another candidate: it stops instead,
    as etcd does when its log cannot be written, and its leaderships are fenced (`ReadyHandler.on_halted`)."""


class ReadyHandler(Protocol):
    """What the driver calls back, always on its own thread."""

    def on_halted(self, driver: Driver, error: Halted) -> None:
        """The driver stopped (`Halted`): end every leadership now; nothing more will be driven."""

    def on_ready(self, driver: Driver, ready: Ready[Message, HardState], now: float) -> None:
        """Apply ``ready.changes`` / ``ready.seen`` (persist already done; messages not yet sent)."""

    def on_idle(self, driver: Driver, now: float) -> float:
        """Housekeeping after each loop (what it makes the host produce is flushed after); return the
        latest time to be called again (INF: no need)."""


class Driver:
    """The one thread that owns a :class:`NodeHost`.

    Other threads talk to it through :meth:`receive` (message batches from the transport) and
    :meth:`submit` (a function run on the driver thread with ``now``; what it makes the host produce is
    flushed after it, its result comes back in a Future). The inbox is bounded: when ``max_inbox``
    batches wait, new batches are dropped.
    """

    def __init__(self, host: NodeHost, store: HardStateLog | HardStateStore,
                 send: Callable[[Mapping[str, list[Message]]], None], handler: ReadyHandler, *,
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
        self._released: list[Message] = []
        self.halted: Halted | None = None  # why the driver stopped on its own (`Halted`), if it did
        self._deferred: dict[str, list[Message]] = {}
        self._deferred_due = INF
        self._send = send
        self._handler = handler
        self._cond = threading.Condition()
        self._inbox: list[list[Message]] = []
        self._commands: list[tuple[Callable[[float], object], Future[object]]] = []
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

    def submit(self, fn: Callable[[float], T]) -> Future[T]:
        fut: Future[T] = Future()
        with self._cond:
            if self._stopping:
                fut.set_exception(RuntimeError("the raft driver has stopped"))
                return fut
            self._commands.append((fn, fut))  # type: ignore[arg-type]
            self._cond.notify()
        return fut

    def call(self, fn: Callable[[float], T], timeout: float | None = None) -> T:
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

    def _halt(self, error: Halted) -> None:
        log.error("raft driver %s: %s; the node stops (a vote kept only in memory could be given twice)",
                  self.host.node, error)
        self.halted = error
        try:
            self._handler.on_halted(self, error)
        except Exception:
            log.exception("raft driver %s: ending the leaderships after the halt failed", self.host.node)
        with self._cond:
            self._stopping = True
            for _, fut in self._commands:
                fut.cancel()
            self._commands.clear()

    def release(self, group: int) -> None:
        """Let ``group``'s newest held TimeoutNow go out with the next flush (if still current)."""
        if group not in self.held:
            return
        msg = self.held.pop(group)
        g = self.host.groups.get(group)
        if msg is not None and g is not None and g.transfer_to == msg.dst and g.term == msg.term:
            self._released.append(msg)

    def flush(self, now: float) -> None:
        """Handle the host's Ready: persist, changes, send (holding TimeoutNows of held groups)."""
        ready = self.host.ready()
        if ready.persist:
            try:
                self.store.save(cast("dict[int, HardState]", ready.persist))  # the host's roles are group ids
            except OSError as exc:
                raise Halted(f"cannot persist term and vote in {self.store.dir}: {exc}") from exc
        if ready.changes or ready.seen:
            self._handler.on_ready(self, ready, now)
        messages = ready.messages
        if self._released:  # produced by an earlier Ready, so ahead of this one's
            messages[:0] = self._released
            self._released = []
        if messages:
            held, deferred, delay = self.held, self._deferred, self.ack_delay
            batches: dict[str, list[Message]] = {}
            for m in messages:
                t = type(m)
                if (t is HeartbeatResponse or t is NodeBeatAck) and delay > 0:
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

    def _flush_deferred(self, now: float) -> None:
        """Send acknowledgements that waited ``ack_delay`` without a batch to ride along with."""
        if self._deferred and now >= self._deferred_due:
            batches, self._deferred = self._deferred, {}
            self._deferred_due = INF
            self._send(batches)

    def _run(self) -> None:
        host, g = self.host, self.granularity
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
                    host.step_all(msgs, now)
                if now >= wake:
                    host.tick(now)
                self.flush(now)
                for fn, fut in commands:
                    if fut.set_running_or_notify_cancel():
                        try:
                            fut.set_result(fn(now))
                        except BaseException as exc:  # the caller sees it
                            fut.set_exception(exc)
                        self.flush(now)
                extra = self._handler.on_idle(self, now)
                self.flush(now)
                self._flush_deferred(now)
            except Halted as exc:
                self._halt(exc)
                return
            except Exception:
                log.exception("raft driver %s: unexpected error; continuing", host.node)
                host.ready()  # dropped, as a step that failed half-way would have
                self._released.clear()
                extra = self.clock() + g
            d = host.next_wakeup()
            wake = math.ceil(d / g) * g if d < INF else INF
