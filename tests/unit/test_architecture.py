"""The architecture docs/architecture.md states, checked: layering, pure cores, one import path per module."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("elect", "neli", "raft_priority", "elect_cluster", "elect_bench", "elect_cli")


def test_import_contracts_hold() -> None:
    """Layers without cycles, implementations reached only through the registry, cores free of I/O."""
    lint = shutil.which("lint-imports")
    assert lint, "lint-imports is missing: ./setup installs it (the dev extra)"
    done = subprocess.run([lint, "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_no_symlinks_in_the_tree() -> None:
    """A symlinked package gives one module several import paths."""
    files = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    links = [line.split("\t", 1)[1] for line in files.splitlines() if line.startswith("120000")]
    assert links == []


def test_code_cites_the_architecture_document_in_the_repository() -> None:
    assert (ROOT / "docs" / "architecture.md").is_file()
    outside = "DESIGN" + ".md"  # the design notes kept outside the repository (spelt apart: this file cites none)
    citing = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if outside in p.read_text()]
    assert citing == []


def test_fault_kinds_are_compared_only_inside_the_fault_registry() -> None:
    """Faults are chosen by name at the edge (CLI, YAML) and are objects everywhere else."""
    names = "kill|stop|pause|cut|cut-in|cut-out|lossy|slow|restart|restarted|infra|infra-pause|resume|heal"
    kinds = re.compile(rf"""(==|!=|\bin)\s*[(\[{{]?\s*["']({names})["']""")
    registry = ROOT / "elect_bench" / "faults"
    harness = [*(ROOT / "elect_bench").rglob("*.py"), ROOT / "elect_cli" / "bench.py", ROOT / "elect_cli" / "demo.py"]
    sources = [p for p in harness if registry not in p.parents]
    offending = [f"{p.relative_to(ROOT)}:{n}" for p in sources
                 for n, line in enumerate(p.read_text().splitlines(), 1) if kinds.search(line)]
    assert offending == []


def test_one_percentile_definition() -> None:
    sources = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    defs = [p for p in sources if re.search(r"^def percentile\(", p.read_text(), re.M)]
    assert len(defs) == 1, defs
