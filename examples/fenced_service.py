"""A service that leads some roles and, while it leads each one, writes to a database under its token.

    python examples/fenced_service.py etcd://127.0.0.1:2379/demo --roles orders,invoices --id a --db ledger.db
    python examples/fenced_service.py --config elect.yaml --db ledger.db [--metrics-port 9100]

Start two or more copies on one host with the same `--db` (an sqlite file: the resource they share); SIGTERM (or
Ctrl-C) one of them and watch the others take its roles over and write on under higher tokens. Copy it, and put your
own resource where the ledger is: all that matters is that a write carrying an older token is refused there, in
the same step as the write itself.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
import threading
from types import FrameType

import elect

SCHEMA = """
CREATE TABLE IF NOT EXISTS fence (role TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY, role TEXT, member TEXT, token INTEGER, seq INTEGER);
"""

#: Moves the role's fence up to our token, or changes nothing if a newer leader has written: the check and the
#: write it guards happen in one transaction, so there is no moment between them for a newer leader to write.
FENCE = """
INSERT INTO fence (role, token) VALUES (?, ?)
ON CONFLICT (role) DO UPDATE SET token = excluded.token WHERE excluded.token >= fence.token
"""


class StaleToken(Exception):
    """The ledger has seen a newer leader of the role: this one must stop writing."""


class Ledger:
    """The resource the service guards: an sqlite file that every copy of the service on this host shares, and
    that refuses a write under a token older than the newest it has taken for the role (the fencing token's rule).
    A connection is used by one thread at a time (the asyncio twin hands it to worker threads in turn); WAL so that
    readers do not block the writer."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def write(self, role: str, member: str, token: int, seq: int) -> None:
        """Record one write under `token`, or raise StaleToken (nothing written) if a newer leader has written."""
        self.db.execute("BEGIN IMMEDIATE")  # one writer at a time across processes
        try:
            if self.db.execute(FENCE, (role, token)).rowcount == 0:
                raise StaleToken(f"{role}: the ledger has a token newer than {token}")
            self.db.execute("INSERT INTO writes (role, member, token, seq) VALUES (?, ?, ?, ?)",
                            (role, member, token, seq))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


def say(text: str) -> None:
    """One flushed line on stdout, written whole: worker threads print too (`print` writes the text and the newline
    separately, so two workers starting together ran their lines into one), and whoever reads us (a log, a test)
    sees it now."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Writer:
    """The work done while leading a role: `fn(lead, stop)` for `Elector.run`."""

    def __init__(self, db: str, every: float) -> None:
        self.db = db
        self.every = every

    def __call__(self, lead: elect.Leadership, stop: threading.Event) -> None:
        """Write under `lead.token` until `stop` is set.

        elect calls this on a thread of its own for each leadership, and sets `stop` when the leadership ends
        (handed over, fenced, or its deadline passed). The token is what makes it safe: a member that still
        believes it leads after a successor took over (a long GC pause, a network cut) writes with an older
        token, which the ledger refuses. Returning promptly on `stop` matters too: an orderly handover waits for
        this function to return, so the successor never starts while we are mid-write.
        """
        say(f"{lead.member} leads {lead.role} under token {lead.token}")
        seq = 0
        # An error propagates (StaleToken, or the database unusable): elect logs it and releases the role for a
        # back-off (run's on_error="release"), so that a member that can do the work leads it instead.
        ledger = Ledger(self.db)
        try:
            while not stop.is_set():
                ledger.write(str(lead.role), lead.member, lead.token, seq)
                seq += 1
                stop.wait(self.every)  # a pause between writes that still wakes at once on `stop`
        finally:
            ledger.close()
        say(f"{lead.member} stopped writing {lead.role} under token {lead.token} after {seq} writes")


def connect(args: argparse.Namespace) -> elect.Elector:
    """The elector, from a URL plus flags or from a YAML file (same keys: `url` or `elector`, `member`, `roles`)."""
    roles = [r.strip() for r in ",".join(args.roles).split(",") if r.strip()]
    if args.config:
        e = elect.from_config(args.config)
    elif args.url and roles:
        e = elect.connect(args.url, roles, member=args.id)
    else:
        raise SystemExit("give an elect URL and --roles, or --config FILE")
    if not e.characteristics.has_token:  # fencing needs a token that grows from leader to leader: refuse early
        raise SystemExit(f"{e.scheme}:// as configured gives no fencing token")
    return e


def serve_metrics(e: elect.Elector, port: int) -> None:
    """Prometheus metrics (elect_leader, transitions, failover...) if prometheus_client is installed."""
    try:
        served = e.metrics().serve(port)
    except elect.MissingExtra as exc:  # optional: the service runs without it
        say(f"{e.member} serves no metrics: {exc}")
        return
    say(f"{e.member} metrics on http://127.0.0.1:{served}/metrics")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", help="elect URL, e.g. etcd://127.0.0.1:2379/demo")
    parser.add_argument("--roles", action="append", default=[], help="roles to lead, comma-separated")
    parser.add_argument("--id", help="member id (default: from the URL or config, else host-pid)")
    parser.add_argument("--config", help="YAML configuration (elect.from_config) instead of URL and --roles")
    parser.add_argument("--db", default="ledger.db", help="the sqlite file the copies share (default ledger.db)")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between writes (default 0.05)")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics here (0: the OS chooses)")
    args = parser.parse_args(argv)

    e = connect(args)
    # Signals only set a flag: the handover itself (drain) blocks, and must not run inside a signal handler.
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.metrics_port is not None:
        serve_metrics(e, args.metrics_port)
    # `run` before `start`, so that no leadership, not even the first, goes without its writer.
    e.run(e.roles, Writer(args.db, args.every))
    e.start()
    say(f"{e.member} started: {e.scheme}:// contending for {sorted(map(str, e.roles))}")
    while not stop.wait(0.5):  # wake now and then: Python runs signal handlers only on the main thread
        pass
    # drain, not stop: hand every role over, wait for the writers to return (that holds each successor back),
    # then wait until this member sees who took each role, so a deploy can tell that nothing went unled.
    drained = e.drain()
    successors = None if drained.successors is None else {str(r): m for r, m in drained.successors.items()}
    say(f"{e.member} drained in {drained.seconds:.3f} s; successors {json.dumps(successors)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
