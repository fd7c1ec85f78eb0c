"""Implementations, found through the `elect.electors` entry-point group so a third party can add one.

An entry point names a `Plugin`: a light object (importing it must not import the implementation's
heavy dependencies) that says what the scheme needs and how to build an elector from its options.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from elect import extras
from elect.contract import Elector
from elect.errors import ConfigError, UnknownScheme
from elect.observe import Observer
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
    observer: "module:callable" taking options, returning an `elect.observe.Observer` that reads who
    holds what from the infrastructure (None: the method keeps no state outside its members).
    """

    scheme: str
    summary: str
    options: type[Any]
    factory: str
    url_parts: Mapping[str, str] = field(default_factory=dict)
    extra: str | None = None
    requires: tuple[str, ...] = ()
    member_required: bool = False
    observer: str | None = None

    def check_installed(self) -> None:
        """Raise `MissingExtra`, naming the `pip install` that fixes it, if a module in `requires` is missing."""
        extras.require(f"{self.scheme}://", self.requires, self.extra)

    def create(self, options: Any, member: str, roles: Iterable[Role]) -> Elector:
        self.check_installed()
        module_name, _, attr = self.factory.partition(":")
        factory: Factory = getattr(importlib.import_module(module_name), attr)
        return factory(options, member, tuple(roles))

    def observe(self, options: Any) -> Observer:
        """An observer of this method's state in its infrastructure (ConfigError if it keeps none)."""
        if self.observer is None:
            raise ConfigError(f"{self.scheme}:// keeps no state outside its members, so there is nothing to read; "
                              f"watch the members' event lines instead: elect member ... | elect watch -")
        self.check_installed()
        module_name, _, attr = self.observer.partition(":")
        made: Observer = getattr(importlib.import_module(module_name), attr)(options)
        return made


@cache
def _discover() -> tuple[dict[str, Plugin], dict[str, str]]:
    """Installed implementations by scheme, and entry points that failed to load (with why).

    A broken third-party entry point must not take every other implementation down with it.
    """
    found: dict[str, Plugin] = {}
    broken: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        try:
            plugin = ep.load()
        except Exception as exc:
            broken[ep.name] = f"entry point {ep.name} = {ep.value} failed to load: {type(exc).__name__}: {exc}"
            continue
        if not isinstance(plugin, Plugin) or plugin.scheme != ep.name:
            broken[ep.name] = f"entry point {ep.name} = {ep.value} is not an elect Plugin for scheme {ep.name!r}"
            continue
        found[plugin.scheme] = plugin
    return found, broken


def plugins() -> dict[str, Plugin]:
    """Every installed implementation by scheme."""
    return _discover()[0]


def get(scheme: str) -> Plugin:
    """The implementation for `scheme`; an unknown scheme lists the known ones."""
    known, broken = _discover()
    if scheme in broken:
        raise UnknownScheme(broken[scheme], parameter="url")
    if scheme not in known:
        listing = ", ".join(f"{s}://" for s in sorted(known)) or "none (is elect installed? pip install -e .)"
        raise UnknownScheme(f"no elector for {scheme}://; known schemes: {listing}", parameter="url")
    return known[scheme]
