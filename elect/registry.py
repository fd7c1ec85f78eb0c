"""Implementations, found through the `elect.electors` entry-point group so a third party can add one.

An entry point names a `Plugin`: a light object (importing it must not import the implementation's
heavy dependencies) that says what the scheme needs and how to build an elector from its options.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from elect.contract import Elector
from elect.errors import ConfigError, MissingExtra, UnknownScheme
from elect.roles import Role

GROUP = "elect.electors"

Factory = Callable[[Any, str, tuple[Role, ...]], Elector]


@dataclass(frozen=True)
class Plugin:
    """How to build one implementation.

    scheme: the URL scheme. options: its options dataclass. factory: "module:callable" taking
    (options, member, roles), imported only when an elector is built. url_parts: which option each
    part of the URL fills ("hosts" and "path"). extra / requires: the pip extra that provides the
    modules in `requires`. member_required: the member id cannot be defaulted (e.g. Raft's node id).
    """

    scheme: str
    summary: str
    options: type[Any]
    factory: str
    url_parts: Mapping[str, str] = field(default_factory=dict)
    extra: str | None = None
    requires: tuple[str, ...] = ()
    member_required: bool = False

    def check_installed(self) -> None:
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if missing:
            hint = f"pip install 'elect[{self.extra}]'" if self.extra else f"pip install {' '.join(missing)}"
            raise MissingExtra(f"{self.scheme}:// needs {', '.join(missing)}, which is not installed: {hint}")

    def create(self, options: Any, member: str, roles: Iterable[Role]) -> Elector:
        self.check_installed()
        module_name, _, attr = self.factory.partition(":")
        factory: Factory = getattr(importlib.import_module(module_name), attr)
        return factory(options, member, tuple(roles))


@cache
def plugins() -> dict[str, Plugin]:
    """Every installed implementation by scheme."""
    found: dict[str, Plugin] = {}
    for ep in entry_points(group=GROUP):
        plugin = ep.load()
        if not isinstance(plugin, Plugin):
            raise TypeError(f"entry point {ep.name} = {ep.value} in group {GROUP} is not an elect Plugin")
        if plugin.scheme != ep.name:
            raise ConfigError(f"entry point {ep.name} serves scheme {plugin.scheme!r}; names must match")
        found[plugin.scheme] = plugin
    return found


def get(scheme: str) -> Plugin:
    """The implementation for `scheme`; an unknown scheme lists the known ones."""
    known = plugins()
    if scheme not in known:
        listing = ", ".join(f"{s}://" for s in sorted(known)) or "none (is elect installed? pip install -e .)"
        raise UnknownScheme(f"no elector for {scheme}://; known schemes: {listing}", parameter="url")
    return known[scheme]
