"""What flows in and out of the lease core: observations of the store and outcomes of its actions (what
`LeaseCore.step` takes), and the store actions it asks for (its `Ready.messages`).

Plain frozen records, no I/O, so the core can be driven by a real store or by a test on virtual time.
Revisions (`rev`) order observations of one key: a driver gives every observation the store's own
order (etcd revision; ZooKeeper zxid, doubled so that "gone after zxid z" sorts as 2z+1 between the
node's creation and any later node), and the core ignores one older than what it already knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elect.roles import Role


@dataclass(frozen=True)
class Holder:
    """Who holds a role's key: the holder's session (one per process incarnation), member id, and token."""

    session: str
    member: str
    token: int


@dataclass(frozen=True)
class MemberRecord:
    """What a member publishes in the membership directory: its id, the roles it contends for now, the
    roles it is handing to a named member (`transfer`), as (role, member) pairs, and its capacity (`weight`,
    `max_roles`: what the others need to compute its fair share, `elect.shares`).

    `roles` None means unknown (treated as "contends for everything"). `silence`: how long this member may be
    silent before the others take what it holds, when longer than their own ttl: a holder outside elect (a
    client-go candidate holding a Kubernetes Lease) is timed by the duration its own record declares.
    """

    member: str
    roles: frozenset[Role] | None
    hints: frozenset[tuple[Role, str]] = frozenset()
    weight: float = 1.0
    max_roles: int | None = None
    silence: float = 0.0

    def wants(self, role: Role) -> bool:
        """Whether this member contends for `role` (an unknown list counts as every role)."""
        return self.roles is None or role in self.roles

    def hinted(self, role: Role) -> str | None:
        """The member this one hands `role` to, if any."""
        return next((to for r, to in self.hints if r == role), None)


# ---------------------------------------------------------------------------------------------- observations
@dataclass(frozen=True)
class RoleSeen:
    """The key of `role` is held by `holder` (None: absent) as of revision `rev`."""

    role: Role
    holder: Holder | None
    rev: int


@dataclass(frozen=True)
class MemberSeen:
    """The membership entry of `session` is `record` (None: absent); `version` changes on every renewal.

    in_order: reported by the store's ordered change stream (a watch), which reports every version of the entry
    before its deletion: an absence so reported follows the last version this member saw, so the holder's silence
    runs on from that version. An absence found by a read or a listing may follow renewals that were missed, and is
    timed anew."""

    session: str
    record: MemberRecord | None
    version: int
    rev: int
    in_order: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Every role key and membership entry under the prefix at revision `rev` (absent if not listed)."""

    roles: Mapping[Role, Holder]
    members: Mapping[str, tuple[MemberRecord, int]]
    rev: int


@dataclass(frozen=True)
class LeaseSeen:
    """The store's own lease (etcd) cannot expire before monotonic time `until`."""

    until: float


Observation = RoleSeen | MemberSeen | Snapshot | LeaseSeen


# ---------------------------------------------------------------------------------------------- store actions
@dataclass(frozen=True)
class Renew:
    """Renew this member's claim to what it holds: touch its membership entry (proof of liveness to the
    others) and, where the store can, read every key at once; its success dates the leaderships' deadline."""


@dataclass(frozen=True)
class KeepAlive:
    """Renew the store's backstop lease (etcd)."""


@dataclass(frozen=True)
class Create:
    """Create the role's key for this session if it is absent (compare-and-swap)."""

    role: Role


@dataclass(frozen=True)
class Expire:
    """Delete `holder`'s key of `role` if it and the holder's membership `version` are unchanged."""

    role: Role
    holder: Holder
    version: int


@dataclass(frozen=True)
class Take:
    """Make this session the holder of `role` in place of `holder`, if `holder`'s key and its membership `version`
    are unchanged: an `Expire` and a `Create` in one conditional write. A takeover of a dead member's roles then
    costs the store one write per role, and the watchers one change, instead of two of each."""

    role: Role
    holder: Holder
    version: int


@dataclass(frozen=True)
class Delete:
    """Delete this session's key of `role` if it is still the one created with `token`."""

    role: Role
    token: int


@dataclass(frozen=True)
class Publish:
    """Write this member's membership record (the roles it contends for now)."""

    record: MemberRecord


StoreAction = Renew | KeepAlive | Create | Expire | Take | Delete | Publish

RoleAction = Create | Expire | Take | Delete
"""The actions on role keys, which a store takes in batches (`ROLE_ACTIONS` for `isinstance`)."""
ROLE_ACTIONS = (Create, Expire, Take, Delete)


# ---------------------------------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class Done:
    """`action`, sent at monotonic time `sent`, finished (`ok`) or failed with an unknown outcome."""

    action: StoreAction
    ok: bool
    sent: float


LeaseInput = Observation | Done
"""What `LeaseCore.step` takes. Its leadership changes are elect.core's; after a `Revoke` the driver
reports `released(role)` once the role's callbacks are done."""
