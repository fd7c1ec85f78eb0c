"""`memory://GROUP`: an in-process elector for tests and examples.

Members that name the same group in one process share a `_Group`, which hands each role to exactly
one contending member (the one leading fewest roles, so roles spread), keeps a token counter per role,
and on an orderly handover waits for the old leader's `Revoked` callbacks before the successor gets
`Acquired` — the whole contract, with no infrastructure. The group tells every member each change of a
role's owner, so `observe` sees the role without a leader during a handover and the successor after it.

Weights and caps: a free role goes to the contender below its `max_roles` leading fewest roles per `weight`.
Nothing moves when a member joins, unless some member of the group has a weight other than 1 or a cap: then a
join, a leave or a change of roles also hands roles over (orderly) from members above their fair share
(`elect.shares`, the rule the lease electors apply) to members below theirs, so the steady distribution follows
the weights as it does on etcd and ZooKeeper. An unweighted group keeps first-come assignment, which tests and
examples rely on.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.errors import ConfigError, TransferRefused
from elect.registry import Plugin
from elect.roles import Role
from elect.shares import Capacity, check_capacity, shares


@dataclass(frozen=True)
class MemoryOptions:
    """group: the name members meet under. revoke_timeout: longest wait for blocking Revoked callbacks.
    weight: this member's capacity relative to the others' (> 0). max_roles: a soft cap on the roles it leads
    (see the module)."""

    group: str = "default"
    revoke_timeout: float = 30.0
    weight: float = 1.0
    max_roles: int | None = None

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("cannot be empty", parameter="group")
        if self.revoke_timeout <= 0:
            raise ConfigError("must be > 0", parameter="revoke_timeout")
        check_capacity(self.weight, self.max_roles)


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
        self.rebalance()

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
            load = self.load()

            def rank(m: MemoryElector) -> tuple[bool, float]:  # below its cap first, then fewest roles per weight
                n, capacity = load.get(m.member, 0), m.capacity
                return capacity.max_roles is not None and n >= capacity.max_roles, n / capacity.weight

            chosen = min(preferred, key=rank)  # min() keeps join order on ties
            token = self.tokens.get(role, 0) + 1
            self.tokens[role] = token
            self.owner[role] = chosen.member
            chosen._acquire(role, token)
            self.tell(role, chosen.member)

    def load(self) -> dict[str, int]:
        """Roles led per member."""
        with self.lock:
            load = dict.fromkeys(self.members, 0)
            for owner in self.owner.values():
                load[owner] = load.get(owner, 0) + 1
            return load

    def rebalance(self) -> None:
        """In a weighted or capped group, hand roles from members above their fair share to members below theirs
        that contend for them, one orderly handover at a time, until no such move is left. Each move lowers the
        total excess over the shares by one, so this ends; the bound is only a guard against members joining and
        leaving meanwhile."""
        for _ in range(1 + len(self.owner) * max(1, len(self.members))):
            with self.lock:
                move = self._move()
            if move is None:
                return
            role, leader, to = move
            self.hand_over(role, leader, to=to)

    def _move(self) -> tuple[Role, MemoryElector, str] | None:
        members = [m for m in self.members.values() if m.wanted()]
        if not any(m.capacity != Capacity() for m in members):
            return None
        universe = {r for m in members for r in m.wanted()}
        share = shares(len(universe), {m.member: m.capacity for m in members})
        load = self.load()
        for m in members:
            if load[m.member] <= share[m.member]:
                continue
            led = sorted((r for r, owner in self.owner.items() if owner == m.member and r not in m.handing_over),
                         key=str)
            for role in led:
                takers = [t for t in members if t is not m and load[t.member] < share[t.member] and
                          role in t.wanted() and role not in t.handing_over]
                if takers:
                    to = max(takers, key=lambda t: share[t.member] - load[t.member])  # the furthest below
                    return role, m, to.member
        return None

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
        self.capacity = Capacity(options.weight, options.max_roles)
        self._group: _Group | None = None

    @property
    def characteristics(self) -> Characteristics:
        return Characteristics(exclusive=True, max_overlap=0.0, max_failover=0.0, graceful_handover=True,
                               token="per-role counter in the group", observes_leaders=True, transfers=True,
                               weights=True, max_drift=math.inf)  # one process, one clock

    def wanted(self) -> frozenset[Role]:
        return self.roles if self.running else frozenset()  # a draining member contends for nothing

    def _on_start(self) -> None:
        self._group = group(self.options.group)
        self._group.join(self)
        self._group.rebalance()

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
        self._group.rebalance()

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
