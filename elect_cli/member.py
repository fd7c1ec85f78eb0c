"""`elect member URL --id ID --roles ...`: run one member and print one JSON line per event.

Stdout carries event lines only (docs/architecture.md's format), flushed one by one, so a harness can read them
as they happen; diagnostics go to stderr. SIGTERM or SIGINT hands leadership over gracefully and exits
0. With `--control`, lines on stdin steer the member (`resign R`, `add R...`, `remove R...`, `stop`;
roles may be JSON-quoted), and end of input stops it, so a member never outlives its controller.
With `--write-to HOST:PORT` the member also writes to the benchmark's fenced store while it leads a role
(elect_bench.fenced.writer), as an application guarding a resource with the fencing token would.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from elect.config import load_yaml, spec_from_config, spec_from_url
from elect.contract import Elector
from elect.errors import ConfigError
from elect.events import Event, Revoked
from elect.roles import Role, parse_role
from elect_bench.members import STARTED

if TYPE_CHECKING:
    from elect_bench.fenced.writer import FencedWriter


def register(sub: Any) -> None:
    p = sub.add_parser("member", help="run one member; print a JSON line per event",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", nargs="?", help="elector URL, e.g. raft://a@127.0.0.1:7001?peers=...")
    p.add_argument("--config", help="YAML configuration instead of (or on top of) a URL")
    p.add_argument("--id", dest="member", help="member id (default: from the URL, else host-pid)")
    p.add_argument("--roles", action="append", default=[], help="roles, comma-separated (repeatable)")
    p.add_argument("--role-count", type=int, default=0, help="also contend for numbered roles 0..N-1")
    p.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                   help="override one option of the URL or configuration (repeatable)")
    p.add_argument("--control", action="store_true", help="read commands on stdin; stop at end of input")
    p.add_argument("--revoke-delay", type=float, default=0.0, metavar="SECONDS",
                   help="block this long in the Revoked callback (simulates finishing in-flight work)")
    p.add_argument("--write-to", metavar="HOST:PORT",
                   help="while leading a role, write to the fenced store there under its token (elect_bench.fenced)")
    p.add_argument("--write-every", type=float, default=0.02, metavar="SECONDS",
                   help="pause between rounds of writes, one write per role led (default 0.02)")
    p.add_argument("--write-log", type=Path, metavar="FILE", help="append every acknowledged write here (JSONL)")
    p.set_defaults(run=run)


def parse_roles(values: Sequence[str], count: int = 0) -> list[Role]:
    roles: list[Role] = [parse_role(text) for value in values for text in value.split(",") if text.strip()]
    roles += list(range(count))
    return roles


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"expected KEY=VALUE, got {pair!r}", parameter="--set")
        options[key.strip()] = value
    return options


def build_elector(args: argparse.Namespace) -> Elector:
    roles = parse_roles(args.roles, args.role_count)
    overrides: dict[str, Any] = dict(parse_options(args.options))
    if args.config:
        data = dict(load_yaml(Path(args.config)))
        if args.url:
            data["url"] = args.url
        if args.member:
            data["member"] = args.member
        if roles:
            data["roles"] = roles
        data.update(overrides)
        return spec_from_config(data).create()
    if not args.url:
        raise ConfigError("give an elector URL or --config FILE", parameter="url")
    return spec_from_url(args.url, roles, member=args.member, **overrides).create()


class _Printer:
    """Writes event lines to stdout, one flushed line per event, from the elector's event thread."""

    def __init__(self, revoke_delay: float) -> None:
        self.revoke_delay = revoke_delay
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self.lock:
            sys.stdout.write(event.to_line() + "\n")
            sys.stdout.flush()
        if isinstance(event, Revoked) and self.revoke_delay > 0:
            time.sleep(self.revoke_delay)  # the application's in-flight work, holding the successor back


def _control_loop(elector: Elector, stop: threading.Event) -> None:
    for raw in sys.stdin:
        words = raw.split()
        if not words:
            continue
        verb, args = words[0].lower(), [_role_word(w) for w in words[1:]]
        try:
            if verb == "resign":
                for role in args:
                    elector.resign(role)
            elif verb == "add":
                elector.add_roles(args)
            elif verb == "remove":
                elector.remove_roles(args)
            elif verb == "stop":
                break
            else:
                print(f"elect member: unknown command {verb!r} (resign, add, remove, stop)", file=sys.stderr)
        except Exception as exc:  # a bad command must not kill the member
            print(f"elect member: {raw.strip()!r} failed: {exc}", file=sys.stderr)
    stop.set()


def _role_word(word: str) -> Role:
    if word.startswith('"'):
        word = str(json.loads(word))
    return parse_role(word)


def run(args: argparse.Namespace) -> int:
    elector = build_elector(args)
    stop = threading.Event()
    signals = {"count": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            raise SystemExit(128 + signum)  # second signal: stop waiting for a graceful handover
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    writer = _writer(args, elector)
    elector.subscribe(_Printer(args.revoke_delay))
    elector.start()
    print(f"elect member: {elector.member} {STARTED} {elector.scheme}:// with roles "
          f"{sorted(map(str, elector.roles))}", file=sys.stderr, flush=True)
    if args.control:
        threading.Thread(target=_control_loop, args=(elector, stop), daemon=True, name="control").start()
    while not stop.wait(0.5):  # wake periodically so signal handlers run promptly
        pass
    elector.stop()
    if writer is not None:
        writer.close()  # after the elector: its Revoked callbacks finish their writes first
    print(f"elect member: {elector.member} stopped", file=sys.stderr, flush=True)
    return 0


def _writer(args: argparse.Namespace, elector: Elector) -> FencedWriter | None:
    """With `--write-to`, the workload that writes to the fenced store while this member leads, subscribed ahead
    of the printer so a Revoked line follows the end of the role's last write."""
    if not args.write_to:
        return None
    from elect_bench.fenced.client import parse_address
    from elect_bench.fenced.writer import FencedWriter

    try:
        address = parse_address(args.write_to)
    except ValueError as exc:
        raise ConfigError(str(exc), parameter="--write-to") from None
    writer = FencedWriter(elector, address, every=args.write_every, log=args.write_log)
    elector.subscribe(writer)
    writer.start()
    return writer
