from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from elect_bench.members import MemberProcess
from elect_cluster.local import LocalCluster

from implementations import Group, Implementation, _Deferred, params


@pytest.fixture(params=params())
def impl(request: pytest.FixtureRequest) -> Implementation:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def group(impl: Implementation, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Group]:
    # the session's real infrastructure, started only when an implementation needs it
    if impl.needs_infra:
        infra = request.getfixturevalue(impl.infra)
        g = impl.make_group(tmp_path, infra.endpoints if isinstance(infra, LocalCluster) else infra)
    else:
        g = impl.make_group(tmp_path)
    try:
        yield g
    finally:
        g.close()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:  # what the members said is most of what a failure tells
            for m in g.members:
                proc = m.proc if isinstance(m, _Deferred) else m
                if isinstance(proc, MemberProcess):
                    print(f"--- {proc.member_id}'s stderr (last 60 lines):\n{proc.stderr_tail(60)}")
                lines = m.log.lines[-60:]  # and its event lines: when it led what, revoked or fenced
                print(f"--- {m.member_id}'s event lines (last {len(lines)}):")
                for line in lines:
                    print("  ", " ".join(f"{k}={line[k]}" for k in ("mono", "event", "role", "token") if k in line))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                              pytest.TestReport]:
    """Keep the call phase's report on the test item, for the `group` fixture's teardown."""
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
