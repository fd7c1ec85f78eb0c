"""What the election core consumes and produces: wire messages, hard state, leadership changes.

Every message carries its group id so a transport can batch the messages of many groups per peer.
The dataclasses are not frozen (construction speed matters in a node hosting 1000 groups); treat
them as immutable once built.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

ChangeKind = Literal["acquired", "revoked", "fenced"]


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


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on disk before any message of the same step is sent."""

    term: int = 0
    voted_for: str | None = None


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """This node started or stopped leading a group.

    ``acquired``: lead from ``at``; ``term`` is the fencing token. ``revoked``: orderly end (transfer,
    resign, a higher term seen while the lease still held): no successor can have started yet.
    ``fenced``: the lease ran out without a quorum (check-quorum); ``at`` is the lease end, which is
    earlier than the step that noticed it when the driver ticked late (a paused process).
    """

    group: int
    node: str
    kind: ChangeKind
    term: int
    at: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """The leader this node follows in ``group`` changed (``leader`` None: none known)."""

    group: int
    node: str
    leader: str | None
    term: int


@dataclass(slots=True)
class Output:
    """Everything one or more steps produced. A driver must, in this order:

    1. persist every ``persist`` entry durably (fsync) -- votes and terms must survive a crash;
    2. deliver ``changes`` to the application (a ``revoked`` callback may block: the TimeoutNow that
       lets the successor start is in ``messages`` and must not leave before it returns);
    3. send ``messages`` (batched per ``dst`` if it likes; see :meth:`by_destination`);
    4. call ``tick`` again no later than the group's (or host's) next deadline.
    """

    messages: list[Message] = field(default_factory=list)
    persist: dict[int, HardState] = field(default_factory=dict)
    changes: list[LeadershipChange] = field(default_factory=list)
    hints: list[LeaderHint] = field(default_factory=list)

    def clear(self) -> None:
        self.messages.clear()
        self.persist.clear()
        self.changes.clear()
        self.hints.clear()

    def __bool__(self) -> bool:
        return bool(self.messages or self.persist or self.changes or self.hints)

    def by_destination(self) -> dict[str, list[Message]]:
        batches: defaultdict[str, list[Message]] = defaultdict(list)
        for m in self.messages:
            batches[m.dst].append(m)
        return dict(batches)
