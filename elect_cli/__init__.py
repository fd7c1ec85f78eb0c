"""The `elect` command line: one subcommand per module in this package."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from elect.errors import ElectError, InfrastructureUnavailable


def build_parser() -> argparse.ArgumentParser:
    from elect_cli import bench, certs, demo, docs, member, report, schemes, soak, watch

    parser = argparse.ArgumentParser(prog="elect", description="Leader election per role, and a harness that "
                                     "measures how each method hands over when things fail.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-vv: debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    member.register(sub)
    watch.register(sub)
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
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
