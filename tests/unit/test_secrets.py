"""TLS and credential options (elect.secrets): where a password may come from, what is refused, and that no
secret reaches a repr, an error message, an endpoints file or `elect schemes`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elect.config import spec_from_url
from elect.errors import ConfigError
from elect.secrets import read_secret, tls_refusal
from elect_cluster.certs import make_authority
from elect_cluster.endpoints import Endpoints
from neli.options import KafkaOptions

SECRET = "s3cret-Value"


@pytest.fixture
def password_file(tmp_path: Path) -> str:
    path = tmp_path / "pw"
    path.write_text(SECRET + "\nignored second line\n")
    return str(path)


def test_the_password_is_the_first_line_of_the_file_or_the_variable(password_file: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_secret(password_file, None, what="password") == SECRET
    monkeypatch.setenv("ELECT_TEST_PW", SECRET)
    assert read_secret(None, "ELECT_TEST_PW", what="password") == SECRET
    assert read_secret(None, None, what="password") is None


def test_a_missing_file_or_variable_is_named_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the password from .*nope"):
        read_secret(str(tmp_path / "nope"), None, what="password")
    monkeypatch.delenv("ELECT_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError, match=r"ELECT_TEST_UNSET .* unset or empty"):
        read_secret(None, "ELECT_TEST_UNSET", what="password")


@pytest.mark.parametrize("scheme", ["etcd://127.0.0.1:2379/x", "zookeeper://127.0.0.1:2181/x",
                                    "kafka://127.0.0.1:9092/x?sasl_mechanism=PLAIN&user=u"])
@pytest.mark.parametrize("name", ["password", "sasl_password"])
def test_a_password_in_the_url_is_refused_without_echoing_it(scheme: str, name: str) -> None:
    sep = "&" if "?" in scheme else "?"
    with pytest.raises(ConfigError) as caught:
        spec_from_url(f"{scheme}{sep}{name}={SECRET}", member="a")
    assert caught.value.parameter == name
    assert "password_file" in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize("query, parameter", [
    ("user=u", "user"),  # a user needs a password
    ("password_env=X", "password_env"),  # a password needs a user
    ("user=u&password_env=X&password_file={pw}", "password_env"),  # one place only
    ("cert={pw}", "key"),  # a client certificate needs its key
    ("tls=false&ca={pw}", "tls"),
    ("ca=/no/such/ca.crt", "ca"),
])
def test_inconsistent_security_options_name_the_parameter(query: str, parameter: str, password_file: str) -> None:
    with pytest.raises(ConfigError) as caught:
        spec_from_url("etcd://127.0.0.1:2379/x?" + query.format(pw=password_file), member="a")
    assert caught.value.parameter == parameter, caught.value


def test_options_hold_where_the_password_is_never_the_password(password_file: str) -> None:
    for url in (f"etcd://127.0.0.1:2379/x?user=u&password_file={password_file}",
                f"zookeeper://127.0.0.1:2181/x?user=u&password_file={password_file}",
                f"kafka://127.0.0.1:9092/x?user=u&sasl_mechanism=SCRAM-SHA-256&password_file={password_file}"):
        options = spec_from_url(url, member="a").options
        assert SECRET not in repr(options)
        assert options.password() == SECRET


def test_kafka_client_security_maps_to_librdkafka(password_file: str, tmp_path: Path) -> None:
    ca = str(make_authority(tmp_path / "ca").cert)
    plain = KafkaOptions(servers=("h:1",))
    assert plain.client_security() == {"security.protocol": "PLAINTEXT"}
    tls = KafkaOptions(servers=("h:1",), ca=ca)
    assert tls.client_security()["security.protocol"] == "SSL"
    assert tls.client_security()["ssl.ca.location"] == ca
    sasl = KafkaOptions(servers=("h:1",), ca=ca, user="u", password_file=password_file,
                        sasl_mechanism="SCRAM-SHA-512")
    assert sasl.client_security() | {"sasl.password": "-"} == {
        "security.protocol": "SASL_SSL", "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": ca, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
        "sasl.password": "-"}
    assert sasl.client_security()["sasl.password"] == SECRET
    with pytest.raises(ConfigError) as caught:
        KafkaOptions(servers=("h:1",), user="u", password_file=password_file)
    assert caught.value.parameter == "sasl_mechanism"


@pytest.mark.parametrize("scheme", ["etcd://h:1/p", "zookeeper://h:1/p", "kafka://h:1/t", "kubernetes://h:1/ns"])
def test_tls_files_that_cannot_work_together_are_refused_for_every_scheme(scheme: str, tmp_path: Path) -> None:
    """Each refused when the URL is read, naming the option and the file (before anything connects)."""
    from elect.config import spec_from_url
    from elect_cluster.certs import make_certs

    make_certs(tmp_path, ["a", "b"])
    ca, crt, key = (str(tmp_path / name) for name in ("ca.crt", "a.crt", "a.key"))
    cases = {f"ca={tmp_path / 'a.key'}": ("ca", "no CA certificate can be read from"),
             f"ca={ca}&cert={crt}&key={tmp_path / 'b.key'}": ("key", "b.key does not belong to the certificate in"),
             f"ca={ca}&cert={ca}&key={tmp_path / 'ca.key'}": ("cert", "is the CA's own certificate"),
             f"ca={ca}&cert={tmp_path / 'pw'}&key={key}": ("cert", "are not a PEM certificate and its private key")}
    (tmp_path / "pw").write_text("not a certificate\n")
    for query, (parameter, words) in cases.items():
        with pytest.raises(ConfigError, match=words) as caught:
            spec_from_url(f"{scheme}?{query}", ["r"], member="m")
        assert caught.value.parameter == parameter, (query, caught.value)
    assert spec_from_url(f"{scheme}?ca={ca}&cert={crt}&key={key}", ["r"], member="m")  # the right files


def test_secured_endpoints_name_files_not_passwords() -> None:
    endpoints = Endpoints(kafka=("h:1",), etcd=("h:2",), zookeeper=("h:3",),
                          security=(("ca", "/d/ca.crt"), ("user", "elect"), ("password_file", "/d/elect.password")))
    urls = endpoints.urls()
    assert "password_file=/d/elect.password" in urls["etcd"] and "user=elect" in urls["zookeeper"]
    assert "sasl_mechanism=SCRAM-SHA-256" in urls["kafka"]
    assert Endpoints.from_dict(endpoints.to_dict()) == endpoints


def test_elect_schemes_lists_the_security_options_without_values() -> None:
    done = subprocess.run([sys.executable, "-m", "elect", "schemes", "kafka"], capture_output=True, text=True,
                          timeout=60, check=True)
    for name in ("ca", "cert", "key", "user", "password_file", "password_env", "sasl_mechanism"):
        assert f"  {name} " in done.stdout


@pytest.mark.parametrize("said, words", [
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", "not trusted"),
    ("[SSL: WRONG_VERSION_NUMBER] wrong version number", "does not speak TLS"),
    ("[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required", "requires a client certificate"),
    ("[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate", "refused the client certificate"),
])
def test_tls_failures_are_said_in_words(said: str, words: str) -> None:
    assert words in (tls_refusal(said, "etcd", "https://h:1", tls=True) or "")


def test_a_time_out_is_no_refusal() -> None:
    assert tls_refusal("timed out", "etcd", "h:1", tls=True) is None
    assert tls_refusal("_ssl.c:980: The handshake operation timed out", "etcd", "h:1", tls=True) is None
