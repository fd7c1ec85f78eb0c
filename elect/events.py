"""Leadership events and their one-JSON-line-per-event form (docs/architecture.md, "Events and their line").

Every event carries two clocks: `ts` (wall, for humans and logs) and `mono` (`time.monotonic()`, one
clock for every process on a Linux machine, so lines from different members compare directly).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from elect.roles import Role

EventKind = Literal["acquired", "revoked", "fenced"]


@dataclass(frozen=True)
class Event:
    """Something happened to `member`'s leadership of `role`; `token` is the fencing token involved."""

    role: Role
    member: str
    token: int
    mono: float = field(default_factory=time.monotonic)
    ts: float = field(default_factory=time.time)
    kind: ClassVar[EventKind]

    def to_dict(self) -> dict[str, Any]:
        """The event as its JSON line's fields (`to_line`), times rounded to microseconds."""
        line: dict[str, Any] = {
            "ts": round(self.ts, 6),
            "mono": round(self.mono, 6),
            "member": self.member,
            "role": str(self.role),
            "event": self.kind,
            "token": self.token,
        }
        return line

    def to_line(self) -> str:
        """The event as one JSON line (no trailing newline)."""
        return json.dumps(self.to_dict(), separators=(", ", ": "))


@dataclass(frozen=True)
class Acquired(Event):
    """This member leads `role` from now on, under `token`."""

    kind: ClassVar[EventKind] = "acquired"


@dataclass(frozen=True)
class Revoked(Event):
    """Leadership was handed over in an orderly way.

    Callbacks may block to finish in-flight work; where the method allows, the successor starts
    only after they return.
    """

    kind: ClassVar[EventKind] = "revoked"


@dataclass(frozen=True)
class Fenced(Event):
    """Stop at once: the successor may already be running.

    `until` is the monotonic time at which leadership ended by the member's own rule (its deadline);
    it can be earlier than `mono` when the process was frozen past its deadline.
    """

    until: float = 0.0
    kind: ClassVar[EventKind] = "fenced"

    def to_dict(self) -> dict[str, Any]:
        """The event's fields, with `until`: when the leadership ended by the member's own deadline."""
        line = super().to_dict()
        line["until"] = round(self.until, 6)
        return line


EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in (Acquired, Revoked, Fenced)}


def parse_line(line: str) -> dict[str, Any]:
    """Parse and validate one event line; raises ValueError naming what is wrong.

    Whatever the text (torn, nested beyond the parser's depth, NaN clocks), the answer is a dict that
    compares and sorts safely by its clocks, or a ValueError: readers skip a bad line and go on.
    """
    shown = _excerpt(line)
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser goes
        raise ValueError(f"not a JSON event line: {shown}") from exc
    except ValueError as exc:  # e.g. an integer of more digits than int() converts
        raise ValueError(f"not a JSON event line ({exc}): {shown}") from None
    if not isinstance(data, dict):
        raise ValueError(f"an event line is a JSON object: {shown}")
    required: dict[str, type | tuple[type, ...]] = {
        "ts": (int, float), "mono": (int, float), "member": str, "role": str, "event": str, "token": int}
    for key, types in required.items():
        if not isinstance(data.get(key), types) or isinstance(data.get(key), bool):
            raise ValueError(f"event line field {key!r} missing or of the wrong type: {shown}")
    if data["event"] not in EVENT_TYPES:
        raise ValueError(f"unknown event {_excerpt(data['event'])} in {shown}")
    clocks = ("ts", "mono", "until") if data["event"] == "fenced" else ("ts", "mono")
    for key in clocks:
        value = data.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or (
                isinstance(value, float) and not math.isfinite(value)):  # isfinite(10**400) would overflow
            raise ValueError(f"event line field {key!r} must be a finite number (a fenced line carries 'until'): "
                             f"{shown}")
    return data


def _excerpt(text: str, limit: int = 120) -> str:
    """`text` quoted for an error message, cut short: a message must not repeat a megabyte of garbage."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"
