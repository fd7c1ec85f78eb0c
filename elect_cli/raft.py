"""`elect raft members|add|remove`: a raft:// cluster's membership, read and changed through any running node.

    elect raft members raft://a@127.0.0.1:7001?...      (or just 127.0.0.1:7001)
    elect raft add 127.0.0.1:7001 d@127.0.0.1:7004      (d then starts with join=..., or already runs with it)
    elect raft remove 127.0.0.1:7001 c                  (a dead member, or one to retire)

`members` prints the configuration the node holds as JSON: {"version": N, "committed": bool, "leader": ID,
"members": [{"id": ..., "address": ..., "voter": true}]}. `add` and `remove` ask whichever node leads the cluster
group, wait until the change is committed (--timeout, default 30 s) and print the configuration then. A node with
mutual TLS is reached with --ca, --cert and --key (a certificate of the cluster's CA). Exit codes as every `elect`
command: 2 a request the cluster refused, 3 no node answered or the change was not committed in time.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from elect.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser("raft", help="a raft:// cluster's members: list, add, remove",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, text in (("members", "print the configuration as JSON"), ("add", "add a member: ID@HOST:PORT"),
                       ("remove", "remove a member: ID")):
        v = verbs.add_parser(name, help=text)
        v.add_argument("node", help="a running node: its raft:// URL or HOST:PORT")
        if name == "add":
            v.add_argument("member", help="ID@HOST:PORT of the node to add (or of a member that moved)")
        elif name == "remove":
            v.add_argument("member", help="the id of the member to remove")
        v.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
        for f in ("ca", "cert", "key"):
            v.add_argument(f"--{f}", help=f"mutual TLS: {f} PEM file (as the node's own {f}=)")
        v.set_defaults(run=run)


def _address(text: str) -> tuple[str, str | None]:
    """HOST:PORT (and the node's id, when a URL names it) of a node given as a raft:// URL or HOST:PORT."""
    from raft_priority.options import split_host_port

    if text.startswith("raft://"):
        rest = text[len("raft://"):].split("?", 1)[0].rstrip("/")
        ident, _, where = rest.rpartition("@")
        if split_host_port(where) is None:
            raise ConfigError(f"cannot read HOST:PORT from {text!r}", parameter="node")
        return where, ident or None
    if split_host_port(text) is None:
        raise ConfigError(f"expected a raft:// URL or HOST:PORT, got {text!r}", parameter="node")
    return text, None


def run(args: argparse.Namespace) -> int:
    from raft_priority import admin
    from raft_priority.grpc_link import Tls
    from raft_priority.options import parse_peer

    given = [f for f in ("ca", "cert", "key") if getattr(args, f)]
    if given and len(given) != 3:
        raise ConfigError("mutual TLS needs --ca, --cert and --key together", parameter="ca")
    tls = Tls.load(args.ca, args.cert, args.key) if given else None
    address, ident = _address(args.node)
    if args.verb == "members":
        out = admin.members(address, args.timeout, tls, ident)
        out.pop("static", None)
    elif args.verb == "add":
        parsed = parse_peer(args.member)
        if parsed is None:
            raise ConfigError(f"expected ID@HOST:PORT, got {args.member!r}", parameter="member")
        out = admin.reconfigure(address, {parsed[0]: parsed[1]}, [], args.timeout, tls, ident)
    else:
        out = admin.reconfigure(address, {}, [args.member], args.timeout, tls, ident)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0
