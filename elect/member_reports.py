"""What `elect member` reports on stderr beside its diagnostics, written and read by this one definition.

A report is one line, `elect member: ID KIND {json}` (for `DRAINED` a few words come before the JSON), so a
harness reading a member's stderr finds it among log lines; the event lines themselves go to stdout
(`elect.events`). The member (`elect_cli.member`) writes them and the harness (`elect_bench.members`) reads
them: neither imports the other, both import this.
"""

from __future__ import annotations

import json
from typing import Any

#: Once the member's elector has started (reached its store or peers), the member id before it: a harness reads
#: it to know that a started-again member is back.
STARTED = "started on"
#: For each worker of `--work` that started or returned (role, token, state "started" / "returned", mono).
WORK = "work"
#: Once it drained on its way out (seconds, mono, roles, successors: None where the method cannot see them,
#: uncontended: roles no other member contended for).
DRAINED = "drained"
#: With `--observe`, each change of whom it sees lead a role it contends for (ts, mono, member, role, leader:
#: None for nobody, token).
LEADER = "leader"
#: Once with `--metrics-port` (port, url).
METRICS = "metrics"
#: Once with `--leave` (raft://), after it drained: left (whether the removal was committed), configuration (the
#: committed one that no longer names it, or None).
LEFT = "left"
#: For each `transfer R TO` control line (role, to, leader, seconds, confirmed; or error and message).
TRANSFERRED = "transferred"
#: Once if its elector stopped on its own (`ElectorFailed`; error: the message), just before it exits 4.
FAILED = "failed"
#: Once on its way out where the method times the steps of its handovers (step -> the seconds each took,
#: `Elector.timings`).
TIMED = "timed"


def report_line(member: str, kind: str, report: dict[str, Any], text: str = "") -> str:
    """The line that reports `report` as `kind` for `member` (`text`: words before the JSON)."""
    return f"elect member: {member} {kind} {text}{json.dumps(report)}"


def reports(text: str, member: str, kind: str) -> list[dict[str, Any]]:
    """The JSON objects of `member`'s `kind` reports in a member's stderr text."""
    prefix = f"elect member: {member} {kind} "
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith(prefix) and "{" in line:
            try:
                found.append(json.loads(line[line.index("{"):]))
            except ValueError:
                continue  # a torn line of a killed process
    return found
