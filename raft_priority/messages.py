"""What the election core exchanges and persists: wire messages and hard state (leadership changes are
`elect.core`'s, as for every core).

Every message carries its group id so a transport can batch the messages of many groups per peer.
The messages are not frozen (construction speed matters in a node hosting 1000 groups); treat them
as immutable once built.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(slots=True)
class Message:
    """Common header. ``term`` is the sender's term (for PreVote: the term it proposes)."""

    group: int
    src: str
    dst: str
    term: int


@dataclass(slots=True)
class PreVoteRequest(Message):
    """"Would you vote for me in ``term``?" Changes no state at the receiver (Raft thesis 9.6)."""

    last_log_index: int = 0
    last_log_term: int = 0
    conf_term: int = 0
    """The position of the candidate's configuration (`Conf.position`): voters holding a later one refuse."""
    conf_index: int = 0


@dataclass(slots=True)
class PreVoteResponse(Message):
    granted: bool = False


@dataclass(slots=True)
class VoteRequest(Message):
    last_log_index: int = 0
    last_log_term: int = 0
    force: bool = False
    """Sent after a TimeoutNow: voters grant it even inside a leader's lease."""
    transfer_seq: int = 0
    """Which transfer of the previous term's leader this campaign answers (only with ``force``)."""
    conf_term: int = 0
    conf_index: int = 0


@dataclass(slots=True)
class VoteResponse(Message):
    granted: bool = False


@dataclass(slots=True)
class Heartbeat(Message):
    sent_at: float = 0.0
    """The leader's clock at sending; echoed back, so lease arithmetic only ever uses one clock."""
    succession: tuple[int, ...] = ()
    """Priorities of the followers the leader hears from, best first (improvement a; else empty)."""
    transfer_closed: int = 0
    """Highest transfer sequence of this term the leader abandoned: voters refuse its late votes."""
    quiesce: bool = False
    """The leader asks the follower to go quiet in this group: stop timing it per group and time the leader's
    node link instead (`raft_priority.links`)."""
    conf_term: int = 0
    """The position of the leader's latest configuration (`Conf`)."""
    conf_index: int = 0
    committed: bool = False
    """That configuration is committed (a quorum of every half of it holds it)."""
    conf: Conf | None = None
    """The whole configuration, for a follower whose acknowledged position is not the leader's."""


@dataclass(slots=True)
class HeartbeatResponse(Message):
    echo: float = 0.0
    last_log_index: int = 0
    last_log_term: int = 0
    quiet: bool = False
    """The follower is quiet in this group under the receiver (it answered a quiesce heartbeat)."""
    conf_term: int = 0
    """The position of the configuration the follower holds."""
    conf_index: int = 0


NODE = -1
"""The group id of node-level messages (`NodeBeat`, `NodeBeatAck`): they belong to no election group."""


@dataclass(slots=True)
class NodeBeat(Message):
    """One per peer node per heartbeat interval, whatever the number of groups: the node link's liveness, which
    quiet groups use instead of per-group heartbeats. ``term`` is unused (0)."""

    sent_at: float = 0.0
    incarnation: int = 0
    """The sender's process incarnation: a restarted node leads nothing it led before."""
    digest: int = 0
    """The sender's digest of the groups it leads quietly with the receiver (`raft_priority.links`)."""


@dataclass(slots=True)
class NodeBeatAck(Message):
    echo: float = 0.0
    incarnation: int = 0
    """The incarnation of the beat acknowledged (an ack to an earlier process is ignored)."""
    digest: int = 0
    """The acker's digest of the groups it follows quietly under the receiver, when it acked."""


@dataclass(slots=True)
class TimeoutNow(Message):
    """Leadership transfer: the receiver campaigns at once, skipping PreVote."""

    transfer_seq: int = 0
    pin: bool = False
    """An operator's transfer: the receiver, once leader, does not rebalance the group back."""




@dataclass(frozen=True, slots=True)
class Conf:
    """One entry of a group's configuration log. Each entry is a whole configuration, so the latest is all a
    member keeps: its log is one entry long, and Raft's rules for logs hold for it as written (docs/architecture.md,
    "Membership"). ``term``/``index``: the entry's place (the term of the leader that made it, and one more than
    the entry before it), compared as Raft compares last log entries.

    ``voters``: the voters and their priorities. ``old``: while joint, the outgoing voters (and priorities): an
    election or a lease then needs a majority of each. ``learners``: members that hear the leader and answer it but
    neither vote nor count. ``payload``: what the group agrees on besides (the cluster group's `Membership`); opaque
    to the core."""

    term: int = 0
    index: int = 0
    voters: Mapping[str, int] = field(default_factory=dict)
    old: Mapping[str, int] | None = None
    learners: tuple[str, ...] = ()
    payload: Any = None

    @property
    def position(self) -> tuple[int, int]:
        return (self.term, self.index)

    @property
    def joint(self) -> bool:
        return self.old is not None

    def halves(self) -> tuple[frozenset[str], ...]:
        """The voter sets whose majorities an election or a lease needs: one, or two while joint."""
        new = frozenset(self.voters)
        if self.old is None or frozenset(self.old) == new:
            return (new,)
        return (frozenset(self.old), new)

    def votes_in(self, node: str) -> bool:
        return node in self.voters or (self.old is not None and node in self.old)

    def members(self) -> set[str]:
        return {*self.voters, *(self.old or ()), *self.learners}

    def same_members(self, other: Conf) -> bool:
        """Whether `other` names the same voters (and priorities), outgoing voters and learners."""
        return (self.voters is other.voters or self.voters == other.voters) and self.old == other.old and \
            self.learners == other.learners

    def next(self, term: int, **changes: Any) -> Conf:
        """The entry after this one, made by the leader of ``term``."""
        if not changes:
            return Conf(term, self.index + 1, self.voters, self.old, self.learners, self.payload)
        return replace(self, term=term, index=self.index + 1, **changes)


@dataclass(slots=True)
class ConfNews(Message):
    """A committed configuration of the cluster group, from any node that holds it to one that acts on an older one
    (a partition leader the sender knows was removed): a committed entry is the same on every node that holds it,
    so the receiver may take it from anyone (`NodeHost`). ``term`` is unused (0)."""

    conf: Conf | None = None


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on disk before any message of the same step is sent: term, vote and the configuration (None:
    the one the group was created with, never changed)."""

    term: int = 0
    voted_for: str | None = None
    conf: Conf | None = None
