"""Where a lease takeover of thousands of roles spends its time: 3 `elect member` processes of etcd:// or
zookeeper:// with N roles on a store started by the project's own code, every role led and the group balanced,
then the member leading most SIGKILLed (`--fault stop`: SIGTERM, its graceful handover; `--fault pause`: SIGSTOP
until the survivors took over). Prints the cold start (all led, balanced), each member's leaderships that
ended at rest, each member's CPU at rest (`--rest SECONDS`, default 3 x budget), and when the survivors acquired
the victim's roles (first, p50, p99, max after the kill); with `--profile` each survivor is sampled by py-spy
through the takeover (`pip install py-spy`; `--gil`: only the thread holding the GIL) and the busiest functions
per thread are printed. Beside `etcd_creates.py`, it shows what the elector adds to the bare store."""

from __future__ import annotations

import argparse
import collections
import math
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from elect_bench.judging.measures import percentile
from elect_bench.members import MemberProcess
from elect_cluster.local import LocalCluster
from elect_cluster.process import usage
from elect_cluster.waiting import wait_until


def _spread(times: list[float]) -> str:
    """The harness's own percentiles (elect_bench.judging.measures), so these figures read like a report's."""
    return (f"first {min(times):.2f} s, p50 {percentile(times, 50):.2f} s, p99 {percentile(times, 99):.2f} s, "
            f"max {max(times):.2f} s")


def _hottest(raw: Path, top: int) -> list[str]:
    """py-spy's raw (collapsed) stacks: per thread, the functions with the most samples (inclusive)."""
    threads: collections.Counter[str] = collections.Counter()
    functions: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread = frames[0].split(": ")[-1]
        threads[thread] += int(count)
        for name in {frame.split(" (")[0] for frame in frames[1:]}:
            functions[thread][name] += int(count)
    lines = []
    for thread, samples in threads.most_common(4):
        lines.append(f"  {samples:5d} samples  {thread}")
        lines += [f"        {n:5d}  {name}" for name, n in functions[thread].most_common(top)
                  if not name.startswith(("Thread.", "_bootstrap"))]
    return lines


