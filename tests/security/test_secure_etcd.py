"""etcd:// against a real secured etcd (HTTPS only, client certificates required, authentication on): the right
settings work, each wrong one is refused at start with a named error that says what was refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from secure_helpers import AccessRefused, InfrastructureUnavailable, member_refused, refused, url, wrong_password_file

import elect
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def _prefix(name: str) -> str:
    return f"sec-{name}-{time.monotonic_ns()}"


@pytest.mark.parametrize("where", ["password_file", "password_env"])
def test_the_right_certificate_user_and_password_lead(secure_etcd: LocalCluster, where: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert secure_etcd.security is not None
    if where == "password_env":
        monkeypatch.setenv("ELECT_TEST_ETCD_PASSWORD", secure_etcd.security.password())
        group = url(secure_etcd, "etcd", _prefix("env"), drop=("password_file",),
                    password_env="ELECT_TEST_ETCD_PASSWORD")
    else:
        group = url(secure_etcd, "etcd", _prefix("ok"))
    elector = elect.connect(group, ["r0"], member="a")
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 10.0, what="the lone member leading r0")
    finally:
        elector.stop()


def test_a_wrong_password_is_refused_naming_the_user(secure_etcd: LocalCluster, tmp_path: Path) -> None:
    refused(url(secure_etcd, "etcd", _prefix("pw"), password_file=wrong_password_file(tmp_path)),
            words=("refused the user 'elect'", "authentication failed"))


def test_no_user_is_refused_saying_authentication_is_required(secure_etcd: LocalCluster) -> None:
    refused(url(secure_etcd, "etcd", _prefix("anon"), drop=("user", "password_file")),
            words=("requires authentication",))


def test_a_missing_client_certificate_is_refused(secure_etcd: LocalCluster) -> None:
    refused(url(secure_etcd, "etcd", _prefix("nocert"), drop=("cert", "key")), words=("client certificate",))


def test_a_server_certificate_of_another_ca_is_not_trusted(secure_etcd: LocalCluster, tmp_path: Path) -> None:
    from elect_cluster.certs import make_authority

    other = make_authority(tmp_path / "other")
    refused(url(secure_etcd, "etcd", _prefix("ca"), ca=str(other.cert)), words=("not trusted",))


def test_plain_http_to_the_tls_port_says_it_may_serve_tls_only(secure_etcd: LocalCluster) -> None:
    # etcd closes a plain connection on its TLS port without a word: that could also be a member restarting, so
    # the elector tries until connect_timeout, then says what may be wrong
    refused(url(secure_etcd, "etcd", _prefix("plain"), drop=("ca", "cert", "key")), words=("serves TLS only",),
            kind=InfrastructureUnavailable)


def test_elect_member_exits_3_and_prints_no_password(secure_etcd: LocalCluster, tmp_path: Path) -> None:
    wrong = wrong_password_file(tmp_path)
    said = member_refused(url(secure_etcd, "etcd", _prefix("cli"), password_file=wrong), "not-the-password")
    assert "refused the user 'elect'" in said
    assert secure_etcd.security is not None
    member_refused(url(secure_etcd, "etcd", _prefix("cli2"), drop=("cert", "key")), secure_etcd.security.password())


def test_the_observer_reads_the_secured_store(secure_etcd: LocalCluster) -> None:
    from elect import registry
    from elect.config import spec_from_url

    group = url(secure_etcd, "etcd", _prefix("watch"))
    elector = elect.connect(group, ["r0"], member="a")
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 10.0, what="a leader of r0")
        spec = spec_from_url(group)
        observer = registry.get("etcd").observe(spec.options)
        try:
            claims = observer.claims(5.0)
        finally:
            observer.close()
        assert [(c.role, c.member) for c in claims] == [("r0", "a")]
    finally:
        elector.stop()


def test_a_refused_start_raises_access_refused_which_is_infrastructure_unavailable() -> None:
    from elect.errors import InfrastructureUnavailable

    assert issubclass(AccessRefused, InfrastructureUnavailable)


def test_a_token_gone_stale_is_fetched_again_and_leadership_goes_on(secure_etcd: LocalCluster) -> None:
    """Setting a user's password (to the same one) makes etcd drop that user's tokens: the elector's next request
    is refused as "invalid auth token", and it authenticates again within that request; it never stops leading.
    All of a member's connections share one token, so a member authenticates once, not once per connection."""
    from elect.etcd_gateway import Access, Gateway
    from elect.events import Event

    sec = secure_etcd.security
    assert sec is not None
    events: list[Event] = []
    elector = elect.connect(url(secure_etcd, "etcd", _prefix("stale")), ["r0"], member="a")
    elector.subscribe(events.append)
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 10.0, what="a leader of r0")
        store = elector._store  # type: ignore[attr-defined]
        # one token for the loop's gateway and the lanes' (etcd checks a password with bcrypt: once per member)
        wait_until(lambda: store._tokens.token and len(store._lane_gateways) > 1, 10.0, what="the lanes' gateways")
        assert all(gw._tokens is store._tokens for gw in [store._gw, *store._lane_gateways])
        before = store._tokens.token
        root = Gateway(secure_etcd.endpoints.etcd, Access(sec.client_context(), "root", sec.admin_password()))
        try:
            root.call("auth/user/changepw", {"name": sec.user, "password": sec.password()}, 5.0)
        finally:
            root.close()
        wait_until(lambda: store._tokens.token not in (None, before), 10.0,
                   what="a new token after the old one was dropped")
        wait_until(lambda: elector.is_leader("r0"), 5.0, what="still leading")
        assert [type(e).__name__ for e in events] == ["Acquired"], events
    finally:
        elector.stop()


def test_elect_cluster_up_secure_prints_urls_that_name_files_not_passwords(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from elect_cluster.security import Security

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "elect", "cluster", *args, "--workdir", str(tmp_path / "c")],
                              capture_output=True, text=True, timeout=120)

    try:
        up = cli("up", "--services", "etcd", "--secure", "--json")
        assert up.returncode == 0, up.stderr
        endpoints = json.loads(up.stdout)
        password = Security(tmp_path / "c" / "security").password()
        assert password not in up.stdout and password not in (tmp_path / "c" / "endpoints.json").read_text()
        assert endpoints["security"]["user"] == "elect"
        elector = elect.connect(endpoints["urls"]["etcd"], ["r0"], member="a")
        elector.start()
        try:
            wait_until(lambda: elector.is_leader("r0"), 10.0, what="a leader on the CLI's secured etcd")
        finally:
            elector.stop()
        status = cli("status")
        assert status.returncode == 0 and "healthy" in status.stdout, status.stdout + status.stderr
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stderr
