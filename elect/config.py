"""From a URL, a dict or a YAML file to a configured elector.

All three forms end in the same `ElectorSpec` (scheme, member, roles, typed options, requirements),
so a URL and its long form in YAML mean exactly the same thing:

    raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002&partitions=6

    elector: raft            # or  url: raft://a@127.0.0.1:7001?...  (other keys override the URL)
    member: a
    listen: 127.0.0.1:7001
    peers: [b@127.0.0.1:7002]
    partitions: 6
    roles: [prices.EURUSD]
    require: {exclusive: true}
"""

from __future__ import annotations

import os
import re
import socket
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

from elect import options as opts
from elect import registry
from elect.contract import Elector, Requirements
from elect.errors import ConfigError
from elect.roles import Role, normalize_roles


@dataclass(frozen=True)
class ParsedURL:
    """The generic parts of `scheme://[member@]host[:port][,host[:port]...][/path][?k=v&...]`."""

    scheme: str
    member: str | None
    hosts: tuple[str, ...]
    path: str
    params: dict[str, str] = field(default_factory=dict)


def parse_url(url: str) -> ParsedURL:
    """Split an elector URL; only syntax is checked here, meaning is checked by the implementation."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"expected a URL such as raft://a@host:7001?peers=..., got {url!r}", parameter="url")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
        raise ConfigError(f"bad scheme {scheme!r}", parameter="url")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    member: str | None = None
    if "@" in netloc:
        member, _, netloc = netloc.rpartition("@")
        member = unquote(member)
        if not member:
            raise ConfigError("empty member id before '@'", parameter="member")
    hosts = tuple(h for h in (part.strip() for part in netloc.split(",")) if h)
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key in params:
            raise ConfigError(f"given twice in the URL ({params[key]!r} and {value!r})", parameter=key)
        params[key] = value
    return ParsedURL(scheme, member, hosts, unquote(path) if slash else "", params)


@dataclass(frozen=True)
class ElectorSpec:
    """A fully validated elector configuration; `create()` builds the elector (not yet started)."""

    plugin: registry.Plugin
    member: str
    roles: tuple[Role, ...]
    options: Any
    require: Requirements

    @property
    def scheme(self) -> str:
        return self.plugin.scheme

    def create(self) -> Elector:
        """Build (not start) the elector; `UnsatisfiedRequirement` if it does not promise what `require` asks."""
        elector = self.plugin.create(self.options, self.member, self.roles)
        self.require.check(self.scheme, elector.characteristics)
        return elector


def default_member() -> str:
    """A member id unique on this host: hostname and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


def spec_from_url(url: str, roles: Iterable[Role] | Role | None = None, *, member: str | None = None,
                  require: Requirements | Mapping[str, Any] | None = None, **overrides: Any) -> ElectorSpec:
    """Validate a URL (plus keyword overrides of its parameters) into an `ElectorSpec`."""
    parsed = parse_url(url)
    plugin = registry.get(parsed.scheme)
    raw: dict[str, Any] = {}
    for part in ("hosts", "path"):
        value: Any = getattr(parsed, part)
        if not value:
            continue
        target = plugin.url_parts.get(part)
        if target is None:
            raise ConfigError(f"{plugin.scheme}:// URLs take no {part} part (got {value!r})", parameter="url")
        raw[target] = value[0] if part == "hosts" and len(value) == 1 and _single(plugin, target) else value
    raw.update(parsed.params)
    raw.update(overrides)
    if member is not None and parsed.member is not None and member != parsed.member:
        raise ConfigError(f"the URL says {parsed.member!r} but member={member!r} was passed", parameter="member")
    return _spec(plugin, member or parsed.member, roles, raw, require)


#: The keys of a configuration beside the scheme's options (`spec_from_config`).
TOP_LEVEL = ("elector", "url", "member", "id", "roles", "require", "options")


def spec_from_config(config: Mapping[str, Any] | str | Path, *, source: Path | None = None) -> ElectorSpec:
    """Validate a dict, or the path of a YAML file holding one, into an `ElectorSpec`. A key that is neither one of
    `TOP_LEVEL` nor an option of the scheme is refused with the closest known name, and with its file and line
    (`source`: the file a dict was read from)."""
    where = source
    if isinstance(config, (str, Path)):
        where = Path(config)
        config = load_yaml(where)
    if not isinstance(config, Mapping):
        raise ConfigError(f"a configuration is a mapping, got {type(config).__name__}")
    try:
        return _spec_from_mapping(config)
    except _UnknownKey as exc:
        line = _key_line(where, exc.key) if where is not None else None
        at = f"{where}:{line}: " if line is not None else ""  # not in the file: given beside it (--set)
        error = ConfigError(f"{at}{exc}")  # the place first, then what is wrong there
        error.parameter = exc.key
        raise error from None


