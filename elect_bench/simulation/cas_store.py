"""A compare-and-swap store in memory with the semantics the lease core relies on, for simulation.

One global revision orders every write; a role's key holds its holder (session, member, token = the revision
of the write that gave it); each member's directory entry changes version on every renewal. Conditional
writes compare what the action names (`Create`: absent; `Expire` / `Take`: the holder's key and its membership
version unchanged; `Delete`: this session's key of that token), and an action the store refuses shows what it
holds instead, as the real stores' clients report a failed transaction.

Sessions end as each store ends them: etcd once the session's lease was not kept alive (`KeepAlive`) for the
lease's TTL; ZooKeeper once it heard nothing from the session's client (any request, or the client library's
pings) for the session timeout. Only the member's directory entry goes with its session (an etcd key on the lease,
an ephemeral ZooKeeper node): role keys are written without a lease and as persistent nodes, so that only the
members' own timing (`Expire`, `Take`) or the holder (`Delete`) frees a role, as `cas_lease.etcd` and
`cas_lease.zookeeper` write them. The store answers with what a request saw (`mine`) and
what its watchers see (`theirs`).

A renewal proves what the core counts on, as each real store's does: on etcd it reads everything as well (a
`Snapshot`; the real one relies on its watch having delivered through the renewal's revision, or reads), on
ZooKeeper it checks, in the same multi, that every role node the member holds is still the one it holds, and is
refuted as a whole otherwise (`Refuted`, showing those nodes), as `cas_lease.zookeeper` does.
"""

from __future__ import annotations

from collections.abc import Mapping

from cas_lease.model import (
    Create,
    Delete,
    Expire,
    Holder,
    KeepAlive,
    LeaseSeen,
    MemberRecord,
    MemberSeen,
    Observation,
    Publish,
    Renew,
    RoleSeen,
    Snapshot,
    StoreAction,
    Take,
)
from elect.roles import Role


class SessionGone(Exception):
    """The request's session no longer exists (its lease or session expired)."""


class Refuted(Exception):
    """The store refuted the action as a whole, because of what `observations` show: `cas_lease.driver.Refuted`,
    in memory."""

    def __init__(self, observations: list[Observation]) -> None:
        super().__init__(f"refused: {observations}")
        self.observations = observations


