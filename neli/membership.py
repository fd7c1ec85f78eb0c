"""How a NELI member comes and goes in its consumer group: hand-overs, parking, rejoining, the end of a stop.

A member hands its partitions back by leaving the group, or, on a broker that keeps a departed member's
partitions (Tansu), by *parking*: subscribing to a parking topic instead of the leader topic, so the group's next
rebalance gives its partitions to the others. It comes back `rejoin` seconds later. A stop parks first and leaves
once parked (or once it ran out of time). This module decides all of that from what happened (callbacks of the
consumer, commands) with time as ``now``; the elector carries out the `Move` it returns with its consumer.
"""

from __future__ import annotations

import math
from enum import Enum

INF = math.inf


class Parking(Enum):
    """Where a member that hands its partitions over by parking stands."""

    OFF = "subscribed to the leader topic"
    REVOKING = "parked, still owning leader-topic partitions"
    JOINING = "parked, waiting for the rebalance that takes the parking subscription into account"
    PARKED = "that rebalance completed (a stop may now leave the group)"


class Move(Enum):
    """What the member does with its consumer now."""

    STAY = "nothing changes"
    PARK = "give up what it owns, then subscribe to the parking topic"
    LEAVE = "give up what it owns, then close the consumer (the group hears it left)"
    REJOIN = "subscribe to the leader topic again (with a new consumer if it left)"
    FINISH = "the stop is complete: end the loop (leaving the group on the way out)"


class Membership:
    """The member's standing in its group: parking, when it rejoins, and whether (and until when) it stops."""

    __slots__ = ("can_park", "park_by", "parking", "rejoin", "rejoin_at", "session_timeout", "stop_by", "stopping")

    def __init__(self, rejoin: float, session_timeout: float, can_park: bool) -> None:
        self.rejoin = rejoin
        self.session_timeout = session_timeout
        self.can_park = can_park  # the broker keeps a departed member's partitions, and a parking topic exists
        self.parking = Parking.OFF
        self.rejoin_at: float | None = None  # parked (or out of the group) until then
        self.stopping = False
        self.stop_by: float | None = None  # an overlap-mode stop leads out T at most until then
        self.park_by = 0.0  # a stop waits for PARKED until then, then leaves anyway

    @property
    def on_leader_topic(self) -> bool:
        return self.parking is Parking.OFF

    def hand_over(self, now: float, in_group: bool) -> Move:
        """Give every partition back to the group and rejoin `rejoin` seconds later (nothing to do while out of
        the group, parked, or stopping: it comes back, or not, as that says)."""
        if not in_group or self.stopping or self.rejoin_at is not None:
            return Move.STAY
        self.rejoin_at = now + self.rejoin
        return Move.PARK if self.can_park else Move.LEAVE

    def stop(self, now: float, joined: bool, stop_by: float | None) -> Move:
        """A stop: park first (unless parked already), leave once parked (`due`). Not in the group yet, or no
        parking topic: leave at once."""
        self.stopping = True
        self.stop_by = stop_by
        if self.parking is Parking.OFF and not (joined and self.can_park):
            return Move.LEAVE
        park_by = now + max(5 * self.session_timeout, 1.0)
        self.park_by = park_by if stop_by is None else min(park_by, stop_by)
        return Move.PARK if self.parking is Parking.OFF else Move.STAY

    def parked(self, owned: bool) -> None:
        """Subscribed to the parking topic, having given up what it owned (`owned`: librdkafka still counts some)."""
        self.parking = Parking.REVOKING if owned else Parking.JOINING

    def left(self) -> None:
        """The consumer was closed: out of the group, nothing parked."""
        self.parking = Parking.OFF

    def assigned(self, ours: bool) -> None:
        """A rebalance assigned partitions (`ours`: of the leader topic)."""
        if self.parking is not Parking.OFF and ours:
            self.parking = Parking.REVOKING  # from a rebalance before parking: librdkafka revokes it again
        elif self.parking is Parking.JOINING:
            self.parking = Parking.PARKED  # the first rebalance with the parking subscription completed

    def revoked(self, owned: bool) -> None:
        """Partitions were revoked or lost (`owned`: whether the member still owns any)."""
        if self.parking is Parking.REVOKING and not owned:
            self.parking = Parking.JOINING

    def due(self, now: float, leading: bool) -> Move:
        """After each turn: FINISH once a stopping member leads nothing any more (or ran out of time) and is parked
        (or gave up waiting); REJOIN when the rejoin is due."""
        if self.stopping:
            done_leading = not leading or (self.stop_by is not None and now > self.stop_by)
            parked = self.parking in (Parking.OFF, Parking.PARKED) or now >= self.park_by
            return Move.FINISH if done_leading and parked else Move.STAY
        if self.rejoin_at is not None and now >= self.rejoin_at:
            self.rejoin_at = None
            self.parking = Parking.OFF
            return Move.REJOIN
        return Move.STAY