class _UnknownKey(Exception):
    def __init__(self, key: str, scheme: str, options: Iterable[str]) -> None:
        import difflib

        known = [*TOP_LEVEL, *sorted(options)]
        close = difflib.get_close_matches(key, known, n=1)
        listed = "" if close else f": {', '.join(sorted(options))}"
        super().__init__(f"unknown key {key!r}{f' (did you mean {close[0]!r}?)' if close else ''}: a configuration "
                         f"takes {', '.join(TOP_LEVEL)}, and the options of {scheme}://{listed} (`elect schemes "
                         f"{scheme}` says what each does)")
        self.key = key


def _key_line(path: Path, key: str) -> int | None:
    """The line of `path` where `key` is written (at the top level or under `options:`), or None."""
    import yaml

    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    pending = [node]
    while pending:
        current = pending.pop(0)
        if not isinstance(current, yaml.MappingNode):
            continue
        for k, v in current.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return int(k.start_mark.line) + 1
            if isinstance(k, yaml.ScalarNode) and k.value == "options":
                pending.append(v)
    return None


def _spec_from_mapping(config: Mapping[str, Any]) -> ElectorSpec:
    data = dict(config)
    roles = data.pop("roles", None)
    member = data.pop("member", None) or data.pop("id", None)
    require = data.pop("require", None)
    url = data.pop("url", None)
    scheme = data.pop("elector", None)
    nested = data.pop("options", None)
    if nested is not None:
        if not isinstance(nested, Mapping):
            raise ConfigError("must be a mapping", parameter="options")
        data.update(nested)
    odd = [key for key in data if not isinstance(key, str)]
    if odd:  # YAML allows `1: x` or `null: x`; an option's name is text
        raise ConfigError(f"an option's name is text, got {odd[0]!r}", parameter=str(odd[0]))
    plugin = registry.get(parse_url(str(url)).scheme if url is not None else str(scheme)) \
        if url is not None or scheme is not None else None
    if plugin is not None:
        names = opts.names(plugin.options)
        unknown = [key for key in data if key not in names and key not in opts.SECRET_INLINE]
        if unknown:
            raise _UnknownKey(unknown[0], plugin.scheme, names)
    if url is not None:
        spec = spec_from_url(str(url), roles, member=member, require=require, **data)
        if scheme is not None and scheme != spec.scheme:
            raise ConfigError(f"elector {scheme!r} contradicts the URL's scheme {spec.scheme!r}",
                              parameter="elector")
        return spec
    if scheme is None:
        raise ConfigError("a configuration needs 'url' or 'elector' (one of: "
                          f"{', '.join(sorted(registry.plugins()))})", parameter="elector")
    return _spec(registry.get(str(scheme)), member, roles, data, require)


def _single(plugin: registry.Plugin, target: str) -> bool:
    """Whether the option filled by the URL's host part takes one host rather than a list."""
    tp = typing.get_type_hints(plugin.options).get(target)
    return tp is str or tp == str | None


def _spec(plugin: registry.Plugin, member: str | None, roles: Iterable[Role] | Role | None,
          raw: Mapping[str, Any], require: Requirements | Mapping[str, Any] | None) -> ElectorSpec:
    if member is None:
        if plugin.member_required:
            raise ConfigError(f"{plugin.scheme}:// needs a member id: write {plugin.scheme}://ID@... or pass "
                              "member=...", parameter="member")
        member = default_member()
    if not str(member).strip():
        raise ConfigError("cannot be empty", parameter="member")
    try:
        role_tuple = normalize_roles(roles)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), parameter="roles") from None
    options = opts.build(plugin.options, raw, scheme=plugin.scheme)
    return ElectorSpec(plugin, str(member), role_tuple, options, Requirements.coerce(require))


def load_yaml(path: Path) -> Mapping[str, Any]:
    """The mapping a YAML file holds; whatever is wrong with the file (unreadable, not UTF-8, not YAML, too deep,
    not a mapping) is a ConfigError that names it."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # a path no file can have, e.g. with a NUL byte
        raise ConfigError(f"cannot read configuration file {str(path)!r}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    except RecursionError:  # PyYAML's parser recurses once per level of nesting
        raise ConfigError(f"{path} nests deeper than a configuration can") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path} must hold a mapping at the top level")
    return data


def connect(url: str, roles: Iterable[Role] | Role | None = None, *, member: str | None = None,
            require: Requirements | Mapping[str, Any] | None = None, **options: Any) -> Elector:
    """Build (not start) the elector a URL describes; keyword options override the URL's parameters."""
    return spec_from_url(url, roles, member=member, require=require, **options).create()


def from_config(config: Mapping[str, Any] | str | Path) -> Elector:
    """Build (not start) the elector a dict or a YAML file describes."""
    return spec_from_config(config).create()