class SimStore:
    """`kind` "etcd" (leases kept alive by `KeepAlive`) or "zookeeper" (sessions kept alive by any contact);
    a session lapses after `session_ttl` seconds without."""

    def __init__(self, kind: str = "etcd", session_ttl: float = 2.0, *, renewal_checks: bool = True,
                 ephemeral_roles: bool = False) -> None:
        if kind not in ("etcd", "zookeeper"):
            raise ValueError(f"unknown store kind {kind!r}")
        self.kind = kind
        self.session_ttl = session_ttl
        self.renewal_checks = renewal_checks  # False: a ZooKeeper renewal checks nothing (what the checks prevent)
        # True: role keys go with their holder's session (ephemeral nodes), for a core with
        # `Timing.silence_takeover=False`, which trusts the store to free a dead holder's roles
        self.ephemeral_roles = ephemeral_roles
        self.rev = 0
        self.roles: dict[Role, Holder] = {}
        self.members: dict[str, tuple[MemberRecord, int]] = {}
        self.contact: dict[str, float] = {}  # session -> when its lease was kept alive / its client last heard
        self.requests = 0

    @property
    def sessions_by_contact(self) -> bool:
        """Whether any contact keeps a session alive (ZooKeeper), not only a `KeepAlive` (etcd)."""
        return self.kind == "zookeeper"

    def snapshot(self) -> Snapshot:
        return Snapshot(dict(self.roles), dict(self.members), self.rev)

    def open(self, session: str, record: MemberRecord, now: float) -> tuple[list[Observation], list[Observation]]:
        """A new session with its directory entry: (what the opener sees: its entry and everything, what watchers
        see)."""
        self.rev += 1
        self.members[session] = (record, self.rev)
        self.contact[session] = now
        seen = MemberSeen(session, record, self.rev, self.rev)
        return [seen, self.snapshot()], [seen]

    def touch(self, session: str, now: float) -> None:
        """The session's client was heard (ZooKeeper: a ping or any request)."""
        if session in self.contact and now > self.contact[session]:
            self.contact[session] = now

    def lapse_due(self, session: str) -> float | None:
        """When `session` lapses unless heard from (None: gone)."""
        last = self.contact.get(session)
        return None if last is None else last + self.session_ttl

    def expire(self, now: float) -> list[Observation]:
        """End every session not kept alive for `session_ttl`; what its watchers see."""
        seen: list[Observation] = []
        for session, last in sorted(self.contact.items()):
            if now - last >= self.session_ttl:
                seen += self.drop(session)
        return seen

    def extend_all(self, now: float) -> None:
        """A leader that (re)gains the store renews every lease (etcd) or session (ZooKeeper) to its full TTL."""
        for session in self.contact:
            self.contact[session] = now

    def drop(self, session: str) -> list[Observation]:
        """End `session` (its lease expired, its session ended, it was closed): its directory entry goes; the role
        keys it holds stay until a member frees them (unless `ephemeral_roles`)."""
        seen: list[Observation] = []
        for role, holder in sorted(self.roles.items(), key=lambda item: str(item[0])):
            if self.ephemeral_roles and holder.session == session:
                self.rev += 1
                del self.roles[role]
                seen.append(RoleSeen(role, None, self.rev))
        if session in self.members:
            self.rev += 1
            del self.members[session]
            seen.append(MemberSeen(session, None, 0, self.rev))
        self.contact.pop(session, None)
        return seen

    def execute(self, session: str, member: str, action: StoreAction, sent: float, now: float,
                ours: Mapping[Role, int] | None = None) -> tuple[list[Observation], list[Observation]]:
        """Carry out `action` of `session` (sent at `sent` by its member's clock) at `now`: (what the caller sees,
        what watchers see). `ours`: for a ZooKeeper renewal, the roles the member holds, with their tokens, as it
        knew them when it sent the renewal. Raises SessionGone if the session has ended, Refuted if a renewal's
        checks fail."""
        self.requests += 1
        if session not in self.members:
            raise SessionGone(session)
        if self.sessions_by_contact:
            self.touch(session, now)
        if isinstance(action, Renew) and self.kind == "zookeeper" and self.renewal_checks:
            taken = [role for role, token in (ours or {}).items()
                     if (held := self.roles.get(role)) is None or held.session != session or held.token != token]
            if taken:
                raise Refuted([RoleSeen(role, self.roles.get(role), self.rev) for role in taken])
        if isinstance(action, Renew):
            self.rev += 1
            record, _ = self.members[session]
            self.members[session] = (record, self.rev)
            changed = MemberSeen(session, record, self.rev, self.rev)
            return ([self.snapshot()] if self.kind == "etcd" else []), [changed]
        if isinstance(action, KeepAlive):
            self.touch(session, now)
            return [LeaseSeen(sent + self.session_ttl)], []
        if isinstance(action, Publish):
            self.rev += 1
            self.members[session] = (action.record, self.rev)
            published = MemberSeen(session, action.record, self.rev, self.rev)
            return [published], [published]
        if isinstance(action, Create):
            current = self.roles.get(action.role)
            if current is None:
                self.rev += 1
                current = self.roles[action.role] = Holder(session, member, self.rev)
                seen = RoleSeen(action.role, current, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev)], []
        if isinstance(action, Expire | Take):
            current = self.roles.get(action.role)
            entry = self.members.get(action.holder.session)
            version = entry[1] if entry else 0
            if current is not None and current.token == action.holder.token and version == action.version:
                self.rev += 1
                if isinstance(action, Take):
                    current = self.roles[action.role] = Holder(session, member, self.rev)
                    seen = RoleSeen(action.role, current, self.rev)
                else:
                    del self.roles[action.role]
                    seen = RoleSeen(action.role, None, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev),
                    MemberSeen(action.holder.session, entry[0] if entry else None, version, self.rev)], []
        if isinstance(action, Delete):
            current = self.roles.get(action.role)
            if current is not None and current.session == session and current.token == action.token:
                self.rev += 1
                del self.roles[action.role]
                seen = RoleSeen(action.role, None, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev)], []
        raise AssertionError(f"unknown store action {action!r}")
