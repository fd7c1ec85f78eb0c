"""Failover, handover, overlap and distribution of kafka:// (NELI), and the broker's own rebalance time.

    python -m elect_bench.neli_failover [--servers HOST:PORT] [--trials 20] [--session-timeout 1.0]

Runs `elect member` processes (3 by default, 20 numbered roles over 20 partitions) against the embedded
broker (started here unless --servers is given) and measures, per role the failed member led:
- crash: SIGKILL of a member -> a survivor's `acquired` (fast mode);
- graceful: SIGTERM (orderly stop, Revoked first) -> a survivor's `acquired` (fast mode);
- full mode: crash failover; overlap per handover (SIGTERM: the leaver leads on for T) and per freeze
  (SIGSTOP past T): the end of the old leadership (`until` of its `fenced` line, or its `revoked`)
  minus the survivor's `acquired`, with the default T = 2 x session timeout and with T = 3.5 s;
- distribution: the most roles one member leads at steady state (balanced = ceil(20 / 3) = 7);
- survivor fences: `fenced` events of healthy members during the trials (should be 0);
- rebalance: bare confluent-kafka consumers with the same session timeout, from the kill / close of one
  member to the survivors' assignment callbacks: the part of failover the broker and client decide.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elect_bench.members import MemberProcess
from elect_cluster.waiting import wait_until

ROLES = 20


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99),
            "max": max(values, default=math.nan)}


class Group:
    def __init__(self, servers: str, workdir: Path, mode: str, session: float, members: int, extra: str = "",
                 quiet: float = 1.0) -> None:
        name = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
        self.url = (f"kafka://{servers}/{name}?group={name}&mode={mode}&partitions={ROLES}"
                    f"&session_timeout={session}" + (f"&{extra}" if extra else ""))
        self.workdir = workdir
        self.quiet = quiet
        self.members = {f"m{i}": self._start(f"m{i}") for i in range(members)}

    def _start(self, member_id: str) -> MemberProcess:
        m = MemberProcess(self.url, member_id, list(range(ROLES)), log_dir=self.workdir)
        m.start()
        return m

    def restart(self, member_id: str) -> None:
        self.members[member_id] = self._start(member_id)

    def leaders(self) -> dict[str, list[str]]:
        return {str(r): [mid for mid, m in self.members.items() if m.alive and str(r) in m.log.leading()]
                for r in range(ROLES)}

    def settle(self, timeout: float = 60.0) -> dict[str, str]:
        """Wait for one leader per role, every member leading some, and no event for `quiet` seconds.

        In full mode a revoked owner leads on for T, so the quiet time must exceed T, or a rebalance
        still under way would look settled.
        """
        def stable() -> dict[str, str] | None:
            first = self.leaders()
            if not all(len(v) == 1 for v in first.values()):
                return None
            if {v[0] for v in first.values()} != set(self.members):  # a restarted member has its share
                return None
            count = sum(len(m.log.lines) for m in self.members.values())
            time.sleep(self.quiet)
            again = self.leaders()
            same = again == first and count == sum(len(m.log.lines) for m in self.members.values())
            return {r: v[0] for r, v in first.items()} if same else None
        return wait_until(stable, timeout, what="a settled group")

    def close(self) -> None:
        for m in self.members.values():
            m.resume()
            m.kill()


def trial(group: Group, fault: str) -> dict[str, Any]:
    """One fault on the member leading role 0; per-role failover and overlap figures."""
    leaders = group.settle()
    per_member: dict[str, int] = {}
    for mid in leaders.values():
        per_member[mid] = per_member.get(mid, 0) + 1
    victim_id = leaders["0"]
    victim = group.members[victim_id]
    led = [r for r, mid in leaders.items() if mid == victim_id]
    marks = {mid: len(m.log.lines) for mid, m in group.members.items()}
    began = time.monotonic()
    if fault == "kill":
        victim.kill()
    elif fault == "stop":
        victim.signal(signal.SIGTERM)
    elif fault == "pause":
        victim.pause()
    survivors = [m for mid, m in group.members.items() if mid != victim_id]
    settled_at = time.monotonic()

    def taken() -> dict[str, dict[str, Any]] | None:
        found = {}
        for role in led:
            lines = [ln for m in survivors for ln in m.log.lines[marks[m.member_id]:]
                     if ln["event"] == "acquired" and ln["role"] == role]
            if not lines:
                return None
            found[role] = min(lines, key=lambda ln: ln["mono"])
        return found
    acquired = wait_until(taken, 60.0, what="survivors acquiring the victim's roles")
    result: dict[str, Any] = {"fault": fault, "distribution": max(per_member.values()), "roles": len(led),
                              "failover": [acquired[r]["mono"] - began for r in led]}
    time.sleep(max(0.0, 2.0 - (time.monotonic() - settled_at)))  # let the rebalance finish for the count below
    result["spurious_fences"] = sum(ln["event"] == "fenced"
                                    for m in survivors for ln in m.log.lines[marks[m.member_id]:])
    if fault == "pause":
        time.sleep(max(0.0, 4.0 - (time.monotonic() - began)))  # frozen well past T
        victim.resume()
        wait_until(lambda: not victim.log.leading(), 30.0, what="the woken member to end its leaderships")
    if fault in ("pause", "stop"):
        ends = {ln["role"]: ln["until"] if ln["event"] == "fenced" else ln["mono"]
                for ln in victim.log.lines[marks[victim_id]:] if ln["event"] in ("fenced", "revoked")}
        result["overlap"] = [max(0.0, ends[r] - acquired[r]["mono"]) for r in led if r in ends]
    if fault == "stop":
        wait_until(lambda: not victim.alive, 30.0, what="the stopped member to exit")
    victim.kill()
    group.restart(victim_id)
    return result


def run_scenario(servers: str, workdir: Path, mode: str, fault: str, trials: int, session: float,
                 progress: Callable[[str], None], extra: str = "") -> dict[str, Any]:
    quiet = 1.0 if mode == "fast" else 1.0 + _threshold(extra, session)
    group = Group(servers, workdir, mode, session, members=3, extra=extra, quiet=quiet)
    spurious = 0
    failover: list[float] = []
    overlap: list[float] = []
    distribution: list[int] = []
    try:
        for i in range(trials):
            r = trial(group, fault)
            failover += r["failover"]
            overlap += r.get("overlap", [])
            distribution.append(r["distribution"])
            spurious += r["spurious_fences"]
            progress(f"{mode}/{fault} trial {i + 1}/{trials}: failover max {max(r['failover']):.3f} s, "
                     f"{r['roles']} roles, most roles on one member {r['distribution']}")
    finally:
        group.close()
    balanced = math.ceil(ROLES / 3)
    return {"mode": mode, "fault": fault, "params": extra, "failover": summary(failover),
            "survivor_fences": spurious,
            "overlap": summary(overlap) if overlap else None,
            "distribution": {"max_per_member": max(distribution), "balanced_share":
                             sum(d <= balanced for d in distribution) / len(distribution)}}


def _threshold(extra: str, session: float) -> float:
    for pair in extra.split("&"):
        key, _, value = pair.partition("=")
        if key == "heartbeat_timeout":
            return float(value)
    return 2.0 * session  # full mode's default T


# --------------------------------------------------------------------------- the rebalance alone
RAW = """
import json, sys, time
from confluent_kafka import Consumer
servers, topic, group, name, session = sys.argv[1:6]
c = Consumer({"bootstrap.servers": servers, "group.id": group, "client.id": name,
              "session.timeout.ms": int(float(session) * 1000), "heartbeat.interval.ms": int(float(session) * 100),
              "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False})
def show(kind):
    return lambda consumer, parts: print(json.dumps({"mono": time.monotonic(), "event": kind,
        "parts": [p.partition for p in parts]}), flush=True)
c.subscribe([topic], on_assign=show("assign"), on_revoke=show("revoke"))
import signal
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
while not stop:
    c.poll(0.05)
c.close()
"""


class _RawConsumers:
    """Three bare consumer processes of one fresh group, and what each was assigned, from their lines."""

    def __init__(self, servers: str, session: float) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        topic = f"raw-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(30)
        self.procs = [subprocess.Popen([sys.executable, "-c", RAW, servers, topic, topic, f"c{i}", str(session)],
                                       stdout=subprocess.PIPE, text=True, start_new_session=True) for i in range(3)]
        self.owned: list[set[int]] = [set() for _ in self.procs]
        self.lines: list[list[dict[str, Any]]] = [[] for _ in self.procs]
        for p in self.procs:
            assert p.stdout is not None
            os.set_blocking(p.stdout.fileno(), False)

    def pump(self) -> None:
        for i, p in enumerate(self.procs):
            assert p.stdout is not None
            while raw := p.stdout.readline():
                ln = json.loads(raw)
                self.lines[i].append(ln)
                parts = set(ln["parts"])
                self.owned[i] = self.owned[i] | parts if ln["event"] == "assign" else self.owned[i] - parts

    def balanced(self) -> bool:
        self.pump()
        return sorted(len(o) for o in self.owned) == [2, 2, 2]

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _raw_trial(servers: str, fault: str, session: float) -> float:
    group = _RawConsumers(servers, session)
    try:
        wait_until(group.balanced, 60.0, what="three consumers with two partitions each")
        time.sleep(1.0)
        group.pump()
        victim = group.owned[0]
        marks = [len(x) for x in group.lines]
        began = time.monotonic()
        if fault == "kill":
            os.killpg(group.procs[0].pid, signal.SIGKILL)
        else:
            group.procs[0].send_signal(signal.SIGTERM)

        def moved() -> float | None:
            group.pump()
            got = [ln for i in (1, 2) for ln in group.lines[i][marks[i]:]
                   if ln["event"] == "assign" and set(ln["parts"]) & victim]
            if {p for ln in got for p in ln["parts"]} >= victim:
                return float(max(ln["mono"] for ln in got))
            return None
        return wait_until(moved, 60.0, what="the victim's partitions reassigned") - began
    finally:
        group.close()


def raw_rebalance(servers: str, fault: str, trials: int, session: float) -> dict[str, float]:
    """Bare consumers: from the fault to the survivors' assignment of the victim's partitions."""
    return summary([_raw_trial(servers, fault, session) for _ in range(trials)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", help="an existing broker (default: start the embedded one)")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--session-timeout", type=float, default=1.0)
    parser.add_argument("--scenarios", default="fast/kill,fast/stop,full/kill,full/stop,full/pause,"
                        "full/pause/heartbeat_timeout=3.5,raw/kill,raw/stop",
                        help="MODE/FAULT[/URL-PARAMS] list; MODE fast|full|raw, FAULT kill|stop|pause")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop members and the broker on the way out
    cluster = None
    workdir = Path(tempfile.mkdtemp(prefix="neli-bench-"))
    servers = args.servers
    if servers is None:
        from elect_cluster.local import LocalCluster

        cluster = LocalCluster(workdir / "cluster", services=("kafka",))
        servers = cluster.up(timeout=60).kafka[0]
    results = []

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)
    try:
        for scenario in args.scenarios.split(","):
            mode, fault, *rest = scenario.split("/", 2)
            if mode == "raw":
                result: dict[str, Any] = {"mode": "raw consumers", "fault": fault,
                                          "rebalance": raw_rebalance(servers, fault, args.trials, args.session_timeout)}
            else:
                result = run_scenario(servers, workdir, mode, fault, args.trials, args.session_timeout, progress,
                                      rest[0] if rest else "")
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        if cluster is not None:
            cluster.down()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
