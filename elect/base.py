"""The part of every elector that is not about a particular algorithm.

`BaseElector` keeps the roles a member contends for, the leaderships it holds, deadlines, and event
delivery. A driver implements the `_on_*` hooks and reports what its algorithm decided: the drivers of
pure cores (Raft, NELI, lease; see `elect.core`) hand each change of a core's `Ready.changes` to
`_apply_change`, which maps it onto `_acquire`, `_extend`, `_revoke` and `_fence`; memory, which has
no core, calls those directly. The base turns them into state that `is_leader()` reads and into
events, in order, with `Fenced` always ahead of whatever follows an expired leadership.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Hashable, Iterable

from elect.contract import Callback, Elector, Leadership, Unsubscribe
from elect.core import Acquire, Extend, LeadershipChange, Revoke
from elect.deadlines import DeadlineTimer
from elect.dispatch import EventDispatcher
from elect.errors import NotStarted
from elect.events import Acquired, Fenced, Revoked
from elect.roles import Role, normalize_roles

log = logging.getLogger("elect")


class BaseElector(Elector):
    """State, events and lifecycle shared by every implementation."""

    scheme = "unknown"  # each implementation names its URL scheme

    #: How long `_revoke(wait=True)` waits for blocking Revoked callbacks before handing over anyway.
    revoke_timeout: float | None = None

    def __init__(self, member: str, roles: Iterable[Role] = ()) -> None:
        self.member = member
        self._lock = threading.RLock()
        self._roles: dict[Role, None] = dict.fromkeys(normalize_roles(list(roles)))
        self._leaderships: dict[Role, Leadership] = {}
        self._dispatcher = EventDispatcher(member)
        self._deadlines = DeadlineTimer(self._deadline_passed, member)
        self._state = "new"

    # ----------------------------------------------------------------- driver hooks
    @abstractmethod
    def _on_start(self) -> None:
        """Join the group and begin contending for `self.roles`."""

    @abstractmethod
    def _on_stop(self, timeout: float | None) -> None:
        """Hand every led role over (via `_revoke`) and leave the group."""

    @abstractmethod
    def _on_resign(self, role: Role) -> None:
        """Give up `role` (via `_revoke`) so another member can take it."""

    @abstractmethod
    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        """Contend for `added`; hand over removed roles that this member leads."""

    # ----------------------------------------------------------------- public API
    def start(self) -> None:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"elector {self.member} was already started")
            self._state = "running"
        self._dispatcher.start()
        try:
            self._on_start()
        except BaseException:
            with self._lock:
                self._state = "stopped"
            self._close_plumbing()
            raise

    def stop(self, timeout: float | None = None) -> None:
        with self._lock:
            if self._state in ("stopping", "stopped"):
                return
            was_running = self._state == "running"
            self._state = "stopping"
        try:
            if was_running:
                self._on_stop(timeout)
        finally:
            with self._lock:
                leftover = list(self._leaderships)
            for role in leftover:  # a driver that could not hand over cleanly
                self._fence(role)
            with self._lock:
                self._state = "stopped"
            self._close_plumbing(timeout)

    def _close_plumbing(self, timeout: float | None = None) -> None:
        self._deadlines.close()
        self._dispatcher.close(timeout)

    @property
    def running(self) -> bool:
        return self._state == "running"

    def subscribe(self, callback: Callback) -> Unsubscribe:
        """Subscribe; the roles already led are replayed to the new subscriber as `Acquired` first."""
        with self._lock:
            replay = [Acquired(role=l.role, member=self.member, token=l.token, mono=l.since, ts=l.since_ts)
                      for l in self._leaderships.values() if l.valid()]
            return self._dispatcher.subscribe(callback, replay)

    def is_leader(self, role: Role) -> bool:
        return self.leadership(role) is not None

    def leadership(self, role: Role) -> Leadership | None:
        current = self._leaderships.get(role)
        return current if current is not None and current.valid() else None

    def leading(self) -> frozenset[Role]:
        now = time.monotonic()
        with self._lock:
            return frozenset(r for r, l in self._leaderships.items() if l.valid(now))

    def resign(self, role: Role) -> None:
        self._require_running()
        if role in self._leaderships:
            self._on_resign(role)

    @property
    def roles(self) -> frozenset[Role]:
        with self._lock:
            return frozenset(self._roles)

    def add_roles(self, roles: Iterable[Role]) -> None:
        with self._lock:
            added = tuple(r for r in normalize_roles(list(roles)) if r not in self._roles)
            self._roles.update(dict.fromkeys(added))
            running = self._state == "running"
        if added and running:
            self._on_roles_changed(added, ())

    def remove_roles(self, roles: Iterable[Role]) -> None:
        with self._lock:
            removed = tuple(r for r in normalize_roles(list(roles)) if r in self._roles)
            for role in removed:
                del self._roles[role]
            running = self._state == "running"
        if removed and running:
            self._on_roles_changed((), removed)

    def _require_running(self) -> None:
        if self._state != "running":
            raise NotStarted(f"elector {self.member} is {self._state}; call start() first")

    # ----------------------------------------------------------------- driver-facing transitions
    def _acquire(self, role: Role, token: int, deadline: float | None = None) -> Leadership:
        """Record that this member leads `role` under `token` (until `deadline`, if given)."""
        with self._lock:
            current = self._leaderships.get(role)
            if current is not None and not current.valid():
                self._fence(role)
                current = None
            if current is not None and current.token == token:
                if deadline is not None:
                    self._extend(role, deadline)
                return self._leaderships[role]
            now, wall = time.monotonic(), time.time()
            leadership = Leadership(role=role, member=self.member, token=token, since=now, since_ts=wall,
                                    deadline=deadline)
            self._leaderships[role] = leadership
            if deadline is not None:
                self._deadlines.set(role, deadline)
            else:
                self._deadlines.cancel(role)
            self._dispatcher.publish(Acquired(role=role, member=self.member, token=token, mono=now, ts=wall))
            return leadership

    def _extend(self, role: Role, deadline: float) -> bool:
        """Move the deadline of a leadership still in force; fences (and returns False) if it lapsed."""
        with self._lock:
            current = self._leaderships.get(role)
            if current is None:
                return False
            if not current.valid():
                self._fence(role)
                return False
            if current.deadline is None or deadline > current.deadline:
                self._leaderships[role] = Leadership(role, current.member, current.token, current.since,
                                                     current.since_ts, deadline)
                self._deadlines.set(role, deadline)
            return True

    def _revoke(self, role: Role, *, wait: bool = True, timeout: float | None = None) -> bool:
        """Orderly end of leadership: emit `Revoked` and, if `wait`, block until callbacks return.

        A leadership whose deadline already passed is fenced instead (the successor may be running).
        Returns True if a leadership was ended.
        """
        with self._lock:
            leading = role in self._leaderships
            done = self._begin_revoke(role)
        if done is None:
            return leading  # not leading, or lapsed and fenced instead
        if wait and not self._dispatcher.on_dispatch_thread():
            limit = timeout if timeout is not None else self.revoke_timeout
            if not done.wait(limit):
                log.warning("elect: %s: Revoked callbacks for %r still running after %ss; handing over",
                            self.member, role, limit)
        return True

    def _begin_revoke(self, role: Role) -> threading.Event | None:
        """`_revoke` without the wait, for drivers whose thread must not block: publish `Revoked` and return
        the flag set once its callbacks returned (None: not leading, or lapsed and fenced instead)."""
        with self._lock:
            current = self._leaderships.get(role)
            if current is None:
                return None
            if not current.valid():
                self._fence(role)
                return None
            del self._leaderships[role]
            self._deadlines.cancel(role)
            return self._dispatcher.publish(Revoked(role=role, member=self.member, token=current.token))

    def _fence(self, role: Role, until: float | None = None) -> bool:
        """Abrupt end of leadership: emit `Fenced`; `until` defaults to the lapsed deadline or now."""
        with self._lock:
            current = self._leaderships.pop(role, None)
            if current is None:
                return False
            self._deadlines.cancel(role)
            now = time.monotonic()
            if until is None:
                until = now
            if current.deadline is not None:  # leadership never outlives its own deadline
                until = min(until, current.deadline)
            self._dispatcher.publish(Fenced(role=role, member=self.member, token=current.token, mono=now,
                                            until=until))
            return True

    def _apply_change(self, change: LeadershipChange, *, wait: bool = True) -> bool:
        """Apply one change of a core's `Ready.changes`, in order; False only for an Extend of a leadership
        that had lapsed already (it was fenced; the core should hear of it). `wait` is for a Revoke (see
        `_revoke`; a driver whose thread must not block hands Revokes to `_begin_revoke` instead)."""
        if isinstance(change, Acquire):
            self._acquire(change.role, change.token, change.deadline)
        elif isinstance(change, Extend):
            return self._extend(change.role, change.deadline)
        elif isinstance(change, Revoke):
            self._revoke(change.role, wait=wait)
        else:
            self._fence(change.role, change.until)
        return True

    def _deadline_passed(self, key: Hashable, deadline: float) -> None:
        with self._lock:
            current = self._leaderships.get(key)  # type: ignore[call-overload]
            if current is None or current.deadline != deadline:
                return
            self._fence(current.role, until=deadline)
        self._on_lapsed(current.role)

    def _on_lapsed(self, role: Role) -> None:
        """Hook: a leadership lapsed on the member's own clock (drivers may react, e.g. re-contend)."""
