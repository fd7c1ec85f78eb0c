"""Fixtures for the lease tests: members as `elect member` processes, always stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from lease_helpers import Spawn

from elect.roles import Role
from elect_bench.members import MemberProcess


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """`spawn(url, member_id, roles, *extra_args)` starts a member; every one is stopped at teardown."""
    started: list[MemberProcess] = []

    def start(url: str, member_id: str, roles: Sequence[Role], *extra: str) -> MemberProcess:
        member = MemberProcess(url, member_id, roles, log_dir=tmp_path, extra_args=extra)
        started.append(member)
        member.start()
        return member

    yield start
    for member in started:
        try:
            member.stop(timeout=10)
        except Exception:
            member.kill()

