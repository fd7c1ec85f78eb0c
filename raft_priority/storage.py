"""Durable term and vote per group: the only state Raft election needs to survive a crash.

A vote must hit the disk before the message granting it leaves, or a restarted node could vote twice
in one term. Every group of a node shares one append-only log (`HardStateLog`), one fsync per save however
many groups changed, compacted atomically (temporary file, fsync, rename, fsync of the directory).

What a crash cannot leave (a file that does not parse, a line torn in the middle of the log) is damage:
loading refuses it (`StateUnreadable`, naming the file and the line) rather than start from what can be read,
which could be a term older than one this node voted in. A save that fails (a full or read-only disk) raises;
the driver then halts: nothing more is sent, every leadership is fenced (elect/driver.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from elect.errors import StateUnreadable
from raft_priority.membership import Membership
from raft_priority.messages import Conf, HardState


class StateStore(Protocol):
    """Where a node keeps its groups' term and vote: `HardStateLog` on disk in a member, a dict in the simulator."""

    def load_all(self) -> dict[int, HardState]: ...

    def save(self, states: Mapping[int, HardState]) -> None:
        """Durable before it returns; raise OSError if it cannot be."""
        ...

    def close(self) -> None: ...


class HardStateLog:
    """Term and vote of every group of one node in one append-only file: one fsync per save.

    A node hosting 1000 groups may have to persist hundreds of votes in one step (a cold start); one
    file per group would cost an fsync each. Here each :meth:`save` appends one line holding every
    changed group and fsyncs once. When the log grows past ``compact_after`` bytes it is rewritten as a
    single line (temporary file, fsync, rename, fsync of the directory), so a crash at any point leaves
    either the old or the new file, and a torn last line (a crash mid-append) is ignored on load.
    Layout: ``<data_dir>/<node>/hardstate.log``, lines of ``{"<group>": [term, voted_for], ...}``; a group whose
    configuration entry changed has it third (``[term, voted_for, {"t": ..., "i": ..., "v": ...}]``), and a line
    without one keeps the group's last.
    """

    def __init__(self, data_dir: str | os.PathLike[str], node: str, compact_after: int = 1 << 20) -> None:
        if not node or "/" in node or node in (".", ".."):
            raise ValueError(f"unusable node id for a directory name: {node!r}")
        self.dir = Path(data_dir) / node
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "hardstate.log"
        self.compact_after = compact_after
        self._state: dict[int, HardState] = {}
        self._fd: int | None = None
        self._size = 0
        self._loaded = False
        self._rewrite = False  # the file ends in a torn line, or an append failed: the next save rewrites it whole

    def __str__(self) -> str:
        return str(self.dir)

    def load_all(self) -> dict[int, HardState]:
        """Every group's state. A torn last line (a crash in the middle of an append, before its fsync returned, so
        before any message that needed it left) is ignored; any other line that does not parse is damage
        (`StateUnreadable`)."""
        state: dict[int, HardState] = {}
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        lines = raw.split(b"\n")
        torn = lines.pop() if lines else b""  # after the last newline: empty, or an append a crash cut short
        for number, line in enumerate(lines, 1):
            try:
                entries = json.loads(line) if line.strip() else {}
                if not isinstance(entries, dict):
                    raise TypeError(f"a line holds a mapping of groups, not {type(entries).__name__}")
                for gid, fields in entries.items():
                    g = int(gid)
                    if not isinstance(fields, list) or len(fields) not in (2, 3):
                        raise TypeError(f"group {gid} holds {fields!r}, not [term, vote(, configuration)]")
                    earlier = state.get(g)
                    conf = decode_conf(fields[2]) if len(fields) == 3 else (earlier.conf if earlier else None)
                    state[g] = _hard_state(fields[0], fields[1], conf)
            except (ValueError, TypeError) as exc:
                raise StateUnreadable(f"Raft state file {self.path} is damaged at line {number} of "
                                      f"{len(lines) + bool(torn)} ({exc}): {_WHAT_TO_DO}") from None
        self._state = state
        self._size = len(raw)
        self._loaded = True
        self._rewrite = bool(torn)  # appending after it would glue the next line to it
        return dict(state)

    def load(self, group: int) -> HardState | None:
        if not self._loaded:
            self.load_all()
        return self._state.get(group)

    def save(self, states: Mapping[int, HardState]) -> None:
        """Persist every entry durably; returns only when they are on disk."""
        if not states:
            return
        if not self._loaded:
            self.load_all()
        known = self._state
        line = {str(g): _fields(hs, known.get(g)) for g, hs in states.items()}
        known.update(states)
        if self._size > self.compact_after or self._rewrite:
            self._compact()
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            created = self._size == 0
        else:
            created = False
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError:
            self._rewrite = True  # part of the line may be in the file: the next save rewrites it whole
            self.close()
            raise
        self._size += len(data)
        if created:
            _fsync_dir(self.dir)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _compact(self) -> None:
        self.close()
        tmp = self.dir / ".hardstate.log.tmp"
        data = (json.dumps({str(g): _fields(hs, None) for g, hs in self._state.items()},
                           separators=(",", ":")) + "\n").encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _fsync_dir(self.dir)
        self._size = len(data)
        self._rewrite = False


_WHAT_TO_DO = ("starting on what can be read could vote twice in one term; restore the file from a backup, or remove "
               "the node's data and start it as a new member")


def _hard_state(term: object, vote: object, conf: Conf | None = None) -> HardState:
    """A term (an int, not a bool, never negative) and a vote (a node id or None), checked."""
    if not isinstance(term, int) or isinstance(term, bool) or term < 0:
        raise TypeError(f"term {term!r} is not a term")
    if vote is not None and not isinstance(vote, str):
        raise TypeError(f"vote {vote!r} is not a node id")
    return HardState(term, vote, conf)


def _fields(hs: HardState, before: HardState | None) -> list[object]:
    """A group's entry in a line: its configuration only when it is not the one the file already holds."""
    if hs.conf is None or (before is not None and before.conf == hs.conf):
        return [hs.term, hs.voted_for]
    return [hs.term, hs.voted_for, encode_conf(hs.conf)]


def encode_conf(conf: Conf) -> dict[str, object]:
    """A configuration entry as JSON (`Conf`; the payload, a `Membership`, as its own JSON text)."""
    out: dict[str, object] = {"t": conf.term, "i": conf.index, "v": dict(conf.voters)}
    if conf.old is not None:
        out["o"] = dict(conf.old)
    if conf.learners:
        out["l"] = list(conf.learners)
    if conf.payload is not None:
        assert isinstance(conf.payload, Membership)
        out["p"] = conf.payload.to_json()
    return out


def decode_conf(raw: object) -> Conf:
    if not isinstance(raw, dict):
        raise TypeError(f"a configuration is a mapping, not {raw!r}")
    term, index, voters = raw.get("t"), raw.get("i"), raw.get("v")
    if not (isinstance(term, int) and isinstance(index, int) and isinstance(voters, dict)):
        raise TypeError(f"a configuration needs t, i and v: {raw!r}")
    old, learners, payload = raw.get("o"), raw.get("l", []), raw.get("p")
    return Conf(term, index, {str(k): int(v) for k, v in voters.items()},
                None if old is None else {str(k): int(v) for k, v in dict(old).items()},
                tuple(str(x) for x in learners), None if payload is None else Membership.from_json(payload))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    dfd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
