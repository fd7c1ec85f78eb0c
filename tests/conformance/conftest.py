from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elect_cluster.local import LocalCluster

from implementations import Group, Implementation, params


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
