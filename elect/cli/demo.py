"""`elect demo`: the one-command tour (placeholder until the demo module lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="the one-command tour on the embedded infrastructure")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return 0
