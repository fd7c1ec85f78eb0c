"""How roles and records are written into a store: key names and small JSON values, both ways.

Shared by the etcd and ZooKeeper stores so both hold the same layout (Kubernetes names its Leases after the roles
too: cas_lease.kubernetes):
`<prefix>/roles/<role>` (value: holder member and session) and `<prefix>/members/<session>`
(value: member id, the roles it contends for, those it is transferring to a named member, and its weight and
max_roles where not the defaults: a record of an older version has neither and reads as weight 1, no cap). A role name
becomes one path segment: numbered roles as digits, names percent-encoded, and a leading `~` marks a name
that would otherwise read as a number or as `.`/`..`, so every role maps to exactly one key and back.
"""

from __future__ import annotations

import functools
import json
import math
from urllib.parse import quote, unquote

from cas_lease.model import Holder, MemberRecord
from elect.roles import Role


def role_name(role: Role) -> str:
    """The key segment of `role`."""
    if isinstance(role, int):
        return str(role)
    name = quote(role, safe="")
    if name.isdigit() or name in (".", "..") or name.startswith("~"):
        return "~" + name
    return name


def role_of(name: str) -> Role:
    """Inverse of `role_name`."""
    if name.startswith("~"):
        return unquote(name[1:])
    if name.isdigit():
        return int(name)
    return unquote(name)


def encode_holder(member: str, session: str, since: float | None = None) -> bytes:
    """A role key's value. `since`: the wall time the holder took the role, for stores that keep no write time of
    their own (etcd); `elect watch` shows how long the holder has led from it."""
    data: dict[str, object] = {"member": member, "session": session}
    if since is not None:
        data["since"] = round(since, 3)
    return json.dumps(data, separators=(",", ":")).encode()


def holder_since(raw: bytes) -> float | None:
    """The wall time a role key's value says its holder took the role (None: not written, or not ours)."""
    try:
        since = json.loads(raw).get("since")
    except (ValueError, TypeError, AttributeError):
        return None
    return float(since) if isinstance(since, int | float) else None


def decode_holder(raw: bytes, token: int, fallback_session: str = "?") -> Holder:
    """The holder a role key names; a value this code did not write still yields a (foreign) holder."""
    try:
        data = json.loads(raw)
        return Holder(session=str(data["session"]), member=str(data["member"]), token=token)
    except (ValueError, TypeError, KeyError):
        return Holder(session=fallback_session, member="?", token=token)


def _order(role: Role) -> tuple[bool, str]:
    return isinstance(role, str), str(role)


def encode_record(record: MemberRecord) -> bytes:
    roles = None if record.roles is None else sorted(record.roles, key=_order)
    data: dict[str, object] = {"member": record.member, "roles": roles}
    if record.hints:
        data["hints"] = [[role, to] for role, to in sorted(record.hints, key=lambda h: (_order(h[0]), h[1]))]
    if record.weight != 1:
        data["weight"] = record.weight
    if record.max_roles is not None:
        data["max_roles"] = record.max_roles
    return json.dumps(data, separators=(",", ":")).encode()


@functools.lru_cache(maxsize=256)
def decode_record(raw: bytes) -> MemberRecord:
    """A membership record; anything unreadable counts as a member contending for every role. Kept for the records
    seen last: every renewal of every member brings its record again, unchanged (6,000 roles long at 6,000 roles),
    and a record is immutable."""
    try:
        data = json.loads(raw)
        roles = data.get("roles")
        parsed = None if roles is None else frozenset(r for r in roles if isinstance(r, (str, int)))
        hints = frozenset((h[0], h[1]) for h in data.get("hints", ()) if isinstance(h, list) and len(h) == 2
                          and isinstance(h[0], (str, int)) and isinstance(h[1], str))
        cap = data.get("max_roles")
        return MemberRecord(member=str(data.get("member", "?")), roles=parsed, hints=hints,
                            weight=_weight(data.get("weight", 1.0)),
                            max_roles=cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1 else None)
    except (ValueError, TypeError, AttributeError):
        return MemberRecord(member="?", roles=None)


def _weight(value: object) -> float:
    """A published weight; anything but a positive finite number counts as the default, 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 1.0
    try:
        weight = float(value)
    except OverflowError:  # an integer too large for a float
        return 1.0
    return weight if math.isfinite(weight) and weight > 0 else 1.0
