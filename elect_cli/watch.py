"""`elect watch URL`, `elect watch SOURCE...` or `elect watch --metrics HOST:PORT,...`: a live table of who leads what.

URL: the group's elector URL (etcd://, zookeeper://, kafka://); the table is read from the store
itself (role keys and their holders, or the consumer group's partition assignment) without joining.
SOURCE: `-` (event lines on stdin, e.g. `elect member ... | elect watch -`) or files of event lines
(followed as they grow, like `tail -f`); each member's lines say what it believes, so the table shows,
per role, every member that currently believes it leads — two names on one row is an overlap. Methods
that keep no state outside their members (raft://, pysyncobj://, memory://) are watched this way.
--metrics HOST:PORT,...: the members' Prometheus endpoints (`elect member --metrics-port`), scraped every
interval: a member leads a role where its `elect_leader` gauge is 1; a role every member reports at 0 is shown
without a leader; an endpoint that cannot be read is named under the table. Any method, no store needed.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from elect import config, registry
from elect.config import parse_url
from elect.errors import ConfigError, InfrastructureUnavailable
from elect.events import parse_line
from elect.metrics import MetricsObserver
from elect.observe import Claim, Observer


@dataclass
class LeaderTable:
    """Per role, the members whose own lines say they lead it now, with their tokens and since when."""

    rows: dict[str, dict[str, tuple[int | None, float]]] = field(default_factory=dict)
    events: int = 0
    note: str = ""  # shown under the table (e.g. why the store could not be read just now)
    unknown_since: set[tuple[str, str]] = field(default_factory=set)  # (role, member) aged from the first sight

    def sync(self, claims: Iterable[Claim], now: float, roles: Iterable[str] = (), wall: float | None = None) -> None:
        """Make the table what an observer read from the store; a holder's `for` runs from when the store says it
        took the role where the store keeps that (`Claim.since_ts`), else from when the watch first saw it with its
        token (shown as at least that: `>`). `roles`: roles known to exist though nobody may hold them (shown with
        no leader)."""
        wall = time.time() if wall is None else wall
        seen: dict[str, dict[str, Claim]] = {role: {} for role in roles}
        for claim in claims:
            seen.setdefault(claim.role, {})[claim.member] = claim
        for role in set(self.rows) | set(seen):
            holders = self.rows.setdefault(role, {})
            new = seen.get(role, {})
            for member in [m for m, (token, _) in holders.items() if m not in new or new[m].token != token]:
                del holders[member]
                self.events += 1
            for member, claim in new.items():
                if member not in holders:
                    if claim.since_ts is not None:  # the record's own age, on this clock
                        holders[member] = (claim.token, now - max(0.0, wall - claim.since_ts))
                    else:
                        holders[member] = (claim.token, now)
                        self.unknown_since.add((role, member))
                    self.events += 1

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
        for role in sorted(self.rows, key=_role_order):
            holders = self.rows[role]
            if not holders:
                out.append(f"{role:<24} {'-':<20} {'':>8} {'':>9}")
            for member, (token, since) in sorted(holders.items()):
                flag = "  OVERLAP" if len(holders) > 1 else ""
                shown = "-" if token is None else str(token)
                age = now - since
                if (role, member) not in self.unknown_since:
                    held = f"{age:>8.1f}s"
                elif age < 0.05:  # first seen just now and the store keeps no time: unknown, not zero
                    held = f"{'?':>9}"
                else:
                    held = f">{age:.1f}s".rjust(9)
                out.append(f"{role:<24} {member:<20} {shown:>8} {held}{flag}")
        out.append(f"{self.events} changes" + (f"  ({self.note})" if self.note else ""))
        return "\n".join(out)


def _role_order(role: str) -> tuple[bool, int, str, str]:
    """Numbered roles first, by number, then names. The number is compared by its digits, not int(): a line may
    name any role ('²' passes isdigit(), a 5000-digit one exceeds int()'s limit) and must not stop the table."""
    digits = role.lstrip("0") if role.isascii() and role.isdigit() else None
    if digits is None:
        return True, 0, "", role
    return False, len(digits), digits, role


def register(sub: Any) -> None:
    p = sub.add_parser("watch", help="live table of who leads what, from the store (URL) or from event lines",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="*", metavar="URL|SOURCE",
                   help="an elector URL, or - for stdin, or files of event lines")
    p.add_argument("--metrics", metavar="HOST:PORT,...", action="append", default=[],
                   help="read the table from members' metrics endpoints (elect member --metrics-port) instead")
    p.add_argument("--interval", type=float, default=0.5, help="refresh period in seconds")
    p.add_argument("--once", action="store_true", help="read what is there, print the table once, exit")
    p.set_defaults(run=run)


_END = (0, "")  # what next() gives for a reader that has ended


def _follow(stream: IO[str], follow: bool) -> Iterator[tuple[int, str] | None]:
    """Lines of `stream` with their 1-based numbers; with `follow`, yields None when idle instead of ending at
    EOF. A line still being written (no newline yet) is read again whole once it is complete."""
    number = 0
    partial = ""
    while True:
        line = stream.readline()
        if line.endswith("\n") or (line and not follow):
            number += 1
            yield number, partial + line
            partial = ""
        elif line:
            partial += line
        elif not follow:
            if partial:
                yield number + 1, partial
            return
        else:
            yield None


def run(args: argparse.Namespace) -> int:
    endpoints = [e.strip() for value in args.metrics for e in value.split(",") if e.strip()]
    if args.metrics:
        if args.sources:
            raise ConfigError("give metrics endpoints, or an elector URL or event-line sources, not both",
                              parameter="--metrics")
        return _watch_observer(MetricsObserver(endpoints), args)
    if not args.sources:
        raise ConfigError("give an elector URL, - or files of event lines, or --metrics HOST:PORT,...",
                          parameter="sources")
    urls = [s for s in args.sources if "://" in s]
    if urls:
        if len(args.sources) != 1:
            raise ConfigError("give one elector URL, or event-line sources (- or files), not both", parameter="url")
        return _watch_store(urls[0], args)
    table = LeaderTable()
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="replace")  # a stray byte spoils its line (reported), not the watch
    streams: list[IO[str]] = [sys.stdin if s == "-" else open(s, errors="replace")  # noqa: SIM115
                              for s in args.sources]
    names = ["<stdin>" if s == "-" else s for s in args.sources]
    tty = sys.stdout.isatty()
    last_draw = 0.0
    try:
        if args.once:
            for stream, name in zip(streams, names, strict=True):
                _apply_all(table, (line for line in _follow(stream, False) if line), name)
            print(table.render())
            return 0
        readers = [(_follow(s, follow=s is not sys.stdin), name) for s, name in zip(streams, names, strict=True)]
        while readers:
            idle = True
            for reader, name in list(readers):
                line = next(reader, _END)
                if line is _END:
                    readers.remove((reader, name))
                elif line is not None:
                    idle = False
                    _apply_all(table, [line], name)
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


