"""A simulated member's leaderships, kept as `elect.base.BaseElector` keeps them: the one keeper of every simulated
world whose core hands its changes to an elector (the lease and NELI worlds; Raft's world reads its nodes).

Each leadership lasts until its deadline (shared ones moved on together by `ExtendShared`) and is fenced by the
member's own timer when that passes; a fence never outlives the deadline (a paused member notices late, and its
leadership ended at the deadline all the same). Every change that prints an event line is recorded as `Recorded`
in the world's history, which `elect_bench.simulation.world.lines_of` turns into the lines a member prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from elect.core import Acquire, Extend, ExtendShared, Fence, LeadershipChange, Revoke
from elect.roles import Role
from elect_bench.simulation.world import Recorded

INF = math.inf


@dataclass(slots=True)
class Held:
    token: int
    deadline: float
    shared: bool


@dataclass(slots=True)
class Applied:
    """What a member's elector must do beyond keeping the leaderships: tell the core of extensions that came too
    late (`lapsed`: the leadership had ended), and release the keys of revoked roles (`revoked`)."""

    lapsed: list[Role] = field(default_factory=list)
    revoked: list[Role] = field(default_factory=list)


class Keeper:
    """The leaderships of member `name`, recorded into `history`."""

    __slots__ = ("held", "history", "name")

    def __init__(self, name: str, history: list[Recorded]) -> None:
        self.name = name
        self.history = history
        self.held: dict[Role, Held] = {}

    def apply(self, changes: Iterable[LeadershipChange], now: float) -> Applied:
        """The core's changes, in order (`BaseElector._apply_change`)."""
        out = Applied()
        for change in changes:
            if isinstance(change, Acquire):
                self.held[change.role] = Held(change.token, INF if change.deadline is None else change.deadline,
                                              change.shared)
                self.history.append(Recorded(self.name, now, change))
            elif isinstance(change, Extend):
                held = self.held.get(change.role)
                if held is not None and now < held.deadline:
                    held.deadline = max(held.deadline, change.deadline)
                else:
                    out.lapsed.append(change.role)
            elif isinstance(change, ExtendShared):
                for held in self.held.values():
                    if held.shared and now < held.deadline:
                        held.deadline = max(held.deadline, change.deadline)
            elif isinstance(change, Revoke):
                if self.held.pop(change.role, None) is not None:
                    self.history.append(Recorded(self.name, now, change))
                out.revoked.append(change.role)
            else:
                self.fence(change.role, change.until, now, change.reason)
        return out

    def fence(self, role: Role, until: float, now: float, reason: str) -> None:
        """End `role` now (`BaseElector._fence`): at `until` or at its deadline, whichever came first."""
        held = self.held.pop(role, None)
        if held is not None:
            self.history.append(Recorded(self.name, now, Fence(role, min(until, held.deadline), reason)))

    def fence_all(self, now: float, reason: str) -> None:
        for role in sorted(self.held, key=str):
            self.fence(role, now, now, reason)

    def expire(self, now: float) -> list[Role]:
        """The deadline timer: fence every leadership whose deadline has passed; the roles fenced."""
        due = sorted((role for role, held in self.held.items() if now >= held.deadline), key=str)
        for role in due:
            deadline = self.held.pop(role).deadline
            self.history.append(Recorded(self.name, now, Fence(role, deadline, "deadline")))
        return due

    def next_deadline(self) -> float:
        return min((h.deadline for h in self.held.values()), default=INF)

    def leading(self, now: float) -> list[Role]:
        """The roles this member believes it leads at `now` (by its own deadlines)."""
        return [role for role, held in self.held.items() if now < held.deadline]
