"""`elect bench neli` in small: NELI members under a crash and a freeze (full mode with a T of its own) on the
local broker, and bare consumers' rebalance, through the suite and the report like any scenario."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from elect_bench import neli_depth, report
from elect_cluster.netns import leftovers

pytestmark = pytest.mark.infra


def test_neli_handovers_and_the_brokers_own_rebalance(tmp_path: Path) -> None:
    chosen = neli_depth.NeliScenario.from_mapping({
        "kind": "neli", "name": "neli-smoke", "members": 2, "roles": 4, "trials": 1, "hold": 2.5,
        "cells": ["kafka-fast kill", "kafka-full pause heartbeat_timeout=1.5"], "rebalance": ["kill"],
        "protocols": ["classic", "consumer"]})
    result = neli_depth.run(chosen, tmp_path / "work", lambda *_: None, command="pytest")
    errors = [e for s in result.summaries() for e in s["errors"]]
    assert result.ok, errors
    rows = {(s["method"], s["fault"]): s for s in result.summaries()}
    assert list(rows) == [("kafka-fast", "kill"), ("kafka-full heartbeat_timeout=1.5", "pause"),
                          ("raw consumers", "kill"), ("raw consumers (KIP-848)", "kill")]
    crash = rows["kafka-fast", "kill"]
    assert crash["failover_n"] >= 1 and crash["survivor_fences"] == 0 and crash["violations"] == 0
    assert crash["overlap_max"] == 0.0  # fast mode is exclusive
    freeze = rows["kafka-full heartbeat_timeout=1.5", "pause"]
    assert freeze["failover_n"] >= 1 and not math.isnan(freeze["overlap_p50"])  # measured per role it led
    for protocol in ("raw consumers", "raw consumers (KIP-848)"):
        raw = rows[protocol, "kill"]
        assert raw["ok"] == 1 and 0 < raw["failover_p50"] < 60
    data, md = report.write(result, tmp_path / "out", [])
    text = md.read_text()
    assert data.exists() and "| kafka-full heartbeat_timeout=1.5 | pause | 1/1 |" in text
    assert "| raw consumers | kill | 1/1 |" in text
    # where the time went, as the members timed it (the survivors of each cell took partitions over)
    assert "## Where the time goes" in text and "| kafka-fast | kill | " in text.split("## Where the time goes")[1]
    assert not leftovers(mine=True)  # ours are gone (another run on the machine may hold its own)
