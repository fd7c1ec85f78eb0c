"""Failover, handover, overlap and load of the lease electors (etcd://, zookeeper://) on real stores.

    python -m elect.bench.lease_failover --stores etcd,zookeeper --kills 50 --pauses 25 --stops 25

One group of 3 member processes (6 roles, TTL 1 s) per store takes a series of faults on the member
leading role 0: SIGKILL (a fresh member replaces it), SIGSTOP for 2 TTL then SIGCONT, and graceful stop
(SIGTERM; a fresh member replaces it). Reported: crash failover (kill to a survivor's `acquired`, per
role the victim led), graceful handover (the victim's `revoked` to the successor's `acquired`), overlap
(time two members both believed they led a role: from `acquired` to `revoked`, to a fenced line's
`until`, or to the SIGKILL), and requests per second per member to the store at steady state for
3, 6 and 12 in-process members.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import elect
from elect.cluster.local import LocalCluster
from elect.cluster.members import Line, MemberProcess
from elect.cluster.waiting import wait_until

ROLES = [str(r) for r in range(6)]


def _holders(members: Sequence[MemberProcess], role: str) -> list[MemberProcess]:
    return [m for m in members if m.alive and role in m.log.leading()]


def _settled(members: Sequence[MemberProcess]) -> bool:
    live = [m for m in members if m.alive]
    return all(len(_holders(live, r)) == 1 for r in ROLES) and all(len(m.log.leading()) == 2 for m in live)


def _all_led(members: Sequence[MemberProcess], roles: Sequence[str]) -> Callable[[], bool]:
    return lambda: all(_holders(members, r) for r in roles)


def _none_led(member: MemberProcess, roles: Sequence[str]) -> Callable[[], bool]:
    return lambda: not (set(member.log.leading()) & set(roles))


def _elapsed(since: float, seconds: float) -> Callable[[], bool]:
    return lambda: time.monotonic() - since >= seconds


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"n": len(values), "p50": round(_pct(values, 0.5), 4), "p99": round(_pct(values, 0.99), 4),
            "max": round(max(values), 4), "mean": round(statistics.fmean(values), 4)}


Spans = dict[str, list[tuple[float, float, str]]]


def _intervals(lines: Sequence[Line], killed: dict[str, float], end: float) -> Spans:
    """Per role, (from, to, member) of every leadership, ended as the member itself says (or by SIGKILL)."""
    open_: dict[tuple[str, str], float] = {}
    out: dict[str, list[tuple[float, float, str]]] = {}
    for line in sorted(lines, key=lambda x: x["mono"]):
        key = (line["member"], line["role"])
        if line["event"] == "acquired":
            open_[key] = line["mono"]
            continue
        began = open_.pop(key, None)
        if began is not None:
            ended = line["until"] if line["event"] == "fenced" else line["mono"]
            out.setdefault(line["role"], []).append((began, ended, line["member"]))
    for (member, role), began in open_.items():
        out.setdefault(role, []).append((began, killed.get(member, end), member))
    return out


def _overlap(ivs: Spans) -> tuple[float, int]:
    total, count = 0.0, 0
    for spans in ivs.values():
        spans = sorted(spans)
        for i, (_a0, a1, am) in enumerate(spans):
            for b0, b1, bm in spans[i + 1:]:
                if b0 >= a1:
                    break
                if bm != am:
                    total += min(a1, b1) - b0
                    count += 1
    return total, count


def faults(store: str, address: str, workdir: Path, kills: int, pauses: int, stops: int, ttl: float,
           seed: int = 1) -> dict[str, Any]:
    ttl_name = "ttl" if store == "etcd" else "session_timeout"
    url = f"{store}://{address}/bench-{time.monotonic_ns()}?{ttl_name}={ttl}"
    counter = iter(range(10_000))
    members: list[MemberProcess] = []
    everyone: list[MemberProcess] = []

    def spawn() -> MemberProcess:
        m = MemberProcess(url, f"m{next(counter)}", ROLES, log_dir=workdir)
        m.start()
        members.append(m)
        everyone.append(m)
        return m

    rng = random.Random(seed)
    crash: list[float] = []
    frozen: list[float] = []
    not_revoked: list[dict[str, Any]] = []
    graceful: list[float] = []
    stop_to_acquired: list[float] = []
    killed: dict[str, float] = {}
    plan = ["kill"] * kills + ["pause"] * pauses + ["stop"] * stops
    try:
        for _ in range(3):
            spawn()
        for n, fault in enumerate(plan):
            wait_until(lambda: _settled(members), 60.0, what="2 roles per member")
            phase = time.monotonic() + rng.uniform(0.0, ttl)  # fault at a random point of the heartbeat cycle
            wait_until(_elapsed(phase, 0.0), 2 * ttl, what="a random moment")
            victim = _holders(members, "0")[0]
            led = sorted(victim.log.leading())
            survivors = [m for m in members if m is not victim]
            at = time.monotonic()
            if fault == "kill":
                victim.kill()
                killed[victim.member_id] = at
            elif fault == "pause":
                victim.pause()
            else:
                victim.stop()
            wait_until(_all_led(survivors, led), 30.0, interval=0.01, what=f"survivors taking {led}")
            for role in led:
                acquired = min(line["mono"] for m in survivors for line in m.log.lines
                               if line["event"] == "acquired" and line["role"] == role and line["mono"] >= at)
                if fault == "kill":
                    crash.append(acquired - at)
                elif fault == "pause":
                    frozen.append(acquired - at)
                else:
                    ended = [line for line in victim.log.lines if line["role"] == role and line["mono"] >= at
                             and line["event"] != "acquired"]
                    if not ended or ended[0]["event"] != "revoked":
                        not_revoked.append({"fault": n, "role": role, "lines": victim.log.lines[-12:]})
                        continue
                    graceful.append(acquired - ended[0]["mono"])
                    stop_to_acquired.append(acquired - at)
            if fault == "pause":
                wait_until(_elapsed(at, 2 * ttl), 10.0, what="a frozen member")
                victim.resume()
                wait_until(_none_led(victim, led), 10.0, what="the victim fencing")
            else:
                members.remove(victim)
                spawn()
            print(f"  {store}: {n + 1}/{len(plan)} {fault}", flush=True)
        wait_until(lambda: _settled(members), 60.0, what="2 roles per member")
    finally:
        for m in members:
            m.resume() if m.alive else None
            m.stop(timeout=10)
        with open(workdir / "events.jsonl", "w") as f:
            for m in everyone:
                for line in m.log.lines:
                    f.write(json.dumps(line) + "\n")
    end = time.monotonic()
    ivs = _intervals([line for m in everyone for line in m.log.lines], killed, end)
    overlap, overlaps = _overlap(ivs)
    return {"crash_failover": _summary(crash), "pause_failover": _summary(frozen),
            "graceful_handover": _summary(graceful), "stop_to_successor": _summary(stop_to_acquired),
            "overlap_seconds": round(overlap, 6), "overlapping_pairs": overlaps, "stops_not_revoked": not_revoked,
            "role_failovers": len(crash) + len(frozen) + len(graceful)}


def load(store: str, address: str, sizes: Sequence[int], window: float, ttl: float) -> dict[str, float]:
    """Requests per second per member at steady state (in-process members, 12 roles)."""
    ttl_name = "ttl" if store == "etcd" else "session_timeout"
    result: dict[str, float] = {}
    roles = list(range(12))
    for size in sizes:
        url = f"{store}://{address}/load-{size}-{time.monotonic_ns()}?{ttl_name}={ttl}"
        electors = [elect.connect(url, roles, member=f"l{i}") for i in range(size)]
        try:
            for e in electors:
                e.start()
            share = -(-len(roles) // size)

            def steady(es: list[elect.Elector] = electors, share: int = share) -> bool:
                return sum(len(e.leading()) for e in es) == len(roles) and max(len(e.leading()) for e in es) <= share

            wait_until(steady, 60.0, what="steady state")
            settle = time.monotonic()
            wait_until(_elapsed(settle, 2.0), 5.0, what="settling")
            before = [e.requests for e in electors]  # type: ignore[attr-defined]
            began = time.monotonic()
            wait_until(_elapsed(began, window), window + 5, what="the load window")
            elapsed = time.monotonic() - began
            rates = [(e.requests - b) / elapsed for e, b in zip(electors, before, strict=True)]  # type: ignore[attr-defined]
            result[str(size)] = round(statistics.fmean(rates), 2)
        finally:
            for e in electors:
                e.stop()
    return result


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so the finally: blocks stop members and the cluster


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="etcd,zookeeper")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--pauses", type=int, default=25)
    parser.add_argument("--stops", type=int, default=25)
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument("--load-window", type=float, default=10.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    stores = [s for s in args.stores.split(",") if s]
    workdir = Path(tempfile.mkdtemp(prefix="elect-bench-lease-"))
    cluster = LocalCluster(workdir / "cluster", services=tuple(stores))
    results: dict[str, Any] = {"ttl": args.ttl, "members": 3, "roles": len(ROLES)}
    try:
        endpoints = cluster.up(timeout=120)
        for store in stores:
            address = ",".join(getattr(endpoints, store))
            print(f"{store}: faults", flush=True)
            results[store] = faults(store, address, workdir / store, args.kills, args.pauses, args.stops, args.ttl)
            print(f"{store}: load", flush=True)
            results[store]["requests_per_s_per_member"] = load(store, address, (3, 6, 12), args.load_window,
                                                               args.ttl)
            print(json.dumps({store: results[store]}, indent=2), flush=True)
    finally:
        cluster.down()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
