"""Scenarios: which methods, faults, sizes and how many trials, from a small YAML file or flags.

A file may describe another kind of run (`kind`): a simulation (it names `shapes`; elect_bench.simulation),
the idle cost of a group at scale (`kind: idle`; elect_bench.idle), NELI in depth (`kind: neli`;
elect_bench.neli_depth) or the operating envelope (`kind: envelope`, or any trials scenario with a `sweep`;
elect_bench.envelope). Each kind reads its own keys; the fault names in a file become `Fault` objects here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from elect.errors import ConfigError
from elect_bench.faults import Fault, LifecycleFault, MembershipFault, fault
from elect_bench.faults.member import Kill
from elect_bench.fenced import WORKLOADS
from elect_bench.methods import METHODS, method_spec
from elect_cluster.local import BROKERS

KINDS = ("trials", "simulation", "chaos", "idle", "neli", "envelope")


@dataclass(frozen=True)
class Scenario:
    name: str = "custom"
    budget: float = 1.0
    members: int = 3
    roles: int = 6
    trials: int = 5
    hold: float = 0.0
    faults: tuple[Fault, ...] = (Kill(),)
    methods: tuple[str, ...] = ("etcd",)
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)  # method -> URL params
    sizes: tuple[int, ...] = ()  # group sizes to run each cell at (load as the group grows); () = (members,)
    hosts: bool = False  # members on network-namespace hosts even without a cut (needed to count load)
    load_window: float = 0.0  # seconds of steady state over which each member's sends are counted
    meter: bool = False  # count each member's requests / messages through relays (adds a hop; for load runs)
    store_members: int = 1  # etcd members / ZooKeeper nodes (3 for the infra fault to leave a quorum)
    broker: str = "apache"  # the Kafka broker: Apache Kafka, or the light Tansu (elect_cluster.local.BROKERS)
    brokers: int = 1  # Apache Kafka nodes (3: a replicated leader topic that survives losing one)
    workload: str = "none"  # none | fenced | unfenced: leaders write to a store checking tokens (elect_bench.fenced)
    rest: float = 0.0  # seconds at rest before each trial's fault: leaderships that end there are false failovers
    busy: int = 0  # CPU-bound processes beside the members during each trial (elect_bench.busy)

    @property
    def group_sizes(self) -> tuple[int, ...]:
        return self.sizes or (self.members,)

    @property
    def on_hosts(self) -> bool:
        """Network-namespace hosts: for cuts, and to count packets on each member's link."""
        return self.hosts or any(f.needs_hosts for f in self.faults) or self.load_window > 0

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m.split()[:1] and m.split()[0] not in METHODS]
        if unknown:
            raise ConfigError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}", parameter="methods")
        for m in self.methods:  # `NAME KEY=VALUE ...`: a variant with URL parameters of its own
            method_spec(m)
        if min(self.group_sizes) < 2 and any(f.injects for f in self.faults):
            raise ConfigError("a fault needs at least 2 members (a survivor to fail over to)", parameter="members")
        if self.store_members not in (1, 3):
            raise ConfigError("store_members is 1 or 3", parameter="store_members")
        if self.broker not in BROKERS:
            raise ConfigError(f"broker is one of {', '.join(BROKERS)}", parameter="broker")
        if self.brokers not in (1, 3) or (self.brokers == 3 and not self.broker.startswith("apache")):
            raise ConfigError("brokers is 1, or 3 with broker apache", parameter="brokers")
        if self.brokers > 1 and self.meter and "kafka" in self.needs:
            raise ConfigError("counting Kafka requests (meter) needs a single broker", parameter="brokers")
        if self.workload not in WORKLOADS:
            raise ConfigError(f"workload is one of {', '.join(WORKLOADS)}", parameter="workload")
        if self.workload != "none" and (anchored := [m for m in self.methods if method_spec(m).anchor]):
            raise ConfigError(f"{', '.join(anchored)}: an anchor's adapter does not write to the store; "
                              "use workload: none", parameter="workload")
        if self.meter and (anchored := [m for m in self.methods if method_spec(m).anchor and not method_spec(m).needs]):
            raise ConfigError(f"{', '.join(anchored)}: peer traffic of an anchor is not counted", parameter="meter")
        secured = [m for m in self.methods if method_spec(m).secure]
        if self.meter and (uncounted := [m for m in self.methods if method_spec(m).uncounted]):
            raise ConfigError(f"{', '.join(uncounted)}: {method_spec(uncounted[0]).uncounted}", parameter="meter")
        if secured and (faults := [str(f) for f in self.faults if f.infrastructure]):
            raise ConfigError(f"{', '.join(faults)} strikes the plain cluster only; run {', '.join(secured)} with "
                              "member faults", parameter="faults")
        if growing := [f.name for f in self.faults if isinstance(f, LifecycleFault) and f.new_members]:
            if fixed := [m for m in self.methods if not method_spec(m).grows]:
                raise ConfigError(f"{', '.join(growing)} start members of new ids, which {', '.join(fixed)} cannot "
                                  "take (their peers are fixed at start; bench/raft_membership.py replaces the Java "
                                  "Raft anchors' members with their own tools): run them with rolling-restart or "
                                  "rolling-kill", parameter="faults")
            if self.on_hosts:
                raise ConfigError(f"{', '.join(growing)}: new members run on this machine, not on network-namespace "
                                  "hosts (drop hosts, load_window and network faults from this scenario)",
                                  parameter="faults")
        if self.budget <= 0 or self.trials < 1 or self.roles < 1:
            raise ConfigError("budget > 0, trials >= 1 and roles >= 1 are required")
        if self.rest < 0 or self.busy < 0:
            raise ConfigError("rest >= 0 and busy >= 0 are required", parameter="rest" if self.rest < 0 else "busy")

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for m in self.methods for s in method_spec(m).needs))

    @property
    def plain_needs(self) -> tuple[str, ...]:
        """The services of the methods that run on the plain cluster."""
        return tuple(dict.fromkeys(s for m in self.methods if not method_spec(m).secure for s in method_spec(m).needs))

    @property
    def secure_needs(self) -> tuple[str, ...]:
        """The services of the methods that run on a secured cluster (`Method.secure`)."""
        return tuple(dict.fromkeys(s for m in self.methods if method_spec(m).secure for s in method_spec(m).needs))

    def with_flags(self, **flags: Any) -> Scenario:
        """Command-line flags override the file; None means not given."""
        given: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in flags.items()
                                 if v is not None}
        return replace(self, **given)


