"""The one protocol every election core follows, and the one set of leadership changes they produce.

A core is a pure state machine, in the manner of etcd's raft library: no sockets, threads, sleeps or
clock reads. What happens outside reaches it in two ways only:

- ``step(message, now)``: something arrived (a peer's message, an observation of the store, the consumer
  group's verdict, the outcome of an action the core asked for);
- ``tick(now)``: time passed; the driver calls it no later than ``next_wakeup()``.

Commands an application gives (set the roles, resign, stop) are methods of each core, as etcd's
``Propose`` and ``Campaign`` are. Whatever any input produced accumulates inside the core until the
driver takes it with ``ready()``: one `Ready` value, which the driver handles in this order:

1. ``persist``: write durably (fsync) what must survive a crash (Raft's term and vote) before step 3;
2. ``changes``: apply to the application through `BaseElector._apply_change`, which keeps the event order
   and the fencing rules in one place (a ``Revoke`` may block while callbacks finish);
3. ``messages``: send (to peers, the store, a partition), batched per destination if the driver likes.

The same core then runs over real networks and in deterministic simulation (``elect_bench.simulation``),
where the simulator plays the driver's part on virtual time. See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from elect.roles import Role

M = TypeVar("M")
"""What a core sends: a Raft wire message, a NELI heartbeat record, a store action."""
P = TypeVar("P")
"""What a core persists before sending (Raft: term and vote per group); `None` for cores with none."""
I_in = TypeVar("I_in", contravariant=True)
"""What a core takes in through `step`."""


@dataclass(frozen=True, slots=True)
class Acquire:
    """This member leads `role` under `token` until `deadline` (monotonic) unless extended. `shared`: the leadership
    follows the core's shared deadline from now on, moved by `ExtendShared` rather than by an `Extend` of its own."""

    role: Role
    token: int
    deadline: float
    shared: bool = False


@dataclass(frozen=True, slots=True)
class Extend:
    """The leadership of `role` holds until the new `deadline`."""

    role: Role
    deadline: float


@dataclass(frozen=True, slots=True)
class ExtendShared:
    """Every leadership that follows shared deadline `key` holds until the new `deadline`: one piece of evidence renews
    them all, so renewing costs the same for ten roles as for ten thousand. Key None is the one a core's `shared`
    acquisitions follow (a lease member's renewal); a core names others (a Raft node's quiet partitions, one per
    quorum of node links). A shared deadline that has passed, or that nobody follows, starts afresh at `deadline`."""

    deadline: float
    key: Hashable = None


@dataclass(frozen=True, slots=True)
class Follow:
    """The leadership of `role` follows shared deadline `key` (made by an `ExtendShared` of that key) from now on,
    instead of a deadline of its own; an `Extend` gives it one of its own again. Refused (the core hears it as lapsed)
    for a leadership no longer in force, and where `key` ends before the leadership's own deadline."""

    role: Role
    key: Hashable


@dataclass(frozen=True, slots=True)
class Revoke:
    """Orderly end of leadership: emit Revoked and let callbacks finish before the successor starts."""

    role: Role
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Fence:
    """Leadership of `role` ended abruptly; by the member's own rule it ended at `until` (monotonic),
    which is earlier than the step that noticed it when the driver ran late (a paused process)."""

    role: Role
    until: float
    reason: str = ""


LeadershipChange = Acquire | Extend | ExtendShared | Follow | Revoke | Fence
"""What a core decided about this member's leadership of one role (for Raft: one group)."""


@dataclass(frozen=True, slots=True)
class LeaderSeen:
    """Who this member believes leads `role` now (`leader` None: nobody it knows of), for observers."""

    role: Role
    leader: str | None
    token: int


@dataclass(slots=True)
class Ready(Generic[M, P]):
    """Everything a core produced since the driver last called ``ready()``; handle it in field order."""

    persist: dict[Role, P] = field(default_factory=dict)
    changes: list[LeadershipChange] = field(default_factory=list)
    messages: list[M] = field(default_factory=list)
    seen: list[LeaderSeen] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.persist or self.changes or self.messages or self.seen)

    def take(self) -> Ready[M, P]:
        """Hand over what has accumulated and start empty again (what a core's ``ready()`` returns)."""
        out = Ready(self.persist, self.changes, self.messages, self.seen)
        self.persist, self.changes, self.messages, self.seen = {}, [], [], []
        return out


class Core(Protocol[I_in, M, P]):
    """An election core: inputs in (`step`, `tick`), one `Ready` out. No I/O, threads or clock reads."""

    def step(self, message: I_in, now: float) -> None:
        """Something arrived from outside at monotonic time `now`."""

    def tick(self, now: float) -> None:
        """Time passed; `now` is monotonic seconds (virtual in simulation)."""

    def next_wakeup(self) -> float:
        """The latest time the driver may call `tick` next (math.inf: only on input)."""

    def has_ready(self) -> bool:
        """Something was produced since the last `ready()` (the driver skips an empty hand-over)."""

    def ready(self) -> Ready[M, P]:
        """Take everything produced since the last call."""
