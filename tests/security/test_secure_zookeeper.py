"""zookeeper:// against a real secured ZooKeeper (only its TLS client port, client certificates required) with a
digest identity: the right settings work, the elector's nodes carry ACLs that keep other clients from deleting,
creating or overwriting them, and each wrong setting is refused at start with a named error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from secure_helpers import member_refused, refused, url, wrong_password_file

import elect
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def _prefix(name: str) -> str:
    return f"sec-{name}-{time.monotonic_ns()}"


def _kazoo(cluster: LocalCluster, auth: tuple[str, str] | None) -> Any:
    """A kazoo client over TLS with the cluster's client certificate, as `auth` (digest user, password) or none."""
    from kazoo.client import KazooClient

    sec = cluster.security
    assert sec is not None
    client = KazooClient(hosts=",".join(cluster.endpoints.zookeeper), timeout=4.0, use_ssl=True, ca=str(sec.ca),
                         certfile=str(sec.client_cert), keyfile=str(sec.client_key),
                         auth_data=[("digest", f"{auth[0]}:{auth[1]}")] if auth else None)
    client.start(timeout=10)
    return client


@pytest.fixture
def leading(secure_zookeeper: LocalCluster) -> Iterator[tuple[str, elect.Elector]]:
    """A group whose member `a` leads r0 (the right certificate, user and password)."""
    prefix = _prefix("lead")
    elector = elect.connect(url(secure_zookeeper, "zookeeper", prefix), ["r0"], member="a")
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 15.0, what="the lone member leading r0")
        yield prefix, elector
    finally:
        elector.stop()


def test_the_right_certificate_user_and_password_lead(leading: tuple[str, elect.Elector]) -> None:
    assert leading[1].is_leader("r0")


def test_other_clients_cannot_delete_create_or_overwrite_the_electors_nodes(
        secure_zookeeper: LocalCluster, leading: tuple[str, elect.Elector]) -> None:
    from kazoo.exceptions import NoAuthError

    prefix = leading[0]
    roles, members = f"/{prefix}/roles", f"/{prefix}/members"
    for auth in (None, ("elect", "not-the-password"), ("mallory", "secret")):
        client = _kazoo(secure_zookeeper, auth)
        try:
            data, _ = client.get(f"{roles}/r0")  # anyone reads: who leads is no secret
            assert b"a" in data
            (member,) = client.get_children(members)
            attempts = [("delete", f"{roles}/r0", None), ("set", f"{roles}/r0", b"mallory"),
                        ("create", f"{roles}/r1", b"mallory"), ("delete", f"{members}/{member}", None),
                        ("set", f"{members}/{member}", b"{}"), ("create", f"{members}/forged", b"{}")]
            for verb, path, value in attempts:
                with pytest.raises(NoAuthError):
                    if verb == "delete":
                        client.delete(path)
                    elif verb == "set":
                        client.set(path, value)
                    else:
                        client.create(path, value, ephemeral=True)
        finally:
            client.stop()
            client.close()
    assert leading[1].is_leader("r0")


def test_a_wrong_password_is_refused_on_the_groups_nodes(secure_zookeeper: LocalCluster,
                                                         leading: tuple[str, elect.Elector], tmp_path: Path) -> None:
    refused(url(secure_zookeeper, "zookeeper", leading[0], password_file=wrong_password_file(tmp_path)),
            words=("refused the user 'elect'", "another identity"))


def test_no_user_is_refused_on_the_groups_nodes(secure_zookeeper: LocalCluster,
                                                leading: tuple[str, elect.Elector]) -> None:
    refused(url(secure_zookeeper, "zookeeper", leading[0], drop=("user", "password_file")),
            words=("another identity",))


def test_a_missing_client_certificate_is_refused(secure_zookeeper: LocalCluster) -> None:
    refused(url(secure_zookeeper, "zookeeper", _prefix("nocert"), drop=("cert", "key")), words=("certificate",))


def test_a_server_certificate_of_another_ca_is_not_trusted(secure_zookeeper: LocalCluster, tmp_path: Path) -> None:
    from elect_cluster.certs import make_authority

    other = make_authority(tmp_path / "other")
    refused(url(secure_zookeeper, "zookeeper", _prefix("ca"), ca=str(other.cert)), words=("not trusted",))


def test_elect_member_exits_3_and_prints_no_password(secure_zookeeper: LocalCluster,
                                                     leading: tuple[str, elect.Elector], tmp_path: Path) -> None:
    said = member_refused(url(secure_zookeeper, "zookeeper", leading[0], password_file=wrong_password_file(tmp_path)),
                          "not-the-password")
    assert "another identity" in said
