"""The operating envelope: every method measured across the settings users run, not at one point.

A *point* is a detection budget D (each method's own knob: election timeout, TTL, session timeout), a number of
roles, a group size and a number of busy processes beside the members (elect_bench.busy). The whole product of
the axes is too long to run on two cores, so the envelope runs *cuts*: the base point, and for each axis each of
its values with every other axis at the base (`sweep`, which any trials scenario may carry). At every point each
method's cells (faults x trials) run as any scenario's do (a fresh group per trial), with a window at rest before
the fault: leaderships that end there, with nothing struck, are *false failovers*.

Two passes follow. The *floor* (`floor`): per method, the smallest D at which a group at rest keeps every
leadership for `floor.rest` seconds, idle and beside `floor.busy` processes; budgets are screened from the
smallest up for `floor.screen` seconds and the first that passes is held for the full time. The *cost*
(`cost`): per method and role count, a group at rest with its requests to its store or broker (Raft: its peers)
counted by the harness's relays, which parse the wire protocol (elect_bench.relays); a pass of its own, because a
relay in the path of every request would change the failover and the false failovers it measures.

A method can be held below a limit on an axis (`limits`: `kafka-fast: {roles: 600}`), with the reason, which the
report gives: the envelope says where a method stops, and why, rather than failing there.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from elect.errors import ConfigError
from elect_bench import suite
from elect_bench.faults import Fault, fault
from elect_bench.judging.measures import mean, percentile
from elect_bench.methods import method_spec
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance
from elect_bench.scenario import Scenario, listed
from elect_bench.trial import TrialResult

AXES = ("budget", "roles", "members", "busy")
KEEP_HISTORY = 60  # a trial's event lines are kept in results.json up to this many roles (6,000 roles: megabytes)


@dataclass(frozen=True, order=True)
class Point:
    """One operating point."""

    budget: float
    roles: int
    members: int
    busy: int = 0

    def label(self) -> str:
        return f"D={self.budget:g} s, {self.roles} roles, {self.members} members" + \
            (f", {self.busy} busy" if self.busy else "")

    def key(self) -> str:
        return f"{self.budget:g}/{self.roles}/{self.members}/{self.busy}"


@dataclass(frozen=True)
class Floor:
    """The floor pass: `budgets` screened from the smallest up for `screen` seconds at rest (idle and beside each
    of `busy`), the first that passes held for `rest` seconds; the method's floor is the first that holds.

    Before the screen, at each of `start_budgets` and (when there are any) at every budget the search screens,
    `starts` cold starts (a fresh group each, idle), each settled and then at rest for `start_rest` seconds: a loop
    or a false failover shows in some cold starts and not in others (issue 61: etcd at 0.1 s looped in 3 of 10), so
    one long window proves little. A budget whose cold starts were not all clean (settled, no leadership ended at
    rest, no violation) is not the floor."""

    budgets: tuple[float, ...]
    busy: tuple[int, ...] = (0, 2)
    rest: float = 600.0
    screen: float = 60.0
    starts: int = 30
    start_rest: float = 10.0
    start_budgets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.budgets or min(self.budgets) <= 0:
            raise ConfigError("floor.budgets: at least one budget, all > 0", parameter="floor")
        if self.rest <= 0 or self.screen <= 0 or min(self.busy, default=0) < 0:
            raise ConfigError("floor: rest > 0, screen > 0, busy >= 0", parameter="floor")
        if self.starts < 0 or self.start_rest <= 0 or min(self.start_budgets, default=1.0) <= 0:
            raise ConfigError("floor: starts >= 0, start_rest > 0, start_budgets > 0", parameter="floor")


@dataclass(frozen=True)
class EnvelopeScenario:
    """`base`: the trials scenario at the base point (methods, faults, trials, rest, hold, infrastructure);
    `sweep`: axis -> values (budget, roles, members, busy); `limits`: method -> axis -> the largest value it runs
    at, and `why` (method -> reason); `cost`: seconds of counted rest per method and role count (0: no cost pass);
    `floor`: the floor pass, or None."""

    base: Scenario
    sweep: dict[str, tuple[float, ...]] = field(default_factory=dict)
    limits: dict[str, dict[str, float]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    cost: float = 0.0
    floor: Floor | None = None

    def __post_init__(self) -> None:
        if unknown := sorted(set(self.sweep) - set(AXES)):
            raise ConfigError(f"unknown sweep axis {unknown}; known: {', '.join(AXES)}", parameter="sweep")
        for axis, values in self.sweep.items():
            if not values or any(v <= 0 if axis == "budget" else v < (0 if axis == "busy" else 1) for v in values):
                raise ConfigError(f"sweep.{axis}: values {list(values)} out of range", parameter="sweep")
        if self.base.rest <= 0:
            raise ConfigError("an envelope needs `rest` > 0: false failovers are counted there", parameter="rest")
        for method, axes in self.limits.items():
            method_spec(method)  # a known method (a typo is refused), run or not: `--methods` may leave it out
            if unknown := sorted(set(axes) - set(AXES)):
                raise ConfigError(f"limits.{method}: unknown axis {unknown}", parameter="limits")
        if self.cost < 0:
            raise ConfigError("cost >= 0 (seconds)", parameter="cost")

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def origin(self) -> Point:
        b = self.base
        return Point(b.budget, b.roles, b.members, b.busy)

    def points(self) -> list[Point]:
        """The base point, then each axis's values with the others at the base (cuts, not the product)."""
        found = [self.origin]
        for axis, values in self.sweep.items():
            for value in values:
                point = replace(self.origin, **{axis: type(getattr(self.origin, axis))(value)})
                if point not in found:
                    found.append(point)
        return found

    def axis_of(self, point: Point) -> str:
        """The axis a point varies ("base" for the base point)."""
        differ = [a for a in AXES if getattr(point, a) != getattr(self.origin, a)]
        return differ[0] if differ else "base"

    def held(self, method: str, point: Point) -> str | None:
        """Why `method` does not run at `point` (a limit of its, or a budget its members refuse), or None."""
        for axis, largest in self.limits.get(method, {}).items():
            if getattr(point, axis) > largest:
                return f"{axis} above {largest:g}" + (f": {self.why[method]}" if method in self.why else "")
        refused = method_spec(method, self.base.methods).refuses(point.budget)
        if refused is not None:
            return f"refuses D = {point.budget:g} s: {refused}"
        return None

    def at(self, point: Point, **changes: Any) -> Scenario:
        return replace(self.base, budget=point.budget, roles=point.roles, members=point.members, busy=point.busy,
                       sizes=(), **changes)

    def to_json(self) -> dict[str, Any]:
        base = self.base
        return {"kind": "envelope", "name": base.name, "methods": list(base.methods),
                "faults": [f.name for f in base.faults], "trials": base.trials, "rest": base.rest, "hold": base.hold,
                "base": dataclasses.asdict(self.origin), "sweep": {k: list(v) for k, v in self.sweep.items()},
                "limits": self.limits, "why": self.why, "cost": self.cost,
                # as a checkpoint reads it back: lists, not tuples
                "floor": json.loads(json.dumps(dataclasses.asdict(self.floor))) if self.floor else None,
                "store_members": base.store_members, "broker": base.broker}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EnvelopeScenario:
        given = {k: v for k, v in data.items() if k != "kind"}
        sweep = {str(k): tuple(float(x) if k == "budget" else int(x) for x in listed(v))
                 for k, v in dict(given.pop("sweep", {}) or {}).items()}
        limits = {str(m): {str(a): float(v) for a, v in dict(axes).items()}
                  for m, axes in dict(given.pop("limits", {}) or {}).items()}
        why = {str(m): str(r) for m, r in dict(given.pop("why", {}) or {}).items()}
        cost = float(given.pop("cost", 0.0))
        floor_data = given.pop("floor", None)
        floor = None
        if floor_data:
            known = {"budgets", "busy", "rest", "screen", "starts", "start_rest", "start_budgets"}
            if unknown := sorted(set(floor_data) - known):
                raise ConfigError(f"unknown floor key(s) {unknown}; known: {sorted(known)}", parameter="floor")
            floor = Floor(budgets=tuple(float(b) for b in listed(floor_data.get("budgets", []))),
                          busy=tuple(int(b) for b in listed(floor_data.get("busy", [0, 2]))),
                          rest=float(floor_data.get("rest", 600.0)), screen=float(floor_data.get("screen", 60.0)),
                          starts=int(floor_data.get("starts", 30)),
                          start_rest=float(floor_data.get("start_rest", 10.0)),
                          start_budgets=tuple(float(b) for b in listed(floor_data.get("start_budgets", []))))
        for key in ("faults", "methods"):
            if key in given:
                given[key] = tuple(listed(given[key]))
        if "faults" in given:
            given["faults"] = tuple(fault(name) for name in given["faults"])
        known = set(Scenario.__dataclass_fields__)
        if unknown := sorted(set(given) - known):
            extra = {"sweep", "limits", "why", "cost", "floor"}
            raise ConfigError(f"unknown envelope key(s) {unknown}; known: {sorted(known | extra)}")
        return cls(Scenario(**given), sweep, limits, why, cost, floor)


