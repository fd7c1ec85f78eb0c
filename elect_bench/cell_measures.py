"""What a cell of a run (one method under one fault, its trials) reports: each measure declared once, with its name in
`results.json`, how it is computed from the cell's trials, and how a report's column shows it.

A new measure is a `TrialResult` field (what one trial measured, `elect_bench.trial`) and one `Measure` here; a table
shows it by naming its key in one of the column sets (`elect_bench.report`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from elect_bench.faults import Fault, LifecycleFault
from elect_bench.judging.measures import Summary, mean
from elect_bench.trial import TrialResult


@dataclass(frozen=True)
class Of:
    """What a measure is computed from: the cell's method (its name), fault, group size and trials, those that ran
    (`ok`), the rollouts they measured (lifecycle faults only), and the run's detection budget."""

    method: str
    fault: Fault
    members: int
    trials: list[TrialResult]
    ok: list[TrialResult]
    rolled: list[dict[str, Any]]
    budget: float


@dataclass(frozen=True)
class Measure:
    """One number (or word) of a cell: `key` in results.json, `title` and `fmt` of its column (`fmt` may name other
    keys of the summary: "{ok}/{trials}")."""

    key: str
    title: str
    fmt: str
    of: Callable[[Of], Any]


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def false_failovers(trials: Sequence[TrialResult]) -> float:
    """Leaderships that ended at rest (no fault), per member-hour at rest; NaN without a window at rest."""
    hours = sum(t.rest * t.members for t in trials) / 3600
    return sum(t.rest_changes for t in trials) / hours if hours > 0 else math.nan


def _failover(o: Of) -> Summary:
    return Summary.of([x for t in o.ok for x in t.failover])


def _ratio(failover: Summary, budget: float) -> float:
    return failover.p99 / budget if failover.n else math.nan


def _rebalance(o: Of) -> Summary:
    return Summary.of([t.rebalance for t in o.ok if t.rebalance is not None])


def _rollout(fn: Callable[[list[dict[str, Any]]], Any]) -> Callable[[Of], Any]:
    """A lifecycle fault's measure over the trials' rollouts (`elect_bench.rollout.Measured`); NaN for other faults."""
    return lambda o: fn(o.rolled) if isinstance(o.fault, LifecycleFault) else math.nan


def _to_balance(rolled: list[dict[str, Any]]) -> Summary:
    return Summary.of([r["to_balance"] for r in rolled if r["to_balance"] is not None])


