"""Node links: one heartbeat per pair of nodes carries the liveness of every quiet group between them.

A group whose leader has heard every follower answer "quiet" stops its per-group heartbeats (quiesces); its
followers stop their per-group election timers. From then on the group costs nothing while idle: the nodes'
`NodeBeat` / `NodeBeatAck`, one pair per peer node per heartbeat interval whatever the number of groups, carry
what its heartbeats carried. Any per-group event (a vote request, a transfer, a resign, a leader stepping
down) wakes the group at both ends and it heartbeats again until it can go quiet again.

Why leases stay exactly as safe (the core's argument, `raft_priority.core`, restated for quiet groups):

- A quiet follower refuses non-forced (pre-)votes while it has heard its leader's *node* within the lease
  window W (`Links.heard`), and a follower that wakes first sets its per-group `refuse_votes_until` to that node
  contact + W, so the refusal covers every node beat it heard while quiet.
- A quiet leader's lease counts a follower's node acks (`Links.acked`) only for followers that answered
  "quiet" in this group, and only acks whose *digest* equals the leader's: each side keeps, per peer, the XOR
  of a 64-bit key of (group, term) over the groups quiet between them (the leader over followers that answered
  quiet; the follower over groups it is quiet in). Equal digests mean the follower was quiet in every group the
  leader counts the ack for, so it heard that beat under the refusal above. A follower that woke in a group has
  left its key out of its digest, so its later acks count for no quiet group of that leader until both agree
  again; a leader that sees disagreement persist wakes its quiet groups with that peer.
- Messages between two nodes arrive in order (one stream per pair; the simulator's FIFO links), and a batch's
  group messages are handled before its node messages, so a change of quiet state and the digests it changes
  are seen in the order they were made. Out of order they only disagree (no ack counted), never agree wrongly.

Liveness: a quiet follower wakes when its leader's node has been silent for the election timeout (its timer
then runs from the last node beat, as it would have from the last heartbeat, so failover times do not change),
when the leader's process restarts (a new incarnation), or when the leader's digest disagrees with its own for
two beats in a row (the leader stepped down or woke the group and the word was lost). A quiet leader wakes the
groups it leads with a peer whose node has not acked for half the lease window (a dead follower: the group then
heartbeats one round, so the succession its quiet followers keep names only live ones, and goes quiet again with
the followers that answer, as long as they make a quorum). A node that starts greets every peer with a beat of its
new incarnation until it is acked (ET at most); a beat of a new incarnation wakes the quiet groups its receiver
leads that name the sender, so they heartbeat it at once: otherwise they would hear it only at its first vote
request, ET or more later, and a primary back from a restart would be handed its partitions that much later.
"""

from __future__ import annotations

import math

MASK = (1 << 64) - 1


def quiet_key(group: int, term: int) -> int:
    """A well-mixed 64-bit key of (group, term) (splitmix64), so that XOR digests of different sets differ."""
    z = ((group & 0xFFFFFFFF) << 32 | (term & 0xFFFFFFFF)) + 0x9E3779B97F4A7C15 & MASK
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & MASK
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & MASK
    return z ^ (z >> 31)


class Links:
    """One node's view of its links to its peer nodes, shared by its groups (pure data; the host drives it)."""

    __slots__ = (
        "_quorums",
        "acked",
        "follow_digest",
        "followers",
        "fresh",
        "heard",
        "incarnation",
        "incarnation_of",
        "lead_digest",
        "led",
        "mismatch_in",
        "mismatch_out",
        "silent_at",
        "woke",
    )

    def __init__(self, incarnation: int) -> None:
        self.incarnation = incarnation
        self.heard: dict[str, float] = {}
        """Peer -> when this node last heard a NodeBeat from it (its own clock)."""
        self.incarnation_of: dict[str, int] = {}
        self.acked: dict[str, float] = {}
        """Peer -> the send time (this node's clock) of the newest NodeBeat it acked with an agreeing digest."""
        self.lead_digest: dict[str, int] = {}
        """Peer -> XOR of quiet_key over the groups this node leads where that peer answered quiet."""
        self.follow_digest: dict[str, int] = {}
        """Peer -> XOR of quiet_key over the groups this node follows quietly under that peer."""
        self.led: dict[str, set[int]] = {}
        """Peer -> the groups this node leads where that peer answered quiet."""
        self.followers: dict[str, set[int]] = {}
        """Peer -> the groups this node follows quietly under that peer."""
        self.fresh: set[tuple[str, bool]] = set()
        """(peer, leading?) whose set of quiet groups was empty and is not any more: the host arms their timers."""
        self.mismatch_in: dict[str, int] = {}
        self.mismatch_out: dict[str, int] = {}
        self._quorums: dict[tuple[tuple[str, ...], int], float] = {}  # emptied whenever an ack counts
        self.silent_at: dict[str, float] = {}
        """Peer -> when its node stopped acking this node's beats (this node then woke the groups it leads with it):
        until it answers again, a leader counts it as dead when deciding to go quiet (`RaftGroup._live_peers`)."""
        self.woke: set[int] = set()
        """Groups this node led quietly whose leases stopped resting on these links (woken, stepped down) since the
        driver last took them: leaderships renewed together with a quorum's shared deadline must leave it."""

    def ack(self, peer: str, echo: float) -> None:
        """`peer` acked the beat sent at `echo` with an agreeing digest."""
        if echo > self.acked.get(peer, -math.inf):
            self.acked[peer] = echo
            self._quorums.clear()

    def quorum(self, peers: tuple[str, ...], need: int) -> float:
        """The `need`-th newest agreeing ack among `peers` (what their node links prove for a quiet group's
        lease), cached until the next ack: every quiet group with the same peers asks the same question."""
        key = (peers, need)
        value = self._quorums.get(key)
        if value is None:
            acks = sorted((self.acked.get(p, -math.inf) for p in peers), reverse=True)
            value = self._quorums[key] = acks[need - 1] if 0 < need <= len(acks) else -math.inf
        return value

    def lead_quiet(self, peer: str, group: int, key: int) -> None:
        led = self.led.setdefault(peer, set())
        if group not in led:
            if not led:
                self.fresh.add((peer, True))
            led.add(group)
            self.lead_digest[peer] = self.lead_digest.get(peer, 0) ^ key

    def lead_awake(self, peer: str, group: int, key: int) -> None:
        led = self.led.get(peer)
        if led is not None and group in led:
            led.discard(group)
            self.lead_digest[peer] ^= key

    def follow_quiet(self, peer: str, group: int, key: int) -> None:
        followers = self.followers.setdefault(peer, set())
        if group not in followers:
            if not followers:
                self.fresh.add((peer, False))
            followers.add(group)
            self.follow_digest[peer] = self.follow_digest.get(peer, 0) ^ key

    def follow_awake(self, peer: str, group: int, key: int) -> None:
        followers = self.followers.get(peer)
        if followers is not None and group in followers:
            followers.discard(group)
            self.follow_digest[peer] ^= key
