"""raft:// membership changes on real processes: add a node, remove one with `--leave`, replace every node one at a
time (gracefully, or SIGKILLed and removed with `elect raft remove`), each measured from the members' own event
lines as every trial is: the longest leaderless time of any role, overlaps, how many roles changed leader, and the
leaders per member at the end. `bench/raft_membership.py` runs them and writes docs/results/raft-membership/.

Members are `elect member raft://...` processes on loopback, D = 1 s (election_timeout), 12 roles over 12
partitions, every member contending for every role; the first three start with `peers=`, later ones with `join=`.
The replace scenarios also run on the two Raft anchors (`AnchorCluster`: sofa-jraft, Apache Ratis), whose own
membership change an operator drives: start the new member, `admin change-peers` (sofa-jraft's
`CliService.changePeers`, Ratis' `admin().setConfiguration`) to add it; stop the old one with SIGTERM (the
adapter hands its groups over) or SIGKILL it; then `admin change-peers` again to remove it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from elect_bench import anchors
from elect_bench.judging.history import FaultRecord, History
from elect_bench.judging.measures import leaderless, overlaps
from elect_bench.members import MemberProcess
from elect_cluster.ports import free_ports
from elect_cluster.waiting import wait_until
from raft_priority.priorities import assign_priorities

ROLES = 12
NODES = "abcdef"


@dataclass
class Outcome:
    """One trial of one scenario."""

    scenario: str
    trial: int
    longest_leaderless: float
    """Seconds: the longest span, over every role, in which no member led it, from the first change to the end."""
    overlaps: int
    overlap_seconds: float
    moved: int
    """Roles whose leader at the end is not the one they had before the first change."""
    leaders: dict[str, int]
    """Roles each live member leads at the end."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Scenario-specific timings (e.g. join_to_share: from the new node's start until it leads its share)."""
    method: str = "raft"
    handovers: int = 0
    """Acquisitions from the first change to the end: each time some role changed hands (the fewest a replace-all
    can do is one per role)."""

    @property
    def balanced(self) -> bool:
        counts = list(self.leaders.values())
        return bool(counts) and max(counts) - min(counts) <= 1