@dataclass
class FloorRun:
    """One window at rest of the floor pass."""

    method: str
    budget: float
    busy: int
    rest: float  # as asked
    stage: str  # "start" (one cold start of several), "screen" or "hold"
    trial: TrialResult | None = None

    @property
    def held(self) -> bool | None:
        """Whether the group settled and no leadership ended in the window, with no violation (a loop, say) (None:
        the window could not run)."""
        if self.trial is None or not self.trial.ok:
            return None
        return self.trial.rest_changes == 0 and not self.trial.violations

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "budget": self.budget, "busy": self.busy, "rest": self.rest,
                "stage": self.stage, "trial": None if self.trial is None else self.trial.to_json()}


@dataclass
class CostRun:
    """One group of the cost pass: a method at a role count, at rest, its requests counted."""

    method: str
    roles: int
    cell: suite.Cell

    def row(self) -> dict[str, Any]:
        ok = [t for t in self.cell.trials if t.ok]
        return {"method": self.method, "roles": self.roles, "ok": len(ok), "trials": len(self.cell.trials),
                "sent_rps_mean": mean([x for t in ok for x in t.sent_rps.values()]),
                "cpu_mean": mean([c for t in ok for c in t.rest_cpu.values()]),
                "errors": [t.error.splitlines()[0] for t in self.cell.trials if not t.ok][:3]}


