"""Durable term and vote per group: the only state Raft election needs to survive a crash.

A vote must hit the disk before the message granting it leaves, or a restarted node could vote twice
in one term. Each group's state is one small JSON file, replaced atomically (write a temporary file,
fsync it, rename over the old one, fsync the directory), so a crash leaves either the old or the new.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from raft_priority.messages import HardState


class HardStateStore:
    """``<data_dir>/<node>/group-<id>.json`` for every group this node is a member of."""

    def __init__(self, data_dir: str | os.PathLike[str], node: str) -> None:
        if not node or "/" in node or node in (".", ".."):
            raise ValueError(f"unusable node id for a directory name: {node!r}")
        self.dir = Path(data_dir) / node
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, group: int) -> Path:
        return self.dir / f"group-{group}.json"

    def load(self, group: int) -> HardState | None:
        try:
            raw = json.loads(self.path(group).read_text())
        except FileNotFoundError:
            return None
        return HardState(int(raw["term"]), raw.get("voted_for"))

    def load_all(self) -> dict[int, HardState]:
        res: dict[int, HardState] = {}
        for p in self.dir.glob("group-*.json"):
            gid = int(p.stem.removeprefix("group-"))
            hs = self.load(gid)
            if hs is not None:
                res[gid] = hs
        return res

    def save(self, states: Mapping[int, HardState]) -> None:
        """Persist every entry durably; returns only when all of them are on disk."""
        if not states:
            return
        for group, hs in states.items():
            tmp = self.dir / f".group-{group}.json.tmp"
            data = json.dumps({"term": hs.term, "voted_for": hs.voted_for}).encode()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path(group))
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)  # make the renames durable, once for the whole batch
        finally:
            os.close(dfd)


class HardStateLog:
    """Term and vote of every group of one node in one append-only file: one fsync per save.

    A node hosting 1000 groups may have to persist hundreds of votes in one step (a cold start); one
    file per group would cost an fsync each. Here each :meth:`save` appends one line holding every
    changed group and fsyncs once. When the log grows past ``compact_after`` bytes it is rewritten as a
    single line (temporary file, fsync, rename, fsync of the directory), so a crash at any point leaves
    either the old or the new file, and a torn last line (a crash mid-append) is ignored on load.
    Layout: ``<data_dir>/<node>/hardstate.log``, lines of ``{"<group>": [term, voted_for], ...}``.
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

    def load_all(self) -> dict[int, HardState]:
        state: dict[int, HardState] = {}
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        for line in raw.split(b"\n"):
            try:
                entries = json.loads(line) if line.strip() else {}
            except ValueError:
                continue  # a torn final line
            for gid, (term, vote) in entries.items():
                state[int(gid)] = HardState(int(term), vote)
        self._state = state
        self._size = len(raw)
        self._loaded = True
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
        self._state.update(states)
        if self._size > self.compact_after:
            self._compact()
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            created = self._size == 0
        else:
            created = False
        data = (json.dumps({str(g): [hs.term, hs.voted_for] for g, hs in states.items()},
                           separators=(",", ":")) + "\n").encode()
        _write_all(self._fd, data)
        os.fsync(self._fd)
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
        data = (json.dumps({str(g): [hs.term, hs.voted_for] for g, hs in self._state.items()},
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
