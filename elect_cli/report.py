"""`elect report OUT`: write OUT's reports again from the data a run left there, with this version's code.

A trials run (`elect bench`, `elect demo`: OUT/results.json) gets report.md, report.html and its plots
(`--html`: report.html only); a soak (`elect soak`: OUT/soak.json) gets report.html. The data is read, never
rewritten: what was measured stays, what the reports show of it may change. A run whose results.json was stripped
of its trials' histories shows no timelines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from elect.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="write a run's report.md / report.html again from its results",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the directory a run wrote (results.json or soak.json)")
    p.add_argument("--html", action="store_true", help="write report.html only (leave report.md and the plots)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from elect_bench import html, plots, report
    from elect_bench.suite import RunResult

    out: Path = args.out
    soak, results = out / "soak.json", out / "results.json"
    if soak.is_file():
        print(f"wrote {html.write(html.of_soak(_read(soak)), out)}")
        return 0
    if not results.is_file():
        raise ConfigError(f"{out} has neither results.json nor soak.json", parameter="out")
    data = _read(results)
    try:
        if "cells" in data.get("scenario", {}):  # a NELI run's scenario: its trials are reported by it
            raise ConfigError("a NELI run", parameter="out")
        result = RunResult.from_json(data)
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{results} is not the results of a trials run ({exc}): `elect report` renders trials "
                          "runs and soaks; the other kinds keep the report they were written with",
                          parameter="out") from None
    if args.html:
        print(f"wrote {html.write(report.html_page(result), out)}")
        return 0
    pictures = plots.draw(result, out)
    _, md = report.write(result, out, pictures, data_too=False)
    print(f"wrote {md}, {out / 'report.html'}" + (f" and {len(pictures)} plots" if pictures else ""))
    return 0


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", parameter="out") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a run's results", parameter="out")
    return data
