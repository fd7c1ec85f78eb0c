"""Lifecycle faults: what production does to a group most often, one member after another. A rolling restart (a
Deployment's rolling update), a rolling kill (each member lost, as after an OOM or a lost node), replacing every
member by a new one, and scaling out and in.

Each kind is a plan: the steps it takes, given the members when it begins. `elect_bench.rollout` carries the steps
out on real processes, waits after each one as an operator's tooling would, and measures the whole rollout. The
history records the rollout as one record of the kind (when it began), one record per step (`STEPS`), and `rolled`
when it is over, so a soak counts one strike per rollout and the checker sees every kill.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from elect_bench.faults.base import Fault

Action = Literal["stop", "kill", "start", "join", "leave"]

#: The record kind of each step: a member SIGTERMed (`stop`), SIGKILLed (`kill`), started again with its id
#: (`start`), a new member started (`join`), one retired for good (`leave`: raft:// also removes it from the
#: configuration).
STEPS: dict[Action, str] = {"stop": "step-stop", "kill": "step-kill", "start": "step-start", "join": "step-join",
                            "leave": "step-leave"}
#: ... and the step records that mean the harness killed the member's process (its beliefs end there).
KILLING_STEPS = frozenset({STEPS["kill"]})
#: The record of a rollout's end.
ROLLED = "rolled"


@dataclass(frozen=True)
class Step:
    """One step of a rollout: what is done, and to which member id (a new id for `join`)."""

    action: Action
    member: str

    @property
    def away(self) -> bool:
        """The member stops leading here, its roles must move (once each)."""
        return self.action in ("stop", "kill", "leave")

    @property
    def kills(self) -> bool:
        """The member's process is SIGKILLed here (else a stop is graceful)."""
        return self.action == "kill"

    @property
    def arrives(self) -> bool:
        """A member starts here, and leads its share once the method has handed it over."""
        return self.action in ("start", "join")


class LifecycleFault(Fault):
    """A fault that goes through the group one member at a time; never healed, measured over the whole rollout."""

    gradual = True
    fails_over = False  # a graceful step may move nothing at once; the rollout waits for what each step needs
    #: the group's size changes: a new member id is started (not possible for methods whose members are configured
    #: by hand, e.g. the Java Raft anchors, whose peers are fixed at start)
    new_members: ClassVar[bool] = False

    def members_at_start(self, members: int) -> int:
        """How many members the group has before the rollout, for a group of `members` (scale-in: twice that)."""
        return members

    def prepare(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        """Steps that bring a group of another size to where the rollout starts, not measured (a soak's group has
        its configured size when scale-in comes up); a trial's group starts there (`members_at_start`)."""
        return []

    @abstractmethod
    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        """The steps, given the live member ids in order and the group's configured size `members`; `fresh()`
        names a new member id."""


class Fresh:
    """New member ids for one group: n0, n1, ... (never one used before, so a replaced member's state is its own)."""

    def __init__(self, taken: Sequence[str] = ()) -> None:
        self.taken = set(taken)
        self.count = 0

    def __call__(self) -> str:
        while (name := f"n{self.count}") in self.taken:
            self.count += 1
        self.taken.add(name)
        return name


class RollingRestart(LifecycleFault):
    """Each member in turn: SIGTERM (it hands its roles over), started again with its id after the hold."""

    name = "rolling-restart"

    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [s for m in ids for s in (Step("stop", m), Step("start", m))]


class RollingKill(LifecycleFault):
    """Each member in turn: SIGKILL (its roles wait out the detection budget), started again after the hold."""

    name = "rolling-kill"

    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [s for m in ids for s in (Step("kill", m), Step("start", m))]


class RollingReplace(LifecycleFault):
    """Each member in turn is replaced by a new id: the new one starts, then the old one is retired (drained; for
    raft://, removed from the configuration too). (The raft soak's `replace` replaces one member.)"""

    name = "rolling-replace"
    new_members = True

    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [s for m in ids for s in (Step("join", fresh()), Step("leave", m))]


class ScaleOut(LifecycleFault):
    """N to 2N members, one new member at a time (a group already larger is first scaled back in, unmeasured)."""

    name = "scale-out"
    new_members = True

    def prepare(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [Step("leave", m) for m in reversed(ids[members:])]

    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [Step("join", fresh()) for _ in range(max(0, 2 * members - len(ids)))]


class ScaleIn(LifecycleFault):
    """2N to N members, the newest retired first (as a StatefulSet scales in: drained, then gone)."""

    name = "scale-in"
    new_members = True

    def members_at_start(self, members: int) -> int:
        return 2 * members

    def prepare(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [Step("join", fresh()) for _ in range(max(0, 2 * members - len(ids)))]

    def plan(self, ids: Sequence[str], members: int, fresh: Fresh) -> list[Step]:
        return [Step("leave", m) for m in reversed(ids[members:])]


LIFECYCLE: tuple[type[LifecycleFault], ...] = (RollingRestart, RollingKill, RollingReplace, ScaleOut, ScaleIn)
