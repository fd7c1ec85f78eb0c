"""The heartbeat record NELI members publish to the leader topic, and its wire form.

A record names its sender precisely enough that a member counts only its *own current* heartbeats:
`member` and `instance` (one per elector run, so a restarted process does not count its predecessor's
records), the sender's `epoch` for the partition (bumped at every assignment, so records from an
earlier ownership do not count for a later one) and the `group` (several groups may share a topic).
`sent` is the sender's monotonic clock, which dates its own evidence exactly; the sender's wall clock
dates a record for other readers (full mode, contested claims), whose monotonic clocks differ. The core
reads no clock, so what it publishes (`Heartbeat`) has no wall time: the driver stamps it as it sends
(`encode(wall)`), and a record read back (`HeartbeatRecord`) carries it. In full mode a leader's
records also carry its `token`, so that a member still leading on an older token learns of the newer
leadership and stands down. A fast-mode member that gives a partition up in order publishes one last record
`released` there, once its leadership has ended: its earlier records no longer hold a successor back (see
neli/core.py). Readers that predate the flag take it for a heartbeat, and wait as before.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heartbeat:
    """A heartbeat as the sender's core makes it."""

    group: str
    member: str
    instance: str
    epoch: int
    sent: float
    token: int | None = field(default=None, kw_only=True)  # full mode: the sender leads here with this token
    released: bool = field(default=False, kw_only=True)  # fast mode: the sender gave the partition up, in order

    def encode(self, wall: float) -> bytes:
        """The wire form, stamped with the sender's wall clock `wall` at sending."""
        raw = {"g": self.group, "m": self.member, "i": self.instance, "e": self.epoch,
               "s": round(self.sent, 6), "w": round(wall, 6)}
        if self.token is not None:
            raw["t"] = self.token
        if self.released:
            raw["r"] = 1
        return json.dumps(raw, separators=(",", ":")).encode()

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def decode(data: bytes | None) -> HeartbeatRecord | None:
        """The record, or None for anything that is not a NELI heartbeat (the topic may be shared). Records are
        immutable, so one read by several members in one process (the simulator's) is parsed once."""
        if not data:
            return None
        try:
            raw = json.loads(data)
            return HeartbeatRecord(group=str(raw["g"]), member=str(raw["m"]), instance=str(raw["i"]),
                                   epoch=int(raw["e"]), sent=float(raw["s"]), wall=float(raw["w"]),
                                   token=None if raw.get("t") is None else int(raw["t"]), released=bool(raw.get("r")))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class HeartbeatRecord(Heartbeat):
    """A heartbeat read back from the topic, with the wall clock (`wall`) its sender stamped on it."""

    wall: float
