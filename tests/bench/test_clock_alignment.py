"""Members on other kernels: their monotonic clocks are unrelated to the harness's, and their lines are carried
onto its clock (members.ClockAlignment). Here each member gets a monotonic clock of its own in a time namespace
(`unshare --time`), hours apart, and a trial still measures a failover of about one detection budget."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from elect_bench.faults import fault
from elect_bench.members import ClockAlignment
from elect_bench.methods import METHODS
from elect_bench.placement import LocalPlacement
from elect_bench.trial import Environment, TrialSpec, run_trial

OFFSETS = {"m0": 3600, "m1": 7200, "m2": 10800}  # seconds each member's monotonic clock is ahead of ours


def test_the_smallest_delivery_sample_is_the_offset() -> None:
    clock = ClockAlignment()
    first = clock.align({"mono": 1000.0, "event": "acquired"}, received=10.03)
    assert first["mono"] == pytest.approx(10.03)  # the only sample: late by this line's delivery
    later = clock.align({"mono": 1001.0, "event": "fenced", "until": 1000.5}, received=11.0)
    assert clock.offset == pytest.approx(-990.0) and clock.bound == pytest.approx(0.03)
    assert (later["mono"], later["until"]) == (pytest.approx(11.0), pytest.approx(10.5))
    clock.align({"mono": 1002.0, "event": "acquired"}, received=12.5)  # a slow delivery changes nothing
    assert clock.offset == pytest.approx(-990.0)


class OtherKernels(LocalPlacement):
    """Local members, each with a monotonic clock of its own (a time namespace), as if on other hosts."""

    separate_clocks = True

    def prefix(self, member: str) -> list[str]:
        return ["unshare", "--time", "--monotonic", str(OFFSETS[member])]


def test_a_trial_with_members_on_unrelated_clocks(tmp_path: Path) -> None:
    probe = subprocess.run(["unshare", "--time", "--monotonic", "3600", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.fail("no time namespaces here (Linux 5.6+ and util-linux unshare --time needed): "
                    f"{probe.stderr.decode().strip()}")
    spec = TrialSpec(METHODS["raft"], fault("kill"), budget=1.0, members=3, roles=4)
    result = run_trial(spec, Environment(None, tmp_path, OtherKernels()), 0, "clocks")
    assert result.ok, result.error
    assert result.failover and result.unrecovered == 0
    assert max(result.failover) < 3 * spec.budget  # hours apart unaligned; about one budget aligned
    assert result.violations == []
