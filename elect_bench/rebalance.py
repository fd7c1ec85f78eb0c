"""The broker's own part of a NELI failover: bare confluent-kafka consumers of one group, one of them faulted,
timed until the survivors are assigned its partitions.

No election runs on top, so what is measured is what the broker and the client library decide (session
expiry, the rebalance protocol); a NELI failover can be no faster. The consumers are faulted by the same fault
objects as members, through the local placement. On the KIP-848 protocol (`protocol="consumer"`) the consumers
may not set their session timeout: the group's configs are set on the broker first, as the elector does
(neli.group.configure_group), so both protocols detect at the same budget.
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
from collections.abc import Iterator, Sequence
from typing import Any

from elect_bench.faults import MemberFault
from elect_bench.members import SignalledProcess
from elect_bench.placement import LocalPlacement
from elect_cluster.waiting import wait_until

LIMIT = 60.0  # seconds to wait for a balanced group, and for the victim's partitions to move

CONSUMER = """
import json, signal, sys, time
from confluent_kafka import Consumer
servers, topic, name, session, protocol = sys.argv[1:6]
settings = {"bootstrap.servers": servers, "group.id": topic, "client.id": name, "enable.auto.commit": False}
if protocol == "consumer":
    settings["group.protocol"] = "consumer"
else:
    settings.update({"session.timeout.ms": int(float(session) * 1000),
                     "heartbeat.interval.ms": int(float(session) * 100),
                     "partition.assignment.strategy": "cooperative-sticky"})
c = Consumer(settings)
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

    def __init__(self, servers: str, topic: str, member_id: str, session: float, protocol: str = "classic") -> None:
        self.member_id = member_id
        self._popen = subprocess.Popen([sys.executable, "-c", CONSUMER, servers, topic, member_id, str(session),
                                        protocol],
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


def rebalance_time(servers: str, fault: MemberFault, consumers: int, partitions: int, session: float,
                   protocol: str = "classic") -> float:
    """Seconds from `fault` striking one consumer of a settled group to the survivors' assignment of its
    partitions, with `session` as the session timeout, on the `classic` or the KIP-848 `consumer` protocol."""
    with _settled(servers, consumers, partitions, session, protocol) as group:
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


def revocations_at_rest(servers: str, consumers: int, partitions: int, session: float, protocol: str,
                        seconds: float) -> int:
    """How many times a consumer of a settled group, nothing faulted, had partitions taken away in `seconds`: what a
    NELI group on that protocol and session timeout would see as false failovers, before any election logic."""
    with _settled(servers, consumers, partitions, session, protocol) as group:
        for c in group:
            c.pump()
        marks = [len(c.lines) for c in group]
        time.sleep(seconds)  # the window at rest itself, not a wait for a condition
        for c in group:
            c.pump()
        return sum(1 for c, mark in zip(group, marks, strict=True) for line in c.lines[mark:]
                   if line["event"] == "revoke" and line["parts"])


@contextlib.contextmanager
def _settled(servers: str, consumers: int, partitions: int, session: float,
             protocol: str) -> Iterator[list[Consumer]]:
    """A group of bare consumers on a new topic, once it shares the partitions evenly; killed on the way out."""
    topic = new_topic(servers, partitions)
    if protocol == "consumer":
        configure_group(servers, topic, session)
    group = [Consumer(servers, topic, f"c{i}", session, protocol) for i in range(consumers)]
    try:
        wait_until(lambda: balanced(group, partitions), LIMIT, what=f"{consumers} consumers sharing {partitions} "
                   "partitions evenly")
        yield group
    finally:
        for c in group:
            c.kill()


def configure_group(servers: str, group: str, session: float) -> None:
    """The KIP-848 group's session timeout and heartbeat on the broker, exactly as a NELI member sets them."""
    from confluent_kafka.admin import AdminClient

    from neli.group import configure_group
    from neli.options import KafkaOptions

    options = KafkaOptions(servers=tuple(servers.split(",")), topic=group, session_timeout=session,
                           protocol="consumer")
    configure_group(AdminClient({"bootstrap.servers": servers}), options)


def new_topic(servers: str, partitions: int, config: dict[str, str] | None = None) -> str:
    """A topic of its own (a random name, replication 1, `config` its topic configs) for a measurement."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"raw-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                  config=config or {})])[topic].result(30)
    return topic


def balanced(group: Sequence[Consumer], partitions: int) -> bool:
    """Every partition owned and the consumers' shares within one of each other (their callbacks read first)."""
    for c in group:
        c.pump()
    counts = [len(c.owned) for c in group]
    return sum(counts) == partitions and max(counts) - min(counts) <= 1
