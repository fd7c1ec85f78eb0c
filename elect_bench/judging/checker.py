"""Reads a merged history and reports every violation of what an elector promised.

- two members leading one role at once, in a mode that claims exclusivity; in a mode that bounds its overlap
  instead (NELI full above its exclusivity bound: T), two members leading one role together for longer than that;
- a fencing token that did not increase from one leader of a role to the next (a member resuming its
  own leadership under the same token, nobody else having acquired in between, is allowed: see
  elect.contract.Leadership);
- a role without a leader for longer than its bound after the last fault healed;
- a member caught in an acquire/fence loop: resuming the same leadership (same token, nobody else between) right
  after fencing itself, and fenced again before it lasted a detection budget, more than `LOOP_LIMIT` times in a
  row while no fault was under way. Safe, and still a broken promise: the role churns while nothing is wrong
  (issue 61: etcd at ttl=0.1 looped for minutes, each leadership doomed when it began).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from elect.contract import Characteristics
from elect_bench.faults import known
from elect_bench.judging.history import History
from elect_bench.judging.measures import leaderless, overlaps

#: How many times in a row a member may fence and resume one leadership with no fault under way (a slow request
#: now and then fences and resumes once; a loop does it every renewal).
LOOP_LIMIT = 3


@dataclass(frozen=True)
class Violation:
    """One broken promise, as a record: reports count it by `kind` and link it to its moment `at`."""

    kind: str
    """overlap | token | leaderless | loop (this checker); unsettled (a group that never went quiet after its
    start); write-stale | write-lost | write-out_of_order | write-conflict (the fenced store's checker)."""
    role: str
    """The role it broke on; "" for the whole group."""
    at: float
    """Monotonic seconds, as the history's (nan: not known, in a results.json written before violations were
    records)."""
    detail: str
    since: float | None = None  # the earlier event it relates to (a token's previous acquisition)

    def __str__(self) -> str:
        where = f" on {self.role}" if self.role else ""
        when = f" at {self.at:.3f}" if math.isfinite(self.at) else ""
        return f"{self.kind}{where}{when}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any] | str) -> Violation:
        """A violation as `to_json` wrote it, or as the text a results.json held before violations were records
        (kept readable so that `elect report` can write an old run's report again)."""
        if isinstance(raw, dict):
            return cls(**raw)
        full = _WRITTEN.match(raw)
        if full:
            return cls(full["kind"], full["role"] or "", float(full["at"]), full["detail"])
        kind, _, detail = raw.partition(": ")
        return cls(kind, "", math.nan, detail) if detail else cls(raw.split(" ", 1)[0], "", math.nan, raw)


_WRITTEN = re.compile(r"(?P<kind>\S+?)(?: on (?P<role>\S+))? at (?P<at>-?\d+\.\d+): (?P<detail>.*)", re.S)


def check(history: History, *, exclusive: bool, tokens: bool = True, leaderless_bound: float | None = None,
          healed_at: float | None = None, overlap_tolerance: float = 0.0,
          max_overlap: float | None = None, budget: float = 1.0) -> list[Violation]:
    """Every violation in `history`; tokens are checked only where the method has them (`tokens`: an anchor
    without a fencing token prints 0); `leaderless_bound` applies from `healed_at` (default: the last fault).
    `max_overlap` (a non-exclusive mode's bound) is judged per pair of leaderships: a chain of handovers may keep
    some two members leading for longer, each pair within the bound. `budget`: the detection budget, for `loops`."""
    found: list[Violation] = []
    by_role = history.intervals()
    for role, ivs in sorted(by_role.items()):
        if exclusive:
            for start, end, members in overlaps(ivs):
                if end - start > overlap_tolerance:
                    found.append(Violation("overlap", role, start,
                                           f"{', '.join(sorted(members))} both led for {end - start:.3f} s"))
        elif max_overlap is not None:
            for a, b in itertools.combinations(ivs, 2):
                start, end = max(a.start, b.start), min(a.end, b.end)
                if a.member != b.member and end - start > max_overlap:
                    found.append(Violation("overlap", role, start, f"{a.member}, {b.member} both led for "
                                           f"{end - start:.3f} s (bound {max_overlap:g} s)"))
        acquired = [line for line in history.lines if tokens and line["role"] == role and line["event"] == "acquired"]
        for prev, nxt in itertools.pairwise(acquired):
            resumed = nxt["member"] == prev["member"] and nxt["token"] == prev["token"]
            if nxt["token"] <= prev["token"] and not resumed:
                found.append(Violation("token", role, nxt["mono"],
                                       f"{nxt['member']} got token {nxt['token']} after {prev['member']}'s "
                                       f"{prev['token']}", since=prev["mono"]))
    found += loops(history, budget=budget)
    if leaderless_bound is not None:
        since = healed_at if healed_at is not None else max((f.mono for f in history.faults), default=history.start)
        for role in history.roles:
            for start, end in leaderless(by_role.get(role, []), since, history.end):
                if end - start > leaderless_bound:
                    found.append(Violation("leaderless", role, start,
                                           f"no leader for {end - start:.3f} s (bound {leaderless_bound:g} s)"))
    return sorted(found, key=lambda v: (v.at, v.role))


def loops(history: History, limit: int = LOOP_LIMIT, budget: float = 1.0) -> list[Violation]:
    """Every run of more than `limit` fence-and-resume cycles of one member's leadership of one role outside the
    harness's fault windows: the same token acquired again right after it fenced itself, and fenced again within
    `budget` (the detection budget: a leadership that outlives it was renewed, so a later fence is another
    matter, a false failover the floor pass counts). A fault or its healing between two cycles ends the run (a
    member fencing once per strike is not looping)."""
    windows = _fault_windows(history)
    marks = sorted(f.mono for f in history.faults)
    found: list[Violation] = []
    runs: dict[tuple[str, str], list[float]] = {}  # (member, role) -> the fences of the current run
    fenced: dict[tuple[str, str], tuple[int, float]] = {}  # its last fence, not yet followed by anything
    since: dict[tuple[str, str], float] = {}  # when its current leadership began
    for line in history.lines:
        key = (line["member"], line["role"])
        if line["event"] == "fenced":
            fenced[key] = (line["token"], line["mono"])
            if line["mono"] - since.get(key, -math.inf) > budget:
                runs.pop(key, None)  # it lasted: renewed, not doomed
            continue
        if line["event"] == "acquired":
            since[key] = line["mono"]
        last = fenced.pop(key, None)
        if line["event"] != "acquired":
            runs.pop(key, None)
            continue
        if last is None or last[0] != line["token"] or any(w0 <= last[1] <= w1 for w0, w1 in windows):
            runs.pop(key, None)
            continue
        run = runs.setdefault(key, [])
        if run and any(run[-1] < m <= last[1] for m in marks):
            run.clear()  # a strike or a healing between: a new run
        run.append(last[1])
        if len(run) == limit + 1:
            found.append(Violation("loop", line["role"], run[0],
                                   f"{line['member']} fenced itself and resumed token {line['token']} {len(run)} times "
                                   f"in a row from {run[0]:.3f} s with no fault under way (an acquire/fence loop)"))
    return found


def _fault_windows(history: History) -> list[tuple[float, float]]:
    """Where a fault was under way: from each fault that heals to its healing (or the end of the history)."""
    out = []
    records = sorted(history.faults, key=lambda f: f.mono)
    for i, record in enumerate(records):
        kind = known(record.kind)
        if kind is None or kind.healed_as is None:
            continue
        heal = next((r.mono for r in records[i + 1:] if r.kind == kind.healed_as and r.target == record.target),
                    history.end)
        out.append((record.mono, heal))
    return out


def check_promise(history: History, promised: Characteristics, budget: float = 1.0) -> list[Violation]:
    """`check` against what an elector promises (its `characteristics`): exclusivity, or a non-exclusive mode's
    overlap bound where it states one; token order where it has tokens; no acquire/fence loops at `budget`."""
    return check(history, exclusive=promised.exclusive, tokens=promised.has_token,
                 max_overlap=None if promised.exclusive else promised.max_overlap, budget=budget)
