"""The asyncio version of fenced_service.py: one task per role, each writing inside `async with e.hold(role)`.

    python examples/fenced_service_async.py etcd://127.0.0.1:2379/demo --roles orders,invoices --id a --db ledger.db

Same ledger, same flags (minus --config and --metrics-port, kept out to keep it short), same drain on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal

from fenced_service import Ledger, StaleToken  # its twin, beside it (a script's folder is on sys.path)

import elect.aio


async def lead_forever(e: elect.aio.AsyncElector, role: str, db: str, every: float) -> None:
    """Wait to lead `role`, write under its token until the leadership ends, then wait to lead it again.

    `hold` cancels the block when the leadership ends (handover, fence, deadline) and the `async with` ends
    quietly; an orderly handover waits for the block to exit, so the successor never overlaps our last write.
    """
    ledger = Ledger(db)  # sqlite blocks: each write runs on a worker thread (asyncio.to_thread)
    try:
        while True:
            stale = False
            async with e.hold(role) as lead:
                print(f"{lead.member} leads {role} under token {lead.token}", flush=True)
                seq = 0
                while True:
                    try:
                        await asyncio.to_thread(ledger.write, role, lead.member, lead.token, seq)
                    except StaleToken as exc:  # a newer leader wrote: ours is stale
                        print(f"{lead.member} refused for {role}: {exc}", flush=True)
                        stale = True
                        break
                    seq += 1
                    await asyncio.sleep(every)
            # refused while still leading: hand the role over rather than spin on it
            if stale and e.is_leader(role):
                with contextlib.suppress(elect.NotStarted):
                    await e.resign(role)
    finally:
        ledger.close()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--roles", required=True, help="roles to lead, comma-separated")
    parser.add_argument("--id", help="member id")
    parser.add_argument("--db", default="ledger.db", help="the sqlite file the copies share (default ledger.db)")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between writes")
    args = parser.parse_args()
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]

    e = elect.aio.connect(args.url, roles, member=args.id)
    stop = asyncio.Event()  # the loop's own signal handling: the handler runs on the loop, not mid-await
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await e.start()
    print(f"{e.member} started: contending for {sorted(roles)}", flush=True)
    tasks = [asyncio.create_task(lead_forever(e, role, args.db, args.every)) for role in roles]
    await stop.wait()
    drained = await e.drain()  # ends each leadership, which ends each `hold` block in turn
    for task in tasks:  # then the tasks, now waiting for a leadership that will not come
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    successors = None if drained.successors is None else {str(r): m for r, m in drained.successors.items()}
    print(f"{e.member} drained in {drained.seconds:.3f} s; successors {json.dumps(successors)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
