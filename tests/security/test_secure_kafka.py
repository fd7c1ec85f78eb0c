"""kafka:// against a real Apache Kafka whose clients' listener is SASL_SSL: PLAIN and SCRAM users work, a wrong
password, an untrusted broker certificate or a client without SASL is refused at start with a named error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from secure_helpers import InfrastructureUnavailable, member_refused, refused, url, wrong_password_file

import elect
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def _topic(name: str) -> str:
    return f"sec-{name}-{time.monotonic_ns()}"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_each_mechanism_with_the_right_password_leads(secure_kafka: LocalCluster, mechanism: str) -> None:
    elector = elect.connect(url(secure_kafka, "kafka", _topic("ok"), sasl_mechanism=mechanism, partitions="2"),
                            ["r0"], member="a")
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 30.0, what=f"the lone member leading r0 ({mechanism})")
    finally:
        elector.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_refused_naming_the_user(secure_kafka: LocalCluster, tmp_path: Path,
                                                     mechanism: str) -> None:
    refused(url(secure_kafka, "kafka", _topic("pw"), sasl_mechanism=mechanism,
                password_file=wrong_password_file(tmp_path)), words=("refused the user 'elect'",))


def test_a_broker_certificate_of_another_ca_is_refused(secure_kafka: LocalCluster, tmp_path: Path) -> None:
    from elect_cluster.certs import make_authority

    other = make_authority(tmp_path / "other")
    refused(url(secure_kafka, "kafka", _topic("ca"), ca=str(other.cert)), words=("TLS with Kafka",))


def test_tls_without_sasl_fails_naming_the_broker(secure_kafka: LocalCluster) -> None:
    # the listener answers ApiVersions, then hangs up on a client that does not start SASL: librdkafka may only
    # see disconnections, so this is an InfrastructureUnavailable (or its AccessRefused) within connect_timeout
    refused(url(secure_kafka, "kafka", _topic("nosasl"), drop=("user", "password_file", "sasl_mechanism")),
            words=("Kafka",), kind=InfrastructureUnavailable)


def test_elect_member_exits_3_and_prints_no_password(secure_kafka: LocalCluster, tmp_path: Path) -> None:
    said = member_refused(url(secure_kafka, "kafka", _topic("cli"), password_file=wrong_password_file(tmp_path)),
                          "not-the-password")
    assert "refused the user 'elect'" in said
    assert secure_kafka.security is not None
    assert secure_kafka.security.password() not in said
