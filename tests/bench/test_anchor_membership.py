"""The Raft anchors' own membership change driven by the harness (elect_bench.membership.AnchorCluster): a new
member started with `--join` is added by `admin change-peers` (sofa-jraft's CliService.changePeers, Ratis'
setConfiguration), the old one stopped and removed, and every role is led by the members that remain. (Overlap is
measured, not asserted: both anchors' graceful stop can leave the old leader believing for some milliseconds after
its successor, as docs/results/anchors shows for their `stop`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from elect_bench.membership import cluster

pytestmark = pytest.mark.infra


@pytest.mark.parametrize("method", ["jraft", "ratis"])
def test_an_anchor_member_is_replaced_through_the_anchors_own_membership_change(method: str, tmp_path: Path) -> None:
    with cluster(tmp_path, method) as c:
        c.first()
        before = c.settled("abc")
        c.join("d", "b", replaces="a")
        c.settled("abcd")
        c.leave("a")
        after = c.settled("bcd")
        assert set(after.values()) <= set("bcd") and c.procs["a"].returncode == 0
        if method == "ratis":  # Ratis' leaders yield to a caught-up peer of higher priority: d gets a's roles back
            assert sorted(r for r, m in after.items() if m == "d") == sorted(r for r, m in before.items() if m == "a")
