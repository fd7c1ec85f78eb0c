"""The fenced store: a tiny server that takes writes per role and refuses one whose fencing token is older
than the newest it has accepted for that role.

`python -m elect_bench.fenced.store --port 0 --log FILE [--unfenced] [--host H]` prints `{"port": N}` as its
first stdout line, then serves one JSON object per line over TCP until SIGTERM or SIGINT:

- `{"op": "write", "role": R, "member": M, "token": T, "seq": S}` -> `{"ok": true}`, or
  `{"ok": false, "highest": H}` when T is below H, the highest token accepted for R (only when fenced:
  `--unfenced` accepts everything, and still keeps H so the log shows what fencing would have refused);
- `{"op": "dump"}` -> `{"ok": true, "writes": {R: [{"member", "token", "seq", "mono"}, ...]}}`, every
  accepted write per role in acceptance order;
- anything else -> `{"ok": false, "error": "..."}`, and the connection stays open.

Every write attempt, accepted or not, is appended to the log as one flushed JSON line: `mono`
(`time.monotonic()`, one clock for every process on the machine), `role`, `member`, `token`, `seq`,
`accepted`, `highest_before`.

Why a process of our own rather than compare-guards in etcd: it isolates what the elector does from any
store's own semantics (etcd's revisions, leases and retries would mix into what is measured); its log is the
single ground-truth order in which writes were accepted, written by one thread; and it costs nothing to
start, so every trial gets a fresh one whatever method it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

Reply = dict[str, Any]

LINE_LIMIT = 1 << 20  # bytes; a longer line is answered with an error and skipped


class Ledger:
    """What the store holds and decides, apart from the network: highest token and accepted writes per role,
    and the attempt log. One asyncio thread calls it, so decisions and log lines have one order."""

    def __init__(self, log: IO[str], *, fenced: bool = True) -> None:
        self.fenced = fenced
        self.highest: dict[str, int] = {}
        self.accepted: dict[str, list[dict[str, Any]]] = {}
        self._log = log

    def handle(self, raw: bytes) -> Reply:
        """The reply to one request line; never raises for a bad line."""
        try:
            request = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            return _error(f"not a JSON line: {exc}")
        if not isinstance(request, dict):
            return _error("a request is a JSON object")
        op = request.get("op")
        if op == "write":
            return self.write(request)
        if op == "dump":
            return {"ok": True, "writes": self.accepted, "highest": self.highest}
        return _error(f"unknown op {op!r} (write, dump)")

    def write(self, request: dict[str, Any]) -> Reply:
        role, member, token, seq = (request.get(k) for k in ("role", "member", "token", "seq"))
        if not isinstance(role, str) or not isinstance(member, str):
            return _error("a write names its role and member as strings")
        if not isinstance(token, int) or isinstance(token, bool) or not isinstance(seq, int) or isinstance(seq, bool):
            return _error("a write carries an integer token and seq")
        return self._decide(role, member, token, seq)

    def _decide(self, role: str, member: str, token: int, seq: int) -> Reply:
        before = self.highest.get(role)
        accepted = not self.fenced or before is None or token >= before
        now = time.monotonic()
        if accepted:
            self.highest[role] = token if before is None else max(before, token)
            self.accepted.setdefault(role, []).append({"member": member, "token": token, "seq": seq, "mono": now})
        self._log.write(json.dumps({"mono": now, "role": role, "member": member, "token": token, "seq": seq,
                                    "accepted": accepted, "highest_before": before}) + "\n")
        self._log.flush()
        return {"ok": True} if accepted else {"ok": False, "highest": before}


def _error(why: str) -> Reply:
    return {"ok": False, "error": why}


async def serve(ledger: Ledger, host: str, port: int, announce: IO[str]) -> None:
    """Serve until SIGTERM or SIGINT; the first line on `announce` is the port."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    open_writers: set[asyncio.StreamWriter] = set()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        open_writers.add(writer)
        buffer, overlong = b"", False  # overlong: dropping a line past LINE_LIMIT until its end arrives
        try:
            while chunk := await reader.read(65536):
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    raw, buffer = buffer[:end], buffer[end + 1:]
                    if overlong:
                        overlong, reply = False, _error(f"line longer than {LINE_LIMIT} bytes")
                    elif raw.strip():
                        reply = ledger.handle(raw)
                    else:
                        continue
                    writer.write(json.dumps(reply).encode() + b"\n")
                if len(buffer) > LINE_LIMIT:
                    buffer, overlong = b"", True
                await writer.drain()
        except ConnectionError:
            pass  # the client went away
        finally:
            open_writers.discard(writer)
            writer.close()

    server = await asyncio.start_server(client, host, port)
    announce.write(json.dumps({"port": server.sockets[0].getsockname()[1]}) + "\n")
    announce.flush()
    async with server:
        await stop.wait()
        server.close()
        for writer in list(open_writers):
            writer.close()
        await server.wait_closed()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elect_bench.fenced.store", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: one from the OS)")
    parser.add_argument("--log", type=Path, required=True, help="append every write attempt here (JSONL)")
    parser.add_argument("--unfenced", action="store_true", help="accept stale tokens too (record them all the same)")
    args = parser.parse_args(argv)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with open(args.log, "a", encoding="utf-8") as log, contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(Ledger(log, fenced=not args.unfenced), args.host, args.port, sys.stdout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
