"""What one node wants of each partition it replicates, and the hand-offs that follow: a pure policy.

A node contends for a partition only while it contends for a role there, and with `max_roles` it leaves the
partitions beyond its cap to nodes below theirs. Peers learn how keen it is as its `Standing`, and the groups it
leads but does not want (or cannot keep under its cap) go to a follower that does. `NodeHost` owns one
`Interest` and applies what it decides (positions, transfers) to its groups; time comes in as ``now``, so the
same policy runs under the real driver and in simulation. Only positions and transfers change, which decide whom
voters prefer and when a leader steps aside, never how many leaders a term may have: safety is untouched, and a
cap needs no agreement between nodes.

Partitions the node was never told about (`Interest.roles` has no entry: the simulator's plain groups) are left
alone: every node then stands as the election core starts it, and nothing here acts on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from enum import IntEnum

from raft_priority.core import Pin, RaftGroup, RaftState

INF = math.inf


class Standing(IntEnum):
    """How much this node wants to lead a group's partition. Peers learn it as the ZEP006 log position, the one field
    a vote compares (only a candidate at least as up to date wins), so a group elects a node that wants the partition
    over one that does not, and one below its `max_roles` over one at it: an interested node stands as if a term
    ahead, a capped one an index ahead, an uninterested one at the start of the log. Greater is keener."""

    UNINTERESTED = 0
    CAPPED = 1
    INTERESTED = 2

    @property
    def position(self) -> tuple[int, int]:
        """The (last log index, last log term) that says it."""
        return _POSITIONS[self]

    @staticmethod
    def of(position: tuple[int, int] | None) -> Standing | None:
        """A peer's standing from its position as a leader records it, (term, index); None: not heard yet."""
        if position is None or position == (-1, -1):
            return None
        if position >= (1, 0):
            return Standing.INTERESTED
        return Standing.CAPPED if position >= (0, 1) else Standing.UNINTERESTED


_POSITIONS = {Standing.UNINTERESTED: (0, 0), Standing.CAPPED: (1, 0), Standing.INTERESTED: (0, 1)}


def standing_of(g: RaftGroup, peer: str) -> Standing | None:
    """`peer`'s standing in group `g` as this node (its leader) last heard it; None: not heard yet."""
    return Standing.of(g.positions.get(peer))


def wants(g: RaftGroup, peer: str, at_least: Standing = Standing.CAPPED) -> bool:
    """`peer` contends for a role on `g`'s partition (`at_least` as keen: INTERESTED, below its cap), as this
    node last heard it."""
    standing = standing_of(g, peer)
    return standing is not None and standing >= at_least


class Interest:
    """The roles this node contends for per partition, its cap, and the partitions it is handing over."""

    __slots__ = ("capped", "election_timeout", "giving_up", "max_roles", "next_due", "roles")

    def __init__(self, election_timeout: float, max_roles: int | None = None) -> None:
        self.election_timeout = election_timeout
        self.max_roles = max_roles
        self.roles: dict[int, int] = {}  # partition -> roles this node contends for there (as told)
        self.capped: set[int] = set()  # partitions left to nodes below their cap
        self.giving_up: set[int] = set()  # partitions whose handover the elector began (Revoked, then transfer)
        self.next_due = INF  # when `unwanted` looks again (INF: nothing to look at)

    def uninterested(self, p: int) -> bool:
        return self.roles.get(p) == 0

    def standing(self, p: int) -> Standing:
        if not self.roles.get(p):
            return Standing.UNINTERESTED
        return Standing.CAPPED if p in self.capped else Standing.INTERESTED

    def active(self) -> bool:
        """Whether anything here can call for a hand-off: a cap, or a told partition without roles."""
        return self.max_roles is not None or any(n == 0 for n in self.roles.values())

    def recount(self, groups: Mapping[int, RaftGroup], now: float) -> set[int]:
        """With a cap: which partitions to leave to nodes below theirs; the partitions whose standing changed.

        The roles of the partitions this node leads count first where nobody else can take them (pinned by a
        transfer, or no live peer known to be interested), then by this node's priority there, while they fit
        under the cap; the rest of those it leads, and every partition it does not lead whose roles would not fit,
        are capped."""
        cap = self.max_roles
        if cap is None:
            return set()
        live = now - self.election_timeout

        def only_here(g: RaftGroup) -> bool:
            if g.pin is Pin.HELD:
                return True
            standings = [standing_of(g, peer) for peer in g.peers if g.last_heard(peer) >= live]
            return None not in standings and Standing.INTERESTED not in standings  # one not heard yet may be keen

        led = {p: n for p, n in self.roles.items() if n and (g := groups.get(p)) is not None
               and g.state is RaftState.LEADER and g.serving and p not in self.giving_up}
        first = {p: only_here(groups[p]) for p in led}
        load, capped = 0, set()
        for p in sorted(led, key=lambda p: (not first[p], -groups[p].priority, p)):
            if first[p] or load + led[p] <= cap:
                load += led[p]
            else:
                capped.add(p)
        capped |= {p for p, n in self.roles.items() if n and p not in led and p in groups and load + n > cap}
        changed = capped ^ self.capped
        self.capped = capped
        return changed

    def best_successor(self, g: RaftGroup, now: float) -> str | None:
        """The highest-priority live follower of `g`, preferring those that contend for the partition."""
        live = now - self.election_timeout
        alive = [peer for peer in g.peers if g.last_heard(peer) >= live]
        keen = [peer for peer in alive if wants(g, peer, Standing.INTERESTED)]
        best = keen or alive
        return best[0] if best else None

    def unwanted(self, groups: Mapping[int, RaftGroup], now: float) -> Iterator[tuple[RaftGroup, str, bool]]:
        """The groups this node leads but should not: (group, the follower to hand it to, over the cap?), each as
        `successor` finds it (the caller spends the rebalancing budget on those over the cap)."""
        for p in sorted({p for p, n in self.roles.items() if n == 0} | self.capped):
            g = groups.get(p)
            if g is None or not g.is_leader(now) or g.transfer_to is not None or p in self.giving_up:
                continue
            found = self.successor(g, p, now)
            if found is not None:
                yield g, *found

    def successor(self, g: RaftGroup, p: int, now: float) -> tuple[str, bool] | None:
        """Whom group `g` (partition `p`, led here) goes to, if this node should not lead it: (the follower, over the
        cap?). No role here: the first live follower in priority order that contends for the partition, one below its
        cap first; beyond the cap: one below its own, while the rebalancing budget lasts. None: keep it."""
        uninterested = self.uninterested(p)
        if not uninterested and p not in self.capped:
            return None
        live = [peer for peer in g.peers if g.last_heard(peer) >= now - self.election_timeout]
        keen = next((peer for peer in live if wants(g, peer, Standing.INTERESTED)), None)
        if not uninterested:
            return (keen, True) if keen is not None and g.budget.left(now) > 0 else None
        to = keen or next((peer for peer in live if wants(g, peer, Standing.CAPPED)), None)
        return None if to is None else (to, False)
