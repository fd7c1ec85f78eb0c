"""`settle`: a cold start is steady only once every member has started, not only once every role is led."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import cast

from elect_bench.members import MemberProcess, settle


class _Log:
    last = 0.0  # no event for long: quiet from the start


class _Member:
    """What `settle` reads of a member: its last event and whether it reported its start."""

    def __init__(self, started: bool) -> None:
        self.log = _Log()
        self._started = threading.Event()
        if started:
            self._started.set()

    def started(self) -> bool:
        return self._started.is_set()


def _procs(members: list[_Member]) -> Sequence[MemberProcess]:
    return cast(Sequence[MemberProcess], members)


def test_a_quiet_group_is_settled_at_once() -> None:
    assert settle(_procs([_Member(True), _Member(True)]), quiet=0.1, limit=5.0, all_started=True)


def test_a_cold_start_waits_for_the_member_that_starts_last() -> None:
    late = _Member(False)
    timer = threading.Timer(0.3, late._started.set)
    timer.start()
    try:
        assert settle(_procs([_Member(True), late]), quiet=0.1, limit=5.0, all_started=True)
        assert late.started()  # it returned only after the late member reported its start
    finally:
        timer.cancel()


def test_a_member_that_never_starts_ends_the_wait_at_the_limit() -> None:
    assert not settle(_procs([_Member(True), _Member(False)]), quiet=0.05, limit=0.3, all_started=True)
    assert settle(_procs([_Member(True), _Member(False)]), quiet=0.05, limit=0.3)  # after a fault: not asked
