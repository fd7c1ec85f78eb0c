"""Typed option records built from URL query strings, YAML or keyword arguments.

Each implementation declares its options as a dataclass; this module turns raw values (strings from a
URL, numbers from YAML) into that dataclass, rejecting unknown names and bad values with a message
that names the parameter. Cross-field rules live in the dataclass's `__post_init__`, raising
`ConfigError` via `rule()`.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from elect.errors import ConfigError

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
MAX_DURATION = 1e9  # seconds (about 32 years): longer is a typo, and stays clear of every overflow
_DURATION = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)?\s*$")


def rule(ok: bool, parameter: str, message: str) -> None:
    """Raise `ConfigError(message, parameter=...)` unless `ok`: how options state their rules."""
    if not ok:
        raise ConfigError(message, parameter=parameter)


def port_number(text: str) -> int | None:
    """The TCP port (1..65535) `text` spells in ASCII digits, else None.

    `str.isdigit()` alone is not enough: it is true for '²' and '٣', which `int()` refuses or reads as digits
    no one typed as a port.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    port = int(text)
    return port if 0 < port < 65536 else None


def duration(value: Any, parameter: str) -> float:
    """Seconds from a number or a string such as '1.5', '1.5s' or '500ms'.

    Only finite values up to MAX_DURATION: '1e999' reads as infinity, and infinity or NaN would pass a rule
    such as `> 0` and then overflow where a duration is rounded, doubled or waited on.
    """
    if isinstance(value, bool):
        raise ConfigError(f"expected a duration in seconds, got {value!r}", parameter=parameter)
    if isinstance(value, (int, float)):
        number = float(value) if abs(value) <= MAX_DURATION else math.inf  # float(10**400) would overflow
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ConfigError(f"expected a duration such as 1.0, 1.0s or 500ms, got {value!r}", parameter=parameter)
        number = float(match.group(1))
        number = number / 1000.0 if match.group(2) == "ms" else number
    if not abs(number) <= MAX_DURATION:  # also false for NaN
        raise ConfigError(f"expected a finite duration of at most {MAX_DURATION:g} s, got {value!r}",
                          parameter=parameter)
    return number


#: Options a user may try to give inline that `build` refuses with a message of their own (where a password goes).
SECRET_INLINE = ("password", "sasl_password")


def names(cls: type[Any]) -> frozenset[str]:
    """The option names an options dataclass takes."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init)


def build(cls: type[T], raw: Mapping[str, Any], *, scheme: str) -> T:
    """Build the options dataclass `cls` from `raw`, coercing each value to its declared type."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(raw) - set(fields))
    inline = [name for name in SECRET_INLINE if name in unknown and "password_file" in fields]
    if inline:  # say where a password goes instead (and never echo it)
        raise ConfigError("a password is never taken from the URL or the configuration text (they get printed): "
                          "name a file with password_file=PATH or an environment variable with password_env=NAME",
                          parameter=inline[0])
    if unknown:
        raise ConfigError(f"unknown parameter(s) {', '.join(unknown)} for {scheme}://; "
                          f"known: {', '.join(sorted(fields))}", parameter=unknown[0])
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if name in raw:
            values[name] = _coerce(raw[name], hints[name], name)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"is required for {scheme}://", parameter=name)
    return cls(**values)


def coerce(value: Any, tp: Any, parameter: str) -> Any:
    """`value` as type `tp` by the rules `build` applies to each option; ConfigError naming `parameter` if not."""
    return _coerce(value, tp, parameter)


def describe(cls: type[Any]) -> list[tuple[str, str, str]]:
    """(name, type, default) for each option: what `elect` prints when asked about an implementation. Options a
    scheme inherits but has no use for (its `unused`: say Kubernetes' password login, which its API lacks) are
    left out."""
    hints = typing.get_type_hints(cls)
    unused: frozenset[str] = getattr(cls, "unused", frozenset())
    rows = []
    for field in dataclasses.fields(cls):
        if field.name in unused:
            continue
        if field.default is not dataclasses.MISSING:
            default = repr(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            default = repr(field.default_factory())
        else:
            default = "(required)"
        rows.append((field.name, _type_name(hints[field.name]), default))
    return rows


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    if typing.get_origin(tp) is typing.Literal:  # the choices, as they are written in a URL
        return "|".join(str(arg) for arg in typing.get_args(tp))
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return f"{_type_name(rest[0])} | None"
    return str(tp).replace("typing.", "")


def help_of(cls: type[Any]) -> dict[str, str]:
    """What each option does, in a sentence: read from the options classes' docstrings (the configuration reference
    prints them whole), where an option is described as `name: what it does.` (several names may share one:
    `a, b: ...`). An option no docstring describes is missing from the result."""
    fields = [f.name for f in dataclasses.fields(cls)]
    name = "|".join(map(re.escape, sorted(fields, key=len, reverse=True)))
    label = re.compile(rf"(?<![\w`.])((?:{name})(?:,\s+(?:{name}))*):\s")
    found: dict[str, str] = {}
    for part in cls.__mro__:
        doc = inspect.getdoc(part) if dataclasses.is_dataclass(part) else None
        if not doc:
            continue
        text = " ".join(doc.split())
        marks = list(label.finditer(text))
        for mark, following in zip(marks, [*marks[1:], None], strict=False):
            body = text[mark.end():following.start() if following else len(text)].strip()
            sentence = _first_sentence(body)
            for name in (n.strip() for n in mark.group(1).split(",")):
                found.setdefault(name, sentence)
    return found


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (not one inside a number, a name or parentheses)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        ends = i + 1 == len(text) or text[i + 1] == " "
        if ch == "." and depth <= 0 and ends and not text[:i + 1].endswith(("e.g.", "i.e.", "etc.")):
            return text[:i + 1]
    return text


def _coerce(value: Any, tp: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        blank = value is None or (isinstance(value, str) and value.lower() in ("", "none", "null"))
        if blank and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, name)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"bad value {value!r} ({'; '.join(errors)})", parameter=name)
    if origin is Literal:
        text = value if not isinstance(value, str) else value.strip()
        if text not in args:
            raise ConfigError(f"must be one of {', '.join(map(str, args))}; got {value!r}", parameter=name)
        return text
    if origin in (tuple, list):
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray, Mapping)):
            items = list(value)
        else:  # e.g. a YAML number, null or mapping where a list belongs
            raise ConfigError(f"expected a list or a comma-separated string, got {value!r}", parameter=name)
        inner = args[0] if args else str
        coerced = [_coerce(v, inner, name) for v in items]
        return tuple(coerced) if origin is tuple else coerced
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected a mapping, got {value!r}", parameter=name)
        return {str(k): str(v) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"expected true or false, got {value!r}", parameter=name)
    if tp is float:
        return duration(value, name)
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"expected an integer, got {value!r}", parameter=name)
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"expected an integer, got {value!r}", parameter=name) from None
    if tp is str:
        if value is None or isinstance(value, (dict, list, tuple, set, frozenset)):  # None is not the text "None"
            raise ConfigError(f"expected a string, got {value!r}", parameter=name)
        return str(value)
    return value
