"""Who leads what, seen from outside a leadership: by an outside reader of the infrastructure, or by a member.

Two views, one question. An `Observer` reads who holds each role from the infrastructure itself without joining
the group (`elect watch URL`): where an implementation keeps its state in a store (etcd keys, ZooKeeper nodes,
a Kafka consumer group's assignment). A member reports what it sees of the roles it contends for as
`LeaderChanged` (`Elector.observe`), where its method lets it see other members' leadership. Either view can
trail a member's own belief by a renewal, a heartbeat or a rebalance; members' event lines remain the exact
record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from elect.roles import Role


@dataclass(frozen=True)
class LeaderChanged:
    """`member` now sees `leader` lead `role` (None: nobody it knows of), under `token` where it knows it.

    Not an `Event` on purpose: events are this member's own leadership, the contract's event lines; this is a
    view of the group, delivered only to `Elector.observe` callbacks. `leader` may be `member` itself.
    """

    role: Role
    leader: str | None
    token: int | None
    member: str
    mono: float = field(default_factory=time.monotonic)
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The change as a JSON line's fields (`elect member --observe` prints them)."""
        return {"ts": round(self.ts, 6), "mono": round(self.mono, 6), "member": self.member, "role": str(self.role),
                "leader": self.leader, "token": self.token}


@dataclass(frozen=True)
class Claim:
    """`member` holds `role` per the store, under `token` (None where the store keeps no token), since the wall time
    `since_ts` (None where the store keeps no such time: a Kafka group's assignment)."""

    role: str
    member: str
    token: int | None = None
    since_ts: float | None = None


class Observer(Protocol):
    #: where the claims are read, as a user would recognize it (`elect watch` names it when it finds none there)
    where: str

    def claims(self, timeout: float) -> list[Claim]:
        """Every role claim in the store now; raises InfrastructureUnavailable when it cannot be read."""
        ...

    def close(self) -> None: ...
