"""Roles and how they map onto partitions.

A role is whatever the application leads: a name ("prices.EURUSD") or a number. Partition-based
electors (NELI, Raft) elect a leader per partition and derive roles from it, so every member must map
a role to the same partition: numbers by `j mod M` (the NELI paper's rule), names by a stable hash
(Python's `hash()` is salted per process, so it cannot be used).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

Role = str | int


def partition_of(role: Role, partitions: int) -> int:
    """The partition in `range(partitions)` that carries `role`, identical in every process."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    if isinstance(role, bool):
        raise TypeError("a role is a str or an int, not a bool")
    if isinstance(role, int):
        return role % partitions
    digest = hashlib.blake2b(role.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def roles_of_partition(roles: Iterable[Role], partition: int, partitions: int) -> list[Role]:
    """The roles among `roles` that ride on `partition`, in their given order."""
    return [r for r in roles if partition_of(r, partitions) == partition]


def parse_role(text: str) -> Role:
    """A role as written on a command line or in YAML: digits are a numbered role, anything else a name."""
    text = text.strip()
    if not text:
        raise ValueError("a role name cannot be empty")
    if text.isascii() and text.isdigit():  # '²'.isdigit() is true too, but it names a role, not a number
        return int(text)
    return text


def normalize_roles(roles: Iterable[Role] | Role | None) -> tuple[Role, ...]:
    """Validate and de-duplicate roles, keeping their order; a lone role is accepted as a one-role list."""
    if roles is None:
        return ()
    if isinstance(roles, (str, int)):
        roles = [roles]
    seen: dict[Role, None] = {}
    for role in roles:
        if isinstance(role, bool) or not isinstance(role, (str, int)):
            raise TypeError(f"a role is a str or an int, got {role!r}")
        if isinstance(role, str) and not role:
            raise ValueError("a role name cannot be empty")
        if isinstance(role, int) and role < 0:
            raise ValueError(f"a numbered role cannot be negative, got {role}")
        seen.setdefault(role, None)
    return tuple(seen)
