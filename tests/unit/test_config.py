"""URLs, YAML and keyword options all become one validated spec, with errors that name the rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import elect
from elect import config, options, registry
from elect.errors import ConfigError, MissingExtra, UnknownScheme, UnsatisfiedRequirement


def test_parse_url_splits_member_hosts_path_and_params() -> None:
    parsed = elect.parse_url("raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003&partitions=6")
    assert parsed.scheme == "raft" and parsed.member == "a" and parsed.hosts == ("127.0.0.1:7001",)
    assert parsed.params == {"peers": "b@127.0.0.1:7002,c@127.0.0.1:7003", "partitions": "6"}
    parsed = elect.parse_url("kafka://h1:9092,h2:9092/leaders?group=g&mode=full")
    assert parsed.hosts == ("h1:9092", "h2:9092") and parsed.path == "leaders" and parsed.params["mode"] == "full"


@pytest.mark.parametrize("bad", ["", "memory", "raft://a@h:1?x=1&x=2", "://x", "memory://@g"])
def test_bad_urls_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        elect.spec_from_url(bad)


def test_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(UnknownScheme, match=r"known schemes: .*memory://"):
        elect.connect("carrier-pigeon://coop")


def test_unknown_parameter_is_named_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"sesion_timeout.*known: group, max_roles, revoke_timeout, weight") as info:
        elect.connect("memory://g?sesion_timeout=1")
    assert info.value.parameter == "sesion_timeout"


def test_bad_value_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match="revoke_timeout"):
        elect.connect("memory://g?revoke_timeout=soon")
    with pytest.raises(ConfigError, match="revoke_timeout: must be > 0"):
        elect.connect("memory://g", revoke_timeout=0)


def test_keyword_options_override_the_url_and_member_must_agree() -> None:
    spec = elect.spec_from_url("memory://g?revoke_timeout=5", ["r"], member="m", revoke_timeout="250ms")
    assert spec.options.revoke_timeout == 0.25 and spec.member == "m" and spec.roles == ("r",)
    with pytest.raises(ConfigError, match="member"):
        elect.spec_from_url("memory://x@g", member="y")


def test_yaml_and_url_give_the_same_spec(tmp_path: Path) -> None:
    path = tmp_path / "elect.yaml"
    path.write_text("elector: memory\nmember: a\ngroup: g\nrevoke_timeout: 2\nroles: [x, 3]\n")
    from_yaml = elect.spec_from_config(path)
    from_url = elect.spec_from_url("memory://g?revoke_timeout=2", ["x", 3], member="a")
    assert (from_yaml.options, from_yaml.member, from_yaml.roles) == (from_url.options, from_url.member,
                                                                     from_url.roles)
    url_form = elect.spec_from_config({"url": "memory://g", "member": "a", "options": {"revoke_timeout": 2}})
    assert url_form.options == from_url.options


def test_config_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs 'url' or 'elector'"):
        elect.from_config({"member": "a"})
    with pytest.raises(ConfigError, match="contradicts"):
        elect.from_config({"url": "memory://g", "elector": "raft"})
    with pytest.raises(ConfigError, match="cannot read"):
        elect.from_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        elect.from_config(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="roles"):
        elect.connect("memory://g", [""])


def test_requirements_are_checked_at_connect_time() -> None:
    elect.connect("memory://g", require={"exclusive": True, "max_overlap": 0, "max_failover": 1.0})
    with pytest.raises(ConfigError, match="unknown requirement"):
        elect.connect("memory://g", require={"fast": True})
    have = elect.Characteristics(exclusive=False, max_overlap=None, max_failover=3.0, graceful_handover=False,
                                 token="t")
    with pytest.raises(UnsatisfiedRequirement, match=r"exclusive.*overlap <= 0.*no bound.*failover <= 1"):
        elect.Requirements(exclusive=True, max_overlap=0, max_failover=1).check("x", have)


@dataclass(frozen=True)
class _Opts:
    listen: str
    peers: tuple[str, ...] = ()
    timeout: float = 1.0
    flag: bool = False
    mode: str = "a"


def _plugin(**kw: object) -> registry.Plugin:
    base: dict[str, object] = dict(scheme="fake", summary="test", options=_Opts, factory="x:y",
                                   url_parts={"hosts": "listen"})
    base.update(kw)
    return registry.Plugin(**base)  # type: ignore[arg-type]


def test_a_clock_rate_tolerance_is_required_like_any_other_promise() -> None:
    elect.connect("memory://g", require={"max_drift": 0.5})  # one process, one clock
    have = elect.Characteristics(exclusive=True, max_overlap=0.0, max_failover=1.0, graceful_handover=True,
                                 token="t", max_drift=1 / 3)
    elect.Requirements(max_drift=0.3).check("x", have)
    with pytest.raises(elect.UnsatisfiedRequirement, match=r"clock rates that differ by up to 0.5 \(tolerates 0.333"):
        elect.Requirements(max_drift=0.5).check("x", have)
    unstated = elect.Characteristics(exclusive=False, max_overlap=2.0, max_failover=None, graceful_handover=False,
                                     token="t")
    with pytest.raises(elect.UnsatisfiedRequirement, match="states no bound"):
        elect.Requirements(max_drift=0.01).check("x", unstated)


def test_member_id_required_where_the_plugin_says_so() -> None:
    with pytest.raises(ConfigError, match="needs a member id"):
        config._spec(_plugin(member_required=True), None, (), {"listen": "h:1"}, None)
    spec = config._spec(_plugin(), None, (), {"listen": "h:1"}, None)
    assert spec.member == config.default_member()


def test_missing_extra_names_the_pip_command() -> None:
    plugin = _plugin(extra="kafka", requires=("surely_not_installed_module",))
    with pytest.raises(MissingExtra, match=r"pip install 'elect\[kafka\]'"):
        plugin.check_installed()


def test_options_coercion() -> None:
    built = options.build(_Opts, {"listen": "h:1", "peers": "a,b", "timeout": "500ms", "flag": "yes"}, scheme="f")
    assert built == _Opts("h:1", ("a", "b"), 0.5, True)
    with pytest.raises(ConfigError, match="listen: is required"):
        options.build(_Opts, {}, scheme="f")
    with pytest.raises(ConfigError, match="flag: expected true or false"):
        options.build(_Opts, {"listen": "h", "flag": "maybe"}, scheme="f")
    assert options.duration("1.5s", "x") == 1.5 and options.duration(2, "x") == 2.0
