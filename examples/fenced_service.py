"""A service that leads some roles and, while it leads each one, writes to a fenced store under its token.

    python examples/fenced_service.py etcd://127.0.0.1:2379/demo --roles orders,invoices --id a \\
        --store 127.0.0.1:7000 [--metrics-port 9100]
    python examples/fenced_service.py --config elect.yaml --store 127.0.0.1:7000

Start the store first (`python -m elect_bench.fenced.store --port 7000 --log attempts.jsonl`), then two or more
copies of this service; SIGTERM (or Ctrl-C) one of them and watch the others take its roles over.
Copy it, and put your own resource where the store is: all that matters is that it refuses a stale token.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType

import elect
from elect_bench.fenced.client import Address, StoreClient, parse_address


def say(text: str) -> None:
    """One flushed line on stdout, written whole: worker threads print too (`print` writes the text and the newline
    separately, so two workers starting together ran their lines into one), and whoever reads us (a log, a test)
    sees it now."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Writer:
    """The work done while leading a role: `fn(lead, stop)` for `Elector.run`."""

    def __init__(self, store: Address, every: float) -> None:
        self.store = store
        self.every = every

    def __call__(self, lead: elect.Leadership, stop: threading.Event) -> None:
        """Write under `lead.token` until `stop` is set.

        elect calls this on a thread of its own for each leadership, and sets `stop` when the leadership ends
        (handed over, fenced, or its deadline passed). The token is what makes it safe: a member that still
        believes it leads after a successor took over (a long GC pause, a network cut) writes with an older
        token, which the store refuses. Returning promptly on `stop` matters too: an orderly handover waits for
        this function to return, so the successor never starts while we are mid-write.
        """
        say(f"{lead.member} leads {lead.role} under token {lead.token}")
        seq = 0
        # An error (the store unreachable) propagates: elect logs it and resigns the role, so that a member
        # that can reach the store leads it instead; this member may get it back later, after a back-off.
        with StoreClient(self.store) as client:
            while not stop.is_set():
                reply = client.request({"op": "write", "role": str(lead.role), "member": lead.member,
                                        "token": lead.token, "seq": seq})
                if not reply.get("ok"):  # a newer token reached the store: ours is stale. Raising makes elect
                    # resign the role if we still believe we lead it, rather than lead it without doing the work.
                    raise RuntimeError(f"the store refused {lead.role} under token {lead.token}: {reply}")
                seq += 1
                stop.wait(self.every)  # a pause between writes that still wakes at once on `stop`
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
    parser.add_argument("--store", required=True, type=parse_address, help="fenced store HOST:PORT")
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
    e.run(e.roles, Writer(args.store, args.every))
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
