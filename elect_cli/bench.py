"""`elect bench [SCENARIO] [flags]`: run a comparison; print the table; write JSON, Markdown and plots.

SCENARIO is a YAML file or a bundled name (bench/NAME.yaml, listed under "positional arguments"); flags override
its fields. A scenario's kind says what runs: faults on real members (the default), a simulation (it names `shapes`:
the Raft core in virtual time, elect_bench/simulation/), `kind: chaos` (seeded chaos against the lease methods, NELI
and Raft in simulation: `sim-lease`, `sim-neli`, `sim-raft`, `sim-raft-members`: nodes added, removed and replaced
among the faults), `kind: idle` (the idle cost of a group at scale) or `kind: neli` (NELI in depth, with the
broker's own rebalance time). `anchors` runs elect's methods beside the well-known implementations' own code
(bench/anchors/); `anchors-load` counts their load on the store. `lifecycle` rolls the group: rolling restarts and
kills, replacements, scaling out and in (`lifecycle-anchors`: the anchors' rolling restart and kill).
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from elect.errors import ConfigError
from elect_bench.faults import FAULTS
from elect_bench.fenced import WORKLOADS
from elect_bench.scenario import bundled
from elect_cluster.local import BROKERS

if TYPE_CHECKING:
    from elect_bench.report import Result

#: the signals that stop a run cleanly (its `finally` blocks stop members, infrastructure and namespaces)
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run a comparison of methods under faults; write a report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.add_argument("scenario", nargs="?", default="default", help=f"YAML file or bundled name ({', '.join(bundled())})")
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--methods", help="comma-separated, e.g. raft,etcd (see elect_bench/methods.py)")
    p.add_argument("--faults", help=f"comma-separated: {', '.join(FAULTS)}")
    p.add_argument("--trials", type=int)
    p.add_argument("--members", type=int, help="members per group (idle: nodes)")
    p.add_argument("--roles", type=int, help="roles per group (idle: partitions)")
    p.add_argument("--budget", type=float, help="detection budget in seconds (election timeout = TTL = session)")
    p.add_argument("--hold", type=float,
                   help="seconds a fault lasts before it is healed: pause, cuts, loss, slow link, restart "
                        "(default 3 x budget)")
    p.add_argument("--store-members", type=int, choices=(1, 3),
                   help="etcd members / ZooKeeper nodes (the infra fault wants 3)")
    p.add_argument("--broker", choices=BROKERS,
                   help="the Kafka broker: Apache Kafka (default; apache-defaults: its group settings at Kafka's "
                        "defaults but the session minimums) or the light in-memory Tansu")
    p.add_argument("--brokers", type=int, choices=(1, 3), help="Apache Kafka nodes (the infra fault wants 3)")
    p.add_argument("--rest", type=float,
                   help="seconds at rest before each trial's fault: leaderships that end there are false failovers")
    p.add_argument("--busy", type=int, help="CPU-bound processes beside the members during each trial")
    p.add_argument("--workload", choices=WORKLOADS,
                   help="leaders write to a store that refuses stale tokens (fenced) or takes every write (unfenced)")
    p.add_argument("--placement", choices=("local", "docker", "docker-official"), default="local",
                   help="local processes (on network namespaces for network faults), or containers: members on "
                        "the network of cluster/docker-compose.yml, brought up for the run with the images "
                        "`elect cluster images` builds here (docker) or the official ones (docker-official)")
    p.add_argument("--out", type=Path, default=Path("results"), help="where results.json, report.md and plots go")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep what each member printed besides its event lines (its stderr: the library's warnings, "
                        "the client libraries' errors) in OUT/logs/METHOD-FAULT-MEMBERS-TRIAL-*/, to find why a trial "
                        "went as it did")
    p.add_argument("--resume", action="store_true",
                   help="go on from OUT/results.partial.json (a run cut short; the same scenario and flags): "
                        "its trials (a simulation's seeds) are kept, the rest are run")
    p.add_argument("--report-only", action="store_true",
                   help="with --resume, on an envelope: write the report of the checkpoint as it is, running "
                        "nothing more (a run that cannot finish still gets its report, which says what is missing)")


def run(args: argparse.Namespace, scenario_name: str | None = None) -> int:
    from elect_bench import scenario

    exit_cleanly_on(*TERMINATING)
    raw = scenario.read(scenario_name or args.scenario)
    kinds: dict[str, Callable[[argparse.Namespace, dict[str, Any]], int]] = {
        "trials": _trials, "simulation": _simulate, "chaos": _chaos, "idle": _idle, "neli": _neli,
        "envelope": _envelope}
    chosen = scenario.kind(raw)
    if getattr(args, "report_only", False) and (chosen != "envelope" or not getattr(args, "resume", False)):
        raise ConfigError("--report-only writes the report of an envelope's checkpoint: an envelope scenario, with "
                          "--resume", parameter="report_only")
    return kinds[chosen](args, raw)


class _Checkpointed(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _checkpoints(args: argparse.Namespace) -> tuple[Path, dict[str, Any] | None, Callable[[_Checkpointed], None]]:
    """A long run's checkpoint file (OUT/results.partial.json), the checkpoint to resume from (`--resume`), and
    what writes one."""
    partial = args.out / "results.partial.json"
    resume = None
    if getattr(args, "resume", False):
        if not partial.is_file():
            raise ConfigError(f"nothing to resume: {partial} does not exist", parameter="resume")
        resume = json.loads(partial.read_text())

    def checkpoint(so_far: _Checkpointed) -> None:
        args.out.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(so_far.to_json(), default=str))

    return partial, resume, checkpoint


def _trials(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench import plots, scenario, suite
    from elect_bench.faults import fault

    chosen = scenario.load(raw).with_flags(
        methods=args.methods.split(",") if args.methods else None,
        faults=[fault(name) for name in args.faults.split(",")] if args.faults else None,
        trials=args.trials, members=args.members, roles=args.roles, budget=args.budget, hold=args.hold,
        store_members=args.store_members, broker=args.broker, brokers=args.brokers, workload=args.workload,
        rest=getattr(args, "rest", None), busy=getattr(args, "busy", None))
    partial, resume, checkpoint = _checkpoints(args)

    with tempfile.TemporaryDirectory(prefix="elect-bench-") as tmp:
        try:
            result = suite.run(chosen, Path(tmp), _progress(), command=_command(), placement=args.placement,
                               checkpoint=checkpoint, resume=resume)
        finally:
            if getattr(args, "keep_logs", False):
                _keep_member_logs(Path(tmp), args.out / "logs")
    print(file=sys.stderr)
    for method, why in result.skipped.items():
        print(f"skipped {method}: {why}", file=sys.stderr)
    _report(result, plots.draw(result, args.out), args.out)
    partial.unlink(missing_ok=True)
    return 0 if result.ok else 1


def _envelope(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    """The operating envelope (elect_bench.envelope); flags set the base point and what runs at every point."""
    from elect_bench import envelope, plots

    given = _given(methods=args.methods, faults=args.faults, trials=args.trials, members=args.members,
                   roles=args.roles, budget=args.budget, hold=args.hold, store_members=args.store_members,
                   broker=args.broker, brokers=args.brokers, rest=getattr(args, "rest", None),
                   busy=getattr(args, "busy", None))
    chosen = envelope.EnvelopeScenario.from_mapping(raw | given)
    partial, resume, checkpoint = _checkpoints(args)

    with tempfile.TemporaryDirectory(prefix="elect-envelope-") as tmp:
        try:
            result = envelope.run(chosen, Path(tmp), _progress(), command=_command(), checkpoint=checkpoint,
                                  resume=resume, report_only=getattr(args, "report_only", False))
        finally:
            if getattr(args, "keep_logs", False):
                _keep_member_logs(Path(tmp), args.out / "logs")
    print(file=sys.stderr)
    for method, why in result.skipped.items():
        print(f"skipped {method}: {why}", file=sys.stderr)
    _report(result, plots.draw_envelope(result, args.out), args.out)
    if not result.cut_short:
        partial.unlink(missing_ok=True)
    return 0 if result.ok else 1


def _keep_member_logs(workdir: Path, into: Path) -> None:
    """Copy every trial's member logs (`member-ID.log` in the trial's directory) under `into`, by trial."""
    import shutil

    for log in sorted(workdir.glob("*/member-*.log")):
        (into / log.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, into / log.parent.name / log.name)


def _simulate(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench import plots
    from elect_bench.simulation import raft_runner as simulation

    if args.methods:
        raw["methods"] = args.methods
    if args.budget:
        raw["budget"] = args.budget
    if args.trials:
        raw["shapes"] = [[s[0], s[1], args.trials, *s[3:]] for s in raw.get("shapes", [])]
    result = simulation.run(simulation.SimScenario.from_mapping(raw), _progress(), command=_command())
    print(file=sys.stderr)
    _report(result, plots.draw_simulation(result, args.out), args.out)
    return 0


def _chaos(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench.simulation import chaos_runner

    given = _given(methods=args.methods, seeds=args.trials, members=args.members, roles=args.roles, ttl=args.budget)
    partial, resume, checkpoint = _checkpoints(args)

    result = chaos_runner.run(chaos_runner.ChaosScenario.from_mapping(raw | given), _progress(), command=_command(),
                              checkpoint=checkpoint, resume=resume)
    print(file=sys.stderr)
    _report(result, [], args.out)
    partial.unlink(missing_ok=True)
    return 1 if any(c.violating for c in result.cells) else 0


def _idle(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench import idle, plots

    chosen = idle.IdleScenario.from_mapping(raw | _given(methods=args.methods, nodes=args.members,
                                                         partitions=args.roles, budget=args.budget))
    with tempfile.TemporaryDirectory(prefix="elect-idle-") as tmp:
        result = idle.run(chosen, Path(tmp), _progress(), command=_command())
    print(file=sys.stderr)
    _report(result, plots.draw_idle(result, args.out), args.out)
    return 0 if result.ok else 1


def _neli(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    from elect_bench import neli_depth, plots

    given = _given(trials=args.trials, members=args.members, roles=args.roles, budget=args.budget, hold=args.hold,
                   broker=args.broker)
    chosen = neli_depth.NeliScenario.from_mapping(raw | given)
    with tempfile.TemporaryDirectory(prefix="elect-neli-") as tmp:
        result = neli_depth.run(chosen, Path(tmp), _progress(), command=_command())
    print(file=sys.stderr)
    _report(result, plots.draw(result.run, args.out), args.out)
    return 0 if result.ok else 1


def _given(**flags: Any) -> dict[str, Any]:
    """The flags given on the command line (None: not given), to lay over a scenario file's keys."""
    return {key: value for key, value in flags.items() if value is not None}


