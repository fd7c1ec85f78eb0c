"""`elect member URL --id ID --roles ...`: run one member and print one JSON line per event.

Stdout carries event lines only (docs/architecture.md's format), flushed one by one, so a harness can read them
as they happen; diagnostics go to stderr. SIGTERM or SIGINT drains the member (Elector.drain: hands every
role over, waits until it sees the successors take them where the method can see that, stops), prints
`elect member: ID drained in S s {json}` on stderr and exits 0; so does an event line that finds nobody reading
stdout any more (EPIPE). With `--control`, lines on stdin steer the
member (`resign R`, `transfer R TO`, `add R...`, `remove R...`, `stop`, and for raft:// `leave`: stop as
`--leave` does; roles may be JSON-quoted), and end of
input stops it (draining too), so a member never outlives its controller. `transfer` reports
`elect member: ID transferred {json}` on stderr (Elector.transfer: role, to, leader, seconds, confirmed; or the
error and its message).
With `--work SECONDS` a worker runs per led role (Elector.run), as an application's work would: told to stop,
it takes SECONDS to finish, holding the handover back; it reports `elect member: ID work {json}` on stderr
when it starts and when it returns (role, token, state, mono).
With `--write-to HOST:PORT` the member also writes to the benchmark's fenced store while it leads a role
(elect_bench.fenced.writer), as an application guarding a resource with the fencing token would.
With `--observe` it reports `elect member: ID leader {json}` on stderr each time whom it sees lead a role changes
(Elector.observe: role, leader or null, token; methods that cannot see it exit 2 saying why). With
`--metrics-port PORT` it serves its Prometheus metrics (Elector.metrics) at http://HOST:PORT/metrics (port 0: the
OS chooses) and reports `elect member: ID metrics {"port": ..., "url": ...}` on stderr before it starts.

Exit codes (every `elect` command alike), each failure with one line on stderr, never a traceback: 0 drained or
done; 2 the configuration or the member's own state (`ConfigError`, `StateUnreadable`, `UnsatisfiedRequirement`,
`NotSupported`: the same command fails again until it is changed); 3 the infrastructure
(`InfrastructureUnavailable`, `AccessRefused` among it: a broker, store, API server or port that could not be
reached, or refused this member); 4 the elector stopped on its own while running (`ElectorFailed`: every role
fenced, nothing led from then on; the line says why, e.g. a Raft node whose disk refused its vote); 130 interrupted
before it started; 128 + N a second signal N while draining.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from elect.base import BaseElector
from elect.config import load_yaml, spec_from_config, spec_from_url
from elect.contract import Drained, Elector, Leadership
from elect.errors import ConfigError, NotSupported
from elect.events import Event, Revoked
from elect.member_reports import (
    DRAINED,
    FAILED,
    LEADER,
    LEFT,
    METRICS,
    STARTED,
    TIMED,
    TRANSFERRED,
    WORK,
    report_line,
)
from elect.roles import Role, parse_role

if TYPE_CHECKING:
    from elect_bench.fenced.writer import FencedWriter


def register(sub: Any) -> None:
    p = sub.add_parser("member", help="run one member; print a JSON line per event",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", nargs="?", help="elector URL, e.g. raft://a@127.0.0.1:7001?peers=...")
    p.add_argument("--config", help="YAML configuration instead of (or on top of) a URL")
    p.add_argument("--id", dest="member", help="member id (default: from the URL, else host-pid)")
    p.add_argument("--roles", action="append", default=[], help="roles, comma-separated (repeatable)")
    p.add_argument("--role-count", type=int, default=0, help="also contend for numbered roles 0..N-1")
    p.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="override one option of the URL or configuration (repeatable)")
    p.add_argument("--control", action="store_true", help="read commands on stdin; stop at end of input")
    p.add_argument("--revoke-delay", type=float, default=0.0, metavar="SECONDS",
                   help="block this long in the Revoked callback (simulates finishing in-flight work)")
    p.add_argument("--work", type=float, metavar="SECONDS",
                   help="run a worker per led role that, told to stop, takes SECONDS to finish (the handover waits "
                        "for it); it reports on stderr when it starts and returns")
    p.add_argument("--write-to", metavar="HOST:PORT",
                   help="while leading a role, write to the fenced store there under its token (elect_bench.fenced)")
    p.add_argument("--write-every", type=float, default=0.02, metavar="SECONDS",
                   help="pause between rounds of writes, one write per role led (default 0.02)")
    p.add_argument("--write-log", type=Path, metavar="FILE", help="append every acknowledged write here (JSONL)")
    p.add_argument("--leave", action="store_true",
                   help="raft:// only: on SIGTERM (or `stop`), drain, then remove this node from the cluster's "
                        "configuration, then exit 0 (a replaced or scaled-in node)")
    p.add_argument("--observe", action="store_true",
                   help="report on stderr each change of whom this member sees lead a role it contends for")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics on this port (0: the OS chooses; the port is printed on stderr)")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                   help="address to serve the metrics on (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.set_defaults(run=run)


def parse_roles(values: Sequence[str], count: int = 0) -> list[Role]:
    roles: list[Role] = [parse_role(text) for value in values for text in value.split(",") if text.strip()]
    roles += list(range(count))
    return roles


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"expected KEY=VALUE, got {pair!r}", parameter="--set")
        options[key.strip()] = value
    return options


def build_elector(args: argparse.Namespace) -> Elector:
    roles = parse_roles(args.roles, args.role_count)
    overrides: dict[str, Any] = dict(parse_options(args.options))
    if args.config:
        data = dict(load_yaml(Path(args.config)))
        if args.url:
            data["url"] = args.url
        if args.member:
            data["member"] = args.member
        if roles:
            data["roles"] = roles
        data.update(overrides)
        return spec_from_config(data, source=Path(args.config)).create()
    if not args.url:
        raise ConfigError("give an elector URL or --config FILE", parameter="url")
    return spec_from_url(args.url, roles, member=args.member, **overrides).create()


class _Printer:
    """Writes event lines to stdout, one flushed line per event, from the elector's event thread. When the reader
    is gone (the harness or pipeline reading them ended: EPIPE), `gone` is called once, so the member drains and
    exits rather than leading on unseen, and the lines after it go nowhere."""

    def __init__(self, revoke_delay: float, gone: Callable[[], None]) -> None:
        self.revoke_delay = revoke_delay
        self.gone = gone
        self.closed = False
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            if not self.closed:
                try:
                    sys.stdout.write(event.to_line() + "\n")
                    sys.stdout.flush()
                except BrokenPipeError:
                    self.closed = True
                    # what is still buffered must not fail again at exit
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                    self.gone()
        if isinstance(event, Revoked) and self.revoke_delay > 0:
            time.sleep(self.revoke_delay)  # the application's in-flight work, holding the successor back


class _HeapFreeze:
    """Freezes the member's heap (`gc.freeze`) as it starts (the modules imported, the clients made) and again once
    its start-up is over: the first time its own leaderships have not changed for `quiet` seconds. What it holds by
    then (a view and a watch per role, besides) is never scanned by Python's cyclic collector again. At 6,000 roles
    a full collection scanned ~150,000 objects in 50-310 ms on the 2-core VM, stopping every thread of the member:
    one in a takeover added that to its failover, and at a short budget one is a missed renewal
    (`bench/bare/takeover.py zookeeper 6000`, each collection timed through `gc.callbacks`). Objects made later are
    collected as before; the few unreachable cycles present at a freeze stay allocated, once."""

    def __init__(self, quiet: float) -> None:
        self.quiet = quiet
        self.last = time.monotonic()
        self.frozen = False
        gc.freeze()

    def __call__(self, event: Event) -> None:
        self.last = time.monotonic()

    def poll(self) -> None:
        if not self.frozen and time.monotonic() - self.last >= self.quiet:
            gc.freeze()
            self.frozen = True


Report = Callable[[dict[str, Any]], None]


class Worker:
    """`--work SECONDS`: the application's work under one leadership (the `fn` of `Elector.run`). It works until
    told to stop, then finishes its in-flight work in `finish` seconds, and reports when it started and returned,
    so a test can see that a successor acquired only after it returned."""

    def __init__(self, finish: float, report: Report) -> None:
        self.finish = finish
        self.report = report

    def __call__(self, lead: Leadership, stop: threading.Event) -> None:
        self._report(lead, "started")
        stop.wait()
        time.sleep(self.finish)  # finishing in-flight work, holding the handover back
        self._report(lead, "returned")

    def _report(self, lead: Leadership, state: str) -> None:
        self.report({"role": str(lead.role), "token": lead.token, "state": state, "mono": round(time.monotonic(), 6)})


def drained_report(result: Drained) -> dict[str, Any]:
    """What a member prints on stderr once drained: how long it took, what it handed over, to whom."""
    return {"seconds": round(result.seconds, 6), "mono": round(time.monotonic(), 6),
            "roles": sorted(map(str, result.roles)),
            "successors": None if result.successors is None else {str(r): m for r, m in result.successors.items()},
            "uncontended": sorted(map(str, result.uncontended)), "confirmed": result.confirmed,
            "outcome": result.outcome}


_STDERR = threading.Lock()


def transfer_report(elector: Elector, role: Role, to: str) -> dict[str, Any]:
    """What `elect member` reports of `transfer R TO`: the outcome, or the `elect` error that refused it."""
    try:
        done = elector.transfer(role, to)
    except Exception as exc:  # an elect error (refused), or a fault of ours: either way the controller hears of it
        return {"role": str(role), "to": to, "error": type(exc).__name__, "message": str(exc)}
    return {"role": str(role), "to": to, "leader": done.leader, "seconds": round(done.seconds, 6),
            "confirmed": done.confirmed, "mono": round(time.monotonic(), 6)}


def _say(line: str) -> None:
    """One whole line on stderr: reports come from several threads (workers, observers), and `print` writes the
    text and its newline apart, so two threads' lines could run together and a harness would miss one."""
    with _STDERR:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _stderr(member: str, kind: str, report: dict[str, Any], text: str = "") -> None:
    _say(report_line(member, kind, report, text))


