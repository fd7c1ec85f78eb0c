"""One member of the official Kubernetes Python client's leader election, printing the harness's event lines
(bench/anchors/README.md).

`kubernetes.leaderelection` (the `kubernetes` package, pinned by elect's `anchors` extra) with its `LeaseLock`:
one `LeaderElection` per role, each on a thread of its own, as its example does; `onstarted_leading` leads until
the elector's renew loop gives up, which is when `onstopped_leading` runs. Nothing of the client is changed or
copied; the kubeconfig is loaded with the client's own `config.load_kube_config`.

What the client does as published, and this adapter shows: its timings are whole seconds of at least 1
(lease_duration > renew_deadline > 1.2 retry_period, each >= 1, so at least 3 s / 2 s / 1 s); a candidate times a
record on the wall clock (`time.time()`); its LeaseLock never writes `leaseTransitions`, so there is no token
(printed as 0); `run()` has no way to stop, so a member that exits leaves its Lease held until the duration passes
(kubernetes-client/python#1669: no release on exit).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from types import FrameType

from kubernetes import config
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

_print_lock = threading.Lock()
_leading: set[str] = set()  # roles led now (under _print_lock): a member that exits stops leading them


def emit(member: str, role: str, event: str, token: int = 0) -> None:
    with _print_lock:
        if (event == "acquired") == (role in _leading):
            return  # nothing changed (a revoke after the exit already said so)
        (_leading.add if event == "acquired" else _leading.discard)(role)
        line = {"ts": time.time(), "mono": time.monotonic(), "member": member, "role": role, "event": event,
                "token": token}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def contend(member: str, role: str, name: str, namespace: str, lease: int, renew: int, retry: int,
            stopping: threading.Event) -> None:
    """Contend for `role` again and again: `run()` returns only once a leadership has ended."""
    while not stopping.is_set():
        ended = threading.Event()

        def started(ended: threading.Event = ended) -> None:
            emit(member, role, "acquired")
            ended.wait()  # leads until the elector says it stopped (or the process ends)

        def stopped(ended: threading.Event = ended) -> None:
            emit(member, role, "revoked")
            ended.set()

        lock = LeaseLock(name, namespace, member)
        conf = electionconfig.Config(lock, lease, renew, retry, started, stopped)
        try:
            leaderelection.LeaderElection(conf).run()
        except Exception as exc:  # the client raises on what its API calls meet; contend again, as a user would
            print(f"k8s-python-member {member}: role {role}: {exc!r}", file=sys.stderr, flush=True)
            stopping.wait(retry)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--id", required=True)
    p.add_argument("--roles", required=True, help="comma-separated role names")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", default="default")
    p.add_argument("--prefix", default="elect-anchor", help="role r's Lease is PREFIX-r")
    p.add_argument("--lease-duration", type=int, default=15)
    p.add_argument("--renew-deadline", type=int, default=10)
    p.add_argument("--retry-period", type=int, default=2)
    args = p.parse_args()
    config.load_kube_config(config_file=args.kubeconfig)
    stopping = threading.Event()
    for role in [r for r in args.roles.split(",") if r]:
        threading.Thread(target=contend, daemon=True, name=f"role-{role}",
                         args=(args.id, role, f"{args.prefix}-{role}", args.namespace, args.lease_duration,
                               args.renew_deadline, args.retry_period, stopping)).start()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"elect member: {args.id} started on k8s-python ({args.kubeconfig})", file=sys.stderr, flush=True)
    while not stopping.wait(0.5):
        pass
    with _print_lock:
        held = sorted(_leading)
    for role in held:  # the application stops leading; the client cannot release: the Leases stay held
        emit(args.id, role, "revoked")
    sys.stdout.flush()
    sys.stderr.flush()
    # not sys.exit: the role threads are daemons inside the client's HTTP calls, and an interpreter finalizing
    # under them can abort (SIGABRT, seen in CI) on a stream lock one of them holds; nothing is left to clean up
    os._exit(0)


if __name__ == "__main__":
    main()
