"""A Kafka consumer group's coordinator for simulation: who owns which partition, by the group protocols' rules.

Pure: the world calls it when a member's request reaches the broker and delivers what it answers. Three protocols:

- **eager** (classic JoinGroup/SyncGroup, the `range` assignor): a rebalance begins when a member joins, leaves or
  its session expires; every member gives up everything it owns before it joins again, and once all remaining
  members have joined, each is given its share afresh.
- **cooperative** (classic, `cooperative-sticky`, the elector's default): members join again *keeping* what they
  own; the assignment keeps each member's partitions up to its share and withholds a partition that must move from
  its new owner in this round; the member that gives it up joins once more, and the next round hands it on.
- **consumer** (KIP-848): no rounds; every heartbeat carries the member's owned partitions and is answered with its
  assignment: what it owns of its target, plus partitions of its target nobody else holds (a partition given to a
  member, or reported owned by it, is held until it reports it gone or its session expires).

A member whose session expired, or that left, is unknown: its heartbeat is answered `Unknown` and it joins afresh.
Session expiry is the coordinator's only clock: `expire(now)` ends the sessions not heard from for the timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Protocol = Literal["eager", "cooperative", "consumer"]
PROTOCOLS: tuple[Protocol, ...] = ("eager", "cooperative", "consumer")


@dataclass(frozen=True, slots=True)
class Assigned:
    """Classic: the round `generation` completed and this member's share is `partitions` (cooperative: those it may
    own now). KIP-848: the heartbeat's answer, the member's current assignment."""

    member_id: str
    generation: int
    partitions: frozenset[int]


@dataclass(frozen=True, slots=True)
class Rebalancing:
    """Classic: a round is under way (or the member's generation is stale): join again."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """The coordinator does not know the member (its session expired, or it left): join afresh."""


@dataclass(frozen=True, slots=True)
class Stable:
    """Classic: heartbeat accepted, nothing to do."""


Answer = Assigned | Rebalancing | Unknown | Stable


@dataclass(slots=True)
class _Member:
    name: str
    last_seen: float
    owned: frozenset[int] = frozenset()  # classic: what it said it owns when it joined; KIP-848: at its last beat
    given: frozenset[int] = frozenset()  # KIP-848: the last assignment answered
    joined: bool = False  # classic: joined the round under way


def balanced(members: Iterable[str], partitions: int, keep: Mapping[str, Iterable[int]]) -> dict[str, set[int]]:
    """Each member's share of `partitions`: as even as can be, each keeping what `keep` gives it up to its share
    (members keeping the most get the larger shares), the rest handed out in order of member and partition. With
    nothing to keep, a member's share is a contiguous range (the `range` assignor)."""
    order = sorted(members, key=lambda m: (-len(set(keep.get(m, ()))), m))
    if not order:
        return {}
    base, extra = divmod(partitions, len(order))
    cap = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    taken: set[int] = set()
    out: dict[str, set[int]] = {}
    for m in order:
        mine = sorted(p for p in set(keep.get(m, ())) if p not in taken and 0 <= p < partitions)[:cap[m]]
        out[m] = set(mine)
        taken.update(mine)
    free = iter(p for p in range(partitions) if p not in taken)
    for m in sorted(order):
        while len(out[m]) < cap[m]:
            out[m].add(next(free))
    return out


@dataclass
class GroupCoordinator:
    """One group of `partitions` partitions under `protocol`, sessions of `session_timeout` seconds."""

    protocol: Protocol
    partitions: int
    session_timeout: float
    members: dict[str, _Member] = field(default_factory=dict)
    generation: int = 0
    rebalancing: bool = False
    target: dict[str, set[int]] = field(default_factory=dict)  # KIP-848
    _ids: int = 0

    # ------------------------------------------------------------------ requests
    def join(self, member_id: str | None, name: str, owned: Iterable[int], now: float) -> tuple[str, dict[str, Answer]]:
        """Classic JoinGroup (with SyncGroup: one round trip here). The member's id (new if it had none, or one the
        coordinator no longer knows), and the answers that are due now: every joined member's share once the round
        completes (the joining member's among them), none while others have yet to join."""
        m = self.members.get(member_id) if member_id is not None else None
        if m is None:
            member_id = self._new_id(name)
            m = self.members[member_id] = _Member(name, now)
        assert member_id is not None
        m.last_seen, m.owned, m.joined = now, frozenset(owned), True
        if not self.rebalancing:
            self._begin_round()
            m.joined = True
        return member_id, self._complete(now)

    def heartbeat(self, member_id: str | None, name: str, generation: int, owned: Iterable[int],
                  now: float) -> Answer:
        """A heartbeat: classic, whether a round is under way; KIP-848 (a `member_id` of None joins), the member's
        assignment, given what it reports it owns."""
        if self.protocol == "consumer":
            return self._consumer_heartbeat(member_id, name, frozenset(owned), now)
        m = self.members.get(member_id) if member_id is not None else None
        if m is None:
            return Unknown()
        m.last_seen = now
        if (self.rebalancing and not m.joined) or generation != self.generation:
            return Rebalancing()
        return Stable()

    def leave(self, member_id: str | None, now: float) -> dict[str, Answer]:
        """LeaveGroup: the member is gone at once (answers due to the others, as for `expire`)."""
        if member_id is None or self.members.pop(member_id, None) is None:
            return {}
        return self._changed(now)

    def expire(self, now: float) -> dict[str, Answer]:
        """End the sessions not heard from for the session timeout; the answers that completes. (A classic member
        waiting for its round to complete is not expired: its JoinGroup is its sign of life.)"""
        gone = [mid for mid, m in self.members.items()
                if now >= m.last_seen + self.session_timeout and not (self.rebalancing and m.joined)]
        for mid in gone:
            del self.members[mid]
        return self._changed(now) if gone else {}

    def expiry_due(self) -> float | None:
        """When the next session may expire (None: none can until a request arrives)."""
        return min((m.last_seen + self.session_timeout for m in self.members.values()
                    if not (self.rebalancing and m.joined)), default=None)

    # ------------------------------------------------------------------ rules
    def _new_id(self, name: str) -> str:
        self._ids += 1
        return f"{name}#{self._ids}"

    def _changed(self, now: float) -> dict[str, Answer]:
        if self.protocol == "consumer":
            self._retarget()
            return {}
        if not self.members:
            self.rebalancing = False
            return {}
        if not self.rebalancing:
            self._begin_round()
        return self._complete(now)

    def _begin_round(self) -> None:
        self.rebalancing = True
        for m in self.members.values():
            m.joined = False

    def _complete(self, now: float) -> dict[str, Answer]:
        """Classic: once every member has joined, the round completes: a new generation, each member's share, and
        every session's timeout starts afresh."""
        if not self.rebalancing or not all(m.joined for m in self.members.values()):
            return {}
        self.rebalancing = False
        self.generation += 1
        keep = {mid: m.owned for mid, m in self.members.items()} if self.protocol == "cooperative" else {}
        target = balanced(self.members, self.partitions, keep)
        answers: dict[str, Answer] = {}
        for mid, m in self.members.items():
            share = target[mid]
            if self.protocol == "cooperative":  # a partition still owned by another member waits for the next round
                share = {p for p in share if not any(p in o.owned for oid, o in self.members.items() if oid != mid)}
            m.given, m.last_seen = frozenset(share), now
            answers[mid] = Assigned(mid, self.generation, m.given)
        return answers

    def _consumer_heartbeat(self, member_id: str | None, name: str, owned: frozenset[int], now: float) -> Answer:
        m = self.members.get(member_id) if member_id is not None else None
        if m is None:
            if member_id is not None:
                return Unknown()
            member_id = self._new_id(name)
            m = self.members[member_id] = _Member(name, now)
            self._retarget()
        assert member_id is not None
        m.last_seen, m.owned = now, owned
        held = {p for oid, o in self.members.items() if oid != member_id for p in o.owned | o.given}
        target = self.target.get(member_id, set())
        m.given = frozenset((owned & target) | {p for p in target if p not in held})
        return Assigned(member_id, self.generation, m.given)

    def _retarget(self) -> None:
        """KIP-848: the members changed; a new group epoch and target assignment, kept as sticky as the old one."""
        self.generation += 1
        self.target = balanced(self.members, self.partitions, self.target)