def _command() -> str:
    return "elect " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "elect bench"


def _report(result: Result, pictures: list[Path], out: Path) -> None:
    """Print the table, write results.json and report.md, and say so."""
    from elect_bench import report

    data, md = report.write(result, out, pictures)  # written before anything else can fail
    print(report.text_table(result))
    print(f"\n{report.provenance(result)}\nwrote {data}, {md}" + (f" and {len(pictures)} plots" if pictures else ""))


def exit_cleanly_on(*signals: signal.Signals) -> None:
    """Turn these signals into SystemExit in the main thread, so that a stopped run still stops its member
    processes, the infrastructure it started and its network namespaces (the `finally` blocks run)."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in signals:
        signal.signal(sig, leave)


def live_line() -> Callable[[str], None]:
    """Show one status line on stderr: rewritten in place on a terminal, one line per status otherwise."""
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        sys.stderr.write("\r\x1b[2K" + line[:160] if tty else line + "\n")
        sys.stderr.flush()

    return show


def _progress() -> Any:
    """A live one-line progress display on stderr: cell, trials done / total, what is happening."""
    began = time.monotonic()
    line = live_line()
    resumed: list[int] = []  # trials a resumed run found done: they took none of this run's time

    def show(cell: str, done: int, total: int, status: str) -> None:
        if not resumed:
            resumed.append(done)
        elapsed = time.monotonic() - began
        ran = done - resumed[0]
        eta = f", ~{elapsed / ran * (total - done):.0f} s left" if ran > 0 and total > done else ""
        count = f"[{done}/{total}] " if total else ""  # a floor-only envelope counts its windows in the cell's name
        line(f"{count}{cell}: {status} ({elapsed:.0f} s{eta})")

    return show
