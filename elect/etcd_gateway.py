"""A small client of etcd's v3 JSON gateway (`/v3/...`): requests with a time budget, endpoint failover,
the watch stream, TLS and authentication.

Standard library only: one keep-alive HTTP connection at a time, moved to the next endpoint when a
request fails or the member has no leader, so a killed or isolated etcd member costs one attempt.
The watch is a long POST answered with one JSON object per line.

With `Access`: HTTPS with the given TLS context (the server's certificate checked, this client's certificate shown
to a server started with `--client-cert-auth`), and a user: `/v3/auth/authenticate` gives a token sent as the
`Authorization` header, fetched again when etcd says it is invalid (expired, or the auth store moved on). Gateways
given one `Tokens` share the token: etcd checks the password with bcrypt, about 100 ms of its CPU per authentication
on these machines, and a member whose every connection authenticated on its own made etcd check three passwords per
member start, its first renewals waiting behind them. What cannot succeed by trying again (a wrong password, a
certificate refused, TLS on one side only) is `Refused`, raised at once with what was refused; the password is in no
message.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from elect.json_http import JSON, json_lines, parse_object, shut
from elect.secrets import AccessOptions, tls_refusal

#: gRPC codes after which another member may answer: Unavailable, DeadlineExceeded, Unknown, Aborted.
_RETRY_CODES = {14, 4, 2, 10}
_NOT_FOUND = 5


class Unreachable(Exception):
    """No endpoint answered within the budget."""


class Refused(Exception):
    """etcd, or the TLS handshake with it, refused this client (says what); trying again will not help."""


@dataclass(frozen=True)
class Access:
    """How to reach etcd: TLS (None: plain HTTP) and the user to authenticate as (None: no authentication)."""

    tls: ssl.SSLContext | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, options: AccessOptions) -> Access:
        """The access the options describe (reads the password now)."""
        return cls(options.ssl_context(), options.user, options.password())

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


#: etcd's words for a token that must be fetched again (expired, or issued before the auth store changed).
_STALE_TOKEN = ("invalid auth token", "revision of auth store is old")


class Tokens:
    """The auth token of one client, shared by the gateways of its connections (see the module): the first that
    needs one authenticates, the others wait for it; a token etcd called stale is fetched again once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.token: str | None = None

    def get(self, fetch: Callable[[], str], deadline: float, stale: str | None = None) -> str:
        """The token, fetched with `fetch` if there is none yet or it is still `stale` (the one etcd refused)."""
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise Unreachable("no etcd token within the budget: another connection is still authenticating")
        try:
            if self.token is None or self.token == stale:
                self.token = None
                self.token = fetch()
            return self.token
        finally:
            self._lock.release()


