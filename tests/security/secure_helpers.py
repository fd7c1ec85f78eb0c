"""Helpers of the secured-store tests: URLs with one thing changed, and a start that must be refused quickly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

import elect
from elect.errors import AccessRefused, InfrastructureUnavailable
from elect_cluster.local import LocalCluster

CONNECT_TIMEOUT = 5.0


def url(cluster: LocalCluster, scheme: str, prefix: str, drop: tuple[str, ...] = (), **change: str) -> str:
    """The secured cluster's URL of `scheme` under a fresh `prefix`, without the parameters in `drop` and with
    those in `change`."""
    endpoints = cluster.endpoints
    params = {k: v for k, v in endpoints.params(scheme).items() if k not in drop}
    params.update(change)
    params["connect_timeout"] = str(CONNECT_TIMEOUT)
    hosts = ",".join(getattr(endpoints, scheme))
    extra = {"group": prefix} if scheme == "kafka" else {}
    return f"{scheme}://{hosts}/{prefix}?" + urlencode({**extra, **params}, safe="/,")


def wrong_password_file(tmp: Path) -> str:
    path = tmp / "wrong.password"
    path.write_text("not-the-password\n")
    return str(path)


def refused(url_text: str, *, words: tuple[str, ...], kind: type[Exception] = AccessRefused) -> str:
    """Start an elector on `url_text`: it must raise `kind` within the connect timeout (plus slack), with a message
    holding every one of `words`; returns the message."""
    elector = elect.connect(url_text, ["r0"], member="intruder")
    began = time.monotonic()
    with pytest.raises(kind) as caught:
        elector.start()
    took = time.monotonic() - began
    message = str(caught.value)
    assert took < CONNECT_TIMEOUT + 3, (took, message)
    for word in words:
        assert word in message, (word, message)
    return message


def member_refused(url_text: str, secret: str) -> str:
    """`elect member` on `url_text` exits 3 (infrastructure refused) with a message, and prints no `secret`."""
    done = subprocess.run([sys.executable, "-m", "elect", "member", url_text, "--id", "intruder", "--roles", "r0"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert secret not in done.stdout + done.stderr
    return done.stderr


__all__ = ["CONNECT_TIMEOUT", "AccessRefused", "InfrastructureUnavailable", "member_refused", "refused", "url",
           "wrong_password_file"]
