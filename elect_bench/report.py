"""Results as a terminal table, `results.json`, and a Markdown `report.md` that says how they were made.

Every kind of run (trials, simulation, idle, neli) comes out the same way: a row per cell from its summary,
the provenance, what the columns mean, and the plots.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from elect_bench import drift, envelope, html, idle, neli_depth
from elect_bench.cell_measures import columns
from elect_bench.envelope import EnvelopeResult
from elect_bench.faults import LifecycleFault
from elect_bench.idle import IdleResult
from elect_bench.neli_depth import NeliResult
from elect_bench.simulation import chaos_runner
from elect_bench.simulation import raft_runner as simulation
from elect_bench.simulation.chaos_runner import ChaosResult
from elect_bench.simulation.raft_runner import SimResult
from elect_bench.simulation.raft_world import NetworkModel
from elect_bench.suite import RunResult

Result = RunResult | SimResult | ChaosResult | IdleResult | NeliResult | EnvelopeResult
Columns = list[tuple[str, str, str]]  # summary key, title, format (named fields are the summary's)

COLUMNS: Columns = columns(
    "method", "fault", "members", "ok", "failover_p50", "failover_p99", "failover_max", "failover_p99_ratio",
    "disrupted", "unrecovered", "gap_max", "overlap_total", "steady_balanced", "after_balanced", "violations",
    "stale_tokens", "cpu_mean", "rss_mb_mean", "sent_rps_mean", "sent_pps_mean")
WRITE_COLUMNS: Columns = columns("workload", "writes", "rejected", "stale_writes", "lost_writes", "conflicting_writes")
REBALANCE_COLUMNS: Columns = columns("rebalance_p50", "rebalance_max", "unbalanced")
ROLLOUT_COLUMNS: Columns = columns(
    "method", "fault", "members", "ok", "rollout_leaderless_max", "rollout_leaderless_p50",
    "rollout_leaderless_sum_p50", "rollout_moves_p50", "rollout_moves_needed", "rollout_excess_moves_max",
    "overlap_total", "rollout_balanced", "rollout_to_balance_p50", "rollout_to_balance_max", "rollout_unsettled",
    "rollout_seconds_p50", "rollout_rps_mean", "violations")

ROLLOUT = (
    "Lifecycle faults (elect_bench.faults.lifecycle, carried out by elect_bench.rollout): *longest leaderless* is the "
    "longest span any role had no leader, from the rollout's first step to the end of the trial (the worst trial; "
    "*p50 of trials* the median trial's); *leaderless sum* adds every role's; *moves* counts acquisitions of a role "
    "by another member than its previous leader, *needed* the moves no rollout of these steps avoids (each role a "
    "departing member led, and each arriving member's share where the method hands roles back), *extra moves* the "
    "most any trial made beyond that; *to balance* is from the last step (the last member started, joined or "
    "retired) until every role had one leader and the busiest member led ceil(roles / members), for good; *steps "
    "unsettled*: steps after which the group was not led throughout (and balanced, where the method hands back) "
    "within the bound; *store req/s*: requests all members sent to the store or broker during the rollout, where "
    "counted (`meter`).")

REBALANCE = (
    "After a restart (elect_bench.faults `restart`): *to balance* is from the member's restart (its process "
    "start included) until every role had one leader and the busiest member led ceil(roles / members), for good; "
    "*never balanced*: trials that were not balanced by the end.")

WRITES = (
    "Writes (elect_bench.fenced): while a member believes it leads a role it writes to a store under that role's "
    "token; *writes* the store accepted, *refused* for a token below one it had accepted (fenced store only), "
    "*stale* accepted anyway (unfenced store only), *lost* acknowledged but not held, *clobbers* accepted on top "
    "of another member's writes under a newer token. In a fenced run every stale, lost or clobbering write is "
    "also a violation.")

DEFINITIONS = (
    "Definitions (docs/architecture.md): *failover* is from the fault to a surviving member's `acquired`, per role "
    "the victim led (after an infrastructure fault: from the fault to the role being led again, per role "
    "whose leader lost it; *roles lost* counts those); *gap* is leaderless time per trial summed over "
    "roles after the fault; *not re-led*: roles nobody led again before the trial's bound; *overlap* is "
    "time two members believed they led one role (a `fenced` line ends belief at its `until`); "
    "*balanced* is the share of trials whose busiest member led ceil(roles / live members); *stale tokens*: "
    "the violations that are a leader's token not above its predecessor's.")

SIMULATION = (
    "Per trial (seed): a cold start of every node within 0.1 s — *balanced cold start* is the share of "
    "trials whose busiest node led ceil(partitions / nodes) at 3 election timeouts (ZEP006's "
    "successCount / totalCount), *all led* when every partition first had one leader — then a crash "
    "of one node: *failover* per partition it led, to a survivor's `acquired`; *balanced after crash* "
    f"among the survivors. Simulated network: {NetworkModel().describe()}.")


def rows(columns: Columns, summaries: list[dict[str, Any]]) -> list[list[str]]:
    return [[_cell(summary, key, fmt) for key, _, fmt in columns] for summary in summaries]


def _cell(summary: dict[str, Any], key: str, fmt: str) -> str:
    value = summary[key]
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return fmt.format(value, **summary)


def text_table(result: Result) -> str:
    header, body = table_rows(result)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def markdown_table(result: Result) -> str:
    header, body = table_rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def table_rows(result: Result) -> tuple[list[str], list[list[str]]]:
    if isinstance(result, SimResult):
        return [title for _, title, _ in simulation.COLUMNS], simulation.rows(result)
    if isinstance(result, ChaosResult):
        return [title for _, title, _ in chaos_runner.COLUMNS], rows(chaos_runner.COLUMNS,
                                                                      [c.summary() for c in result.cells])
    if isinstance(result, EnvelopeResult):
        return [title for _, title, _ in envelope.COLUMNS], rows(envelope.COLUMNS, result.summaries())
    if isinstance(result, RunResult) and _rolled(result):
        columns = ROLLOUT_COLUMNS + (WRITE_COLUMNS if _wrote(result) else [])
        return [title for _, title, _ in columns], rows(columns, result.summaries())
    columns = idle.COLUMNS if isinstance(result, IdleResult) else neli_depth.COLUMNS if isinstance(result, NeliResult) \
        else COLUMNS + (WRITE_COLUMNS if _wrote(result) else []) + (REBALANCE_COLUMNS if _restarted(result) else [])
    return [title for _, title, _ in columns], rows(columns, result.summaries())


def _restarted(result: RunResult) -> bool:
    """Whether any cell restarted its victim (the time-to-balance columns are shown only then)."""
    return any(c.fault.kills_process and c.fault.healed_as is not None for c in result.cells)


def _rolled(result: RunResult) -> bool:
    """Whether every cell is a lifecycle fault (the table is then the rollout's)."""
    return bool(result.cells) and all(isinstance(c.fault, LifecycleFault) for c in result.cells)


def _wrote(result: RunResult) -> bool:
    """Whether any trial ran a write workload (the write columns are shown only then)."""
    return any(t.workload != "none" for c in result.cells for t in c.trials)


def provenance(result: Result) -> str:
    if isinstance(result, SimResult):
        return simulation.provenance(result)
    if isinstance(result, ChaosResult):
        return chaos_runner.provenance(result)
    if isinstance(result, IdleResult):
        return idle.provenance(result)
    if isinstance(result, NeliResult):
        return neli_depth.provenance(result)
    if isinstance(result, EnvelopeResult):
        return envelope.provenance(result)
    s = result.scenario
    sizes = "/".join(map(str, s.group_sizes))
    broker = f" Kafka broker: {result.kafka_broker}." if result.kafka_broker else ""
    busy = f" {result.made.busy()}" if result.made.load else ""
    return (f"{result.made.header()} "
            f"{sizes} members, {s.roles} roles, {s.trials} trials per cell, detection budget {s.budget:g} s "
            f"(Raft election timeout = lease TTL = Kafka session timeout).{broker}{busy}")


def write(result: Result, out: Path, plots: list[Path], *, data_too: bool = True) -> tuple[Path, Path]:
    """results.json (unless not `data_too`: a report made again from it) and report.md in `out`, the report showing
    `plots`; for a trials run also report.html."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    if data_too:
        data.write_text(json.dumps(result.to_json(), indent=1, default=_jsonable))
    report = out / "report.md"
    if isinstance(result, EnvelopeResult):  # what a reader looks for first, then every cell
        parts = [f"# {title(result)}", "", provenance(result), "", "## Which method for me", "",
                 *envelope.which_method_table(result), *envelope.floor_table(result), *envelope.cost_table(result),
                 "## Every cell", "", envelope.NOTES, "", markdown_table(result), "", *_notes(result)]
    else:
        parts = [f"# {title(result)}", "", provenance(result), "", markdown_table(result), "", *_notes(result)]
    for plot in plots:
        parts += [f"![{plot.stem}]({plot.name})", ""]
    if isinstance(result, RunResult):  # what happened, to explore in a browser
        html.write(html_page(result), out)
        parts += ["Every trial's timeline, zoomable, and the tables sortable: [report.html](report.html).", ""]
    report.write_text("\n".join(parts))
    return data, report


def html_page(result: RunResult) -> str:
    """report.html of a trials run: its timelines under the title, provenance and table of report.md."""
    header, body = table_rows(result)
    return html.of_run(result, title(result), provenance(result), header, body)


def title(result: Result) -> str:
    if isinstance(result, SimResult):
        return f"elect simulation runs: {result.scenario.name}"
    if isinstance(result, ChaosResult):
        return f"elect simulated chaos: {result.scenario.name}"
    if isinstance(result, IdleResult):
        return f"elect idle cost: {result.scenario.name}"
    if isinstance(result, NeliResult):
        return f"elect NELI benchmark: {result.scenario.name}"
    if isinstance(result, EnvelopeResult):
        return f"elect operating envelope: {result.scenario.name}"
    return f"elect benchmark: {result.scenario.name}"


def _notes(result: Result) -> list[str]:
    """What the columns mean, and what went wrong."""
    if isinstance(result, SimResult):
        return [SIMULATION, ""]
    if isinstance(result, ChaosResult):
        seeds = [f"- `{c.method}` seed {seed}: {'; '.join(broke[:3])}" for c in result.cells
                 for seed, broke in c.violating[:20]]
        return [chaos_runner.NOTES, "", *(["Violating seeds (the first 20 per method):", "", *seeds, ""]
                                         if seeds else [])]
    if isinstance(result, IdleResult):
        failed = [(s["method"], f"{s['partitions']} partitions", s["error"]) for s in result.summaries() if s["error"]]
        return [idle.NOTES, "", *_failures(failed)]
    failed = [(s["method"], s["fault"], e) for s in result.summaries() for e in s["errors"]]
    if isinstance(result, EnvelopeResult):
        skipped = [f"- `{m}`: {why}" for m, why in result.skipped.items()]
        points = [(s["method"], f"{s['point']} / {s['fault']}", e) for s in result.summaries() for e in s["errors"]]
        return [*envelope.held_notes(result), *(["Not run:", "", *skipped, ""] if skipped else []),
                *_failures(points)]
    if isinstance(result, NeliResult):
        return [neli_depth.NOTES, "", *neli_depth.step_table(result), *_failures(failed), *_violations(result.run)]
    skipped = [f"- `{m}`: {why}" for m, why in result.skipped.items()]
    return [*drift.table(result), DEFINITIONS, "", *([WRITES, ""] if _wrote(result) else []),
            *([REBALANCE, ""] if _restarted(result) else []), *([ROLLOUT, ""] if _rolled(result) else []),
            *_anchors(result),
            *(["Not run:", "", *skipped, ""] if skipped else []), *_failures(failed), *_violations(result)]


def _anchors(result: RunResult) -> list[str]:
    """With anchors in the run: each method, what it was set to, and what it promises (bench/anchors)."""
    methods = [c.method for c in result.cells]
    if not any(m.anchor for m in methods):
        return []
    lines = ["Methods (the anchors are the other projects' own code, bench/anchors/; each is checked against "
             "the promise its documentation makes: one leader per role; *violations* counts overlaps, and "
             "tokens that did not grow where the anchor has a token):", ""]
    for method in dict.fromkeys(methods):
        said = method.promises("") if method.anchor else None
        extra = f" Token: {said.token}. {said.notes}." if said else ""
        lines.append(f"- `{method.name}`: {method.summary}.{extra}")
    return [*lines, ""]


def _failures(found: list[tuple[str, str, str]]) -> list[str]:
    if not found:
        return []
    return ["Failed trials (first lines):", ""] + [f"- {m} / {f}: {e}" for m, f, e in found] + [""]


def _violations(result: RunResult) -> list[str]:
    found = [(t.method, t.fault, t.trial, v) for c in result.cells for t in c.trials for v in t.violations]
    if not found:
        return []
    return ["Violations found by the checker:", "", *(f"- {m} / {f} trial {i}: {v}" for m, f, i, v in found[:50]), ""]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)
