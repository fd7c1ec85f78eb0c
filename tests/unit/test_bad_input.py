"""Any input to the parsers gives a result or an `elect` error, nothing else (issue 14, item 5).

A parser that lets an IndexError, OverflowError or TypeError escape turns a typo in a URL or a YAML file
into a traceback that names no parameter; a reader of event lines that stops at one bad line loses the
rest of a run. Hypothesis drives arbitrary text and near-valid inputs through each entry point; the
examples are fixed (the `elect` profile in tests/conftest.py), so a failure here reproduces everywhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import elect
from elect import config, registry
from elect.errors import ElectError
from elect.events import Acquired, Fenced, parse_line
from elect.options import port_number
from elect.roles import parse_role
from elect_bench.judging.history import LineProblem, read_lines
from elect_cli.watch import LeaderTable, _follow

SCHEMES = sorted(registry.plugins())
OPTION_NAMES = sorted({f.name for p in registry.plugins().values() for f in dataclasses.fields(p.options)})
CONFIG_KEYS = ["url", "elector", "member", "id", "roles", "require", "options"]

# Values that sit on the edges of what the options accept: numbers in every spelling, non-finite, huge, signed,
# non-ASCII digits (str.isdigit() is true for '²', int() refuses it), booleans, lists, peers, escapes.
EDGY = ["", " ", "0", "1", "-1", "2", "6", "0.5", "1e999", "-1e999", "nan", "inf", "1" * 5000, "500ms", "1.5s",
        "on", "off", "true", "none", "²", "٣", "१२", "b@127.0.0.1:2", "b@127.0.0.1:²", "b@[::1]:7002,c@h:3",
        "a@127.0.0.1:1", "%zz", "%00", "%ff%fe", "é", "\x00", "balanced", "zeebe", "fast", "full", "classic",
        "127.0.0.1:9092", ":", "@", ",", ",,", "65536", "99999999999999999999"]


def _no_foreign_error(fn: Callable[[], object]) -> None:
    """Run `fn`; an `elect` error is an answer, any other exception is a bug in the library."""
    with contextlib.suppress(ElectError):
        fn()


# ---------------------------------------------------------------------------------------------- URLs

ports = st.one_of(st.integers(-5, 70_000).map(str), st.sampled_from(["", "²", "٣", "0x1f", " 80", "+1", "1" * 400]))
hostnames = st.one_of(st.sampled_from(["127.0.0.1", "localhost", "[::1]", "", "h", "ä.example"]),
                      st.text(max_size=8))
hosts = st.builds(lambda h, sep, p: f"{h}{sep}{p}", hostnames, st.sampled_from([":", "", "::"]), ports)
words = st.one_of(st.sampled_from(EDGY), st.text(max_size=12))
query_keys = st.one_of(st.sampled_from(OPTION_NAMES), st.text(max_size=8))
escape = st.sampled_from([lambda s: s, lambda s: quote(s, safe=""), lambda s: quote(s, safe="@:,")])


@st.composite
def near_urls(draw: st.DrawFn) -> str:
    """A URL of a known (or near-known) scheme whose parts are drawn from the edges."""
    scheme = draw(st.one_of(st.sampled_from(SCHEMES), st.sampled_from(["RAFT", "nope", "1x", "", "raft "])))
    member = draw(st.one_of(st.none(), st.sampled_from(["a", "", "b@c", "é", "a" * 70]), st.text(max_size=6)))
    netloc = ",".join(draw(st.lists(hosts, max_size=3)))
    path = draw(st.one_of(st.just(""), st.text(max_size=8).map(lambda s: "/" + s)))
    pairs = draw(st.lists(st.tuples(query_keys, words, escape), max_size=6))
    query = "&".join(f"{esc(k)}={esc(v)}" for k, v, esc in pairs)
    at = "" if member is None else f"{member}@"
    tail = draw(st.sampled_from(["?", "", "?&", "#x"]))
    return f"{scheme}://{at}{netloc}{path}{'?' + query if query else tail}"


@given(st.text())
@example("raft://")
@example("raft://a@")
@example("://")
@example("raft://a@127.0.0.1:²?peers=b@127.0.0.1:2")
def test_any_text_as_a_url_gives_a_spec_or_an_elect_error(text: str) -> None:
    _no_foreign_error(lambda: config.spec_from_url(text))


@given(near_urls(), st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=4), st.integers(-2, 9)), max_size=3)))
@example("raft://a@127.0.0.1:1?peers=b@127.0.0.1:²", None)
@example("kafka://127.0.0.1:9092?session_timeout=1e999", None)
@example("etcd://127.0.0.1:2379?ttl=1e999&renew_interval=1&renew_deadline=2", None)
@example("etcd://127.0.0.1:2379?lease_ttl=99999999999999999999", None)
def test_near_valid_urls_give_an_elector_or_an_elect_error(url: str, roles: list[Any] | None) -> None:
    def build() -> None:
        spec = config.spec_from_url(url, roles)
        spec.create()  # connect() = spec + create(): builds the elector and checks requirements; starts nothing

    _no_foreign_error(build)


@given(st.sampled_from(SCHEMES), st.dictionaries(query_keys, st.one_of(words, st.integers(), st.floats(),
                                                                       st.booleans(), st.none()), max_size=4))
def test_keyword_overrides_of_a_url_are_checked_like_the_url(scheme: str, overrides: dict[str, Any]) -> None:
    url = {"raft": "raft://a@127.0.0.1:1?peers=b@127.0.0.1:2", "pysyncobj": "pysyncobj://a@127.0.0.1:1"}.get(
        scheme, f"{scheme}://127.0.0.1:2")
    _no_foreign_error(lambda: elect.connect(url, **overrides))


# ---------------------------------------------------------------------------------------------- YAML

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.sampled_from(EDGY), st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=8)
keys = st.one_of(st.sampled_from(CONFIG_KEYS + OPTION_NAMES), st.text(max_size=6), st.integers(), st.booleans(),
                 st.none(), st.floats(allow_nan=False))
mappings = st.dictionaries(keys, st.one_of(values, st.sampled_from(SCHEMES), near_urls()), max_size=6)


def _spec_from_yaml_text(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "elector.yaml"
        path.write_bytes(data)
        config.spec_from_config(path)


@given(st.text())
@example("elector: raft\nmember: a\nlisten: 127.0.0.1:1\npeers: [b@127.0.0.1:2]\n")
@example("{1: 2, a: 3}")
@example("elector: etcd\nendpoints: 5\n")
@example("url: kafka://127.0.0.1:9092\nrequire: [[1]]\n")
@example("[" * 2000)
def test_any_yaml_text_gives_a_spec_or_an_elect_error(text: str) -> None:
    _no_foreign_error(lambda: _spec_from_yaml_text(text.encode("utf-8", "surrogatepass")))


@given(st.binary())
@example(b"elector: raft\nmember: \xff\n")
def test_any_bytes_in_a_yaml_file_give_a_spec_or_an_elect_error(data: bytes) -> None:
    _no_foreign_error(lambda: _spec_from_yaml_text(data))


@given(st.one_of(mappings, values))
@example("\x00")  # a str is the path of a YAML file: one no file can have
@example({"elector": "raft", "member": "a", "listen": "127.0.0.1:1", "peers": 5})
@example({"elector": "memory", 1: 2})
@example({"url": "memory://g", 1: 2})
@example({"url": "memory://g", "require": 5})
@example({"url": "memory://g", "require": {"exclusive": "maybe"}})
@example({"url": "memory://g", "require": {"max_overlap": [1]}})
def test_any_config_mapping_gives_a_spec_or_an_elect_error(data: Any) -> None:
    def build() -> None:
        config.spec_from_config(data).create()

    _no_foreign_error(build)


def test_missing_and_unreadable_yaml_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(elect.ConfigError):
        config.spec_from_config(tmp_path / "absent.yaml")
    with pytest.raises(elect.ConfigError):
        config.spec_from_config(tmp_path)  # a directory


# ---------------------------------------------------------------------------------------------- event lines

GOOD = Fenced(role="r", member="a", token=3, mono=10.0, ts=1.0, until=9.5).to_dict()
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                           max_leaves=8)


def _checked(line: str) -> None:
    """parse_line documents ValueError for a bad line; a good line comes back as a dict that later code can trust."""
    try:
        data = parse_line(line)
    except ValueError:
        return
    assert isinstance(data, dict)
    assert data["event"] in ("acquired", "revoked", "fenced")
    for key in ("ts", "mono") + (("until",) if data["event"] == "fenced" else ()):
        value = data[key]
        assert isinstance(value, (int, float)) and not isinstance(value, bool)
        assert not isinstance(value, float) or math.isfinite(value)


@given(st.text())
@example("[" * 100_000)
@example('{"a":' * 100_000)
@example("1" * 5000)
def test_any_text_as_an_event_line_gives_a_dict_or_value_error(text: str) -> None:
    _checked(text)


@given(json_values)
def test_any_json_value_as_an_event_line_gives_a_dict_or_value_error(value: Any) -> None:
    _checked(json.dumps(value))


@given(st.sampled_from(sorted(GOOD)), st.one_of(json_values, st.sampled_from([math.nan, math.inf, -math.inf, True])))
def test_an_event_line_with_one_field_replaced_gives_a_dict_or_value_error(key: str, value: Any) -> None:
    _checked(json.dumps({**GOOD, key: value}))


def test_non_finite_clocks_and_boolean_until_are_rejected() -> None:
    for key, value in (("mono", math.nan), ("ts", math.inf), ("until", -math.inf), ("until", True)):
        with pytest.raises(ValueError, match=key):
            parse_line(json.dumps({**GOOD, key: value}))


def test_read_lines_skips_malformed_lines_and_reports_each_with_its_line_number(tmp_path: Path) -> None:
    good = Acquired(role="r", member="a", token=1, mono=5.0, ts=1.0).to_line()
    first = tmp_path / "a.jsonl"
    first.write_text("\n".join([good, "not json", "", '{"event": "acquired"}', good]) + "\n")
    second = tmp_path / "b.jsonl"
    second.write_bytes(good.encode() + b"\n\xff\xfe garbage\n" + good.encode())
    problems: list[LineProblem] = []
    lines = read_lines([first, second], problems=problems)
    assert len(lines) == 4
    assert [(p.path, p.number) for p in problems] == [(first, 2), (first, 4), (second, 2)]
    assert all(p.reason for p in problems)
    assert str(problems[0]).startswith(f"{first}:2: ")


def test_read_lines_without_a_problems_list_warns_and_carries_on(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("oops\n" + Acquired(role="r", member="a", token=1, mono=5.0, ts=1.0).to_line() + "\n")
    assert len(read_lines([path])) == 1
    assert f"{path}:1:" in caplog.text


def test_watch_reports_each_bad_line_with_its_number_and_goes_on(tmp_path: Path) -> None:
    lines = [Acquired(role="r", member="a", token=1, mono=1.0, ts=1.0).to_line().encode(), b"{torn",
             b"\xff\xfe", Acquired(role="\u00b2", member="b", token=1, mono=2.0, ts=2.0).to_line().encode()]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = subprocess.run([sys.executable, "-m", "elect", "watch", "--once", str(path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"{path}:2: skipped" in result.stderr and f"{path}:3: skipped" in result.stderr
    assert "2 changes" in result.stdout and "\u00b2" in result.stdout


def test_numbered_roles_sort_by_number_whatever_their_spelling() -> None:
    table = LeaderTable()
    for role in ("10", "9", "\u00b2", "1" * 5000, "b", "007"):
        table.apply({"role": role, "member": "m", "event": "acquired", "token": 1, "mono": 0.0})
    shown = [row.split()[0] for row in table.render(now=1.0).splitlines()[1:-1]]
    assert shown == ["007", "9", "10", "1" * 5000, "b", "\u00b2"]


def test_what_the_properties_found_stays_fixed() -> None:
    """One plain example per bug the property tests found, so each reads as a rule."""
    assert parse_role("\u00b2") == "\u00b2" and parse_role("12") == 12  # '²'.isdigit() is true; int('²') fails
    assert port_number("\u00b2") is None and port_number("1" * 5000) is None and port_number("7001") == 7001
    for url in ("raft://a@127.0.0.1:\u00b2?peers=b@127.0.0.1:2", "kafka://127.0.0.1:9092?session_timeout=1e999",
                "etcd://127.0.0.1:2379?ttl=1e999", "memory://g?revoke_timeout=nan"):
        with pytest.raises(elect.ConfigError):
            elect.connect(url)
    for bad in ({"elector": "etcd", "endpoints": 5}, {"url": "memory://g", 1: 2}, {"url": "memory://g", "require": 5},
                {"url": "memory://g", "require": {"exclusive": "maybe"}}, "\x00"):
        with pytest.raises(elect.ConfigError):
            config.spec_from_config(bad)  # type: ignore[arg-type]
    spec = config.spec_from_config({"url": "memory://g", "require": {"exclusive": "yes", "max_overlap": "500ms"}})
    assert spec.require.exclusive is True and spec.require.max_overlap == 0.5


def test_watch_reads_a_line_still_being_written_once_it_is_whole() -> None:
    """Following a file that a member is appending to, half a line is not a malformed line."""
    chunks = iter(['{"a": ', "", '1}\n', "x\n", "tail", ""])

    class Growing:
        def readline(self) -> str:
            return next(chunks, "")

    followed = _follow(cast(IO[str], Growing()), follow=True)
    assert [next(followed) for _ in range(4)] == [None, (1, '{"a": 1}\n'), (2, "x\n"), None]
    assert list(_follow(io.StringIO("one\ntwo"), follow=False)) == [(1, "one\n"), (2, "two")]