@dataclass
class EnvelopeResult:
    scenario: EnvelopeScenario
    cells: dict[str, list[suite.Cell]]  # point key -> the cells run there
    held: dict[str, dict[str, str]]  # point key -> method -> why it did not run there
    floor: list[FloorRun]
    cost: list[CostRun]
    skipped: dict[str, str]
    made: Provenance  # its load sampled after each trial
    kafka_broker: str = ""
    cut_short: bool = False  # the report of a checkpoint (`run(..., report_only=True)`): what did not run is missing

    @property
    def ok(self) -> bool:
        return all(t.ok for cells in self.cells.values() for c in cells for t in c.trials)

    def missing(self) -> list[str]:
        """What a run cut short did not get to: cells short of their trials, methods without a floor window or a
        cost group (empty for a finished run)."""
        if not self.cut_short:
            return []
        wanted = self.scenario.base.trials
        short = [f"{point.label()} / {c.method.name} / {c.fault.name}: {len(c.trials)} of {wanted} trials"
                 for point in self.scenario.points() for c in self.cells.get(point.key(), [])
                 if len(c.trials) < wanted]
        methods = self.methods()
        floors = self.floors()
        unfloored = [m for m in methods if self.scenario.floor is not None and floors.get(m) is None]
        costed = {run_.method for run_ in self.cost}
        uncosted = [m for m in methods if self.scenario.cost > 0 and m not in costed and not method_spec(m).uncounted]
        return [*short, *(f"the floor of {m}: no budget held through all its windows (not all run)" for m in unfloored),
                *(f"the cost of {m}: not run" for m in uncosted)]

    def summaries(self) -> list[dict[str, Any]]:
        """A row per point, method and fault (the report's envelope table)."""
        rows = []
        for point in self.scenario.points():
            for cell in self.cells.get(point.key(), []):
                rows.append({"axis": self.scenario.axis_of(point), "point": point.label(),
                             **dataclasses.asdict(point), **cell.summary(point.budget)})
        return rows

    def floors(self) -> dict[str, float | None]:
        """Per method: the smallest budget held at rest, idle and busy, for the full time (None: none held)."""
        found: dict[str, float | None] = {}
        levels = set(self.scenario.floor.busy) if self.scenario.floor is not None else set()
        for method in self.methods():
            holds = [r for r in self.floor if r.method == method and r.stage == "hold"]
            starts = [r for r in self.floor if r.method == method and r.stage == "start"]
            passed = sorted(b for b in {r.budget for r in holds}  # held idle and busy (a run cut short may lack one)
                            if {r.busy for r in holds if r.budget == b} >= levels
                            and all(r.held for r in holds if r.budget == b)
                            and all(r.held for r in starts if r.budget == b))
            found[method] = passed[0] if passed else None
        return found

    def cold_starts(self) -> list[dict[str, Any]]:
        """Per method and budget of the cold-start stage: how many starts, how many never settled, looped, or ended
        a leadership at rest, and the settling time (the report's cold-start table)."""
        rows = []
        cells = sorted({(r.method, r.budget) for r in self.floor if r.stage == "start"},
                       key=lambda mb: (self.methods().index(mb[0]) if mb[0] in self.methods() else 99, mb[1]))
        for method, budget in cells:
            trials = [r.trial for r in self.floor if (r.method, r.budget, r.stage) == (method, budget, "start")
                      and r.trial is not None]
            ran = [t for t in trials if t.ok]
            settled = sorted(t.settled for t in ran if t.settled is not None)
            rows.append({
                "method": method, "budget": budget, "starts": len(trials), "ran": len(ran),
                "unsettled": sum(1 for t in ran if t.settled is None),
                "looping": sum(1 for t in ran if any(v.kind == "loop" for v in t.violations)),
                "false_failovers": sum(1 for t in ran if t.rest_changes), "ended": sum(t.rest_changes for t in ran),
                "clean": sum(1 for t in ran if t.rest_changes == 0 and not t.violations),
                "settled_median": percentile(settled, 50) if settled else None,
                "settled_max": settled[-1] if settled else None,
                "errors": sorted({t.error.splitlines()[0] for t in trials if not t.ok and t.error})})
        return rows

    def methods(self) -> list[str]:
        return [m for m in self.scenario.base.methods if m not in self.skipped]

    def headline(self) -> Fault | None:
        """The fault the tables and pictures lead with: the scenario's first (kill in bench/envelope.yaml); None for
        a run without faults (bench/floor.yaml: the floor pass alone)."""
        return self.scenario.base.faults[0] if self.scenario.base.faults else None

    def along(self, axis: str, method: str, *, failed_over: bool = False,
              rows: Sequence[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """`method`'s summary rows for the headline fault along one axis, the base point included; with
        `failed_over`, only those with a failover measured."""
        headline = self.headline()
        if headline is None:
            return []
        return [r for r in (self.summaries() if rows is None else rows)
                if r["method"] == method and r["fault"] == headline.name and r["axis"] in ("base", axis)
                and (r["failover_n"] or not failed_over)]

    def largest_held(self, method: str, ratio: float = 1.1) -> int | None:
        """The largest role count of the roles axis at which `method`'s headline failover p99 stayed within
        `ratio` x D (None: not even the smallest)."""
        held = [r["roles"] for r in self.along("roles", method, failed_over=True) if r["failover_p99_ratio"] <= ratio]
        return max(held, default=None)

    def cost_rows(self) -> list[dict[str, Any]]:
        return [run_.row() for run_ in self.cost]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.made.to_json(), "kafka_broker": self.kafka_broker, "scenario": self.scenario.to_json(),
            "skipped": self.skipped, "held": self.held, "summary": self.summaries(),
            "floors": self.floors(), "floor": [r.to_json() for r in self.floor], "cold_starts": self.cold_starts(),
            "cost": self.cost_rows(), "cut_short": self.cut_short, "missing": self.missing(),
            "trials": {key: [t.to_json() for c in cells for t in c.trials] for key, cells in self.cells.items()},
            "cost_trials": [t.to_json() | {"roles": run_.roles} for run_ in self.cost for t in run_.cell.trials]}


def run(scenario: EnvelopeScenario, workdir: Path, progress: Progress, command: str = "",
        checkpoint: Callable[[EnvelopeResult], None] | None = None,
        resume: dict[str, Any] | None = None, report_only: bool = False) -> EnvelopeResult:
    """Every point's cells, then the floor and the cost passes; `checkpoint` gets the result so far after every
    trial, and `resume` (a checkpoint of this scenario) keeps the trials it has. `report_only`: run nothing more,
    the result is the checkpoint's, marked cut short (its report says what is missing)."""
    if report_only and resume is None:
        raise ConfigError("a report of a checkpoint needs the checkpoint (--resume)", parameter="report_only")
    if resume is not None and resume.get("scenario") != scenario.to_json():
        raise ConfigError("the checkpoint is of another envelope (its scenario differs)", parameter="resume")
    made = Provenance.begin(command, resume)
    base = scenario.base
    skipped = {m: why for m in base.methods if (why := suite.available(m))}
    methods = [m for m in base.methods if m not in skipped]
    points = scenario.points()
    cells: dict[str, list[suite.Cell]] = {}
    held: dict[str, dict[str, str]] = {}
    for point in points:
        held[point.key()] = {m: why for m in methods if (why := scenario.held(m, point))}
        cells[point.key()] = [suite.Cell(method_spec(m), f, point.members) for m in methods
                              if m not in held[point.key()] for f in base.faults]
    floor: list[FloorRun] = []
    cost: list[CostRun] = []
    result = EnvelopeResult(scenario, cells, held, floor, cost, skipped, made)
    if resume is not None:
        _restore(result, resume)
    if report_only:
        result.cut_short = True
        result.kafka_broker = str(resume.get("kafka_broker", "")) if resume else ""
        return result

    def after_trial() -> None:
        made.sample()
        made.tick()
        if checkpoint is not None:
            checkpoint(result)

    largest = max(p.members for p in points)
    shared = replace(base, members=largest, sizes=(largest,), meter=False, load_window=0.0)
    total = sum(len(c) for c in cells.values()) * base.trials
    done = [sum(len(c.trials) for cs in cells.values() for c in cs)]

    def show(name: str, status: str) -> None:
        progress(name, done[0], total, status)

    with suite.environment(shared, workdir) as env:
        result.kafka_broker = env.endpoints.kafka_broker if env.endpoints is not None else ""
        for point in points:
            at = scenario.at(point)

            def finished(at: Scenario = at) -> None:
                done[0] += 1
                _lighten(at, result)
                after_trial()

            suite.run_cells(at, cells[point.key()], env, _under(point.label(), show), after_trial=finished)
        if scenario.floor is not None:
            _floors(scenario, methods, env, result, show, after_trial)
    if scenario.cost > 0:
        _cost(scenario, methods, workdir, result, show, after_trial)
    made.tick()
    return result


def _under(label: str, show: Callable[[str, str], None]) -> Progress:
    """A cell's progress shown under `label` (its point, or a pass), with the envelope's own count of trials."""

    def progress(cell: str, _done: int, _total: int, status: str) -> None:
        show(f"{label} / {cell}", status)

    return progress


def _lighten(at: Scenario, result: EnvelopeResult) -> None:
    """Drop the event lines of trials of many roles (results.json would hold megabytes of them)."""
    if at.roles > KEEP_HISTORY:
        for cells in result.cells.values():
            for cell in cells:
                for trial in cell.trials:
                    trial.history = {}


def _floors(scenario: EnvelopeScenario, methods: Sequence[str], env: Any, result: EnvelopeResult,
            show: Callable[[str, str], None], after_trial: Callable[[], None]) -> None:
    """Per method, the smallest budget held at rest: screened from the smallest up, the first that passes held."""
    assert scenario.floor is not None
    plan = scenario.floor
    origin = scenario.origin
    for method in methods:
        clean = {}  # budget -> whether every cold start there was clean: all of them are run, floor or not
        for budget in sorted(plan.start_budgets):
            point = replace(origin, budget=budget)
            if not scenario.held(method, point):
                clean[budget] = _cold_starts(scenario, method, point, env, result, show, after_trial)
        for budget in sorted(plan.budgets):
            point = replace(origin, budget=budget)
            if scenario.held(method, point):
                continue
            if plan.start_budgets and budget not in clean:  # no floor is claimed without clean cold starts there
                clean[budget] = _cold_starts(scenario, method, point, env, result, show, after_trial)
            if not clean.get(budget, True):
                continue  # a start that looped or failed over at rest: not the floor, and the screen is moot
            passed = True
            for stage, seconds in (("screen", plan.screen), ("hold", plan.rest)):
                for busy in plan.busy:
                    existing = next((r for r in result.floor if (r.method, r.budget, r.busy, r.stage) ==
                                     (method, budget, busy, stage)), None)
                    run_ = existing or FloorRun(method, budget, busy, seconds, stage)
                    if existing is None:
                        at = scenario.at(replace(point, busy=busy), rest=seconds, faults=(_none(),), trials=1)
                        cell = suite.Cell(method_spec(method), _none(), at.members)
                        label = f"floor: D={budget:g} s, {busy} busy, {stage} {seconds:g} s"
                        suite.run_cells(at, [cell], env, _under(label, show))
                        run_.trial = cell.trials[0]
                        if run_.held:  # a window that lost leaderships keeps its lines: they show which and when
                            run_.trial.history = {}
                        result.floor.append(run_)
                        after_trial()
                    if not run_.held:
                        passed = False
                        break
                if not passed:
                    break
            if passed:
                break  # this method's floor: the budgets above it are not needed


def _cold_starts(scenario: EnvelopeScenario, method: str, point: Point, env: Any, result: EnvelopeResult,
                 show: Callable[[str, str], None], after_trial: Callable[[], None]) -> bool:
    """`floor.starts` cold starts of `method` at `point` (idle), each a fresh group settled then at rest for
    `floor.start_rest` seconds; True if every one was clean. Starts a checkpoint has are not run again."""
    assert scenario.floor is not None
    plan = scenario.floor
    have = [r for r in result.floor if (r.method, r.budget, r.stage) == (method, point.budget, "start")]
    for index in range(len(have), plan.starts):
        at = scenario.at(replace(point, busy=0), rest=plan.start_rest, faults=(_none(),), trials=1)
        cell = suite.Cell(method_spec(method), _none(), at.members)
        label = f"floor: D={point.budget:g} s, cold start {index + 1} of {plan.starts}"
        suite.run_cells(at, [cell], env, _under(label, show))
        trial = cell.trials[0]
        run_ = FloorRun(method, point.budget, 0, plan.start_rest, "start", trial)
        if run_.held:
            trial.history = {}  # the lines of a start that failed are kept: they show what went wrong
        result.floor.append(run_)
        have.append(run_)
        after_trial()
    return all(r.held for r in have)


def _cost(scenario: EnvelopeScenario, methods: Sequence[str], workdir: Path, result: EnvelopeResult,
          show: Callable[[str, str], None], after_trial: Callable[[], None]) -> None:
    """Per method and role count of the roles axis: a group at rest, its requests counted by relays."""
    origin = scenario.origin
    counts = sorted({origin.roles, *(int(v) for v in scenario.sweep.get("roles", ()))})
    counted = tuple(m for m in methods if not method_spec(m).uncounted)  # the others: said in `held_notes`
    if not counted:
        return
    metered = replace(scenario.base, methods=counted, budget=origin.budget, members=origin.members,
                      sizes=(origin.members,), meter=True, faults=(_none(),), trials=1, rest=scenario.cost, busy=0)
    done = {(run_.method, run_.roles) for run_ in result.cost}
    with suite.environment(metered, workdir / "cost") as env:
        for method in counted:
            for roles in counts:
                point = replace(origin, roles=roles)
                if scenario.held(method, point) or (method, roles) in done:
                    continue
                cell = suite.Cell(method_spec(method), _none(), origin.members)
                suite.run_cells(replace(metered, roles=roles), [cell], env, _under(f"cost: {roles} roles", show))
                for trial in cell.trials:
                    trial.history = {}
                result.cost.append(CostRun(method, roles, cell))
                after_trial()


def _none() -> Fault:
    return fault("none")


def _restore(result: EnvelopeResult, resume: dict[str, Any]) -> None:
    """Put a checkpoint's trials back in their cells (and its floor and cost runs), so they are not run again."""
    for key, trials in dict(resume.get("trials", {})).items():
        kept = [TrialResult.from_json(t) for t in trials]
        for cell in result.cells.get(key, []):
            cell.trials = sorted((t for t in kept if t.method == cell.method.name and t.fault == cell.fault.name),
                                 key=lambda t: t.trial)[:result.scenario.base.trials]
    for data in resume.get("floor", []):
        trial = data.get("trial")
        result.floor.append(FloorRun(data["method"], float(data["budget"]), int(data["busy"]), float(data["rest"]),
                                     data["stage"], TrialResult.from_json(trial) if trial else None))
    runs: dict[tuple[str, int], CostRun] = {}
    for data in resume.get("cost_trials", []):
        key = (str(data["method"]), int(data.get("roles", 0)))
        if key not in runs:
            runs[key] = CostRun(key[0], key[1], suite.Cell(method_spec(key[0]), _none(), int(data.get("members", 0))))
        runs[key].cell.trials.append(TrialResult.from_json(data))
    result.cost.extend(runs.values())


# ---------------------------------------------------------------------------------------------- report
def which_method(result: EnvelopeResult) -> list[dict[str, Any]]:
    """The README's table: per method, its floor, its kill failover at 600 roles (or the largest role count run),
    and its cost per 1,000 roles (CPU per member, requests per second per member)."""
    rows = []
    summaries = result.summaries()
    cost = result.cost_rows()
    for method in result.methods():
        kills = result.along("roles", method, failed_over=True, rows=summaries)
        at = next((r for r in kills if r["roles"] == 600), max(kills, key=lambda r: r["roles"], default=None))
        spent = sorted((r for r in cost if r["method"] == method and r["ok"]), key=lambda r: r["roles"])
        per_k = _per_thousand(spent)
        rows.append({"method": method, "floor": result.floors().get(method),
                     "roles_at": at["roles"] if at else None,
                     "failover_p99": at["failover_p99"] if at else math.nan,
                     "failover_ratio": at["failover_p99_ratio"] if at else math.nan,
                     "largest_held": result.largest_held(method),
                     "cpu_per_k": per_k[0], "rps_per_k": per_k[1]})
    return rows


def _per_thousand(rows: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """What 1,000 more roles cost a member at rest (CPU share, requests/s): the slope between the smallest and the
    largest role count counted (NaN where they are less than 500 roles apart: any less is within the noise; a slope
    below zero is noise too, and shows as 0)."""
    if len(rows) < 2 or rows[-1]["roles"] - rows[0]["roles"] < 500:
        return math.nan, math.nan
    span = (rows[-1]["roles"] - rows[0]["roles"]) / 1000
    return (max(0.0, (rows[-1]["cpu_mean"] - rows[0]["cpu_mean"]) / span),
            max(0.0, (rows[-1]["sent_rps_mean"] - rows[0]["sent_rps_mean"]) / span))


COLUMNS = [
    ("method", "method", "{}"), ("point", "point", "{}"), ("fault", "fault", "{}"), ("ok", "trials", "{ok}/{trials}"),
    ("failover_p50", "failover p50", "{:.2f} s"), ("failover_p99", "p99", "{:.2f} s"),
    ("failover_max", "max", "{:.2f} s"), ("failover_p99_ratio", "p99/D", "{:.2f}"),
    ("unrecovered", "not re-led", "{}"), ("false_per_member_hour", "false failovers/member-h", "{:.1f}"),
    ("startup_max", "all led after (max)", "{:.1f} s"), ("steady_balanced", "balanced", "{:.0%}"),
    ("rest_cpu_mean", "cpu/member at rest", "{:.1%}"), ("rss_mb_max", "rss max", "{:.0f} MB"),
    ("violations", "violations", "{}"),
]

NOTES = (
    "Per point (D, roles, members, busy processes beside the members), each method's cells: a fresh group per "
    "trial, every role led and the group settled, then *at rest* for the scenario's `rest` seconds, then the "
    "fault. *failover* runs from the fault to a surviving member's `acquired`, per role the victim led (for "
    "`stop`, the graceful handover); *p99/D* is its p99 over the detection budget. *false failovers/member-h*: "
    "leaderships that ended (a `fenced` or `revoked` line) in the windows at rest, per member-hour at rest. *all "
    "led after*: from starting the members' processes to every role led (the cold start, the processes' own start "
    "included). *cpu/member at rest*: each member's CPU over the window at rest, a share of one core; *rss max*: "
    "the largest resident memory of a member at the end of the trial.")

FLOOR_NOTES = (
    "The floor: per method, budgets are screened from the smallest up, a group at rest (the base point's roles "
    "and members) for the screen's seconds idle and beside each number of busy processes; the first budget that "
    "keeps every leadership is held for the full time, idle and busy. The *floor* is the smallest budget that held "
    "through all of its windows; the windows run are listed with the leaderships that ended in each.")

COST_NOTES = (
    "Cost at rest: per method and role count, a group at rest at the base point's budget and size, each member's "
    "requests to its store or broker (Raft: its messages to its peers) counted by the harness's relays, which "
    "parse the wire protocol, over the window; CPU per member over the same window. A pass of its own: the relays "
    "are in the path of every request, which would change the failover and false failovers measured above.")


def provenance(result: EnvelopeResult) -> str:
    s = result.scenario
    b = s.base
    sweep = "; ".join(f"{axis} {', '.join(f'{v:g}' for v in values)}" for axis, values in s.sweep.items())
    floor = (f" Floor: budgets {', '.join(f'{x:g}' for x in s.floor.budgets)} s screened {s.floor.screen:g} s and "
             f"held {s.floor.rest:g} s, idle and beside {', '.join(str(x) for x in s.floor.busy if x)} busy "
             "processes." if s.floor else "")
    return (f"{result.made.header()} Base point "
            f"{s.origin.label()}; cuts: {sweep or 'none'}; {b.trials} trial(s) per cell, faults "
            f"{', '.join(f.name for f in b.faults)}, {b.rest:g} s at rest before each fault; etcd and ZooKeeper "
            f"with {b.store_members} member(s), Kafka broker {result.kafka_broker or b.broker}.{floor}"
            + (f" Cost: {s.cost:g} s at rest per method and role count." if s.cost else "")
            + (f" {result.made.busy()}" if result.made.load else ""))


def summary_of_floor(result: EnvelopeResult) -> list[dict[str, Any]]:
    """A row per window of the screen and hold stages (the cold starts have a table of their own)."""
    rows = []
    for run_ in result.floor:
        if run_.stage == "start":
            continue
        trial = run_.trial
        rows.append({"method": run_.method, "budget": run_.budget, "busy": run_.busy, "stage": run_.stage,
                     "rest": trial.rest if trial else 0.0, "ended": trial.rest_changes if trial else None,
                     "ok": bool(trial and trial.ok), "error": trial.error.splitlines()[0] if trial and trial.error
                     else ""})
    return rows


# ---------------------------------------------------------------------------------------------- tables
def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in body)]


