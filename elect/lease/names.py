"""How roles and records are written into a store: key names and small JSON values, both ways.

Shared by the etcd and ZooKeeper drivers so both stores hold the same layout:
`<prefix>/roles/<role>` (value: holder member and session) and `<prefix>/members/<session>`
(value: member id, the roles it contends for, and those it is transferring to a named member). A role name
becomes one path segment: numbered roles as digits, names percent-encoded, and a leading `~` marks a name
that would otherwise read as a number or as `.`/`..`, so every role maps to exactly one key and back.
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

from elect.lease.model import Holder, MemberRecord
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


def encode_holder(member: str, session: str) -> bytes:
    return json.dumps({"member": member, "session": session}, separators=(",", ":")).encode()


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
    return json.dumps(data, separators=(",", ":")).encode()


def decode_record(raw: bytes) -> MemberRecord:
    """A membership record; anything unreadable counts as a member contending for every role."""
    try:
        data = json.loads(raw)
        roles = data.get("roles")
        parsed = None if roles is None else frozenset(r for r in roles if isinstance(r, (str, int)))
        hints = frozenset((h[0], h[1]) for h in data.get("hints", ()) if isinstance(h, list) and len(h) == 2
                          and isinstance(h[0], (str, int)) and isinstance(h[1], str))
        return MemberRecord(member=str(data.get("member", "?")), roles=parsed, hints=hints)
    except (ValueError, TypeError, AttributeError):
        return MemberRecord(member="?", roles=None)
