"""Results as a terminal table, `results.json`, and a Markdown `report.md` that says how they were made."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from elect_bench.simulation import runner as simulation
from elect_bench.simulation.runner import SimResult
from elect_bench.suite import RunResult

COLUMNS = [
    ("method", "method", "{}"), ("fault", "fault", "{}"), ("members", "members", "{}"), ("ok", "trials", "{}"),
    ("failover_p50", "failover p50", "{:.2f} s"), ("failover_p99", "p99", "{:.2f} s"),
    ("failover_max", "max", "{:.2f} s"), ("failover_p99_ratio", "p99/budget", "{:.2f}"),
    ("disrupted", "roles lost", "{}"), ("unrecovered", "not re-led", "{}"), ("gap_max", "gap max", "{:.2f} s"),
    ("overlap_total", "overlap", "{:.3f} s"),
    ("steady_balanced", "balanced", "{:.0%}"), ("after_balanced", "balanced after", "{:.0%}"),
    ("violations", "violations", "{}"), ("cpu_mean", "cpu/member", "{:.1%}"), ("rss_mb_mean", "rss", "{:.0f} MB"),
    ("sent_rps_mean", "msgs/s/member", "{:.0f}"), ("sent_pps_mean", "pkts/s/member", "{:.0f}"),
]


def _cell(value: Any, fmt: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return fmt.format(value)


def rows(result: RunResult) -> list[list[str]]:
    out = []
    for summary in (c.summary(result.scenario.budget) for c in result.cells):
        row = [_cell(summary[key], fmt) for key, _, fmt in COLUMNS]
        row[3] = f"{summary['ok']}/{summary['trials']}"
        out.append(row)
    return out


def text_table(result: RunResult | SimResult) -> str:
    header, body = _table(result)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def markdown_table(result: RunResult | SimResult) -> str:
    header, body = _table(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def _table(result: RunResult | SimResult) -> tuple[list[str], list[list[str]]]:
    if isinstance(result, SimResult):
        return [title for _, title, _ in simulation.COLUMNS], simulation.rows(result)
    return [title for _, title, _ in COLUMNS], rows(result)


def write_simulation(result: SimResult, out: Path, plots: list[Path]) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    data.write_text(json.dumps(result.to_json(), indent=1, default=_jsonable))
    report = out / "report.md"
    parts = [f"# elect simulation runs: {result.scenario.name}", "", simulation.provenance(result), "",
             markdown_table(result), "",
             "Per trial (seed): a cold start of every node within 0.1 s — *balanced cold start* is the share of "
             "trials whose busiest node led ceil(partitions / nodes) at 3 election timeouts (ZEP006's "
             "successCount / totalCount), *all led* when every partition first had one leader — then a crash "
             "of one node: *failover* per partition it led, to a survivor's `acquired`; *balanced after crash* "
             "among the survivors. Simulated network: 1-5 ms per message, no loss.", ""]
    parts += [f"![{plot.stem}]({plot.name})" for plot in plots]
    report.write_text("\n".join(parts) + "\n")
    return data, report


def provenance(result: RunResult) -> str:
    m = result.machine
    s = result.scenario
    sizes = "/".join(map(str, s.group_sizes))
    return (f"Command: `{result.command}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(result.started))}, "
            f"{result.seconds:.0f} s on {m['host']} ({m['cpus']} cores, {m['cpu']}, Python {m['python']}). "
            f"{sizes} members, {s.roles} roles, {s.trials} trials per cell, detection budget {s.budget:g} s "
            f"(Raft election timeout = lease TTL = Kafka session timeout).")


def write(result: RunResult, out: Path, plots: list[Path]) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    data.write_text(json.dumps(result.to_json(), indent=1, default=_jsonable))
    report = out / "report.md"
    parts = [f"# elect benchmark: {result.scenario.name}", "", provenance(result), "", markdown_table(result), "",
             "Definitions (DESIGN.md): *failover* is from the fault to a surviving member's `acquired`, per role "
             "the victim led (after an infrastructure fault: from the fault to the role being led again, per role "
             "whose leader lost it; *roles lost* counts those); *gap* is leaderless time per trial summed over "
             "roles after the fault; *not re-led*: roles nobody led again before the trial's bound; *overlap* is "
             "time two members believed they led one role (a `fenced` line ends belief at its `until`); "
             "*balanced* is the share of trials whose busiest member led ceil(roles / live members).", ""]
    if result.skipped:
        parts += ["Not run:", ""] + [f"- `{m}`: {why}" for m, why in result.skipped.items()] + [""]
    errors = [(s["method"], s["fault"], e) for c in result.cells for s in [c.summary(result.scenario.budget)]
              for e in s["errors"]]
    if errors:
        parts += ["Failed trials (first lines):", ""] + [f"- {m} / {f}: {e}" for m, f, e in errors] + [""]
    violations = [(t.method, t.fault, t.trial, v) for c in result.cells for t in c.trials for v in t.violations]
    if violations:
        parts += ["Violations found by the checker:", ""]
        parts += [f"- {m} / {f} trial {i}: {v}" for m, f, i, v in violations[:50]] + [""]
    for plot in plots:
        parts += [f"![{plot.stem}]({plot.name})", ""]
    report.write_text("\n".join(parts))
    return data, report


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)