class _Workers:
    """The `--work` workers: one `Elector.run` for the roles at start, one more for each role added later."""

    def __init__(self, elector: Elector, finish: float) -> None:
        self.elector = elector
        self.worker = Worker(finish, lambda report: _stderr(elector.member, WORK, report))
        self.covered: set[Role] = set()

    def cover(self, roles: Iterable[Role]) -> None:
        new = [r for r in roles if r not in self.covered]
        if new:
            self.elector.run(new, self.worker)
            self.covered.update(new)


def _control_loop(elector: Elector, stop: threading.Event, workers: _Workers | None,
                  leaving: threading.Event) -> None:
    for raw in sys.stdin:
        words = raw.split()
        if not words:
            continue
        verb, args = words[0].lower(), [_role_word(w) for w in words[1:]]
        try:
            if verb == "resign":
                for role in args:
                    elector.resign(role)
            elif verb == "transfer" and len(words) == 3:
                _stderr(elector.member, TRANSFERRED, transfer_report(elector, args[0], words[2]))
            elif verb == "add":
                elector.add_roles(args)
                if workers is not None:
                    workers.cover(args)
            elif verb == "remove":
                elector.remove_roles(args)
            elif verb == "stop":
                break
            elif verb == "leave" and hasattr(elector, "leave"):  # raft://: stop as --leave does
                leaving.set()
                break
            else:
                _say(f"elect member: unknown command {verb!r} (resign R, transfer R TO, add, remove, stop, leave)")
        except Exception as exc:  # a bad command must not kill the member
            _say(f"elect member: {raw.strip()!r} failed: {exc}")
    stop.set()


