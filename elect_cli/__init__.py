"""The `elect` command line: one subcommand per module in this package."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from elect import extras
from elect.errors import ElectError, InfrastructureUnavailable


def build_parser() -> argparse.ArgumentParser:
    from elect_cli import bench, certs, demo, docs, member, raft, report, schemes, soak, watch

    parser = argparse.ArgumentParser(prog="elect", description="Leader election per role, and a harness that "
                                     "measures how each method hands over when things fail.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-vv: debug)")
    parser.add_argument("--version", action="version", version=f"elect {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    member.register(sub)
    watch.register(sub)
    raft.register(sub)
    schemes.register(sub)
    bench.register(sub)
    demo.register(sub)
    soak.register(sub)
    report.register(sub)
    docs.register(sub)
    certs.register(sub)
    try:
        from elect_cli import cluster as cluster_commands
    except ImportError:  # pragma: no cover - only when the package is broken
        pass
    else:
        cluster_commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