def _watch_store(url: str, args: argparse.Namespace) -> int:
    """Poll the store behind `url` every interval and redraw; a store that cannot be read is reported
    under the table and polled again (with --once: exit 3)."""
    plugin = registry.get(parse_url(url).scheme)
    if plugin.observer is None:
        plugin.observe(None)  # raises the ConfigError that says to watch event lines instead
    spec = config.spec_from_url(url, member="watch")
    return _watch_observer(plugin.observe(spec.options), args)


def _watch_observer(observer: Observer, args: argparse.Namespace) -> int:
    """Poll `observer` every interval and redraw; what cannot be read is reported under the table and polled
    again (with --once: exit 3). Closes the observer."""
    table = LeaderTable()
    tty = sys.stdout.isatty()
    timeout = max(2.0, 4 * args.interval)
    try:
        while True:
            began = time.monotonic()
            try:
                claims = observer.claims(timeout)
                if isinstance(observer, MetricsObserver):
                    table.sync(claims, time.monotonic(), observer.roles)
                    table.note = observer.note
                else:
                    table.sync(claims, time.monotonic())
                    table.note = "" if table.rows else (f"nothing held under {observer.where}: no member of this "
                                                        "group leads a role there now, or it is not the members'")
            except InfrastructureUnavailable as exc:
                if args.once:
                    raise  # exit 3, as for every command that cannot reach its infrastructure
                table.note = str(exc)
            if args.once:
                print(table.render())
                return 0
            _draw(table, tty)
            time.sleep(max(0.0, args.interval - (time.monotonic() - began)))  # the refresh period
    except KeyboardInterrupt:
        return 0
    finally:
        observer.close()


def _apply_all(table: LeaderTable, lines: Iterable[tuple[int, str]], source: str) -> None:
    """Apply numbered lines of `source`; a malformed one is reported (where and why) and skipped, the rest go on."""
    for number, raw in lines:
        raw = raw.strip()
        if raw:
            try:
                table.apply(parse_line(raw))
            except ValueError as exc:
                print(f"elect watch: {source}:{number}: skipped: {exc}", file=sys.stderr)


def _draw(table: LeaderTable, tty: bool) -> None:
    text = table.render()
    if tty:
        sys.stdout.write("\x1b[H\x1b[2J" + text + os.linesep)
    else:
        sys.stdout.write(text + os.linesep + os.linesep)
    sys.stdout.flush()
