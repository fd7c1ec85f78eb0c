"""The asyncio version of fenced_service.py: one task per role, each writing inside `async with e.hold(role)`.

    python examples/fenced_service_async.py etcd://127.0.0.1:2379/demo --roles orders,invoices --id a \\
        --store 127.0.0.1:7000

Same store, same flags (minus --config and --metrics-port, kept out to keep it short), same drain on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal

import elect.aio
from elect_bench.fenced.client import Address, parse_address


async def lead_forever(e: elect.aio.AsyncElector, role: str, store: Address, every: float) -> None:
    """Wait to lead `role`, write under its token until the leadership ends, then wait to lead it again.

    `hold` cancels the block when the leadership ends (handover, fence, deadline) and the `async with` ends
    quietly; an orderly handover waits for the block to exit, so the successor never overlaps our last write.
    """
    while True:
        async with e.hold(role) as lead:
            print(f"{lead.member} leads {role} under token {lead.token}", flush=True)
            # the store's protocol (a JSON line each way) on asyncio streams: StoreClient is its blocking twin
            reader, writer = await asyncio.open_connection(*store)
            try:
                seq = 0
                while True:
                    message = {"op": "write", "role": role, "member": lead.member, "token": lead.token, "seq": seq}
                    writer.write(json.dumps(message).encode() + b"\n")
                    await writer.drain()
                    reply = json.loads(await reader.readline())
                    if not reply.get("ok"):  # a newer token reached the store: ours is stale
                        print(f"{lead.member} refused for {role}: {reply}", flush=True)
                        break
                    seq += 1
                    await asyncio.sleep(every)
            finally:
                writer.close()
        # a refused write also ends up here while still leading: hand the role over rather than spin on it
        if e.is_leader(role):
            with contextlib.suppress(elect.NotStarted):
                await e.resign(role)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--roles", required=True, help="roles to lead, comma-separated")
    parser.add_argument("--id", help="member id")
    parser.add_argument("--store", required=True, type=parse_address, help="fenced store HOST:PORT")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between writes")
    args = parser.parse_args()
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]

    e = elect.aio.connect(args.url, roles, member=args.id)
    stop = asyncio.Event()  # the loop's own signal handling: the handler runs on the loop, not mid-await
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await e.start()
    print(f"{e.member} started: contending for {sorted(roles)}", flush=True)
    tasks = [asyncio.create_task(lead_forever(e, role, args.store, args.every)) for role in roles]
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
