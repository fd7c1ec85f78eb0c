"""A small client of the Kubernetes API for `kubernetes://`: where the API server is and how to prove who we are
(a kubeconfig, the pod's service account, or explicit options), JSON requests with a time budget, and the watch.

Standard library only, like the etcd gateway: a Lease is a small JSON object, and one keep-alive HTTPS connection
per thread with a streamed watch is all the elector needs; the official client's generated models and its
urllib3 pool would add a dependency and per-request cost for nothing it uses. Tokens are read from their file
again when the server answers 401 (service-account tokens rotate), and are never part of a message.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

import yaml

from cas_lease.options import KubernetesOptions
from elect.errors import ConfigError
from elect.json_http import JSON, json_lines, parse_object, shut
from elect.secrets import tls_refusal

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class Unreachable(Exception):
    """The API server did not answer within the budget."""


class Refused(Exception):
    """The API server (or the TLS handshake) refused this client; trying again will not help. Says what."""


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is, how to check it, and who we are: the TLS context (CA, client certificate) and
    where the bearer token comes from (a file, read again on 401; or a fixed token from a kubeconfig)."""

    host: str
    port: int
    tls: ssl.SSLContext
    token_file: str | None = None
    token: str | None = field(default=None, repr=False)
    source: str = ""

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"


def resolve(options: KubernetesOptions) -> Endpoint:
    """The endpoint the options describe: an explicit server (with ca/cert/key/token_file), else the named or
    default kubeconfig, else the pod's service account; ConfigError naming what is missing."""
    if options.kubeconfig:
        return _from_kubeconfig(Path(options.kubeconfig), options)
    if options.server is not None:
        host, _, port = options.server.rpartition(":")
        return Endpoint(host.strip("[]"), int(port), _context(options.ca, options.cert, options.key),
                        token_file=options.token_file, source=f"server={options.server}")
    if os.environ.get("KUBERNETES_SERVICE_HOST") and SERVICE_ACCOUNT.is_dir():
        ca = str(SERVICE_ACCOUNT / "ca.crt")
        return Endpoint(os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ.get("KUBERNETES_SERVICE_PORT", "443")),
                        _context(options.ca or ca, options.cert, options.key),
                        token_file=options.token_file or str(SERVICE_ACCOUNT / "token"), source="in-cluster")
    default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(Path.home() / ".kube" / "config")
    if Path(default).is_file():
        return _from_kubeconfig(Path(default), options)
    raise ConfigError("no Kubernetes API server to reach: give HOST:PORT in the URL, kubeconfig=PATH (or set "
                      "$KUBECONFIG), or run in a pod with a service account", parameter="server")


def _context(ca: str | None, cert: str | None, key: str | None, *, verify: bool = True) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=ca)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot read CA certificates from {ca}: {exc}", parameter="ca") from None
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert and key:
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"cannot use {cert} with {key} as a client certificate: {exc}",
                              parameter="cert") from None
    return context