def _cpu_seconds(member: MemberProcess) -> float:
    """User and system CPU seconds the member's process has used so far."""
    used = usage(member.pid)
    if used is None:
        raise RuntimeError(f"{member.member_id} exited")
    return used.cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", choices=["etcd", "zookeeper"])
    parser.add_argument("roles", type=int)
    parser.add_argument("--budget", type=float, default=1.0, help="ttl / session_timeout, seconds")
    parser.add_argument("--fault", choices=["kill", "stop", "pause"], default="kill",
                        help="SIGKILL (default), SIGTERM (graceful handover) or SIGSTOP the member leading most")
    parser.add_argument("--profile", action="store_true", help="py-spy the survivors through the takeover")
    parser.add_argument("--gil", action="store_true", help="with --profile, sample only the thread holding the GIL "
                                                           "(where the member's CPU goes, threads waiting left out)")
    parser.add_argument("--rest", type=float, help="seconds at rest before the fault, each member's CPU measured "
                                                   "over them (default 3 x budget)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="elect-takeover-"))
    cluster = LocalCluster(work / "cluster", services=(args.store,))
    cluster.up(timeout=120)
    procs: list[MemberProcess] = []
    try:
        hosts = ",".join(getattr(cluster.endpoints, args.store))
        group = "takeover-" + uuid.uuid4().hex[:6]
        knob = "ttl" if args.store == "etcd" else "session_timeout"
        url = f"{args.store}://{hosts}/{group}?{knob}={args.budget:g}"
        roles = [str(i) for i in range(args.roles)]
        began = time.monotonic()
        procs = [MemberProcess(url, f"m{i}", roles, log_dir=work / "logs") for i in range(3)]
        for p in procs:
            p.start()
        wait_until(lambda: len(set().union(*(p.log.leading() for p in procs))) == args.roles, 300, what="all led")
        print(f"cold start: all {args.roles} roles led {time.monotonic() - began:.2f} s after starting the members")
        share = -(-args.roles // 3)
        wait_until(lambda: max(len(p.log.leading()) for p in procs) <= share, 120, what="balanced")
        print(f"            balanced after {time.monotonic() - began:.2f} s")
        rest = 3 * args.budget if args.rest is None else args.rest
        before, rested = [_cpu_seconds(p) for p in procs], time.monotonic()
        time.sleep(rest)
        used = [_cpu_seconds(p) - b for p, b in zip(procs, before, strict=True)]
        span = time.monotonic() - rested
        print(f"  at rest for {span:.0f} s, CPU per member: "
              + ", ".join(f"{p.member_id} {u / span:.1%}" for p, u in zip(procs, used, strict=True)))
        for p in procs:
            ended = collections.Counter(line["event"] for line in p.log.lines if line["event"] in ("fenced", "revoked"))
            print(f"  {p.member_id}: leads {len(p.log.leading())}; since the start {ended['revoked']} leaderships "
                  f"handed over (revoked), {ended['fenced']} lapsed (fenced)")
            fenced = [line for line in p.log.lines if line["event"] == "fenced"]
            if fenced:  # when (after the start) and at which deadline the lapses came
                at = sorted({round(line["mono"] - began, 2) for line in fenced})
                until = sorted({round(line["until"] - began, 2) for line in fenced if line.get("until")})
                print(f"      lapses seen at {at[:6]} s, deadlines {until[:6]} s after the start")
        victim = max(procs, key=lambda p: len(p.log.leading()))
        lost = set(victim.log.leading())
        survivors = [p for p in procs if p is not victim]
        watched = survivors + ([victim] if args.fault == "stop" else [])  # the victim hands over itself
        seconds = str(math.ceil(4 * args.budget))  # py-spy takes whole seconds
        spies = [subprocess.Popen(["py-spy", "record", "-p", str(p.pid), "-d", seconds, "-r", "200", "-f",
                                   "raw", "--threads", "--nonblocking", *(["--gil"] if args.gil else []),
                                   "-o", str(work / f"spy-{p.member_id}.txt")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for p in watched] if args.profile else []
        time.sleep(0.3 if spies else 0.0)
        killed = time.monotonic()
        {"kill": victim.kill, "stop": lambda: victim.signal(signal.SIGTERM), "pause": victim.pause}[args.fault]()
        wait_until(lambda: lost <= set().union(*(p.log.leading() for p in survivors)), 120, what="taken over")
        if args.fault == "pause":
            victim.resume()
        took = {p.member_id: [line["mono"] - killed for line in p.log.lines
                              if line["event"] == "acquired" and line["mono"] > killed and line["role"] in lost]
                for p in survivors}
        times = [t for mine in took.values() for t in mine]
        signal_name = {"kill": "SIGKILL", "stop": "SIGTERM", "pause": "SIGSTOP"}[args.fault]
        print(f"takeover of {len(lost)} roles after {signal_name} of {victim.member_id}: {_spread(times)}")
        for p in survivors:
            mine = took[p.member_id]
            bins = collections.Counter(int(t / 0.05) for t in mine)
            steps = " ".join(f"{b * 0.05:.2f}:{bins[b]}" for b in sorted(bins))
            print(f"  {p.member_id} took {len(mine)}, per 50 ms from the kill: {steps}")
        for spy, p in zip(spies, watched if spies else [], strict=True):
            spy.wait()
            raw = work / f"spy-{p.member_id}.txt"
            if raw.exists():
                print(f"py-spy of {p.member_id} through the takeover (200 samples/s while busy):")
                print("\n".join(_hottest(raw, 30)))
    finally:
        for p in procs:
            p.kill()
        cluster.down()
    print(f"(member logs in {work / 'logs'})", file=sys.stderr)


if __name__ == "__main__":
    main()
