"""What a bare consumer group does at rest, nothing faulted: revocations per minute among 3 confluent-kafka consumers
of 6 partitions, for a few session timeouts, on the classic and the KIP-848 protocol (elect_bench.rebalance).

A NELI group can be no calmer than the group it rides on: every revocation is a leadership change."""

from __future__ import annotations

import argparse

from elect_bench.rebalance import LIMIT, revocations_at_rest
from elect_cluster.waiting import WaitTimeout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap", help="HOST:PORT of a plaintext listener")
    parser.add_argument("--sessions", default="0.1,0.2,0.5,1.0", help="comma-separated session timeouts, seconds")
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds at rest per setting")
    args = parser.parse_args()
    for protocol in args.protocols.split(","):
        for session in (float(s) for s in args.sessions.split(",")):
            try:
                revoked = revocations_at_rest(args.bootstrap, 3, 6, session, protocol, args.seconds)
            except WaitTimeout:
                print(f"{protocol:8} session {session:g} s: the group never shared its partitions evenly in "
                      f"{LIMIT:g} s")
                continue
            print(f"{protocol:8} session {session:g} s: {revoked} revocations in {args.seconds:g} s at rest "
                  f"({60 * revoked / args.seconds:.0f}/min; 3 consumers, 6 partitions)")


if __name__ == "__main__":
    main()
