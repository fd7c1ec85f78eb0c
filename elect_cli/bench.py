"""`elect bench [SCENARIO] [flags]`: run a comparison; print the table; write JSON, Markdown and plots.

SCENARIO is a YAML file or a bundled name (default, demo, infra, load, raft, lease, sim); flags override
its fields. A scenario with `shapes` is a simulation run (the Raft core in virtual time, elect_bench/simulation/).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run a comparison of methods under faults; write a report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.add_argument("scenario", nargs="?", default="default",
                   help="YAML file or bundled name (default, demo, infra, load, raft, lease, sim)")
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--methods", help="comma-separated, e.g. raft,etcd (see bench/methods.py)")
    p.add_argument("--faults", help="comma-separated: kill, pause, stop, cut, infra, infra-pause, none")
    p.add_argument("--trials", type=int)
    p.add_argument("--members", type=int)
    p.add_argument("--roles", type=int)
    p.add_argument("--budget", type=float, help="detection budget in seconds (election timeout = TTL = session)")
    p.add_argument("--hold", type=float, help="pause / cut length in seconds (default 3 x budget)")
    p.add_argument("--store-members", type=int, choices=(1, 3),
                   help="etcd members / ZooKeeper nodes (the infra fault wants 3)")
    p.add_argument("--placement", choices=("local", "docker"), default="local",
                   help="local processes (network namespaces for cuts), or containers of cluster/docker-compose.yml")
    p.add_argument("--out", type=Path, default=Path("results"), help="where results.json, report.md and plots go")


def run(args: argparse.Namespace, scenario_name: str | None = None) -> int:
    from elect_bench import plots, report, scenario, suite

    _exit_cleanly_on(signal.SIGTERM, signal.SIGHUP)

    raw = scenario.read(scenario_name or args.scenario)
    if scenario.is_simulation(raw):
        return _simulate(args, raw)
    chosen = scenario.load(raw).with_flags(
        methods=args.methods.split(",") if args.methods else None,
        faults=args.faults.split(",") if args.faults else None,
        trials=args.trials, members=args.members, roles=args.roles, budget=args.budget, hold=args.hold,
        store_members=args.store_members)
    command = "elect " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "elect bench"
    show = _progress()
    with tempfile.TemporaryDirectory(prefix="elect-bench-") as tmp:
        result = suite.run(chosen, Path(tmp), show, command=command, placement=args.placement)
    print(file=sys.stderr)
    for method, why in result.skipped.items():
        print(f"skipped {method}: {why}", file=sys.stderr)
    print(report.text_table(result))
    pictures = plots.draw(result, args.out)
    data, md = report.write(result, args.out, pictures)
    _wrote(report.provenance(result), data, md, pictures)
    return 0 if all(t.ok for c in result.cells for t in c.trials) else 1


def _simulate(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench import plots, report
    from elect_bench.simulation import runner as simulation

    if args.methods:
        raw["methods"] = args.methods
    if args.budget:
        raw["budget"] = args.budget
    if args.trials:
        raw["shapes"] = [[s[0], s[1], args.trials, *s[3:]] for s in raw.get("shapes", [])]
    chosen = simulation.SimScenario.from_mapping(raw)
    command = "elect " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = simulation.run(chosen, _progress(), command=command)
    print(file=sys.stderr)
    print(report.text_table(result))
    pictures = plots.draw_simulation(result, args.out)
    data, md = report.write_simulation(result, args.out, pictures)
    _wrote(simulation.provenance(result), data, md, pictures)
    return 0


def _wrote(provenance: str, data: Path, md: Path, pictures: list[Path]) -> None:
    print(f"\n{provenance}\nwrote {data}, {md}" + (f" and {len(pictures)} plots" if pictures else ""))


def _exit_cleanly_on(*signals: signal.Signals) -> None:
    """Turn these signals into SystemExit in the main thread, so that a stopped run still stops its member
    processes, the infrastructure it started and its network namespaces (the `finally` blocks run)."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in signals:
        signal.signal(sig, leave)


def _progress() -> Any:
    """A live one-line progress display on stderr: cell, trials done / total, what is happening."""
    began = time.monotonic()
    tty = sys.stderr.isatty()

    def show(cell: str, done: int, total: int, status: str) -> None:
        elapsed = time.monotonic() - began
        eta = f", ~{elapsed / done * (total - done):.0f} s left" if done else ""
        line = f"[{done}/{total}] {cell}: {status} ({elapsed:.0f} s{eta})"
        if tty:
            sys.stderr.write("\r\x1b[2K" + line[:160])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return show
