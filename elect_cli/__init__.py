"""The `elect` command line: one subcommand per module in this package."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from elect import extras
from elect.errors import ElectError, InfrastructureUnavailable

COMMANDS = ("member", "watch", "raft", "schemes", "bench", "demo", "soak", "report", "docs", "certs", "cluster")
"""Each subcommand's module in this package, in the order `elect --help` lists them."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of `only` alone: `elect member` starts a member, and each restart in a
    rollout waits for it, so it does not import the harness the other subcommands need (0.15 s here)."""
    parser = argparse.ArgumentParser(prog="elect", description="Leader election per role, and a harness that "
                                     "measures how each method hands over when things fail.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"elect {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        module = importlib.import_module(f"elect_cli.{name}")
        module.register(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names, if it names one before any other word (None: build them all)."""
    for word in argv:
        if word in COMMANDS:
            return word
        if not word.startswith("-"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(words))
    args = parser.parse_args(words)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        code: int = args.run(args)
    except InfrastructureUnavailable as exc:
        print(f"elect {args.command}: {exc}", file=sys.stderr)
        return 3
    except ElectError as exc:
        print(f"elect {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`elect schemes raft | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ImportError as exc:  # an optional part that is not installed: the one line naming its extra
        missing = extras.explain(exc, f"elect {args.command}")
        if missing is None:
            raise
        print(f"elect {args.command}: {missing}", file=sys.stderr)
        return 2
    return code


def version() -> str:
    """The installed distribution's version (a checkout that is not installed says so)."""
    try:
        return metadata.version("elect")
    except metadata.PackageNotFoundError:
        return "(not installed: pip install -e .)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
