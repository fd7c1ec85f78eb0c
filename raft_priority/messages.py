"""What the election core exchanges and persists: wire messages and hard state (leadership changes are
`elect.core`'s, as for every core).

Every message carries its group id so a transport can batch the messages of many groups per peer.
The messages are not frozen (construction speed matters in a node hosting 1000 groups); treat them
as immutable once built.
"""
from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(slots=True)
class HeartbeatResponse(Message):
    echo: float = 0.0
    last_log_index: int = 0
    last_log_term: int = 0
    quiet: bool = False
    """The follower is quiet in this group under the receiver (it answered a quiesce heartbeat)."""


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
class HardState:
    """What must be on disk before any message of the same step is sent."""

    term: int = 0
    voted_for: str | None = None