def _from_kubeconfig(path: Path, options: KubernetesOptions) -> Endpoint:
    """The cluster and user of the kubeconfig's context (`options.context`, else its current context); options
    given explicitly (server, ca, cert, key, token_file) win over the file's."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the kubeconfig {path}: {exc}", parameter="kubeconfig") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} is not a kubeconfig", parameter="kubeconfig")

    def named(kind: str, name: str) -> JSON:
        for entry in config.get(kind + "s") or []:
            if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(kind), dict):
                found: JSON = entry[kind]
                return found
        raise ConfigError(f"the kubeconfig {path} has no {kind} named {name!r}", parameter="kubeconfig")

    context_name = options.context or config.get("current-context")
    if not context_name:
        raise ConfigError(f"the kubeconfig {path} names no current context: give context=NAME",
                          parameter="context")
    context = named("context", str(context_name))
    cluster = named("cluster", str(context.get("cluster", "")))
    user = named("user", str(context.get("user", ""))) if context.get("user") else {}
    base = path.parent
    server = urlsplit(str(cluster.get("server", "")))
    if options.server is not None:
        host, _, port = options.server.rpartition(":")
        host, port_number = host.strip("[]"), int(port)
    elif server.scheme == "https" and server.hostname:
        host, port_number = server.hostname, server.port or 443
    else:
        raise ConfigError(f"the kubeconfig {path}: cluster of context {context_name!r} has no https server "
                          f"(got {cluster.get('server')!r})", parameter="kubeconfig")
    files = _Materialized()
    ca = options.ca or files.path(base, cluster, "certificate-authority")
    cert = options.cert or files.path(base, user, "client-certificate")
    key = options.key or files.path(base, user, "client-key")
    token_file = options.token_file or (str(base / user["tokenFile"]) if user.get("tokenFile") else None)
    token = None if token_file else (str(user["token"]) if user.get("token") else None)
    plugin = next((name for name in ("exec", "auth-provider") if user.get(name)), None)
    if plugin and not (token or token_file or cert):
        raise ConfigError(f"the kubeconfig {path}: user of context {context_name!r} authenticates through an "
                          f"{plugin} plugin, which elect does not run: give token_file= (e.g. a service account's "
                          "token) or cert= and key=", parameter="kubeconfig")
    tls = _context(ca, cert, key, verify=not cluster.get("insecure-skip-tls-verify"))
    files.remove()
    return Endpoint(host, port_number, tls, token_file=token_file, token=token,
                    source=f"kubeconfig {path} context {context_name}")


class _Materialized:
    """A kubeconfig's inline `*-data` certificates written to private files for the TLS context to load."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def path(self, base: Path, section: JSON, name: str) -> str | None:
        if section.get(name):
            return str(base / str(section[name]))
        data = section.get(name + "-data")
        if not data:
            return None
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="elect-kube-")
        target = Path(self._dir.name) / name
        target.write_bytes(base64.b64decode(str(data)))
        target.chmod(0o600)
        return str(target)

    def remove(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


class Client:
    """Requests to one API server: `request` from any thread (one keep-alive connection per thread)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._local = threading.local()
        self._connections: list[http.client.HTTPSConnection] = []
        self._lock = threading.Lock()
        self._token = endpoint.token
        self._token_read = 0.0
        self.requests = 0

    # ------------------------------------------------------------------------------------------ credentials
    def _bearer(self, fresh: bool = False) -> str | None:
        """The bearer token: from its file (read again every minute, or at once after a 401), or the fixed one."""
        path = self.endpoint.token_file
        if path is None:
            return self._token
        if fresh or self._token is None or time.monotonic() - self._token_read > 60:
            try:
                self._token = Path(path).read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                raise Refused(f"cannot read the bearer token from {path}: {exc.strerror}") from None
            self._token_read = time.monotonic()
        return self._token

    def headers(self, fresh: bool = False) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        token = self._bearer(fresh)
        if token:
            headers["Authorization"] = "Bearer " + token
        return headers

    # ------------------------------------------------------------------------------------------ requests
    def connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.endpoint.host, self.endpoint.port, timeout=timeout,
                                           context=self.endpoint.tls)

    def request(self, method: str, path: str, body: JSON | None, timeout: float,
                query: dict[str, str] | None = None) -> tuple[int, JSON]:
        """One request within `timeout` seconds: (HTTP status, JSON body). Unreachable when no answer came;
        Refused for 401/403 (naming the verb and the resource) and for TLS refusals."""
        deadline = time.monotonic() + timeout
        url = path + ("?" + urlencode(query) if query else "")
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        fresh = False
        for attempt in range(2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                status, raw = self._send(method, url, payload, remaining, fresh)
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                refused = _tls_refusal(exc, self.endpoint.url)
                if refused is not None:
                    raise Refused(refused) from None
                if attempt == 0 and isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError,
                                                     ConnectionResetError)):
                    continue  # a kept-alive connection the server had closed: once more on a new one
                raise Unreachable(f"{self.endpoint.url}: {exc or type(exc).__name__}") from None
            data = parse_object(raw, "message")
            if status == 401 and self.endpoint.token_file and not fresh:
                fresh = True  # the token may have rotated: read it again, once
                continue
            if status in (401, 403):
                raise Refused(_refusal(status, method, path, data, self.endpoint))
            return status, data
        raise Unreachable(f"{self.endpoint.url}: no answer within {timeout:g} s")

    def _send(self, method: str, url: str, payload: bytes | None, timeout: float,
              fresh: bool) -> tuple[int, bytes]:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.connection(timeout)
            with self._lock:
                self._connections.append(conn)
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        else:
            conn.timeout = timeout
        self.requests += 1
        conn.request(method, url, body=payload, headers=self.headers(fresh))
        response = conn.getresponse()
        return response.status, response.read()

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()


class Watch:
    """One watch of a namespace's Leases (those matching the label `selector`, if given) from `resource_version` on:
    iterate `events()` for (type, object), where type is ADDED, MODIFIED, DELETED or BOOKMARK; an expired resource
    version ends it with `Expired`."""

    def __init__(self, client: Client, namespace: str, resource_version: str, connect_timeout: float,
                 read_timeout: float, selector: str = "") -> None:
        self._client = client
        query = {"watch": "1", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": "300", **({"labelSelector": selector} if selector else {})}
        self._url = leases(namespace) + "?" + urlencode(query)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._conn: http.client.HTTPSConnection | None = None

    def events(self) -> Iterator[tuple[str, JSON]]:
        self._conn = conn = self._client.connection(self._connect_timeout)
        self._client.requests += 1
        conn.request("GET", self._url, headers=self._client.headers())
        response = conn.getresponse()
        if response.status in (401, 403):
            said = parse_object(response.read(), "message")
            raise Refused(_refusal(response.status, "WATCH", self._url, said, self._client.endpoint))
        if response.status != 200:
            raise OSError(f"watch refused: HTTP {response.status} {response.read()[:200]!r}")
        for event in json_lines(conn, response, self._read_timeout, "message"):
            kind, obj = str(event.get("type", "")), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Expired(str(obj.get("message", "resource version too old")))
                raise OSError(f"watch error: {obj.get('message', obj)}")
            yield kind, obj

    def close(self) -> None:
        """Stop the stream from another thread (its reader gets an error or end of stream)."""
        shut(self._conn)


class Expired(Exception):
    """The watch's resource version is too old (410 Gone): list again."""


def leases(namespace: str) -> str:
    return LEASES.format(namespace=quote(namespace, safe=""))


def _refusal(status: int, method: str, path: str, data: JSON, endpoint: Endpoint) -> str:
    said = str(data.get("message") or data)
    if status == 401:
        return (f"the Kubernetes API at {endpoint.url} did not accept this client's credentials ({endpoint.source}): "
                f"{said}")
    verb = {"GET": "get/list", "POST": "create", "PUT": "update", "DELETE": "delete", "WATCH": "watch"}.get(method,
                                                                                                            method)
    return (f"the Kubernetes API at {endpoint.url} forbids {verb} on leases.coordination.k8s.io ({said}); a member "
            "needs a Role granting get, list, watch, create, update and delete on leases in its namespace")


def _tls_refusal(exc: BaseException, where: str) -> str | None:
    if isinstance(exc, (ConnectionResetError, ssl.SSLEOFError)):
        return None
    if not isinstance(exc, ssl.SSLError):
        return None
    return tls_refusal(str(exc), "the Kubernetes API server", where, tls=True)
