"""The workload of `elect member --write-to HOST:PORT`: while the member believes it leads a role, write to the
fenced store (elect_bench.fenced.store) under that role's fencing token, as an application guarding a
resource would.

Belief is what the member's event lines say: from its `Acquired` until its `Revoked` or `Fenced`, seen
through the same subscription that prints them. Before each write the elector is asked as an application
asks it (`leadership(role)`: `is_leader` and the token in one read), so a lapsed lease stops writes even
before its `Fenced` event is delivered. Writes come from one thread of their own, so event callbacks never
wait for the network, except a `Revoked` callback, which waits (bounded) for a write of that role still in
flight: an orderly handover leaves no write of the old leader after its `Revoked` callback returned.

Each write carries a per-member sequence number that only rises, also across restarts of the member: it
starts at the monotonic clock in microseconds and counts up by one per write. Every acknowledged write (the
store said ok) is appended to the write log as a flushed JSON line: `mono`, `role`, `member`, `token`, `seq`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import IO, Protocol

from elect.contract import Leadership
from elect.events import Acquired, Event, Revoked
from elect.roles import Role
from elect_bench.fenced.client import Address, StoreClient


class HoldsLeaderships(Protocol):
    """What the writer asks of an elector."""

    member: str

    def leadership(self, role: Role) -> Leadership | None: ...


class FencedWriter:
    """Subscribe it to an elector (it is the callback), `start()` it, and `close()` it after the elector stopped.

    `every`: seconds between rounds (each round writes once to every role led). `timeout`: the longest one
    connect or write may take, and so about the longest a `Revoked` callback waits.
    """

    def __init__(self, elector: HoldsLeaderships, address: Address, *, every: float = 0.02, log: Path | None = None,
                 timeout: float = 1.0) -> None:
        self.elector = elector
        self.address = address
        self.every = every
        self.timeout = timeout
        self.acked = 0
        self.refused = 0
        self._log: IO[str] | None = open(log, "a", encoding="utf-8") if log is not None else None  # noqa: SIM115
        self._cond = threading.Condition()
        self._believed: set[Role] = set()
        self._in_flight: Role | None = None
        self._stopping = False
        self._seq = int(time.monotonic() * 1_000_000)  # above every seq an earlier run of this member used
        self._client: StoreClient | None = None
        self._thread = threading.Thread(target=self._run, name="fenced-writer", daemon=True)

    # ------------------------------------------------------------------ the callback (event thread)
    def __call__(self, event: Event) -> None:
        with self._cond:
            if isinstance(event, Acquired):
                self._believed.add(event.role)
                self._cond.notify_all()
                return
            self._believed.discard(event.role)
            if isinstance(event, Revoked):  # finish the write in flight before the successor may start
                self._cond.wait_for(lambda: self._in_flight != event.role, timeout=self.timeout + 0.5)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop writing (after the write in flight, if any) and release the connection and the log."""
        with self._cond:
            self._stopping = True
            self._believed.clear()
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            return  # stuck past its own timeouts: leave it what it still uses (it is a daemon thread)
        self._disconnect()
        if self._log is not None:
            self._log.close()

    # ------------------------------------------------------------------ the writer thread
    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or bool(self._believed))
                if self._stopping:
                    return
                roles = sorted(self._believed, key=str)
            try:
                for role in roles:
                    self._write(role)
                if failures:
                    print(f"elect member: writing to the store at {self._where} again", file=sys.stderr, flush=True)
                failures = 0
            except OSError as exc:  # connection refused, dropped or timed out: reconnect after a pause
                self._disconnect()
                if not failures:
                    print(f"elect member: store at {self._where}: {exc}; reconnecting", file=sys.stderr, flush=True)
                failures += 1
                self._pause(min(0.05 * 2 ** failures, 1.0))
                continue
            self._pause(self.every)

    def _write(self, role: Role) -> None:
        client = self._connected()
        with self._cond:
            lead = self.elector.leadership(role) if role in self._believed and not self._stopping else None
            if lead is None:
                return
            self._seq += 1
            seq = self._seq
            self._in_flight = role
        try:
            reply = client.request({"op": "write", "role": str(role), "member": self.elector.member,
                                    "token": lead.token, "seq": seq})
            if reply.get("ok") is True:
                self._acknowledged(role, lead.token, seq)
            elif "error" in reply:
                print(f"elect member: the store refused a write as malformed: {reply['error']}", file=sys.stderr,
                      flush=True)
            else:
                self.refused += 1
        finally:
            with self._cond:
                self._in_flight = None
                self._cond.notify_all()

    def _acknowledged(self, role: Role, token: int, seq: int) -> None:
        self.acked += 1
        if self._log is not None:
            self._log.write(json.dumps({"mono": time.monotonic(), "role": str(role), "member": self.elector.member,
                                        "token": token, "seq": seq}) + "\n")
            self._log.flush()

    def _connected(self) -> StoreClient:
        if self._client is None:
            self._client = StoreClient(self.address, self.timeout)
        return self._client

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _pause(self, seconds: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._stopping, timeout=seconds)

    @property
    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"