def _role_word(word: str) -> Role:
    if word.startswith('"'):
        word = str(json.loads(word))
    return parse_role(word)


def run(args: argparse.Namespace) -> int:
    elector = build_elector(args)
    if args.leave and not hasattr(elector, "leave"):
        raise NotSupported(f"--leave: {elector.scheme}:// keeps no configuration of members to leave (a member that "
                           "stops is simply gone); it is raft://'s")
    if not elector.roles:  # legal (roles may come later, `add` on --control), but rarely what was meant
        _say(f"elect member: {elector.member} contends for no roles: give --roles a,b,c (or roles: in --config), "
             "or add them later with `add R` on --control")
    stop = threading.Event()
    leaving = threading.Event()  # `leave` on --control: as --leave
    signals = {"count": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            raise SystemExit(128 + signum)  # second signal: stop waiting for a graceful handover
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.observe:  # first: a method that cannot observe refuses before anything starts
        elector.observe(lambda seen: _stderr(elector.member, LEADER, seen.to_dict()))
    metrics = None
    if args.metrics_port is not None:
        metrics = elector.metrics()
        port = metrics.serve(args.metrics_port, args.metrics_host)
        shown = f"[{args.metrics_host}]" if ":" in args.metrics_host else args.metrics_host
        _stderr(elector.member, METRICS, {"port": port, "url": f"http://{shown}:{port}/metrics"})
    writer = _writer(args, elector)
    elector.subscribe(_Printer(args.revoke_delay, gone=stop.set))
    workers = None
    if args.work is not None:  # after the printer: a revoked line is printed when the handover begins
        workers = _Workers(elector, max(0.0, args.work))
        workers.cover(elector.roles)
    heap = _HeapFreeze(quiet=1.0)
    elector.subscribe(heap)
    elector.start()
    _say(f"elect member: {elector.member} {STARTED} {elector.scheme}:// with {_roles_said(elector.roles)}")
    if args.control:
        threading.Thread(target=_control_loop, args=(elector, stop, workers, leaving), daemon=True,
                         name="control").start()
    while not stop.wait(0.5):  # wake periodically so signal handlers run promptly
        heap.poll()
        if elector.failure is not None:
            break
    if elector.failure is not None:  # nothing to hand over: it fenced everything as it stopped
        elector.stop()
        _stderr(elector.member, FAILED, {"error": str(elector.failure)})
        if writer is not None:
            writer.close()
        if metrics is not None:
            metrics.close()
        return 4
    leave = getattr(elector, "leave", None) if args.leave or leaving.is_set() else None
    drained = leave() if leave is not None else elector.drain()
    _stderr(elector.member, DRAINED, drained_report(drained), f"in {drained.seconds:.3f} s ")
    if leave is not None:
        left = getattr(elector, "left", None)
        _stderr(elector.member, LEFT, {"left": left is not None, "configuration": left})
    if isinstance(elector, BaseElector) and elector.steps:
        _stderr(elector.member, TIMED, elector.timings())
    if writer is not None:
        writer.close()  # after the elector: its Revoked callbacks finish their writes first
    if metrics is not None:
        metrics.close()
    _say(f"elect member: {elector.member} stopped")
    return 0


def _writer(args: argparse.Namespace, elector: Elector) -> FencedWriter | None:
    """With `--write-to`, the workload that writes to the fenced store while this member leads, subscribed ahead
    of the printer so a Revoked line follows the end of the role's last write."""
    if not args.write_to:
        return None
    from elect_bench.fenced.client import parse_address
    from elect_bench.fenced.writer import FencedWriter

    try:
        address = parse_address(args.write_to)
    except ValueError as exc:
        raise ConfigError(str(exc), parameter="--write-to") from None
    writer = FencedWriter(elector, address, every=args.write_every, log=args.write_log)
    elector.subscribe(writer)
    writer.start()
    return writer


def _roles_said(roles: Iterable[object], shown: int = 10) -> str:
    """The roles for the started line: all of a few, else a count and the first few (a line of 6,000 names helps
    no one reading a log)."""
    names = sorted(map(str, roles))
    if len(names) <= shown:
        return f"roles {names}"
    return f"{len(names)} roles {names[:shown]} ..."
