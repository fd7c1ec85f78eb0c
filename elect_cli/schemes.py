"""`elect schemes [SCHEME]`: the installed implementations and the options each takes."""

from __future__ import annotations

import argparse
from typing import Any

from elect import options, registry
from elect.errors import MissingExtra


def register(sub: Any) -> None:
    p = sub.add_parser("schemes", help="list implementations (URL schemes) and their options")
    p.add_argument("scheme", nargs="?", help="show the options of this scheme")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.scheme:
        plugin = registry.get(args.scheme)
        print(f"{plugin.scheme}:// — {plugin.summary}")
        for part, option in plugin.url_parts.items():
            print(f"  URL {part} -> {option}")
        for name, tp, default in options.describe(plugin.options):
            print(f"  {name:<24} {tp:<28} {default}")
        return 0
    for scheme, plugin in sorted(registry.plugins().items()):
        try:
            plugin.check_installed()
            state = "ready"
        except MissingExtra:
            state = f"needs: pip install 'elect[{plugin.extra}]'"
        print(f"{scheme + '://':<14} {plugin.summary}  [{state}]")
    return 0
