"""What a raft:// node sends, and when: the driver's `send` for a Raft host (`elect.driver`).

Messages go out as one batch per peer. Heartbeat acknowledgements may wait up to `ack_delay` to ride along with
the node's next batch to that peer (its own heartbeats), which halves the number of batches; nothing else waits. A
group may be *held*: its TimeoutNow messages then wait until released (the successor must not start before the old
leader's Revoked callbacks returned).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from raft_priority.host import NodeHost
from raft_priority.messages import HeartbeatResponse, Message, NodeBeatAck, TimeoutNow

INF = math.inf


class Outbox:
    """Batches per peer, deferred acknowledgements and held TimeoutNows, in front of `send` (the transport)."""

    def __init__(self, host: NodeHost, send: Callable[[Mapping[str, list[Message]]], None], *,
                 ack_delay: float = 0.0) -> None:
        self.host = host
        self.ack_delay = ack_delay
        self.held: dict[int, TimeoutNow | None] = {}
        self.due = INF  # when the oldest deferred acknowledgement must go
        self._send = send
        self._released: list[Message] = []
        self._deferred: dict[str, list[Message]] = {}

    def hold(self, group: int) -> None:
        """Keep `group`'s TimeoutNow messages back until `release`."""
        self.held.setdefault(group, None)

    def release(self, group: int) -> None:
        """Let `group`'s newest held TimeoutNow go out with the next send (if still current)."""
        if group not in self.held:
            return
        msg = self.held.pop(group)
        g = self.host.groups.get(group)
        if msg is not None and g is not None and g.transfer_to == msg.dst and g.term == msg.term:
            self._released.append(msg)

    def pending(self) -> bool:
        """A released TimeoutNow waits for the next send."""
        return bool(self._released)

    def defer(self, ack: NodeBeatAck, now: float) -> None:
        """An acknowledgement to ride along with the next batch to its peer (what `send` does with it when
        `ack_delay` > 0), without a batch of its own: a simulator's fast path for a lone node beat's answer."""
        d = self._deferred.get(ack.dst)
        if d is None:
            self._deferred[ack.dst] = [ack]
            if now + self.ack_delay < self.due:
                self.due = now + self.ack_delay
        else:
            d.append(ack)

    def send(self, messages: list[Message], now: float) -> None:
        if self._released:  # produced by an earlier Ready, so ahead of this one's
            messages[:0] = self._released
            self._released = []
        held, deferred, delay = self.held, self._deferred, self.ack_delay
        batches: dict[str, list[Message]] = {}
        for m in messages:
            t = type(m)
            if (t is HeartbeatResponse or t is NodeBeatAck) and delay > 0:
                d = deferred.get(m.dst)
                if d is None:
                    deferred[m.dst] = [m]
                    if now + delay < self.due:
                        self.due = now + delay
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
            self.due = INF
        if batches:
            self._send(batches)

    def send_due(self, now: float) -> float:
        """Send the acknowledgements that waited `ack_delay` without a batch to ride along with, and a released
        TimeoutNow no Ready carried out; return when the next deferred one is due."""
        if self._released:
            self.send([], now)
        if self._deferred and now >= self.due:
            batches, self._deferred = self._deferred, {}
            self.due = INF
            self._send(batches)
        return self.due