def which_method_table(result: EnvelopeResult) -> list[str]:
    """"Which method for me": floor, failover at 600 roles, cost per 1,000 roles (Markdown lines)."""
    b = result.scenario.base
    header = ["method", "floor (0 false failovers at rest, idle and busy)", "kill failover p99 (roles)", "p99/D",
              "largest roles with p99 <= 1.1 D", "CPU per 1,000 roles", "requests/s per 1,000 roles"]
    body = [[r["method"], _fmt(r["floor"], "{:g} s"),
             f"{_fmt(r['failover_p99'], '{:.2f} s')} ({_fmt(r['roles_at'], '{}')})",
             _fmt(r["failover_ratio"], "{:.2f}"), _fmt(r["largest_held"], "{:,}"),
             _fmt(r["cpu_per_k"], "{:.1%}"), _fmt(r["rps_per_k"], "{:.1f}")] for r in which_method(result)]
    return [f"Kill failover at D = {b.budget:g} s, {b.members} members; cost per member at rest, the slope between "
            "the smallest and largest role counts of the cost pass.", "", *_markdown(header, body), ""]


def floor_table(result: EnvelopeResult) -> list[str]:
    if not result.floor:
        return []
    floors = result.floors()
    header = ["method", "D", "busy processes", "stage", "seconds at rest", "leaderships ended", "floor"]
    body = [[r["method"], f"{r['budget']:g} s", str(r["busy"]), r["stage"], f"{r['rest']:.0f}",
             "-" if r["ended"] is None else str(r["ended"]) + ("" if r["ok"] else f" ({r['error']})"),
             _fmt(floors.get(r["method"]), "{:g} s")] for r in summary_of_floor(result)]
    return ["## The floor", "", FLOOR_NOTES, "", *cold_start_table(result), *_markdown(header, body), ""]