def load(source: str | Path | Mapping[str, Any]) -> Scenario:
    """A scenario from a mapping, a YAML path, or the name of a bundled one (`default`, `demo`)."""
    data = read(source)
    if kind(data) != "trials":
        raise ConfigError(f"this is a {kind(data)} scenario, not one of trials", parameter="kind")
    data.pop("kind", None)
    for key in ("faults", "methods", "sizes"):
        if key in data:
            data[key] = tuple(listed(data[key]))
    if "faults" in data:
        data["faults"] = tuple(fault(name) for name in data["faults"])
        if changes := [f.name for f in data["faults"] if isinstance(f, MembershipFault)]:
            raise ConfigError(f"{', '.join(changes)}: membership changes are struck by `elect soak raft` and by the "
                              "simulator (`elect bench sim-raft-members`), not in trials", parameter="faults")
    known = set(Scenario.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown scenario key(s) {unknown}; known: {sorted(known)}")
    return Scenario(**data)


def listed(value: Any) -> list[Any]:
    """A list as YAML gives it, a comma-separated string as a flag does, or one value."""
    if isinstance(value, str):
        return [x.strip() for x in value.split(",") if x.strip()]
    return list(value) if isinstance(value, list | tuple) else [value]


def kind(data: Mapping[str, Any]) -> str:
    """Which kind of run a scenario's mapping describes: its `kind`, else a simulation if it names shapes, else
    trials (faults on real members)."""
    named = str(data.get("kind", "simulation" if "shapes" in data else "envelope" if "sweep" in data else "trials"))
    if named not in KINDS:
        raise ConfigError(f"unknown scenario kind {named!r}; known: {', '.join(KINDS)}", parameter="kind")
    return named


def bundled() -> list[str]:
    """The names `elect bench NAME` accepts: the scenarios shipped in `bench/`."""
    files = resources.files("elect_bench.scenarios").iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def read(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The raw mapping of a scenario: given, from a YAML path, or bundled (`bench/<name>.yaml`)."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if not path.is_file() and not str(source).endswith((".yaml", ".yml")):
        shipped = resources.files("elect_bench.scenarios").joinpath(f"{source}.yaml")
        if not shipped.is_file():
            raise ConfigError(f"no scenario file {source!r} and no bundled scenario of that name; bundled: "
                              f"{', '.join(bundled())}")
        text = shipped.read_text()
    else:
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read scenario {path}: {exc.strerror}") from None
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"scenario {source} is not a mapping of keys to values")
    return data
