"""Observers: who holds each role, read from the infrastructure itself (`elect watch URL`).

Where an implementation keeps its state in a store (etcd keys, ZooKeeper nodes, a Kafka consumer
group's assignment) an observer can read it without joining the group. The store's view can trail a
member's own belief by a renewal or a rebalance; members' event lines remain the exact record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Claim:
    """`member` holds `role` per the store, under `token` (None where the store keeps no token)."""

    role: str
    member: str
    token: int | None = None


class Observer(Protocol):
    def claims(self, timeout: float) -> list[Claim]:
        """Every role claim in the store now; raises InfrastructureUnavailable when it cannot be read."""
        ...

    def close(self) -> None: ...