class GatewayError(Exception):
    """etcd refused the request (the message is etcd's)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.code == _NOT_FOUND


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def range_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def revision(data: JSON) -> int:
    return int(data.get("header", {}).get("revision", 0))


def _attempt_budget(remaining: float, attempt: int, endpoints: int) -> float:
    """One attempt's share of a request's budget: on the first round, the rest split among the endpoints not
    yet tried (but at least half a second, where that much is left), so a member that accepts connections and
    does not answer (restarting, or without a leader) cannot spend the whole budget; on the second round, all
    that is left."""
    untried = endpoints - attempt
    if untried <= 1:
        return remaining
    return max(remaining / untried, min(remaining, 0.5))


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


class Gateway:
    """Requests to whichever endpoint answers; `requests` counts what was sent."""

    def __init__(self, endpoints: tuple[str, ...], access: Access | None = None, tokens: Tokens | None = None) -> None:
        self.endpoints = tuple(_split(e) for e in endpoints)
        self.access = access or Access()
        self._index = 0
        self._conn: http.client.HTTPConnection | None = None
        self._tokens = tokens if tokens is not None else Tokens()
        self.requests = 0

    @property
    def current(self) -> int:
        return self._index

    def where(self, index: int | None = None) -> str:
        host, port = self.endpoints[self._index if index is None else index]
        return f"{self.access.scheme}://{host}:{port}"

    def connection(self, index: int, timeout: float) -> http.client.HTTPConnection:
        """A new connection to endpoint `index` (HTTPS with this gateway's TLS context, if any)."""
        host, port = self.endpoints[index]
        if self.access.tls is not None:
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self.access.tls)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def headers(self) -> dict[str, str]:
        """The headers of a request: JSON, and the auth token once there is one."""
        headers = {"Content-Type": "application/json"}
        token = self._tokens.token
        if token:
            headers["Authorization"] = token
        return headers

    def call(self, path: str, body: JSON, timeout: float) -> JSON:
        """POST `body` to `/v3/<path>`; tries each endpoint at most twice within `timeout` seconds, each attempt
        within its share (`_attempt_budget`). With a user, authenticates first, and again once if etcd says the
        token went stale."""
        deadline = time.monotonic() + timeout
        if self.access.user and self._tokens.token is None:
            self._authenticate(deadline)
        used = self._tokens.token
        try:
            return self._call(path, body, deadline)
        except GatewayError as exc:
            if not (self.access.user and any(words in exc.message for words in _STALE_TOKEN)):
                raise self._refusal(exc) from None
        self._authenticate(deadline, stale=used)
        try:
            return self._call(path, body, deadline)
        except GatewayError as exc:
            raise self._refusal(exc) from None

    def ensure_authenticated(self, timeout: float) -> None:
        """Fetch a token now if there is a user and no token yet (`call` does it on its own)."""
        if self.access.user and self._tokens.token is None:
            self._authenticate(time.monotonic() + timeout)

    def _authenticate(self, deadline: float, stale: str | None = None) -> None:
        self._tokens.get(lambda: self._fetch_token(deadline), deadline, stale)

    def _fetch_token(self, deadline: float) -> str:
        body = {"name": self.access.user, "password": self.access.password or ""}
        try:
            data = self._call("auth/authenticate", body, deadline)
        except GatewayError as exc:
            if "authentication is not enabled" in exc.message:
                return ""  # nothing to prove to this etcd: go on without a token
            if "authentication failed" in exc.message:
                raise Refused(f"etcd at {self.where()} refused the user {self.access.user!r}: authentication "
                              "failed (wrong user or password)") from None
            raise self._refusal(exc) from None
        return str(data.get("token") or "")

    def _refusal(self, exc: GatewayError) -> Exception:
        """`Refused` for what etcd says about who is asking; the GatewayError itself otherwise."""
        anonymous = not self.access.user and "permission denied" in exc.message
        if anonymous or "user name is empty" in exc.message or "user name not found" in exc.message:
            return Refused(f"etcd at {self.where()} requires authentication: give user= and password_file= "
                           f"(or password_env=) ({exc.message})")
        if "permission denied" in exc.message:
            who = f"the user {self.access.user!r}" if self.access.user else "an unauthenticated client"
            return Refused(f"etcd at {self.where()} denied {who} permission ({exc.message})")
        return exc

    def _call(self, path: str, body: JSON, deadline: float) -> JSON:
        payload = json.dumps(body).encode()
        errors: list[str] = []
        refusals: list[str] = []
        for attempt in range(2 * len(self.endpoints)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            host, port = self.endpoints[self._index]
            try:
                status, raw = self._post(path, payload, _attempt_budget(remaining, attempt, len(self.endpoints)))
            except (OSError, http.client.HTTPException) as exc:
                refused = _tls_refusal(exc, self.where(), self.access)
                if refused is not None:
                    refusals.append(refused)
                    if len(refusals) >= len(self.endpoints):
                        self._next()
                        raise Refused(refusals[0]) from None
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                self._next()
                continue
            data = parse_object(raw, "error")
            if status == 200:
                return data
            if status == 400 and b"CommonName of client" in raw:
                self._next()
                raise Refused(f"etcd at {self.where()} refuses a client certificate with a common name while "
                              "authentication is on (its JSON gateway cannot pass the name on): use a certificate "
                              "without one (elect certs make --no-common-name)")
            if status == 400 and b"HTTPS server" in raw:  # Go's answer to plain HTTP on a TLS port
                self._next()
                raise Refused(f"etcd at {host}:{port} speaks TLS and this client does not: give ca= (and cert=, "
                              "key= if it requires client certificates)")
            code, message = int(data.get("code", -1)), str(data.get("error") or data.get("message") or raw[:200])
            if code in _RETRY_CODES or "leader" in message:
                errors.append(f"{host}:{port}: {message}")
                self._next()
                continue
            raise GatewayError(code, message)
        if refusals:
            raise Refused(refusals[0])
        raise Unreachable("; ".join(errors) or "no answer within the time given")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, path: str, payload: bytes, timeout: float) -> tuple[int, bytes]:
        if self._conn is None:
            self._conn = self.connection(self._index, timeout)
        conn = self._conn
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        else:
            conn.timeout = timeout
        self.requests += 1
        conn.request("POST", "/v3/" + path, body=payload, headers=self.headers())
        response = conn.getresponse()
        return response.status, response.read()

    def _next(self) -> None:
        self.close()
        self._index = (self._index + 1) % len(self.endpoints)


def _tls_refusal(exc: BaseException, where: str, access: Access) -> str | None:
    """What a failed TLS handshake (or a TLS client meeting a plain server) says was refused; None for an
    error that another attempt may not meet (a time-out, a refused connection)."""
    if access.tls is not None and isinstance(exc, (ConnectionResetError, ssl.SSLEOFError)):
        return f"etcd at {where} closed the TLS connection (does it require a client certificate?)"
    if not isinstance(exc, ssl.SSLError):
        return None
    return tls_refusal(str(exc), "etcd", where, tls=access.tls is not None)


class WatchStream:
    """One watch of a key range on one endpoint: iterate it for the `result` objects etcd sends."""

    def __init__(self, gateway: Gateway, index: int, key: str, start_revision: int, connect_timeout: float,
                 read_timeout: float) -> None:
        self._gateway = gateway
        self._index = index
        request: JSON = {"key": b64(key), "range_end": b64(range_end(key))}
        if start_revision > 0:
            request["start_revision"] = start_revision
        self._body = json.dumps({"create_request": request}).encode()
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._conn: http.client.HTTPConnection | None = None

    def results(self) -> Iterator[JSON]:
        self._conn = conn = self._gateway.connection(self._index, self._connect_timeout)
        conn.request("POST", "/v3/watch", body=self._body, headers=self._gateway.headers())
        response = conn.getresponse()
        if response.status != 200:
            raise OSError(f"watch refused: HTTP {response.status} {response.read()[:200]!r}")
        for message in json_lines(conn, response, self._read_timeout, "error"):
            if "error" in message:
                raise OSError(f"watch ended: {message['error']}")
            yield message.get("result", {})

    def close(self) -> None:
        """Stop the stream from another thread (its reader gets an error or end of stream)."""
        shut(self._conn)
