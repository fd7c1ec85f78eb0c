"""The broker's own part of a NELI failover: bare confluent-kafka consumers of one group, one of them faulted,
timed until the survivors are assigned its partitions.

No election runs on top, so what is measured is what the broker and the client library decide (session
expiry, the rebalance protocol); a NELI failover can be no faster. The consumers are faulted by the same fault
objects as members, through the local placement.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

from elect_bench.faults import MemberFault
from elect_bench.members import SignalledProcess
from elect_bench.placement import LocalPlacement
from elect_cluster.waiting import wait_until

LIMIT = 60.0  # seconds to wait for a balanced group, and for the victim's partitions to move

CONSUMER = """
import json, signal, sys, time
from confluent_kafka import Consumer
servers, topic, name, session = sys.argv[1:5]
c = Consumer({"bootstrap.servers": servers, "group.id": topic, "client.id": name,
              "session.timeout.ms": int(float(session) * 1000), "heartbeat.interval.ms": int(float(session) * 100),
              "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False})
def show(kind):
    return lambda consumer, parts: print(json.dumps({"mono": time.monotonic(), "event": kind,
        "parts": [p.partition for p in parts]}), flush=True)
c.subscribe([topic], on_assign=show("assign"), on_revoke=show("revoke"))
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
while not stop:
    c.poll(0.05)
c.close()
"""


class Consumer(SignalledProcess):
    """One bare consumer process, and what it owns by its assignment lines (a `placement.Signalled`)."""

    def __init__(self, servers: str, topic: str, member_id: str, session: float) -> None:
        self.member_id = member_id
        self._popen = subprocess.Popen([sys.executable, "-c", CONSUMER, servers, topic, member_id, str(session)],
                                       stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.proc = self._popen
        assert self._popen.stdout is not None
        os.set_blocking(self._popen.stdout.fileno(), False)
        self.owned: set[int] = set()
        self.lines: list[dict[str, Any]] = []

    def pump(self) -> None:
        """Read the lines printed so far."""
        assert self._popen.stdout is not None
        while raw := self._popen.stdout.readline():
            line = json.loads(raw)
            self.lines.append(line)
            parts = set(line["parts"])
            self.owned = self.owned | parts if line["event"] == "assign" else self.owned - parts

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        self._popen.wait()


def rebalance_time(servers: str, fault: MemberFault, consumers: int, partitions: int, session: float) -> float:
    """Seconds from `fault` striking one consumer of a settled group to the survivors' assignment of its
    partitions, with `session` as the session timeout."""
    topic = _topic(servers, partitions)
    group = [Consumer(servers, topic, f"c{i}", session) for i in range(consumers)]
    try:
        wait_until(lambda: _balanced(group, partitions), LIMIT, what=f"{consumers} consumers sharing {partitions} "
                   "partitions evenly")
        time.sleep(1.0)  # let the group be quiet
        for c in group:
            c.pump()
        victim, survivors = group[0], group[1:]
        moving = set(victim.owned)
        marks = [len(c.lines) for c in survivors]
        began = time.monotonic()
        fault.inject(LocalPlacement(), victim)

        def moved() -> float | None:
            for c in survivors:
                c.pump()
            got = [line for c, mark in zip(survivors, marks, strict=True) for line in c.lines[mark:]
                   if line["event"] == "assign" and set(line["parts"]) & moving]
            if {p for line in got for p in line["parts"]} >= moving:
                return float(max(line["mono"] for line in got))
            return None

        return wait_until(moved, LIMIT, what="the victim's partitions reassigned") - began
    finally:
        for c in group:
            c.kill()


def _topic(servers: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"raw-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    return topic


def _balanced(group: list[Consumer], partitions: int) -> bool:
    for c in group:
        c.pump()
    counts = [len(c.owned) for c in group]
    return sum(counts) == partitions and max(counts) - min(counts) <= 1