def cold_start_table(result: EnvelopeResult) -> list[str]:
    """Per method and budget: cold starts run, and how many never settled, looped or failed over at rest."""
    rows = result.cold_starts()
    if not rows:
        return []
    plan = result.scenario.floor
    rest = f"{plan.start_rest:g} s" if plan is not None else "a window"
    header = ["method", "D", "cold starts", "clean", "never settled", "looping", "with false failovers",
              "leaderships ended", "settled in (median / max)"]
    body = [[r["method"], f"{r['budget']:g} s",
             str(r["ran"]) + (f" of {r['starts']}" if r["ran"] < r["starts"] else ""),
             str(r["clean"]), str(r["unsettled"]), str(r["looping"]), str(r["false_failovers"]), str(r["ended"]),
             f"{_fmt(r['settled_median'], '{:.1f}')} / {_fmt(r['settled_max'], '{:.1f}')} s"
             + (f" ({r['errors'][0]})" if r["errors"] else "")] for r in rows]
    return [f"Cold starts: a fresh group per start, idle, settled, then {rest} at rest; *clean*: settled, no "
            "leadership ended at rest, no violation (an acquire/fence loop, a group that never went quiet).", "",
            *_markdown(header, body), ""]


def cost_table(result: EnvelopeResult) -> list[str]:
    rows = result.cost_rows()
    if not rows:
        return []
    header = ["method", "roles", "requests/s per member", "CPU per member", "trials"]
    body = [[r["method"], f"{r['roles']:,}", _fmt(r["sent_rps_mean"], "{:.1f}"), _fmt(r["cpu_mean"], "{:.1%}"),
             f"{r['ok']}/{r['trials']}" + (f" ({r['errors'][0]})" if r["errors"] else "")] for r in rows]
    return ["## Cost at rest", "", COST_NOTES, "", *_markdown(header, body), ""]


def held_notes(result: EnvelopeResult) -> list[str]:
    held = sorted({(m, why) for methods in result.held.values() for m, why in methods.items()})
    if result.scenario.cost:
        held += [(m, f"cost at rest not counted: {why}") for m in result.scenario.base.methods
                 if (why := method_spec(m).uncounted)]
    missing = result.missing()
    cut = ["**Cut short**: this report is of the run's checkpoint (`--report-only`); what it did not get to is "
           "missing from the tables:", "", *(f"- {what}" for what in missing), ""] if result.cut_short else []
    if not held:
        return cut
    return [*cut, "Not run at some points (limits of the scenario):", "", *(f"- `{m}`: {why}" for m, why in held), ""]
