"""A member process whose clock runs at a rate the harness sets, for the clock faults (`elect_bench/faults/clock.py`).

Every process on one machine shares one monotonic clock, so two members' clocks never disagree here on their own.
A member started with `FakeClock.env()` runs under libfaketime (Debian's `faketime` package) and our shim
(`shim.c`, compiled once with the system's C compiler): its clocks, sleeps and timed waits follow a spec file that
`set_rate` rewrites while it runs. That fakes a dynamically linked program that asks libc for the time: CPython
members and the Python anchors (kazoo). Go binaries read the clock without libc (the vDSO, raw syscalls) and the
JVM's timed waits are not all wrapped, so the Go and Java anchors cannot be struck this way.

libfaketime scales time from the instant it loaded: faked = start + offset + rate * (real - start), with every
clock (CLOCK_MONOTONIC included) answering that faked wall time. A rate change keeps the faked time continuous by
choosing the offset at the switch, and `to_real` carries the member's lines (`mono`, `until`, `ts`) back onto the
real clocks through the segments of rates set so far, so the checker judges real time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elect.errors import ConfigError

_SHIM = Path(__file__).with_name("shim.c")
#: Where Debian's libfaketime package puts the library (multiarch path of this machine's kind).
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def shim() -> Path:
    """The compiled shim, built on first use into the user's cache (named by its source's hash, so an edit rebuilds)."""
    source = _SHIM.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "elect"
    built = cache / f"fakeclock-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if built.exists():
        return built
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ConfigError("clock faults need a C compiler to build elect_bench/fakeclock/shim.c (apt-get install "
                          "gcc; ./setup installs it)", parameter="faults")
    cache.mkdir(parents=True, exist_ok=True)
    partial = built.with_suffix(f".{os.getpid()}.tmp")
    run = subprocess.run([cc, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(partial), str(_SHIM), "-ldl"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise ConfigError(f"building {_SHIM} failed: {run.stderr.strip()[-500:]}", parameter="faults")
    partial.replace(built)
    return built


def available() -> None:
    """Raise ConfigError, saying what to install, unless clock faults can run here."""
    if not LIBFAKETIME.exists():
        raise ConfigError(f"clock faults need libfaketime ({LIBFAKETIME} is missing: apt-get install faketime; "
                          "./setup installs it)", parameter="faults")
    shim()


@dataclass(frozen=True)
class _Segment:
    """From real wall time `real` (when the member's faked clock read `faked`) on, it ran at `rate`."""

    real: float
    faked: float
    rate: float


class FakeClock:
    """One member process's clock: its environment, its rate, and how to read its lines in real time.

    `starting()` before each start of the process (a restarted one begins at rate 1 again), `set_rate` while it
    runs, `to_real` for each line it prints. The harness's own clock stays the real one throughout.
    """

    def __init__(self, spec: Path) -> None:
        self.spec = spec
        self._started = Path(f"{spec}.start")
        self._segments: list[_Segment] = []
        self._loaded: float | None = None  # real wall time at which libfaketime loaded in this life
        self._wall_less_mono = time.time() - time.monotonic()  # the harness's monotonic: its wall time less this

    def env(self) -> dict[str, str]:
        """What the member's environment needs: the preloads (our shim first, its waits before libfaketime's)."""
        available()
        return {"LD_PRELOAD": f"{shim()}:{LIBFAKETIME}", "FAKETIME_TIMESTAMP_FILE": str(self.spec),
                "FAKETIME_NO_CACHE": "1"}  # read the spec at every call: a rate change takes effect at once

    def starting(self) -> None:
        """A new life begins: rate 1, no offset (its faked clocks read the real wall time until `set_rate`)."""
        self.spec.parent.mkdir(parents=True, exist_ok=True)
        self._started.unlink(missing_ok=True)
        self._write("+0 x1")
        self._segments = []
        self._loaded = None

    @property
    def rate(self) -> float:
        return self._segments[-1].rate if self._segments else 1.0

    def set_rate(self, rate: float) -> None:
        """From now on the member's clock advances `rate` seconds per real second, without a jump."""
        if not rate > 0:
            raise ValueError(f"a clock rate must be positive, not {rate}")
        loaded = self._load_time()
        now = time.time()
        faked = self._faked_at(now)
        offset = faked - loaded - rate * (now - loaded)
        self._write(f"{offset:+.6f} x{rate:.6f}")
        self._segments.append(_Segment(now, faked, rate))

    def to_real(self, line: dict[str, Any]) -> dict[str, Any]:
        """The line with its faked times carried onto the real clocks (`mono`, `until`: the harness's monotonic)."""
        real = dict(line)
        for key in ("mono", "until"):
            if key in line:
                real[key] = self._real_wall(float(line[key])) - self._wall_less_mono
        if "ts" in line:
            real["ts"] = self._real_wall(float(line["ts"]))
        return real

    def _load_time(self) -> float:
        if self._loaded is None:
            try:
                self._loaded = float(self._started.read_text())
            except (OSError, ValueError):
                raise RuntimeError(f"the member did not load the clock shim ({self._started} unreadable): was "
                                   "it started with FakeClock.env()?") from None
        return self._loaded

    def _faked_at(self, real_wall: float) -> float:
        if not self._segments:
            return real_wall  # rate 1, no offset: the faked clock reads the real one
        last = self._segments[-1]
        return last.faked + last.rate * (real_wall - last.real)

    def _real_wall(self, faked: float) -> float:
        # the faked clock only moves forward, so the segment a time belongs to is the last one begun at or before it
        for segment in reversed(self._segments):
            if faked >= segment.faked:
                return segment.real + (faked - segment.faked) / segment.rate
        return faked  # before the first change: faked and real agree

    def _write(self, spec: str) -> None:
        partial = self.spec.with_name(self.spec.name + ".tmp")
        partial.write_text(spec + "\n")
        partial.replace(self.spec)  # libfaketime opens the file at each call: it must never see half a spec
