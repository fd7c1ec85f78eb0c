"""Plots a reader takes the trade-offs from at a glance: failover CDF, distribution, one timeline each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from elect_bench.envelope import EnvelopeResult
from elect_bench.idle import IdleResult
from elect_bench.judging.history import History
from elect_bench.simulation.raft_runner import SimResult
from elect_bench.suite import RunResult
from elect_bench.trial import TrialResult


def draw_simulation(result: SimResult, out: Path) -> list[Path]:
    """One failover CDF per group shape (simulated seconds), methods side by side; none without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    shapes = list(dict.fromkeys(c.shape for c in result.cells))
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.5 * len(shapes), 3.8), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        for cell in (c for c in result.cells if c.shape == shape and c.failover):
            xs = sorted(cell.failover)
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=cell.method)
        ax.axvline(result.scenario.budget, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{shape.nodes} nodes x {shape.partitions} partitions, RF {shape.rf}, {shape.trials} trials",
                     fontsize=9)
        ax.set_xlabel("failover after a crash (simulated s)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("share of failovers")
    path = out / "simulation-failover-cdf.png"
    _save(plt, fig, path)
    return [path]


def draw_envelope(result: EnvelopeResult, out: Path) -> list[Path]:
    """The envelope's three pictures: kill failover p99 / D against roles, false failovers against D, and what a
    member costs at rest against roles; none without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    rows = result.summaries()
    methods = result.methods()
    paths = []

    headline = result.headline()
    if headline is not None:  # a run of the floor pass alone has no failover to draw
        fig, ax = plt.subplots(figsize=(7, 4))
        for method in methods:
            points = sorted((r["roles"], r["failover_p99_ratio"])
                            for r in result.along("roles", method, failed_over=True, rows=rows))
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
        for level, style in ((1.1, "--"), (1.3, ":")):
            ax.axhline(level, color="grey", linestyle=style, linewidth=1, label=f"{level} D")
        _log_roles(ax)
        ax.set_xlabel("roles (log)")
        ax.set_ylabel(f"{headline.name} failover p99 / D")
        ax.set_title(f"Failover as the roles grow ({result.scenario.origin.members} members, "
                     f"D = {result.scenario.origin.budget:g} s)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        path = out / "envelope-failover.png"
        _save(plt, fig, path)
        paths.append(path)

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, method in enumerate(methods):
        points = sorted((r["budget"], r["false_per_member_hour"]) for r in result.along("budget", method, rows=rows))
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=f"C{i}", label=method)
        busy = sorted((run_.budget, run_.trial.rest_changes * 3600 / max(1e-9, run_.trial.rest * run_.trial.members))
                      for run_ in result.floor if run_.method == method and run_.busy and run_.trial is not None
                      and run_.trial.ok and run_.trial.rest > 0)
        if busy:
            ax.plot([p[0] for p in busy], [p[1] for p in busy], marker="x", linestyle="", color=f"C{i}",
                    label=f"{method} (busy, floor pass)")
    ax.set_xscale("log")
    ax.set_xlabel("detection budget D, s (log)")
    ax.set_ylabel("false failovers per member-hour at rest")
    ax.set_title("Leaderships lost with nothing struck", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path = out / "envelope-false-failovers.png"
    _save(plt, fig, path)
    paths.append(path)

    cost = result.cost_rows()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for method in methods:
        cpu = sorted((r["roles"], r["rest_cpu_mean"]) for r in result.along("roles", method, rows=rows))
        if cpu:
            axes[0].plot([p[0] for p in cpu], [100 * p[1] for p in cpu], marker="o", label=method)
        sent = sorted((r["roles"], r["sent_rps_mean"]) for r in cost if r["method"] == method and r["ok"])
        if sent:
            axes[1].plot([p[0] for p in sent], [p[1] for p in sent], marker="o", label=method)
    for ax, label in ((axes[0], "CPU per member at rest, % of a core"),
                      (axes[1], "requests/s per member at rest (relays)")):
        _log_roles(ax)
        ax.set_xlabel("roles (log)")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title("What a member costs as the roles grow", fontsize=9)
    path = out / "envelope-cost.png"
    _save(plt, fig, path)
    paths.append(path)
    return paths


def _log_roles(ax: Any) -> None:
    """A log axis of role counts, labelled with plain numbers (6, 60, 600, 6,000)."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))


def draw_idle(result: IdleResult, out: Path) -> list[Path]:
    """CPU share of one core and RSS per node against the partitions, one line per method (cells that did not
    come to rest are left out); none without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    fig, (cpu, rss) = plt.subplots(1, 2, figsize=(9, 3.6))
    for method in result.scenario.methods:
        cells = sorted((c for c in result.cells if c.method == method and not c.error), key=lambda c: c.partitions)
        if not cells:
            continue
        xs = [c.partitions for c in cells]
        cpu.plot(xs, [100 * max(c.cpu.values(), default=0.0) for c in cells], marker="o", label=method)
        rss.plot(xs, [max(c.rss_mb.values(), default=0.0) for c in cells], marker="o", label=method)
    for ax, what in ((cpu, "CPU per node (% of one core, worst node)"), (rss, "RSS per node (MB, worst node)")):
        ax.set_xscale("log")
        ax.set_xlabel(f"partitions ({result.scenario.nodes} nodes, at rest)", fontsize=8)
        ax.set_ylabel(what, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path = out / "idle.png"
    _save(plt, fig, path)
    return [path]


def draw(result: RunResult, out: Path) -> list[Path]:
    """Write PNGs into `out`; returns their paths (none if matplotlib is not installed)."""
    plt = _pyplot()
    if plt is None:
        return []
    from matplotlib.patches import Patch
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    budget = result.scenario.budget

    for fault in result.scenario.faults:
        cells = [c for c in result.cells if c.fault == fault and any(t.failover for t in c.trials)]
        if not cells:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for cell in cells:
            xs = sorted(x / budget for t in cell.trials for x in t.failover)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step([xs[0], *xs], [0.0, *ys], where="post", label=cell.method.name)
        ax.set_xlabel(f"failover latency / detection budget ({budget:g} s)")
        ax.set_ylabel("share of failovers")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"Failover latency CDF — fault: {fault}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        path = out / f"failover-cdf-{fault}.png"
        _save(plt, fig, path)
        paths.append(path)

    cells = [c for c in result.cells if c.trials]
    if cells:
        fig, ax = plt.subplots(figsize=(7, 4))
        methods = list(dict.fromkeys(c.method.name for c in cells))
        steady = [[t.steady_max_led for c in cells if c.method.name == m for t in c.trials if t.ok] for m in methods]
        ax.boxplot(steady, tick_labels=methods, showmeans=True)
        ideal = -(-result.scenario.roles // result.scenario.members)
        ax.axhline(ideal, linestyle="--", color="grey", label=f"balanced = {ideal}")
        ax.set_ylabel("roles led by the busiest member")
        ax.set_title("Leader distribution at steady state")
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=20, fontsize=8)
        path = out / "distribution.png"
        _save(plt, fig, path)
        paths.append(path)

    candidates: list[tuple[str, Callable[[TrialResult], dict[str, float]]]] = [
        ("requests or messages/s sent per member (counted by relays)", lambda t: t.sent_rps),
        ("packets/s sent per member (counted on its link)", lambda t: t.sent_pps)]
    measures = [(title, pick) for title, pick in candidates if any(pick(t) for c in result.cells for t in c.trials)]
    if measures:
        fig, axes = plt.subplots(1, len(measures), figsize=(6.5 * len(measures), 4), squeeze=False)
        for ax, (title, pick) in zip(axes[0], measures, strict=True):
            loaded = [c for c in result.cells if any(pick(t) for t in c.trials)]
            for method in dict.fromkeys(c.method.name for c in loaded):
                points = sorted((c.members, sum(x for t in c.trials for x in pick(t).values())
                                 / max(1, sum(len(pick(t)) for t in c.trials)))
                                for c in loaded if c.method.name == method)
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
            ax.set_xlabel("members in the group")
            ax.set_ylabel(title, fontsize=8)
            ax.set_title("Load as the group grows (steady state)", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        path = out / "load.png"
        _save(plt, fig, path)
        paths.append(path)

    # one trial's timeline per cell, where its roles fit in a picture (a row per role)
    timeline = [c.trials[0] for c in cells if c.trials and c.trials[0].ok and c.fault.injects and
                result.scenario.roles <= 60]
    if timeline:
        fig, axes = plt.subplots(len(timeline), 1, figsize=(8, 1.6 * len(timeline) + 0.6), squeeze=False)
        for ax, trial in zip(axes[:, 0], timeline, strict=True):
            history = History.from_json(trial.history)
            ivs = history.intervals()
            members = sorted({line["member"] for line in history.lines})
            colors = {m: f"C{i}" for i, m in enumerate(members)}
            roles = sorted(ivs, key=lambda r: (len(r), r))
            for y, role in enumerate(roles):
                for iv in ivs[role]:
                    ax.broken_barh([(iv.start - history.start, iv.length)], (y - 0.4, 0.8), color=colors[iv.member])
            for f in history.faults:
                ax.axvline(f.mono - history.start, color="red", linestyle=":", linewidth=1)
            ax.set_yticks(range(len(roles)), roles, fontsize=6)
            ax.set_title(f"{trial.method} / {trial.fault}: who led what (red: fault)", fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            handles = [Patch(color=c) for c in colors.values()]
            ax.legend(handles, list(colors), fontsize=6, loc="upper right", ncol=len(colors))
        axes[-1, 0].set_xlabel("seconds since the trial started")
        path = out / "timelines.png"
        _save(plt, fig, path)
        paths.append(path)
    return paths


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
