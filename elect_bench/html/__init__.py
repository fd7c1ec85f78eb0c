"""report.html: one self-contained page per run, to explore in a browser what the Markdown report summarises.

The summary table (sortable), the failover CDF per fault, and per trial (per soak: the whole soak) a timeline: a
lane per role and member, leadership bars coloured by member with the token and how it ended on hover, the
fault's moment and span, overlaps and leaderless gaps marked; the wheel zooms, a drag pans, a double click resets.
A soak's violations link to the moment on its timeline. The page's script and styles are ours (`report.js`,
`report.css`), inlined with the run's data as JSON: the file opens with no network.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elect_bench.faults import known
from elect_bench.judging.checker import Violation
from elect_bench.judging.history import History
from elect_bench.judging.measures import leaderless, overlaps
from elect_bench.provenance import Provenance
from elect_bench.suite import seconds

if TYPE_CHECKING:
    from elect_bench.suite import RunResult

_HERE = Path(__file__).parent


def timeline(history: History, key: str, label: str) -> dict[str, Any]:
    """What the page draws of one history: lanes of leadership bars, faults with their spans, overlaps, gaps."""
    by_role = history.intervals()
    roles = sorted(by_role, key=lambda r: (len(r), r))
    lanes = [{"role": role, "member": member,
              "bars": [[iv.start, iv.end, iv.token, iv.ended_by] for iv in by_role[role] if iv.member == member]}
             for role in roles for member in sorted({iv.member for iv in by_role[role]})]
    faults = sorted(history.faults, key=lambda f: f.mono)
    struck = []
    for i, f in enumerate(faults):
        if not _is_fault(f.kind):
            continue
        healed = next((g.mono for g in faults[i + 1:] if g.target == f.target and not _is_fault(g.kind)), None)
        struck.append({"at": f.mono, "kind": f.kind, "target": f.target, "healed": healed})
    return {"id": key, "label": label, "start": history.start, "end": history.end, "lanes": lanes,
            "faults": struck,
            "overlaps": [[role, a, b] for role in roles for a, b, _ in overlaps(by_role[role])],
            "gaps": [[role, a, b] for role in roles
                     for a, b in leaderless(by_role[role], _first_lead(by_role[role]), history.end)]}


def _first_lead(intervals: Sequence[Any]) -> float:
    return min((iv.start for iv in intervals), default=0.0)


def _is_fault(kind: str) -> bool:
    return known(kind) is not None  # the registry says whether a record's kind is a fault or a healing


def page(title: str, made: str, sections: list[str], data: dict[str, Any]) -> str:
    """The whole file: the sections' HTML, the data as JSON, our styles and script inline."""
    payload = json.dumps(data, separators=(",", ":"), default=str).replace("</", "<\\/")
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{(_HERE / 'report.css').read_text()}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", f'<p class="made">{html.escape(made)}</p>', *sections,
        f'<script type="application/json" id="data">{payload}</script>',
        f"<script>{(_HERE / 'report.js').read_text()}</script>", "</body></html>"])


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], zoom: Sequence[str] | None = None) -> str:
    """A sortable table (click a header); `zoom`: per row, `TIMELINE@TIME` to show on a click of the row."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    opens = [f'<tr data-zoom="{html.escape(z)}">' for z in zoom] if zoom is not None else ["<tr>"] * len(rows)
    body = "".join(tr + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for tr, row in zip(opens, rows, strict=True))
    rows_html = f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
    return f'<div class="wide"><table class="sortable">{rows_html}</table></div>'


def _violations(items: Sequence[Violation], key: str) -> str:
    """A list of violations, each linked to its moment on the timeline `key` where it is known."""
    out = []
    for v in items:
        link = f' <a data-zoom="{key}@{v.at:.3f}" href="#{key}">show</a>' if math.isfinite(v.at) else ""
        out.append(f"<li>{html.escape(str(v))}{link}</li>")
    return f'<ul class="violations">{"".join(out)}</ul>' if out else ""


#: Timelines per cell of a trials run (besides those with violations): a page of a thousand trials stays light.
SHOWN = 3

HINT = ('<p class="hint">Timelines: the wheel zooms, a drag pans, a double click shows the whole; hover a bar for the '
        "member, its token and how the leadership ended.</p>")


def of_run(result: RunResult, title: str, made: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The page of a trials run (`elect bench`, `elect demo`), with the title, provenance and summary table its
    Markdown report has (`elect_bench.report.html_page`)."""
    budget = result.scenario.budget
    charts: list[dict[str, Any]] = []
    for fault in result.scenario.faults:
        series = [{"name": c.method.name, "xs": [x / budget for t in c.trials for x in t.failover]}
                  for c in result.cells if c.fault == fault and any(t.failover for t in c.trials)]
        if series:
            charts.append({"fault": fault.name, "series": series,
                           "xlabel": f"failover latency / detection budget ({budget:g} s), fault: {fault.name}"})
    sections = ["<h2>Summary</h2>", table(header, rows)]
    sections += [f'<h2>Failover CDF: {html.escape(str(c["fault"]))}</h2><div id="chart-{i}"></div>'
                 for i, c in enumerate(charts)]
    trials: list[dict[str, Any]] = []
    sections += ["<h2>Trials</h2>", HINT, f'<p class="hint">Per cell the first {SHOWN} trials, and every trial the '
                 "checker found a violation in.</p>"]
    for cell in result.cells:
        for n, t in enumerate(cell.trials):
            if not t.history or not t.history.get("lines") or (n >= SHOWN and not t.violations):
                continue
            key = f"trial-{len(trials)}"
            label = f"{t.method} / {t.fault} / trial {t.trial}"
            trials.append(timeline(History.from_json(t.history), key, label))
            sections += [f"<h3>{html.escape(label)}</h3>", _violations(t.violations, key), f'<div id="{key}"></div>']
    return page(title, made, sections, {"charts": charts, "trials": trials})



