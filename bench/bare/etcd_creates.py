"""How fast etcd takes create-if-absent writes from Python through its JSON gateway, as elect's lease sends them:
transactions of 100 nested per-key transactions, on 1, 2 and 4 connections side by side.

A member taking over a dead member's 2,000 roles must expire and create each, so this rate over 2,000 says how
long a takeover costs at the store, before any election logic."""

from __future__ import annotations

import argparse
import threading
import time
import uuid

from elect.etcd_gateway import Gateway, b64


def _lane(endpoint: str, prefix: str, batches: int, per: int, took: list[float]) -> None:
    gw = Gateway((endpoint,))
    began = time.monotonic()
    try:
        for b in range(batches):
            nested = []
            for i in range(per):
                key = b64(f"/{prefix}/b{b}/r{i}")
                nested.append({"request_txn": {
                    "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
                    "success": [{"request_put": {"key": key, "value": b64("x" * 60)}}], "failure": []}})
            gw.call("kv/txn", {"compare": [], "success": nested, "failure": []}, 10.0)
    finally:
        gw.close()
    took.append(time.monotonic() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("endpoint", help="HOST:PORT of an etcd client URL (plain HTTP)")
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--per", type=int, default=100, help="nested transactions per request")
    args = parser.parse_args()
    run = uuid.uuid4().hex[:8]
    for lanes in (1, 2, 4):
        took: list[float] = []
        batches = max(1, args.keys // (args.per * lanes))
        threads = [threading.Thread(target=_lane, args=(args.endpoint, f"bare-{run}/{lanes}-{k}", batches, args.per,
                                                        took)) for k in range(lanes)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
        keys = batches * args.per * lanes
        print(f"{lanes} connection(s): {keys} creates in {elapsed:.2f} s = {keys / elapsed:,.0f}/s")


if __name__ == "__main__":
    main()
