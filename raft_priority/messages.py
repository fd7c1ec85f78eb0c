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


@dataclass(slots=True)
class HeartbeatResponse(Message):
    echo: float = 0.0
    last_log_index: int = 0
    last_log_term: int = 0


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
