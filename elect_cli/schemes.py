"""`elect schemes [SCHEME]`: the installed implementations and the options each takes."""

from __future__ import annotations

import argparse
from typing import Any

from elect import options, registry
from elect.errors import MissingExtra


def register(sub: Any) -> None:
    p = sub.add_parser("schemes", help="list implementations (URL schemes) and their options")
    p.add_argument("scheme", nargs="?", help="show the options of this scheme, each with what it does (etcd, or etcd://)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.scheme:
        plugin = registry.get(args.scheme.lower().removesuffix("://").removesuffix(":"))
        print(f"{plugin.scheme}:// — {plugin.summary}")
        for part, option in plugin.url_parts.items():
            print(f"  URL {part} -> {option}")
        rows = options.describe(plugin.options)
        helps = options.help_of(plugin.options)
        name_w = max(len(name) for name, _, _ in rows)
        type_w = max(len(tp) for _, tp, _ in rows)
        default_w = max(len(default) for _, _, default in rows)
        for name, tp, default in rows:
            said = _short(helps.get(name, ""))
            print(f"  {name:<{name_w}}  {tp:<{type_w}}  {default:<{default_w}}  {said}".rstrip())
        return 0
    for scheme, plugin in sorted(registry.plugins().items()):
        try:
            plugin.check_installed()
            state = "ready"
        except MissingExtra:
            state = f"needs: pip install 'elect[{plugin.extra}]'"
        print(f"{scheme + '://':<14} {plugin.summary}  [{state}]")
    return 0


def _short(text: str, width: int = 100) -> str:
    """An option's sentence cut to one line of the listing (the configuration reference has it whole)."""
    if len(text) <= width:
        return text
    return text[:width].rsplit(" ", 1)[0].rstrip(",;:(") + " …"
