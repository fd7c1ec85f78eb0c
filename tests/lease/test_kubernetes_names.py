"""kubernetes://: its URL and options, and how roles become Lease names (pure: no API server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cas_lease.kubernetes import micro_time, role_from_name, role_lease_name
from cas_lease.options import KubernetesOptions
from elect.config import spec_from_url
from elect.errors import ConfigError

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def test_url_fills_server_namespace_and_derived_timing() -> None:
    spec = spec_from_url("kubernetes://10.0.0.1:6443/jobs?ttl=0.5&prefix=orders", ["a"], member="m")
    options = spec.options
    assert isinstance(options, KubernetesOptions)
    assert (options.server, options.namespace, options.prefix) == ("10.0.0.1:6443", "jobs", "orders")
    assert (options.interval, options.deadline, options.lease_seconds) == (0.125, 0.375, 1)
    assert spec_from_url("kubernetes:///default", member="m").options.server is None


def test_the_default_lease_duration_follows_the_roles() -> None:
    """Role Leases are rewritten every half `leaseDurationSeconds` for client-go readers: by default it grows with
    the roles a member contends for (a member holding all of them rewrites at most 50 a second), never below twice
    the TTL; one the user set stands whatever the roles."""
    options = KubernetesOptions(server="h:6443", ttl=1.0)
    assert [options.lease_seconds_for(n) for n in (6, 50, 60, 600, 6000)] == [2, 2, 3, 24, 240]
    assert all(2 * n / options.lease_seconds_for(n) <= 50 for n in range(1, 10_000, 7))
    assert KubernetesOptions(server="h:6443", ttl=1.0, lease_duration=5).lease_seconds_for(6000) == 5


@pytest.mark.parametrize(("url", "parameter"), [
    ("kubernetes://h:6443/Not_A_Namespace", "namespace"),
    ("kubernetes://h:6443/default?prefix=UPPER", "prefix"),
    ("kubernetes://h:6443/default?user=me&password_env=X", "user"),
    ("kubernetes://h:6443/default?tls=false", "tls"),
    ("kubernetes://h:6443/default?ttl=1&lease_duration=1", "lease_duration"),
    ("kubernetes://h/default", "server"),
    ("kubernetes://h:6443/default?kubeconfig=/no/such/file", "kubeconfig"),
    ("kubernetes://h:6443/default?token_file=/no/such/file", "token_file"),
])
def test_bad_options_name_the_parameter(url: str, parameter: str) -> None:
    with pytest.raises(ConfigError) as caught:
        spec_from_url(url, member="m")
    assert caught.value.parameter == parameter


@pytest.mark.parametrize("role", ["orders", "a-b-c", 7, 0, "7", "Orders", "a.b", "x" * 300, "ünïcode", "", "-x",
                                  -3, "a--b"])
def test_every_role_has_a_valid_name_that_maps_back_or_carries_the_role(role: str | int) -> None:
    name = role_lease_name("elect", role)
    assert DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253
    assert name.startswith("elect-")
    back = role_from_name("elect", name)
    assert back is None or back == role  # a hashed name is read from the Lease's annotation instead


def test_names_are_distinct_across_forms() -> None:
    roles: list[str | int] = ["7", 7, "orders", "Orders", "ORDERS", "a.b", "a-b", "a b", "a_b", "x" * 300, "x" * 301]
    names = [role_lease_name("p", r) for r in roles]
    assert len(set(names)) == len(names)
    assert role_lease_name("p", "orders") == "p-orders" and role_lease_name("p", 7) == "p-7"


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    assert micro_time(0.5) == "1970-01-01T00:00:00.500000Z"


def test_a_kubeconfig_is_read_for_server_ca_and_token_and_an_exec_plugin_is_refused(tmp_path: Path) -> None:
    from cas_lease.kube_api import resolve
    from elect_cluster.certs import make_authority

    ca = make_authority(tmp_path)
    (tmp_path / "token").write_text("abc\n")
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "one",
              "clusters": [{"name": "c", "cluster": {"server": "https://10.1.2.3:6443",
                                                     "certificate-authority": str(ca.cert)}}],
              "users": [{"name": "u", "user": {"tokenFile": "token"}},
                        {"name": "cloud", "user": {"exec": {"command": "gke-gcloud-auth-plugin"}}}],
              "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}},
                           {"name": "two", "context": {"cluster": "c", "user": "cloud"}}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    endpoint = resolve(spec_from_url(f"kubernetes:///default?kubeconfig={path}", member="m").options)
    assert (endpoint.host, endpoint.port, endpoint.token_file) == ("10.1.2.3", 6443, str(tmp_path / "token"))
    with pytest.raises(ConfigError, match="exec plugin, which elect does not run") as caught:
        resolve(spec_from_url(f"kubernetes:///default?kubeconfig={path}&context=two", member="m").options)
    assert caught.value.parameter == "kubeconfig"
    with pytest.raises(ConfigError, match="no context named 'three'"):
        resolve(spec_from_url(f"kubernetes:///default?kubeconfig={path}&context=three", member="m").options)
