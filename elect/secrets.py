"""TLS and credentials of the schemes that reach a store or broker (etcd://, zookeeper://, kafka://).

One set of options, one way to read a secret. A password is never part of a URL or a YAML value: those are
printed (event lines, reports, `elect schemes`, error messages), so the configuration names where the password
is, a file (`password_file=PATH`) or an environment variable (`password_env=NAME`), and it is read only when a
client is made, held by no options object, and never formatted into a message.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from elect.errors import ConfigError
from elect.options import rule


def read_secret(file: str | None, env: str | None, *, what: str) -> str | None:
    """The secret in `file` (its first line, without the line end) or in the environment variable `env`; None if
    neither is named. A file that cannot be read, or a variable that is unset or empty, is a ConfigError naming the
    file or the variable (never its content)."""
    if file:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ConfigError(f"cannot read the {what} from {file}: {reason}", parameter="password_file") from None
        secret = text.splitlines()[0] if text else ""
        rule(bool(secret), "password_file", f"{file} holds no {what} (its first line is empty)")
        return secret
    if env:
        secret = os.environ.get(env, "")
        rule(bool(secret), "password_env", f"the environment variable {env} that should hold the {what} is "
                                           "unset or empty")
        return secret
    return None


def check_certificate(ca: str | None, cert: str | None, key: str | None, *, name: str | None = None) -> None:
    """Refuse, naming the file at fault, TLS files that cannot work together (those given): a CA file with no
    certificate, a certificate and key that are not PEM or do not belong together, the CA's own certificate given as
    a member's (it would start, and every peer would refuse it or, worse, take it for the CA) and, with `name`, a
    certificate that does not name this member (its peers would refuse it as another's). Checked where the options
    are read, before anything connects or listens."""
    if ca:
        try:
            ssl.create_default_context(cafile=ca)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"no CA certificate can be read from {ca}: {exc}", parameter="ca") from None
    if not (cert and key):
        return
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise ConfigError(f"the key in {key} does not belong to the certificate in {cert}", parameter="key") \
                from None
        raise ConfigError(f"{cert} and {key} are not a PEM certificate and its private key: {exc}",
                          parameter="cert") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {cert} or {key}: {exc}", parameter="cert") from None
    if ca and _certificates(cert)[:1] and _certificates(cert)[0] in _certificates(ca):
        raise ConfigError(f"{cert} is the CA's own certificate (the one in {ca}): give this member a certificate "
                          "of its own, signed by that CA (`elect certs make`)", parameter="cert")
    names = certificate_names(cert)
    if name is not None and names is not None and name not in names:
        raise ConfigError(f"{cert} names {', '.join(sorted(names)) or 'nobody'}, not this member {name!r}: its peers "
                          "would refuse it as another member's (`elect certs make --members` writes one per id)",
                          parameter="cert")


def certificate_names(cert: str) -> set[str] | None:
    """The common name and DNS names of the first certificate in `cert`, or None if this Python cannot read them
    (the standard library decodes a certificate file only through a private helper of `ssl`)."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return None
    try:
        info = decode(cert)
    except (ssl.SSLError, OSError, ValueError):
        return None
    names = {value for rdn in info.get("subject", ()) for key, value in rdn if key == "commonName"}
    return names | {value for kind, value in info.get("subjectAltName", ()) if kind == "DNS"}


def _certificates(path: str) -> list[bytes]:
    """The DER of each PEM certificate in a file."""
    text = Path(path).read_text(errors="replace")
    end = "-----END CERTIFICATE-----"
    blocks = [block + end for block in text.split(end) if "-----BEGIN CERTIFICATE-----" in block]
    found = []
    for block in blocks:
        try:
            found.append(ssl.PEM_cert_to_DER_cert(block[block.index("-----BEGIN CERTIFICATE-----"):]))
        except ValueError:
            continue
    return found


def tls_refusal(said: str, service: str, where: str, *, tls: bool) -> str | None:
    """What a failed connection's error text (`said`) tells of a TLS refusal, as a sentence naming `service` at
    `where` and what to change; None when it tells of none (a time-out, a refused connection: try again)."""
    text = said.upper()
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (f"the certificate of {service} at {where} is not trusted ({said}): give ca= the CA that signed it, "
                "and dial a name the certificate holds")
    if "WRONG_VERSION_NUMBER" in text or "RECORD_LAYER_FAILURE" in text or "PACKET_LENGTH_TOO_LONG" in text:
        return f"{service} at {where} does not speak TLS: drop tls/ca/cert, or give the server TLS"
    if "CERTIFICATE_REQUIRED" in text:
        return f"{service} at {where} requires a client certificate: give cert= and key="
    if any(word in text for word in ("BAD_CERTIFICATE", "UNKNOWN_CA", "HANDSHAKE_FAILURE", "CERTIFICATE_UNKNOWN")):
        return (f"{service} at {where} refused the client certificate, or that there was none ({said}): give "
                "cert= and key= signed by a CA the server trusts")
    if tls and "[SSL" in text:  # another of OpenSSL's refusals ("_ssl.c: ... timed out" is no refusal)
        return f"TLS with {service} at {where} failed: {said}"
    return None


@dataclass(frozen=True)
class AccessOptions:
    """TLS and credentials (a mix-in of the options of etcd://, zookeeper:// and kafka://).

    tls: speak TLS to the servers (default: on when `ca` or `cert` is given; `tls=true` alone trusts the system's
    CAs). ca: PEM file of the CA that signed the servers' certificates; the name dialled (host or IP) must be in
    the server's certificate. cert, key: PEM files of this client's certificate and key, for servers that require
    one (mutual TLS; `elect certs make` writes such files). user: the name to authenticate as (etcd user,
    ZooKeeper digest user, Kafka SASL user). password_file, password_env: where that user's password is (a file
    whose first line it is, or an environment variable); never the password itself.
    """

    tls: bool | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password_file: str | None = None
    password_env: str | None = None

    def _check_access(self) -> None:
        rule(bool(self.cert) == bool(self.key), "cert" if self.key else "key",
             "a client certificate needs both cert and key")
        rule(self.tls is not False or not (self.ca or self.cert), "tls",
             "tls=false contradicts ca/cert, which are for TLS")
        for name in ("ca", "cert", "key", "password_file"):
            path = getattr(self, name)
            rule(path is None or Path(path).is_file(), name, f"no such file: {path}")
        check_certificate(self.ca, self.cert, self.key)  # files that cannot work together, named before any connect
        rule(not (self.password_file and self.password_env), "password_env",
             "name the password once: password_file or password_env, not both")
        rule(self.user is None or bool(self.user.strip()), "user", "cannot be empty")
        rule(not self.user or bool(self.password_file or self.password_env), "user",
             f"user {self.user!r} needs a password: password_file=PATH or password_env=NAME")
        rule(bool(self.user) or not (self.password_file or self.password_env),
             "password_file" if self.password_file else "password_env", "a password needs user=NAME")

    @property
    def uses_tls(self) -> bool:
        return bool(self.ca or self.cert) if self.tls is None else self.tls

    @property
    def authenticates(self) -> bool:
        return bool(self.user)

    def password(self) -> str | None:
        """The user's password, read now from where the options name it (None without a user)."""
        if not self.user:
            return None
        return read_secret(self.password_file, self.password_env, what=f"password of user {self.user!r}")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context (the server's certificate checked against `ca`, or the system's CAs, and the name
        dialled; this client's certificate if given), or None without TLS."""
        if not self.uses_tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.ca)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"cannot read CA certificates from {self.ca}: {exc}", parameter="ca") from None
        if self.cert and self.key:
            try:
                context.load_cert_chain(self.cert, self.key)
            except (ssl.SSLError, OSError) as exc:
                raise ConfigError(f"cannot use {self.cert} with {self.key} as a client certificate: {exc}",
                                  parameter="cert") from None
        return context
