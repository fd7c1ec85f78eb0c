"""The implementations the conformance suite runs against, and how each starts a group of members.

Each implementation adds itself to IMPLEMENTATIONS with a `Group` factory: members either live in this
process (memory://) or run as `elect member` processes against real infrastructure. Tests only use
the `Member` interface of elect.cluster.members, so one suite checks them all.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import elect
from elect.cluster.members import InProcessMember, Member
from elect.events import Event, Revoked
from elect.roles import Role

_counter = itertools.count()


class Group:
    """A fresh election group for one test; `close()` stops every member it started."""

    def __init__(self) -> None:
        self.members: list[Member] = []

    def member(self, member_id: str, roles: Sequence[Role], *, revoke_delay: float = 0.0) -> Member:
        raise NotImplementedError

    def start(self, member_id: str, roles: Sequence[Role], *, revoke_delay: float = 0.0) -> Member:
        m = self.member(member_id, roles, revoke_delay=revoke_delay)
        self.members.append(m)
        m.start()
        return m

    def close(self) -> None:
        for m in self.members:
            try:
                m.kill() if not m.alive else m.stop(timeout=20)
            except Exception:
                m.kill()


class MemoryGroup(Group):
    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.url = f"memory://conformance-{next(_counter)}-{time.monotonic_ns()}"

    def member(self, member_id: str, roles: Sequence[Role], *, revoke_delay: float = 0.0) -> Member:
        m = InProcessMember(elect.connect(self.url, roles, member=member_id))
        if revoke_delay:
            def hold(event: Event) -> None:
                if isinstance(event, Revoked):
                    time.sleep(revoke_delay)  # the application finishing in-flight work
            m.elector.subscribe(hold)
        return m


@dataclass(frozen=True)
class Implementation:
    """name: test id. exclusive: at most one leader per role. graceful: Revoked callbacks hold the
    successor back. timeout: generous bound for any one election or handover to show up."""

    name: str
    make_group: Callable[[Path], Group]
    exclusive: bool = True
    graceful: bool = True
    timeout: float = 30.0


IMPLEMENTATIONS: list[Implementation] = [
    Implementation("memory", MemoryGroup, timeout=10.0),
]


def params() -> list[object]:
    return [pytest.param(impl, id=impl.name) for impl in IMPLEMENTATIONS]
