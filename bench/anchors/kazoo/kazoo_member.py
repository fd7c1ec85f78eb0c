"""One member of kazoo's own `Election` recipe, printing the harness's event lines (bench/anchors/README.md).

kazoo (https://kazoo.readthedocs.io) is the Python ZooKeeper client most Python services use; its
`Election(path, identifier).run(func)` blocks until this contender holds the election's lock, then calls
`func`. This adapter does what its documentation asks of a careful user: one client (one session) per
member, one `Election` per role, and `func` leads until the connection is SUSPENDED or LOST (kazoo's advice:
treat a suspended connection as a lost lock), then returns so the lock is released, and the loop contends
again. Nothing of kazoo is changed or copied.

The token is the sequence number ZooKeeper gave the contender's lock node: it grows with every contender of
the role (a fencing value ZooKeeper users take from the lock node). kazoo has no self-fencing deadline: a
leader learns of its loss only when the client notices the connection is gone.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from types import FrameType

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.recipe.election import Election

_print_lock = threading.Lock()


def emit(member: str, role: str, event: str, token: int) -> None:
    line = {"ts": time.time(), "mono": time.monotonic(), "member": member, "role": role, "event": event,
            "token": token}
    with _print_lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def sequence(node: str | None) -> int:
    """The sequence number ZooKeeper appended to a lock node's name (…__lock__0000000042 -> 42)."""
    digits = (node or "").rsplit("__", 1)[-1]
    return int(digits) if digits.isdigit() else 0


class Member:
    def __init__(self, member: str, hosts: str, path: str, session_timeout: float, roles: list[str]) -> None:
        self.member = member
        self.path = path.rstrip("/") or "/elect-kazoo"
        self.roles = roles
        self.stopping = threading.Event()
        self.connected = threading.Event()  # set while kazoo says CONNECTED; leaders lead only while it is set
        self.changed = threading.Condition()  # notified on every state change and on stop
        self.client = KazooClient(hosts=hosts, timeout=session_timeout)
        self.client.add_listener(self._on_state)
        self.elections: dict[str, Election] = {}

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self.connected.set()
        else:  # SUSPENDED or LOST: kazoo's advice is to assume the lock is gone
            self.connected.clear()
        with self.changed:
            self.changed.notify_all()

    def start(self, timeout: float) -> None:
        self.client.start(timeout=timeout)
        self.connected.set()
        for role in self.roles:
            threading.Thread(target=self._contend, args=(role,), daemon=True, name=f"role-{role}").start()

    def _contend(self, role: str) -> None:
        while not self.stopping.is_set():
            election = self.client.Election(f"{self.path}/{role}", self.member)
            self.elections[role] = election
            try:
                election.run(self._lead, role, election)
            except KazooException as exc:
                print(f"kazoo-member {self.member}: role {role}: {exc!r}", file=sys.stderr, flush=True)
            if not self.stopping.is_set():
                self.connected.wait(1.0)  # contend again once connected (the client reconnects by itself)

    def _lead(self, role: str, election: Election) -> None:
        token = sequence(election.lock.node)
        emit(self.member, role, "acquired", token)
        with self.changed:  # the listener cannot interrupt this function: it wakes it
            while self.connected.is_set() and not self.stopping.is_set():
                self.changed.wait(0.5)
        emit(self.member, role, "revoked", token)

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()
        for election in list(self.elections.values()):
            election.cancel()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(t.name.startswith("role-") and t.is_alive()
                                                  for t in threading.enumerate()):
            time.sleep(0.01)
        self.client.stop()
        self.client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--id", required=True)
    p.add_argument("--roles", required=True, help="comma-separated role names")
    p.add_argument("--hosts", required=True, help="ZooKeeper host:port,host:port")
    p.add_argument("--path", default="/elect-kazoo", help="the parent of every role's election path")
    p.add_argument("--session-timeout", type=float, default=10.0, help="kazoo's `timeout`: the session timeout")
    p.add_argument("--connect-timeout", type=float, default=15.0)
    args = p.parse_args()
    member = Member(args.id, args.hosts, args.path, args.session_timeout, [r for r in args.roles.split(",") if r])
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    member.start(args.connect_timeout)
    print(f"elect member: {args.id} started on kazoo://{args.hosts}{member.path}", file=sys.stderr, flush=True)
    while not done.wait(0.5):
        pass
    member.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
