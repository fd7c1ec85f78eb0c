"""`memory://GROUP`: an in-process elector for tests and examples.

Members that name the same group in one process share a `_Group`, which hands each role to exactly
one contending member (the one leading fewest roles, so roles spread), keeps a token counter per role,
and on an orderly handover waits for the old leader's `Revoked` callbacks before the successor gets
`Acquired` — the whole contract, with no infrastructure. The group tells every member each change of a
role's owner, so `observe` sees the role without a leader during a handover and the successor after it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.errors import ConfigError, TransferRefused
from elect.registry import Plugin
from elect.roles import Role


@dataclass(frozen=True)
class MemoryOptions:
    """group: the name members meet under. revoke_timeout: longest wait for blocking Revoked callbacks."""

    group: str = "default"
    revoke_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("cannot be empty", parameter="group")
        if self.revoke_timeout <= 0:
            raise ConfigError("must be > 0", parameter="revoke_timeout")


class _Group:
    """The shared state of one group: who leads each role, and the last token given per role."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.RLock()
        self.members: dict[str, MemoryElector] = {}
        self.owner: dict[Role, str] = {}
        self.tokens: dict[Role, int] = {}

    def join(self, elector: MemoryElector) -> None:
        with self.lock:
            if elector.member in self.members:
                raise ConfigError(f"member {elector.member!r} is already in memory group {self.name!r}",
                                  parameter="member")
            self.members[elector.member] = elector
            self.show(elector)
            self.assign_free()

    def leave(self, elector: MemoryElector) -> None:
        with self.lock:
            held = [r for r, m in self.owner.items() if m == elector.member]
        for role in held:
            self.hand_over(role, elector)
        with self.lock:
            self.members.pop(elector.member, None)
            if not self.members:
                _GROUPS.pop(self.name, None)
            self.assign_free()

    def hand_over(self, role: Role, leader: MemoryElector, exclude_leader: bool = True, to: str | None = None) -> None:
        """Orderly handover of `role` from `leader`: Revoked (waited for), then Acquired on a successor (`to`
        if it still contends then)."""
        with self.lock:
            if self.owner.get(role) != leader.member:
                return
            del self.owner[role]
            leader.handing_over.add(role)
            self.tell(role, None)
        try:
            leader._revoke(role, wait=True)
        finally:
            with self.lock:
                leader.handing_over.discard(role)
                self.assign(role, avoid=leader.member if exclude_leader else None, prefer=to)

    def contends(self, role: Role, member: str) -> bool:
        with self.lock:
            other = self.members.get(member)
            return other is not None and role in other.wanted() and role not in other.handing_over

    def assign_free(self) -> None:
        with self.lock:
            wanted = {r for m in self.members.values() for r in m.wanted()}
            for role in sorted(wanted - set(self.owner), key=str):
                self.assign(role)

    def assign(self, role: Role, avoid: str | None = None, prefer: str | None = None) -> None:
        """Give an unowned `role` to `prefer` if it contends, else to the contender leading fewest roles (`avoid`
        only as a last resort)."""
        with self.lock:
            if role in self.owner:
                return
            contenders = [m for m in self.members.values() if role in m.wanted() and role not in m.handing_over]
            if not contenders:
                return
            preferred = ([m for m in contenders if m.member == prefer] or
                         [m for m in contenders if m.member != avoid] or contenders)
            load = {m.member: 0 for m in preferred}
            for owner in self.owner.values():
                if owner in load:
                    load[owner] += 1
            chosen = min(preferred, key=lambda m: load[m.member])  # min() keeps join order on ties
            token = self.tokens.get(role, 0) + 1
            self.tokens[role] = token
            self.owner[role] = chosen.member
            chosen._acquire(role, token)
            self.tell(role, chosen.member)

    def tell(self, role: Role, owner: str | None) -> None:
        """Every member learns who owns `role` now (each keeps it only if it contends for the role)."""
        with self.lock:
            for member in self.members.values():
                member._saw(role, owner, self.tokens.get(role))

    def show(self, elector: MemoryElector) -> None:
        """What a member joining, or contending for more roles, should know: the current owners."""
        with self.lock:
            for role, owner in self.owner.items():
                elector._saw(role, owner, self.tokens[role])

    def leaders(self) -> dict[Role, str]:
        with self.lock:
            return dict(self.owner)


_GROUPS: dict[str, _Group] = {}
_GROUPS_LOCK = threading.Lock()


def group(name: str) -> _Group:
    with _GROUPS_LOCK:
        found = _GROUPS.get(name)
        if found is None:
            found = _GROUPS[name] = _Group(name)
        return found


class MemoryElector(BaseElector):
    """An in-process member of a memory group."""

    scheme = "memory"
    drain_timeout = 0.0  # a handover gives the role to a successor, if any member contends, before it returns

    def __init__(self, options: MemoryOptions, member: str, roles: tuple[Role, ...]) -> None:
        super().__init__(member, roles)
        self.options = options
        self.revoke_timeout = options.revoke_timeout
        self.handing_over: set[Role] = set()
        self._group: _Group | None = None

    @property
    def characteristics(self) -> Characteristics:
        return Characteristics(exclusive=True, max_overlap=0.0, max_failover=0.0, graceful_handover=True,
                               token="per-role counter in the group", observes_leaders=True, transfers=True)

    def wanted(self) -> frozenset[Role]:
        return self.roles if self.running else frozenset()  # a draining member contends for nothing

    def _on_start(self) -> None:
        self._group = group(self.options.group)
        self._group.join(self)

    def _on_stop(self, timeout: float | None) -> None:
        if self._group is not None:
            self._group.leave(self)

    def _on_resign(self, role: Role) -> None:
        assert self._group is not None
        self._group.hand_over(role, self)

    def _on_transfer(self, role: Role, to: str) -> None:
        assert self._group is not None
        if not self._group.contends(role, to):
            raise TransferRefused(f"memory://{self.options.group}: member {to!r} is not in the group or does not "
                                  f"contend for {role!r}")
        self._group.hand_over(role, self, to=to)

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        assert self._group is not None
        for role in removed:
            self._group.hand_over(role, self)
        self._group.show(self)
        self._group.assign_free()

    def _on_drain(self) -> bool:
        assert self._group is not None
        for role, owner in self._group.leaders().items():
            if owner == self.member:
                self._group.hand_over(role, self)  # the successor, if any, has acquired when this returns
        return True

    def _successors(self, roles: frozenset[Role]) -> dict[Role, str | None]:
        group = self._group
        assert group is not None
        with group.lock:
            seen: dict[Role, str | None] = {}
            for role in roles:
                owner = group.owner.get(role)
                if owner is not None and owner != self.member:
                    seen[role] = owner
                elif not any(role in m.wanted() for m in group.members.values() if m is not self):
                    seen[role] = None
            return seen


def create(options: MemoryOptions, member: str, roles: tuple[Role, ...]) -> MemoryElector:
    return MemoryElector(options, member, roles)


def leaders(group_name: str) -> dict[Role, str]:
    """Who leads each role in a group of this process (what `elect watch memory://G` shows)."""
    with _GROUPS_LOCK:
        found = _GROUPS.get(group_name)
    return found.leaders() if found else {}


PLUGIN = Plugin(
    scheme="memory",
    summary="in-process group, for tests and examples",
    options=MemoryOptions,
    factory="elect.memory:create",
    url_parts={"hosts": "group"},
)
