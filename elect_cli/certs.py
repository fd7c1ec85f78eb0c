"""`elect certs make DIR --members a,b,c`: a CA and a certificate per member, for mutual TLS in tests and quick
starts (elect_cluster.certs). Then `raft://a@...?ca=DIR/ca.crt&cert=DIR/a.crt&key=DIR/a.key`; the same files
serve etcd://, zookeeper:// and kafka:// (`ca=`, `cert=`, `key=`), servers' certificates made with `--hosts`, and
clients of an etcd with authentication on need `--no-common-name`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from elect.errors import ConfigError, MissingExtra


def register(sub: Any) -> None:
    p = sub.add_parser("certs", help="make a CA and a certificate per member (mutual TLS for tests and demos)")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    make = verbs.add_parser("make", help="write DIR/ca.crt, ca.key and MEMBER.crt, MEMBER.key per member")
    make.add_argument("dir", type=Path)
    make.add_argument("--members", required=True, help="comma-separated member ids (each certificate names one)")
    make.add_argument("--hosts", default="",
                      help="comma-separated extra host names or IPs every certificate is valid for "
                           "(servers dialled by host: etcd, ZooKeeper, Kafka), e.g. localhost,127.0.0.1")
    make.add_argument("--no-common-name", action="store_true",
                      help="put each name in the DNS name and organization only: etcd's JSON gateway refuses client "
                           "certificates with a common name while authentication is on")
    make.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    members = [m.strip() for m in args.members.split(",") if m.strip()]
    if not members or len(set(members)) != len(members):
        raise ConfigError("name one or more distinct member ids, e.g. --members a,b,c", parameter="members")
    try:
        from elect_cluster.certs import make_certs
    except ImportError as exc:
        raise MissingExtra("elect certs needs the cryptography package: pip install 'elect[tls]'") from exc
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    ca, issued = make_certs(args.dir, members, hosts=hosts, common_name=not args.no_common_name)
    print(f"CA: {ca.cert} (key {ca.key}: keep it to issue more, or delete it)")
    for one in issued:
        print(f"{one.name}: cert={one.cert} key={one.key}")
    return 0
