"""The Clock rates table of a run under skewed clocks (elect_bench.drift): ratios, the first overlap, and the
violations inside the stated bound, from trials made up here."""

from __future__ import annotations

from dataclasses import dataclass, field

from elect_bench import drift
from elect_bench.faults import fault
from elect_bench.judging.checker import Violation
from elect_bench.methods import METHODS
from elect_bench.suite import Cell
from elect_bench.trial import TrialResult


@dataclass
class Run:
    cells: list[Cell] = field(default_factory=list)


def cell(method: str, name: str, overlap: float, violations: int, max_drift: float | None) -> Cell:
    found = [Violation("overlap", "0", 1.0, "a, b both led")] * violations
    trial = TrialResult(method, name, 0, ok=True, overlap=overlap, violations=found, max_drift=max_drift)
    return Cell(METHODS[method], fault(name), 3, [trial])


def test_ratios_first_overlap_and_violations_inside_the_bound() -> None:
    run = Run([cell("etcd", "pause@leader:0.8", 0.0, 0, 1 / 3),  # ratio 1.25: inside 1.33, no overlap
               cell("etcd", "pause@leader:0.5", 0.5, 2, 1 / 3),  # ratio 2: outside, overlapped
               cell("etcd", "pause@leader:0.7", 0.1, 1, 1 / 3),  # ratio 1.43: outside, overlapped first
               cell("etcd", "pause@others:1.25", 0.0, 0, 1 / 3),
               cell("raft", "pause@others:1.05", 0.2, 1, 0.1),  # inside raft's 1.1: a violation inside
               cell("etcd", "kill", 0.0, 0, 1 / 3)])  # not skewed: not in the table
    found = {(f.method, f.direction): f for f in drift.findings(run)}  # type: ignore[arg-type]
    slow = found["etcd", "leader's clock slow"]
    assert slow.ratios == (1.25, 1 / 0.7, 2.0) and slow.first_overlap == 1 / 0.7
    assert slow.stated == 1 + 1 / 3 and slow.inside_violations == 0 and slow.trials == 3
    fast = found["etcd", "others' clocks fast"]
    assert fast.ratios == (1.25,) and fast.first_overlap is None
    assert found["raft", "others' clocks fast"].inside_violations == 1
    text = "\n".join(drift.table(run))  # type: ignore[arg-type]
    assert "| etcd | leader's clock slow | 1.33 | 1.25, 1.43, 2 | 1.43 | 0 | 3 |" in text


def test_a_run_without_skewed_clocks_has_no_table() -> None:
    assert drift.table(Run([cell("etcd", "kill", 0.0, 0, 1 / 3)])) == []  # type: ignore[arg-type]
