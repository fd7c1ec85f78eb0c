"""What a simulated member did, as the event lines it would print: every simulated world records its members'
leadership changes as `Recorded`, and `lines_of` turns them into the lines the real checker reads."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from elect.core import Acquire, ExtendShared, Fence, LeadershipChange, Revoke
from elect.events import Acquired, Event, Fenced, Revoked
from elect.leaderships import Change, Held
from elect.roles import Role


@dataclass(frozen=True, slots=True)
class Recorded:
    """A leadership change of ``node``, made by the step at virtual time ``at`` (the changes carry no
    node or time of their own; a Fence's ``until`` may be earlier than ``at``)."""

    node: str
    at: float
    change: LeadershipChange


class Recorder:
    """What a simulated member's `Leaderships` emits, appended to the world's `history` as `Recorded`.
    `on_true_time`: for a member on a clock of its own, what it records on that clock, carried onto the world's time."""

    __slots__ = ("history", "node", "on_true_time")

    def __init__(self, node: str, history: list[Recorded],
                 on_true_time: Callable[[Recorded], Recorded] | None = None) -> None:
        self.node = node
        self.history = history
        self.on_true_time = on_true_time

    def __call__(self, now: float, change: Change, held: Held | None = None) -> None:
        r = Recorded(self.node, now, change)
        self.history.append(r if self.on_true_time is None else self.on_true_time(r))

    def event(self, e: Event) -> None:
        """An elector's event, as the change that made it (a subscriber of a simulated elector: events are
        delivered as they are published, during the step that made them)."""
        if isinstance(e, Acquired):
            self(e.mono, Acquire(e.role, e.token, math.inf))
        elif isinstance(e, Revoked):
            self(e.mono, Revoke(e.role))
        elif isinstance(e, Fenced):
            self(e.mono, Fence(e.role, e.until))


def lines_of(records: Iterable[Recorded]) -> list[dict[str, object]]:
    """The event lines the recorded changes would make a member print: the one vocabulary of histories,
    real and simulated (`elect_bench.judging.history.History` reads both). A Revoke or Fence carries the token of
    the leadership it ends, as `BaseElector` gives it; an Extend prints nothing. Times are the exact virtual
    ones (`ts` too), not rounded to microseconds as printed lines are, so they compare with fault times."""
    tokens: dict[tuple[str, Role], int] = {}
    out: list[dict[str, object]] = []
    for r in records:
        if isinstance(r.change, ExtendShared):
            continue  # prints nothing (the Raft core emits none)
        c, key = r.change, (r.node, r.change.role)
        event: Event | None = None
        if isinstance(c, Acquire):
            tokens[key] = c.token
            event = Acquired(c.role, r.node, c.token, mono=r.at, ts=r.at)
        elif isinstance(c, Revoke) and key in tokens:
            event = Revoked(c.role, r.node, tokens.pop(key), mono=r.at, ts=r.at)
        elif isinstance(c, Fence) and key in tokens:
            event = Fenced(c.role, r.node, tokens.pop(key), mono=r.at, ts=r.at, until=c.until)
        if event is not None:
            line = event.to_dict()
            line.update(mono=r.at, ts=r.at, **({"until": c.until} if isinstance(c, Fence) else {}))
            out.append(line)
    return out
