"""A simulated member's leaderships, kept as `elect.base.BaseElector` keeps them: the one keeper of every simulated
world whose core hands its changes to an elector (the lease and NELI worlds; Raft's world reads its nodes).

Each leadership lasts until its deadline (shared ones moved on together by `ExtendShared`, or following one
`SharedDeadline` as a Raft node's quiet partitions do: `share`, `renew_shared`) and is fenced by the member's own
timer when that passes; a fence never outlives the deadline (a paused member notices late, and its
leadership ended at the deadline all the same). Every change that prints an event line is recorded as `Recorded`
in the world's history, which `elect_bench.simulation.recorded.lines_of` turns into the lines a member prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from elect.core import Acquire, Extend, ExtendShared, Fence, LeadershipChange, Revoke
from elect.deadlines import SharedDeadline
from elect.roles import Role
from elect_bench.simulation.recorded import Recorded

INF = math.inf


@dataclass(slots=True)
class Held:
    token: int
    deadline: float
    shared: bool
    follows: SharedDeadline | None = None
    """The deadline this leadership follows instead of its own (`Keeper.share`)."""

    def until(self) -> float:
        follows = self.follows
        return self.deadline if follows is None else follows.until


@dataclass(slots=True)
class Applied:
    """What a member's elector must do beyond keeping the leaderships: tell the core of extensions that came too
    late (`lapsed`: the leadership had ended), and release the keys of revoked roles (`revoked`)."""

    lapsed: list[Role] = field(default_factory=list)
    revoked: list[Role] = field(default_factory=list)


class Keeper:
    """The leaderships of member `name`, recorded into `history`."""

    __slots__ = ("held", "history", "name", "on_true_time")

    def __init__(self, name: str, history: list[Recorded],
                 on_true_time: Callable[[Recorded], Recorded] | None = None) -> None:
        self.name = name
        self.history = history
        self.on_true_time = on_true_time
        """For a member on a clock of its own: what it records on that clock, carried onto the world's time."""
        self.held: dict[Role, Held] = {}

    def _record(self, r: Recorded) -> None:
        self.history.append(r if self.on_true_time is None else self.on_true_time(r))

    def apply(self, changes: Iterable[LeadershipChange], now: float) -> Applied:
        """The core's changes, in order (`BaseElector._apply_change`)."""
        out = Applied()
        for change in changes:
            if isinstance(change, Acquire):
                self.acquire(change.role, change.token, change.deadline, now, change.shared)
            elif isinstance(change, Extend):
                if not self.extend(change.role, change.deadline, now):
                    out.lapsed.append(change.role)
            elif isinstance(change, ExtendShared):
                for held in self.held.values():
                    if held.shared and now < held.deadline:
                        held.deadline = max(held.deadline, change.deadline)
            elif isinstance(change, Revoke):
                self.revoke(change.role, now, change.reason)
                out.revoked.append(change.role)
            else:
                self.fence(change.role, change.until, now, change.reason)
        return out

    def acquire(self, role: Role, token: int, deadline: float | None, now: float, shared: bool = False) -> None:
        """Lead `role` under `token` (`BaseElector._acquire`): a leadership in force under the same token is extended
        instead; one that lapsed unnoticed is fenced at its deadline first."""
        held = self.held.get(role)
        if held is not None and now >= held.until():
            self.fence(role, now, now, "deadline")
            held = None
        if held is not None and held.token == token:
            if deadline is not None:
                self.extend(role, deadline, now)
            return
        until = INF if deadline is None else deadline
        self.held[role] = Held(token, until, shared)
        self._record(Recorded(self.name, now, Acquire(role, token, until, shared)))

    def extend(self, role: Role, deadline: float, now: float) -> bool:
        """Move the deadline of a leadership in force, on a deadline of its own from here (`BaseElector._extend`);
        False if there is none in force (one that lapsed unnoticed is fenced at its deadline)."""
        held = self.held.get(role)
        if held is None:
            return False
        until = held.until()
        if now >= until:
            self.fence(role, now, now, "deadline")
            return False
        held.deadline, held.follows = max(until, deadline), None
        return True

    def share(self, role: Role, shared: SharedDeadline, now: float) -> bool:
        """Let the leadership of `role` follow `shared` (`BaseElector._share`): refused for one not in force, and
        where `shared` ends before its own deadline."""
        held = self.held.get(role)
        if held is None or now >= held.until():
            return False
        if held.follows is not shared and shared.until < held.until():
            return False
        held.follows = shared
        return True

    @staticmethod
    def renew_shared(shared: SharedDeadline, until: float, now: float) -> bool:
        """Move `shared` on (`BaseElector._renew_shared`); False if it had passed (its leaderships lapsed)."""
        if now >= shared.until:
            return False
        shared.until = max(shared.until, until)
        return True

    def revoke(self, role: Role, now: float, reason: str = "") -> None:
        """The orderly end of `role` (`BaseElector._begin_revoke`): Revoked, or Fenced at its deadline if it had
        lapsed unnoticed."""
        held = self.held.get(role)
        if held is None:
            return
        if now >= held.until():
            self.fence(role, now, now, "deadline")
            return
        del self.held[role]
        self._record(Recorded(self.name, now, Revoke(role, reason)))

    def fence(self, role: Role, until: float, now: float, reason: str) -> None:
        """End `role` now (`BaseElector._fence`): at `until` or at its deadline, whichever came first."""
        held = self.held.pop(role, None)
        if held is not None:
            self._record(Recorded(self.name, now, Fence(role, min(until, held.until()), reason)))

    def fence_all(self, now: float, reason: str) -> None:
        for role in sorted(self.held, key=str):
            self.fence(role, now, now, reason)

    def expire(self, now: float) -> list[Role]:
        """The deadline timer: fence every leadership whose deadline has passed; the roles fenced."""
        due = sorted((role for role, held in self.held.items() if now >= held.until()), key=str)
        for role in due:
            deadline = self.held.pop(role).until()
            self._record(Recorded(self.name, now, Fence(role, deadline, "deadline")))
        return due

    def next_deadline(self) -> float:
        return min((h.until() for h in self.held.values()), default=INF)

    def leading(self, now: float) -> list[Role]:
        """The roles this member believes it leads at `now` (by its own deadlines)."""
        return [role for role, held in self.held.items() if now < held.until()]
