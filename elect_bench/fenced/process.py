"""The fenced store as a child process of the harness or a test: on a port from the OS, always stopped."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from elect_bench.fenced import client
from elect_bench.fenced.client import Address


class StoreProcess:
    """`python -m elect_bench.fenced.store` with its attempt log (`log_path`) and stderr in `workdir`, on `port`
(0: one from the OS; `port` is then the one it got).

    `start` returns once the store announced its port; `stop` (SIGTERM, then SIGKILL) is safe to call at any
    time, also when `start` failed half way, and more than once.
    """

    def __init__(self, workdir: Path, *, fenced: bool = True, host: str = "127.0.0.1", port: int = 0,
                 python: str = sys.executable) -> None:
        self.workdir = Path(workdir)
        self.fenced = fenced
        self.host = host
        self.log_path = self.workdir / "store-attempts.jsonl"
        self.stderr_path = self.workdir / "store.log"
        self.port = 0
        self._argv = [python, "-m", "elect_bench.fenced.store", "--host", host, "--port", str(port),
                      "--log", str(self.log_path), *([] if fenced else ["--unfenced"])]
        self.proc: subprocess.Popen[str] | None = None

    @property
    def address(self) -> Address:
        return self.host, self.port

    @property
    def where(self) -> str:
        """`HOST:PORT`, as `elect member --write-to` takes it."""
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "a") as stderr:
            self.proc = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, start_new_session=True)
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(self._stdout().readline()), daemon=True,
                                  name="fenced-store-port")
        reader.start()
        reader.join(timeout)
        try:
            self.port = int(json.loads(first[0])["port"]) if first and first[0] else 0
        except (ValueError, KeyError, TypeError):
            self.port = 0
        if not self.port:
            self.stop()
            why = "exited" if self.proc.poll() is not None else f"said nothing for {timeout:g} s"
            raise RuntimeError(f"the fenced store {why}; first line {first[:1]!r}; stderr:\n{self._stderr_tail()}")
        return self

    def dump(self, timeout: float = 10.0) -> dict[str, list[dict[str, Any]]]:
        return client.dump(self.address, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def _stdout(self) -> IO[str]:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout

    def _stderr_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