class Cluster:
    """Up to six raft:// members on loopback; the first three form the cluster."""

    method = "raft"
    balances = True
    """Leaders end balanced after every change (raft:// re-lays priorities out); the anchors are measured as they
    end, without waiting for balance."""

    def __init__(self, tmp: Path, election_timeout: float = 1.0, partitions: int = ROLES) -> None:
        self.tmp = tmp
        self.et = election_timeout
        self.partitions = partitions
        self.ports = dict(zip(NODES, free_ports(len(NODES)), strict=True))
        self.procs: dict[str, MemberProcess] = {}
        self.faults: list[FaultRecord] = []

    def address(self, node: str) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def url(self, node: str, peers: Sequence[str] = (), join: Sequence[str] = ()) -> str:
        which = (f"peers={','.join(f'{m}@{self.address(m)}' for m in peers)}" if peers else
                 f"join={','.join(f'{m}@{self.address(m)}' for m in join)}")
        return (f"raft://{node}@{self.address(node)}?{which}&partitions={self.partitions}"
                f"&election_timeout={self.et:g}&data_dir={self.tmp / 'state' / node}")

    def start(self, node: str, url: str, leave: bool = True) -> MemberProcess:
        proc = MemberProcess(url, node, list(range(ROLES)), log_dir=self.tmp,
                             extra_args=["--leave"] if leave else [])
        self.procs[node] = proc
        proc.start()
        return proc

    def first(self, nodes: str = "abc") -> None:
        for n in nodes:
            self.start(n, self.url(n, peers=[m for m in nodes if m != n]))

    def join(self, node: str, through: str, replaces: str | None = None) -> MemberProcess:
        """Start `node` with join= through a running member (raft:// lays priorities out anew: `replaces` is
        unused)."""
        return self.start(node, self.url(node, join=[through]))

    def live(self) -> list[MemberProcess]:
        return [p for p in self.procs.values() if p.alive]

    def leaders(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {r: [] for r in range(ROLES)}
        for p in self.live():
            for role in p.log.leading():
                out[int(role)].append(p.member_id)
        return out

    def counts(self) -> dict[str, int]:
        out = {p.member_id: 0 for p in self.live()}
        for who in self.leaders().values():
            for m in who:
                out[m] += 1
        return out

    def settled(self, members: str, timeout: float = 60.0, balanced: bool | None = None) -> dict[int, str]:
        """Every role led by exactly one of `members` (each within one of the others' counts, if `balanced`,
        which defaults to whether this method balances), for 2 D in a row."""
        allowed = set(members)
        balanced = self.balances if balanced is None else balanced
        since: list[float] = []

        def ok() -> dict[int, str] | None:
            h = self.leaders()
            good = all(len(v) == 1 and v[0] in allowed for v in h.values())
            if good and balanced:
                counts = [sum(1 for v in h.values() if v[0] == m) for m in allowed]
                good = max(counts) - min(counts) <= 1
            if not good:
                since.clear()
                return None
            if not since:
                since.append(time.monotonic())
            return {r: v[0] for r, v in h.items()} if time.monotonic() - since[0] >= 2 * self.et else None

        what = f"every role led once by {sorted(allowed)}" + (", balanced" if balanced else "")
        return wait_until(ok, timeout, what=what)

    def leave(self, node: str, timeout: float = 60.0) -> None:
        """SIGTERM: the member drains, removes itself and exits 0."""
        proc = self.procs[node]
        proc.stop(timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{node} left with exit code {proc.returncode}: {proc.stderr_tail()}")

    def kill(self, node: str) -> None:
        self.faults.append(FaultRecord(time.monotonic(), "kill", node))
        self.procs[node].kill()

    def remove(self, node: str, through: str) -> None:
        """`elect raft remove` through a live member, as an operator removes a dead one."""
        done = subprocess.run([sys.executable, "-m", "elect", "raft", "remove", self.address(through), node,
                               "--timeout", "30"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"elect raft remove {node}: {done.stderr.strip()}")

    def measure(self, scenario: str, trial: int, began: float, before: dict[int, str],
                seconds: dict[str, float]) -> Outcome:
        lines = [line for p in self.procs.values() for line in p.log.lines]
        history = History(lines, list(self.faults), end=time.monotonic())
        by_role = history.intervals()
        longest, count, spent = 0.0, 0, 0.0
        for role in range(ROLES):
            ivs = by_role.get(str(role), [])
            for start, end in leaderless(ivs, began, history.end):
                longest = max(longest, end - start)
            for start, end, _who in overlaps(ivs, began, history.end):
                count += 1
                spent += end - start
        now = {r: v[0] for r, v in self.leaders().items() if v}
        moved = sum(1 for r in range(ROLES) if now.get(r) != before.get(r))
        handovers = sum(1 for line in lines if line["event"] == "acquired" and line["mono"] >= began)
        return Outcome(scenario, trial, round(longest, 4), count, round(spent, 4), moved, self.counts(),
                       {k: round(v, 3) for k, v in seconds.items()}, self.method, handovers)

    def close(self) -> None:
        for p in self.procs.values():
            with contextlib.suppress(Exception):
                p.kill()


class AnchorCluster(Cluster):
    """Members of a Java Raft anchor (bench/anchors: `jraft`, `ratis`), each member one group per role, with the
    harness's balanced priorities; its membership changed as the anchor's own operators change it."""

    balances = False

    def __init__(self, tmp: Path, method: str, election_timeout: float = 1.0) -> None:
        super().__init__(tmp, election_timeout)
        self.method = method
        self.layout: dict[int, list[str]] = {}
        """Role -> member ids, highest priority first."""
        self.members: list[str] = []
        """The configuration as last changed."""

    def _priorities(self, layout: dict[int, list[str]]) -> str:
        return ";".join(f"{r}=" + ">".join(order) for r, order in sorted(layout.items()))

    def anchor_url(self, node: str, peers: Sequence[str], layout: dict[int, list[str]], join: bool) -> str:
        query = {"peers": ",".join(f"{m}@{self.address(m)}" for m in peers if m != node),
                 "election_timeout_ms": str(round(self.et * 1000)), "data_dir": str(self.tmp / "state" / node),
                 "priorities": self._priorities(layout), **({"join": "1"} if join else {})}
        return f"{self.method}://{node}@{self.address(node)}?" + urlencode(query)

    def start(self, node: str, url: str, leave: bool = True) -> MemberProcess:
        proc = MemberProcess(url, node, list(range(ROLES)), log_dir=self.tmp,
                             command=anchors.command(url, node, list(range(ROLES)), sys.executable))
        self.procs[node] = proc
        proc.start()
        return proc

    def first(self, nodes: str = "abc") -> None:
        orders = assign_priorities(list(nodes), ROLES, len(nodes))
        self.layout = {r: sorted(ranks, key=lambda m: -ranks[m]) for r, ranks in enumerate(orders)}
        self.members = list(nodes)
        for n in nodes:
            self.start(n, self.anchor_url(n, self.members, self.layout, join=False))

    def join(self, node: str, through: str, replaces: str | None = None) -> MemberProcess:
        """Start `node` (it starts with its priorities those of `replaces`, whose place it takes), wait until it
        serves, then add it to every group: `admin change-peers` to the members and it, with the priorities as
        they are (`node` lowest) until `replaces` is removed."""
        if replaces is None:
            raise ValueError("an anchor's new member takes the place of one that leaves: name it (replaces=)")
        after = {r: [node if m == replaces else m for m in order] for r, order in self.layout.items()}
        proc = self.start(node, self.anchor_url(node, self.members, after, join=True))
        wait_until(lambda: proc.started() or None, 60, what=f"{node} serving")
        self.change([*self.members, node], self.layout)
        self.layout = after
        return proc

    def leave(self, node: str, timeout: float = 60.0) -> None:
        """As raft:// `--leave` does, drain first, then leave the configuration: SIGTERM `node` (the adapter hands
        each group it leads to its next-priority live peer and exits), then remove it from every group, the
        member that took its place getting its priorities."""
        super().leave(node, timeout)
        self.remove(node, through="")

    def remove(self, node: str, through: str) -> None:
        self.change([m for m in self.members if m != node], self.layout)

    def change(self, members: Sequence[str], layout: dict[int, list[str]]) -> None:
        """`admin change-peers` from the members now to `members`, each role's priorities from `layout`."""
        argv = [*anchors.program(self.method), "admin", "change-peers",
                "--roles", ",".join(str(r) for r in range(ROLES)),
                "--peers", ",".join(f"{m}@{self.address(m)}" for m in self.members),
                "--to", ",".join(f"{m}@{self.address(m)}" for m in members),
                "--priorities", self._priorities(layout), "--timeout-ms", "30000"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{self.method} admin change-peers to {list(members)}: {done.stderr[-2000:]}")
        self.members = list(members)


@contextlib.contextmanager
def cluster(tmp: Path, method: str = "raft") -> Iterator[Cluster]:
    c = Cluster(tmp) if method == "raft" else AnchorCluster(tmp, method)
    try:
        yield c
    finally:
        c.close()


def add_fourth(c: Cluster, trial: int) -> Outcome:
    """Three balanced members; d joins through a: how soon it leads its share, how many roles move."""
    c.first()
    before = c.settled("abc")
    began = time.monotonic()
    c.join("d", "a")
    wait_until(lambda: c.counts().get("d", 0) >= ROLES // 4 - 1 or None, 30, what="d leading its share")
    share = time.monotonic() - began
    c.settled("abcd")
    return c.measure("add a 4th member to 3", trial, began, before, {"join_to_share": share})


def leave_one(c: Cluster, trial: int) -> Outcome:
    """Four balanced members (a, b, c, then d joined); b leaves with --leave."""
    c.first()
    c.settled("abc")
    c.join("d", "a")
    before = c.settled("abcd")
    began = time.monotonic()
    c.leave("b")
    left = time.monotonic() - began
    c.settled("acd")
    return c.measure("remove a member with --leave", trial, began, before, {"leave_exits_after": left})


def replace_all(c: Cluster, trial: int, kill: bool = False) -> Outcome:
    """a, b, c replaced by d, e, f one at a time: start the new one with join, then the old one leaves (or is
    SIGKILLed, then removed with `elect raft remove`)."""
    c.first()
    before = c.settled("abc")
    began = time.monotonic()
    seconds: dict[str, float] = {}
    members = "abc"
    for new, old, through in (("d", "a", "b"), ("e", "b", "c"), ("f", "c", "d")):
        t = time.monotonic()
        c.join(new, through, replaces=old)
        c.settled(members + new)
        if kill:
            c.kill(old)
            c.remove(old, through)
        else:
            c.leave(old)
        members = members.replace(old, "") + new
        c.settled(members)
        seconds[f"{old}->{new}"] = time.monotonic() - t
    name = "replace every member of 3, " + ("each SIGKILLed, then removed" if kill else "each leaving")
    return c.measure(name, trial, began, before, seconds)


SCENARIOS: dict[str, Callable[[Cluster, int], Outcome]] = {
    "add": add_fourth,
    "leave": leave_one,
    "replace": replace_all,
    "replace-kill": lambda c, t: replace_all(c, t, kill=True),
}


#: The scenarios each method runs: the anchors only replace (a member that joins takes the place of one that leaves,
#: with its priorities; adding or removing alone would need priorities laid out anew, which only raft:// does).
RUNS: dict[str, tuple[str, ...]] = {"raft": tuple(SCENARIOS), "jraft": ("replace", "replace-kill"),
                                    "ratis": ("replace", "replace-kill")}


def run(out: Path, trials: int, which: Sequence[tuple[str, str]], progress: Callable[[str], None] = print,
        work: Path | None = None) -> list[Outcome]:
    """Every (method, scenario) of `which`, `trials` times, each on a cluster of its own under `work` (the members'
    logs and state; a temporary directory if None); writes `out/results.json`."""
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="elect-membership-") as tmp:
        for method, name in which:
            if name not in RUNS.get(method, ()):
                raise ValueError(f"{method} does not run {name!r}; it runs {', '.join(RUNS.get(method, ())) or 'none'}")
            for trial in range(trials):
                results.append(_one(method, name, trial, trials, Path(work or tmp) / f"{method}-{name}-{trial}",
                                    progress))
    (out / "results.json").write_text(json.dumps([asdict(o) for o in results], indent=1) + "\n")
    return results


def _one(method: str, name: str, trial: int, trials: int, where: Path, progress: Callable[[str], None]) -> Outcome:
    with cluster(where, method) as c:
        o = SCENARIOS[name](c, trial)
    progress(f"{method} {name} #{trial + 1}/{trials}: longest leaderless {o.longest_leaderless:.3f} s, "
             f"{o.overlaps} overlaps, {o.moved} moved in {o.handovers} handovers, leaders {o.leaders}, {o.seconds}")
    return o