def of_soak(data: dict[str, Any]) -> str:
    """The page of a soak (`elect soak`), from its soak.json: the faults by kind, violations linked to their moment,
    one timeline of the whole soak, and the strike schedule."""
    history = History.from_json(data["history"])
    kinds = [[k["fault"], k["strikes"], *(seconds(k[f]) for f in ("failover_p50", "failover_p99",
                                                                       "failover_max")),
              k.get("unrecovered", 0), k.get("leaderless", 0), k.get("failed_starts", 0), f"{k.get('overlap', 0):.3f}"]
             for k in data["by_kind"]]  # .get: a soak.json of an older version lacks the columns added since
    schedule = [[s["index"], s["fault"], s["target"], f"{s['at'] - history.start:.3f}", len(s["failover"]),
                 seconds(max(s["failover"], default=float("nan"))), s.get("unrecovered", 0),
                 s.get("leaderless", 0), f"{s.get('overlap', 0):.3f}"] for s in data["strikes"]]
    key = "soak"
    sections = ["<h2>Faults by kind</h2>",
                table(["fault", "strikes", "failover p50", "p99", "max", "unrecovered roles", "leaderless",
                       "failed starts", "overlap s"], kinds),
                f"<h2>Violations: {len(data['violations'])}</h2>",
                _violations([Violation.from_json(v.get("record", v["violation"])) for v in data["violations"]], key),
                "<h2>Timeline</h2>", HINT, f'<div id="{key}"></div>',
                "<h2>Strikes</h2>", '<p class="hint">Click a strike to see it on the timeline.</p>',
                table(["#", "fault", "member", "at s", "roles moved", "failover max", "unrecovered", "leaderless",
                       "overlap s"], schedule, zoom=[f"{key}@{s['at']}" for s in data["strikes"]])]
    provenance = Provenance.from_json(data).header()
    return page(f"elect soak: {data['method']}", provenance, sections,
                {"charts": [], "trials": [timeline(history, key, "the whole soak")]})


def write(text: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(text)
    return path
