"""`elect watch SOURCE...`: a live table of who leads what.

SOURCE is `-` (event lines on stdin, e.g. `elect member ... | elect watch -`) or files of event lines
(followed as they grow, like `tail -f`). Each member's lines say what it believes, so the table shows,
per role, every member that currently believes it leads — two names on one row is an overlap.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from elect.events import parse_line


@dataclass
class LeaderTable:
    """Per role, the members whose own lines say they lead it now, with their tokens and since when."""

    rows: dict[str, dict[str, tuple[int, float]]] = field(default_factory=dict)
    events: int = 0

    def apply(self, line: dict[str, Any]) -> None:
        self.events += 1
        holders = self.rows.setdefault(line["role"], {})
        if line["event"] == "acquired":
            holders[line["member"]] = (line["token"], line["mono"])
        else:
            holders.pop(line["member"], None)

    def render(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        out = [f"{'role':<24} {'leader':<20} {'token':>8} {'for':>9}"]
        for role in sorted(self.rows, key=lambda r: (not r.isdigit(), int(r) if r.isdigit() else 0, r)):
            holders = self.rows[role]
            if not holders:
                out.append(f"{role:<24} {'-':<20} {'':>8} {'':>9}")
            for member, (token, since) in sorted(holders.items()):
                flag = "  OVERLAP" if len(holders) > 1 else ""
                out.append(f"{role:<24} {member:<20} {token:>8} {now - since:>8.1f}s{flag}")
        out.append(f"{self.events} events")
        return "\n".join(out)


def register(sub: Any) -> None:
    p = sub.add_parser("watch", help="live table of who leads what, from members' event lines",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="- for stdin, or files of event lines")
    p.add_argument("--interval", type=float, default=0.5, help="refresh period in seconds")
    p.add_argument("--once", action="store_true", help="read what is there, print the table once, exit")
    p.set_defaults(run=run)


def _follow(stream: IO[str], follow: bool) -> Iterator[str | None]:
    """Lines of `stream`; with `follow`, yields None when idle instead of ending at EOF."""
    while True:
        line = stream.readline()
        if line:
            yield line
        elif not follow:
            return
        else:
            yield None


def run(args: argparse.Namespace) -> int:
    table = LeaderTable()
    streams: list[IO[str]] = [sys.stdin if s == "-" else open(s) for s in args.sources]  # noqa: SIM115
    tty = sys.stdout.isatty()
    last_draw = 0.0
    try:
        if args.once:
            for stream in streams:
                _apply_all(table, (line for line in _follow(stream, False) if line))
            print(table.render())
            return 0
        readers = [_follow(s, follow=s is not sys.stdin) for s in streams]
        while readers:
            idle = True
            for reader in list(readers):
                line = next(reader, "")
                if line == "":
                    readers.remove(reader)
                elif line is not None:
                    idle = False
                    _apply_all(table, [line])
            now = time.monotonic()
            if now - last_draw >= args.interval:
                _draw(table, tty)
                last_draw = now
            if idle:
                time.sleep(min(args.interval, 0.1))  # nothing new in any file: poll again shortly
        _draw(table, tty)
    finally:
        for stream in streams:
            if stream is not sys.stdin:
                stream.close()
    return 0


def _apply_all(table: LeaderTable, lines: Iterable[str]) -> None:
    for raw in lines:
        raw = raw.strip()
        if raw:
            try:
                table.apply(parse_line(raw))
            except ValueError as exc:
                print(f"elect watch: skipped {exc}", file=sys.stderr)


def _draw(table: LeaderTable, tty: bool) -> None:
    text = table.render()
    if tty:
        sys.stdout.write("\x1b[H\x1b[2J" + text + os.linesep)
    else:
        sys.stdout.write(text + os.linesep + os.linesep)
    sys.stdout.flush()
