"""Micro-benchmark of the history checker (pytest-benchmark). In the suite it runs once as a test
(`--benchmark-disable` is the default); measure with: python -m pytest tests/micro --benchmark-enable"""

from __future__ import annotations

import random
from typing import Any

from elect_bench.judging.checker import check
from elect_bench.judging.history import History


def big_history(members: int = 10, roles: int = 100, handovers: int = 50, seed: int = 7) -> History:
    """Each role passes from member to member `handovers` times: 10,000 lines, no violation."""
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = []
    for role in range(roles):
        t = rng.random()
        for token in range(1, handovers + 1):
            member = f"m{rng.randrange(members)}"
            lines.append({"ts": t, "mono": t, "member": member, "role": str(role), "event": "acquired",
                          "token": token})
            t += rng.uniform(0.5, 2.0)
            lines.append({"ts": t, "mono": t, "member": member, "role": str(role), "event": "revoked",
                          "token": token})
            t += rng.uniform(0.0, 0.1)
    return History(lines)


def test_checker_on_10k_lines(benchmark: Any) -> None:
    history = big_history()
    assert len(history.lines) == 10_000
    found = benchmark(check, history, exclusive=True, leaderless_bound=1000.0, healed_at=0.0)
    assert found == []