MEASURES: tuple[Measure, ...] = (
    Measure("method", "method", "{}", lambda o: o.method),
    Measure("fault", "fault", "{}", lambda o: o.fault.name),
    Measure("members", "members", "{}", lambda o: o.members),
    Measure("trials", "trials", "{}", lambda o: len(o.trials)),
    Measure("ok", "trials", "{ok}/{trials}", lambda o: len(o.ok)),
    Measure("failover_n", "failovers", "{}", lambda o: _failover(o).n),
    Measure("failover_p50", "failover p50", "{:.2f} s", lambda o: _failover(o).p50),
    Measure("failover_p99", "p99", "{:.2f} s", lambda o: _failover(o).p99),
    Measure("failover_max", "max", "{:.2f} s", lambda o: _failover(o).max),
    Measure("failover_p99_ratio", "p99/budget", "{:.2f}", lambda o: _ratio(_failover(o), o.budget)),
    Measure("unrecovered", "not re-led", "{}", lambda o: sum(t.unrecovered for t in o.ok)),
    Measure("disrupted", "roles lost", "{}",
            lambda o: sum(t.disrupted for t in o.ok) if o.fault.measured_as_disruption else math.nan),
    Measure("gap_p50", "gap p50", "{:.2f} s", lambda o: Summary.of([t.gap for t in o.ok]).p50),
    Measure("gap_max", "gap max", "{:.2f} s", lambda o: Summary.of([t.gap for t in o.ok]).max),
    Measure("overlap_total", "overlap", "{:.3f} s", lambda o: sum(t.overlap for t in o.ok)),
    Measure("overlap_max", "overlap max", "{:.3f} s", lambda o: max((t.max_overlap for t in o.ok), default=0.0)),
    Measure("steady_balanced", "balanced", "{:.0%}", lambda o: _share([t.steady_balanced for t in o.ok])),
    Measure("steady_max_led", "most led", "{}", lambda o: max((t.steady_max_led for t in o.ok), default=0)),
    Measure("after_balanced", "balanced after", "{:.0%}",
            lambda o: _share([t.after_balanced for t in o.ok]) if o.fault.injects else math.nan),
    Measure("rebalance_p50", "to balance p50", "{:.2f} s", lambda o: _rebalance(o).p50),
    Measure("rebalance_max", "to balance max", "{:.2f} s", lambda o: _rebalance(o).max),
    Measure("unbalanced", "never balanced", "{}",
            lambda o: (sum(1 for t in o.ok if t.rebalance is None)
                       if o.fault.kills_process and o.fault.healed_as else math.nan)),
    Measure("violations", "violations", "{}", lambda o: sum(len(t.violations) for t in o.ok)),
    Measure("stale_tokens", "stale tokens", "{}",
            lambda o: sum(1 for t in o.ok for v in t.violations if v.kind == "token")),
    Measure("startup_p50", "startup p50", "{:.2f} s", lambda o: Summary.of([t.startup for t in o.ok]).p50),
    Measure("startup_max", "startup max", "{:.2f} s", lambda o: Summary.of([t.startup for t in o.ok]).max),
    Measure("rest_seconds", "at rest", "{:.0f} s", lambda o: sum(t.rest for t in o.ok)),
    Measure("rest_changes", "changes at rest", "{}", lambda o: sum(t.rest_changes for t in o.ok)),
    Measure("false_per_member_hour", "false/member-h", "{:.2f}",
            lambda o: false_failovers([t for t in o.ok if t.rest > 0])),
    Measure("rest_cpu_mean", "cpu at rest", "{:.1%}", lambda o: mean([c for t in o.ok for c in t.rest_cpu.values()])),
    Measure("rss_mb_max", "rss max", "{:.0f} MB",
            lambda o: max((m for t in o.ok for m in t.rss_mb.values()), default=math.nan)),
    Measure("cpu_mean", "cpu/member", "{:.1%}", lambda o: mean([c for t in o.ok for c in t.cpu.values()])),
    Measure("rss_mb_mean", "rss", "{:.0f} MB", lambda o: mean([m for t in o.ok for m in t.rss_mb.values()])),
    Measure("sent_rps_mean", "msgs/s/member", "{:.0f}", lambda o: mean([x for t in o.ok for x in t.sent_rps.values()])),
    Measure("sent_pps_mean", "pkts/s/member", "{:.0f}", lambda o: mean([x for t in o.ok for x in t.sent_pps.values()])),
    Measure("sent_bps_mean", "bytes/s/member", "{:.0f}",
            lambda o: mean([x for t in o.ok for x in t.sent_bps.values()])),
    Measure("workload", "workload", "{}", lambda o: next((t.workload for t in o.trials), "none")),
    Measure("writes", "writes", "{}", lambda o: sum(t.writes for t in o.ok)),
    Measure("rejected", "refused", "{}", lambda o: sum(t.rejected for t in o.ok)),
    Measure("stale_writes", "stale", "{}", lambda o: sum(t.stale_writes for t in o.ok)),
    Measure("lost_writes", "lost", "{}", lambda o: sum(t.lost_writes for t in o.ok)),
    Measure("conflicting_writes", "clobbers", "{}", lambda o: sum(t.conflicting_writes for t in o.ok)),
    Measure("errors", "errors", "{}", lambda o: [t.error.splitlines()[0] for t in o.trials if not t.ok][:3]),
    Measure("rollout_leaderless_max", "longest leaderless", "{:.3f} s",
            _rollout(lambda r: max((x["leaderless_max"] for x in r), default=math.nan))),
    Measure("rollout_leaderless_p50", "p50 of trials", "{:.3f} s",
            _rollout(lambda r: Summary.of([x["leaderless_max"] for x in r]).p50)),
    Measure("rollout_leaderless_sum_p50", "leaderless sum p50", "{:.2f} s",
            _rollout(lambda r: Summary.of([x["leaderless_sum"] for x in r]).p50)),
    Measure("rollout_moves_p50", "moves p50", "{:.0f}", _rollout(lambda r: Summary.of([x["moves"] for x in r]).p50)),
    Measure("rollout_moves_needed", "needed", "{:.0f}",
            _rollout(lambda r: Summary.of([x["moves_needed"] for x in r]).p50)),
    Measure("rollout_excess_moves_max", "extra moves max", "{:.0f}",
            _rollout(lambda r: max((x["moves"] - x["moves_needed"] for x in r), default=math.nan))),
    Measure("rollout_balanced", "balanced at end", "{:.0%}",
            _rollout(lambda r: _share([bool(x["balanced"]) for x in r]))),
    Measure("rollout_to_balance_p50", "to balance p50", "{:.2f} s", _rollout(lambda r: _to_balance(r).p50)),
    Measure("rollout_to_balance_max", "max", "{:.2f} s", _rollout(lambda r: _to_balance(r).max)),
    Measure("rollout_unsettled", "steps unsettled", "{}", _rollout(lambda r: sum(x["unsettled"] for x in r))),
    Measure("rollout_seconds_p50", "rollout p50", "{:.1f} s",
            _rollout(lambda r: Summary.of([x["seconds"] for x in r]).p50)),
    Measure("rollout_rps_mean", "store req/s", "{:.0f}",
            _rollout(lambda r: mean([x["store_rps"] for x in r if x.get("store_rps") is not None]))),
)

BY_KEY = {m.key: m for m in MEASURES}


def summarize(method: str, fault: Fault, members: int, trials: list[TrialResult], budget: float) -> dict[str, Any]:
    """Every measure of a cell (one method under one fault), by key: its row of results.json."""
    ok = [t for t in trials if t.ok]
    of = Of(method, fault, members, trials, ok, [t.rollout for t in ok if t.rollout], budget)
    return {m.key: m.of(of) for m in MEASURES}


def columns(*keys: str) -> list[tuple[str, str, str]]:
    """A table's columns, by the keys of the measures it shows: (key, title, format) each."""
    return [(m.key, m.title, m.fmt) for m in (BY_KEY[k] for k in keys)]
