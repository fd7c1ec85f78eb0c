"""A member's leaderships and their deadlines, kept by one set of rules: pure (no clock, thread or I/O).

Every elector keeps its leaderships here (`elect.base.BaseElector`, on the monotonic clock, publishing an event for
each change) and so does every simulated member (`elect_bench.simulation`, on virtual time, recording each change
as the line a member prints), so what `is_leader` answers, when a leadership lapses and what a late renewal does
are decided once for both.

- A leadership lasts until its deadline (math.inf: none), on a deadline of its own or following a
  `SharedDeadline` that many follow (one piece of evidence renewing them all: a lease member's renewal, the node
  links under a Raft node's quiet partitions). A deadline never moves earlier.
- Whatever notices a leadership past its deadline fences it, at the deadline: a late acquire, extend or revoke as
  well as `expire`, the timer's turn (a paused member notices late, and its leadership ended at the deadline
  all the same). A fence never outlives the deadline.
- A revoke of a leadership in force is orderly (Revoked); every other end is a fence.

Each change is handed to `emit(now, change, held)` as it happens, in order: `Acquire` (its deadline math.inf when
it has none), `Revoke`, `Fence` (with the time it ended).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from elect.core import Acquire, Extend, ExtendShared, Fence, Follow, LeadershipChange, Revoke
from elect.roles import Role

INF = math.inf

class SharedDeadline:
    """One deadline that many leaderships follow (`BaseElector._share`).

    Where one piece of evidence renews many leaderships at once (Raft's quiet partitions, whose leases are all
    the same node-link quorum), the driver moves this once instead of each leadership's own deadline: renewal
    then costs the same for ten roles as for ten thousand. It is the timer's key for all of them, so they lapse
    together when it passes. Compared by identity.
    """

    __slots__ = ("name", "roles", "until")

    def __init__(self, name: str, until: float) -> None:
        self.name = name
        self.until = until
        self.roles: set[Role] = set()

    def __repr__(self) -> str:
        return f"SharedDeadline({self.name!r}, until={self.until:.3f}, roles={len(self.roles)})"


class Deadlines:
    """Keys with deadlines, and the earliest of them: pure (no clock or thread), for `DeadlineTimer` and
    `elect.leaderships.Leaderships` alike.

    A key has at most one live heap entry, pushed only when its deadline moves *earlier*: renewals, which move it
    later, cost a dict update (the entry, found early, is pushed again at the later deadline). A driver renewing
    thousands of leaderships several times a second relies on that.
    """

    __slots__ = ("_current", "_heap", "_scheduled", "_seq")

    def __init__(self) -> None:
        self._current: dict[Hashable, float] = {}
        self._scheduled: dict[Hashable, float] = {}  # key -> the time of its live heap entry
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0

    def set(self, key: Hashable, deadline: float) -> bool:
        """`key` is due at `deadline` (replacing its earlier one); True if that is now the earliest of all."""
        self._current[key] = deadline
        at = self._scheduled.get(key)
        if at is not None and at <= deadline:
            return False  # its entry comes up first and is pushed again at the later deadline
        self._scheduled[key] = deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, key))
        return self._heap[0][2] == key

    def cancel(self, key: Hashable) -> None:
        self._current.pop(key, None)

    def clear(self) -> None:
        self._current.clear()

    def next(self) -> float:
        """The earliest deadline of any key (math.inf: none)."""
        heap = self._heap
        while heap:
            at, _, key = heap[0]
            if self._scheduled.get(key) != at:
                heapq.heappop(heap)  # superseded by an earlier entry
                continue
            current = self._current.get(key)
            if current is None:  # cancelled
                heapq.heappop(heap)
                del self._scheduled[key]
                continue
            if current > at:  # moved later meanwhile
                self._seq += 1
                heapq.heapreplace(heap, (current, self._seq, key))
                self._scheduled[key] = current
                continue
            return at
        return math.inf

    def due(self, now: float) -> list[tuple[Hashable, float]]:
        """Take every key whose deadline is at or before `now`, earliest first, each with its deadline."""
        out: list[tuple[Hashable, float]] = []
        while (at := self.next()) <= now:
            _, _, key = heapq.heappop(self._heap)
            del self._scheduled[key]
            del self._current[key]
            out.append((key, at))
        return out


Change = Acquire | Revoke | Fence
"""What `Leaderships` emits: a leadership began, ended in order, or ended abruptly."""


@dataclass(slots=True)
class Held:
    """One leadership: `deadline` is its own (math.inf: none), unless it `follows` a shared one."""

    token: int
    deadline: float
    since: float
    since_ts: float
    follows: SharedDeadline | None = None

    def until(self) -> float:
        follows = self.follows
        return self.deadline if follows is None else follows.until


@dataclass(slots=True)
class Applied:
    """What the core should hear of a `Ready.changes` applied: extensions that came too late (`lapsed`: the
    leadership had ended), and the roles revoked (their keys to release once the handover is done)."""

    lapsed: list[Role] = field(default_factory=list)
    revoked: list[Role] = field(default_factory=list)


class Leaderships:
    """The leaderships of one member, each change handed to `emit` (see the module)."""

    __slots__ = ("_emit", "_shared", "_timers", "held")

    def __init__(self, emit: Callable[[float, Change, Held], None]) -> None:
        self.held: dict[Role, Held] = {}
        self._emit = emit
        self._timers = Deadlines()  # keys: a role on its own deadline, or a SharedDeadline that roles follow
        self._shared: dict[Hashable, SharedDeadline] = {}  # by key (None: the core's `shared` acquisitions')

    # ------------------------------------------------------------------ a core's changes
    def apply(self, changes: Iterable[LeadershipChange], now: float, wall: float | None = None) -> Applied:
        """A core's `Ready.changes`, in order (see `elect.core`)."""
        out = Applied()
        for change in changes:
            if isinstance(change, Acquire):
                self.acquire(change.role, change.token, change.deadline, now, wall)
                if change.shared and not self.share(change.role, self.shared(None, change.deadline, now), now):
                    out.lapsed.append(change.role)  # acquired past its deadline: lapsed at once
            elif isinstance(change, Extend):
                if not self.extend(change.role, change.deadline, now):
                    out.lapsed.append(change.role)
            elif isinstance(change, ExtendShared):
                self.shared(change.key, change.deadline, now)
            elif isinstance(change, Follow):
                shared = self._shared.get(change.key)
                if shared is None or not self.share(change.role, shared, now):
                    out.lapsed.append(change.role)
            elif isinstance(change, Revoke):
                self.revoke(change.role, now, change.reason)
                out.revoked.append(change.role)
            else:
                self.fence(change.role, change.until, now, change.reason)
        return out

    def shared(self, key: Hashable, until: float, now: float) -> SharedDeadline:
        """Shared deadline `key` moved on to `until` (`ExtendShared`); a new one where it has passed (its leaderships
        lapsed with it, and a later deadline does not revive them) or, for a key a core names, nobody follows it."""
        shared = self._shared.get(key)
        if shared is None or (key is not None and not shared.roles) or not self.renew_shared(shared, until, now):
            shared = self._shared[key] = SharedDeadline("core" if key is None else str(key), until)
        return shared

    # ------------------------------------------------------------------ transitions
    def acquire(self, role: Role, token: int, deadline: float | None, now: float, wall: float | None = None) -> None:
        """Lead `role` under `token` until `deadline` (None: no deadline). A leadership in force under the same token
        is extended instead; one that lapsed unnoticed is fenced at its deadline first."""
        held = self.held.get(role)
        if held is not None and now >= held.until():
            self.fence(role, now, now, "deadline")
            held = None
        if held is not None and held.token == token:
            if deadline is not None:
                self.extend(role, deadline, now)
            return
        if held is not None:
            self._detach(role, held)
        until = INF if deadline is None else deadline
        held = self.held[role] = Held(token, until, now, now if wall is None else wall)
        self._time(role, until)
        self._emit(now, Acquire(role, token, until), held)

    def extend(self, role: Role, deadline: float, now: float) -> bool:
        """Move the deadline of a leadership in force, on a deadline of its own from here; False if there is none
        in force (one that lapsed unnoticed is fenced at its deadline)."""
        held = self.held.get(role)
        if held is None:
            return False
        until = held.until()
        if now >= until:
            self.fence(role, now, now, "deadline")
            return False
        self._detach(role, held)
        held.deadline = max(until, deadline)
        self._time(role, held.deadline)
        return True

    def share(self, role: Role, shared: SharedDeadline, now: float) -> bool:
        """Let the leadership of `role` follow `shared` from now on. Refused (False) for one not in force, and where
        `shared` ends before its own deadline: a deadline never moves earlier."""
        held = self.held.get(role)
        if held is None or now >= held.until():
            return False
        if held.follows is shared:
            return True
        if shared.until < held.until():
            return False
        self._detach(role, held)
        self._timers.cancel(role)
        held.follows = shared
        shared.roles.add(role)
        self._timers.set(shared, shared.until)
        return True

    def renew_shared(self, shared: SharedDeadline, until: float, now: float) -> bool:
        """Move `shared` on to `until`, renewing every leadership that follows it. False if it had passed already:
        its leaderships lapsed, and a later deadline does not revive them."""
        if now >= shared.until:
            return False
        if until > shared.until:
            shared.until = until
            if shared.roles:
                self._timers.set(shared, until)
        return True

    def revoke(self, role: Role, now: float, reason: str = "") -> bool:
        """The orderly end of `role`: True if Revoked; a leadership that lapsed unnoticed is fenced at its deadline
        instead (the successor may be running)."""
        held = self.held.get(role)
        if held is None:
            return False
        if now >= held.until():
            self.fence(role, now, now, "deadline")
            return False
        self._remove(role, held)
        self._emit(now, Revoke(role, reason), held)
        return True

    def fence(self, role: Role, until: float, now: float, reason: str = "") -> bool:
        """End `role` abruptly, at `until` or at its deadline, whichever came first; False if not leading."""
        held = self.held.get(role)
        if held is None:
            return False
        self._remove(role, held)
        self._emit(now, Fence(role, min(until, held.until()), reason), held)
        return True

    def fence_all(self, now: float, reason: str) -> None:
        for role in sorted(self.held, key=str):
            self.fence(role, now, now, reason)

    def expire(self, now: float) -> list[Role]:
        """The deadline timer's turn: fence every leadership whose deadline has passed, each at its deadline; the
        roles fenced."""
        due: list[Role] = []
        for key, _ in self._timers.due(now):
            if isinstance(key, SharedDeadline):
                due += key.roles
            else:
                due.append(key)  # type: ignore[arg-type]
        due.sort(key=str)
        for role in due:
            held = self.held[role]
            self.fence(role, held.until(), now, "deadline")
        return due

    # ------------------------------------------------------------------ reading
    def next_deadline(self) -> float:
        """When `expire` has something to do next (math.inf: never, until something changes)."""
        return self._timers.next()

    def in_force(self, role: Role, now: float) -> Held | None:
        held = self.held.get(role)
        return held if held is not None and now < held.until() else None

    def leading(self, now: float) -> list[Role]:
        """The roles this member believes it leads at `now`, by its own deadlines."""
        return [role for role, held in self.held.items() if now < held.until()]

    # ------------------------------------------------------------------ helpers
    def _time(self, role: Role, until: float) -> None:
        if until < INF:
            self._timers.set(role, until)
        else:
            self._timers.cancel(role)

    def _detach(self, role: Role, held: Held) -> None:
        """`role` no longer follows its shared deadline (if it did); the caller sees to its own timer."""
        shared = held.follows
        if shared is not None:
            held.deadline, held.follows = shared.until, None
            shared.roles.discard(role)
            if not shared.roles:
                self._timers.cancel(shared)

    def _remove(self, role: Role, held: Held) -> None:
        del self.held[role]
        self._detach(role, held)
        self._timers.cancel(role)
