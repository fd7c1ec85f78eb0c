"""The architecture docs/architecture.md states, checked: layering, pure cores, one import path per module."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("elect", "neli", "raft_priority", "cas_lease", "elect_cluster", "elect_bench", "elect_cli")


def test_import_contracts_hold() -> None:
    """Layers without cycles, implementations reached only through the registry, cores free of I/O."""
    lint = shutil.which("lint-imports")
    assert lint, "lint-imports is missing: ./setup installs it (the dev extra)"
    done = subprocess.run([lint, "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def module_table() -> dict[str, bool]:
    """docs/architecture.md's module tables: every module's dotted name, and whether it is marked pure."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n### Modules\n", 1)[1].split("\n## ", 1)[0]
    table: dict[str, bool] = {}
    package = None
    for line in section.splitlines():
        if heading := re.match(r"#### `(\w+)/`", line):
            package = heading.group(1)
        elif package and (row := re.match(r"\| `([\w/]+)\.py` \|.*\|\s*(pure)?\s*\|$", line)):
            parts = [package, *row.group(1).split("/")]
            table[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = bool(row.group(2))
    return table


def modules_in_code() -> set[str]:
    """Every module of the installed packages, an empty `__init__.py` aside."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "__init__.py" and not path.read_text().strip():
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def contract(name_starts: str) -> dict[str, Any]:
    contracts: list[dict[str, Any]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"]
    return next(c for c in contracts if c["name"].startswith(name_starts))


def test_the_module_tables_name_every_module_and_only_those() -> None:
    table, code = set(module_table()), modules_in_code()
    assert not code - table, f"modules missing from docs/architecture.md's module tables: {sorted(code - table)}"
    assert not table - code, f"modules in the tables but not in the code: {sorted(table - code)}"


def test_the_pure_contract_is_exactly_the_modules_the_table_calls_pure() -> None:
    pure = sorted(name for name, marked in module_table().items() if marked)
    assert sorted(contract("pure cores")["source_modules"]) == pure


def test_every_library_module_is_kept_from_importing_the_in_process_implementation() -> None:
    library = sorted(m for m in modules_in_code() if m.startswith("elect.") and m not in ("elect.memory",
                                                                                          "elect.__main__"))
    assert sorted(contract("the library reaches")["source_modules"]) == library


def test_no_import_cycles_type_only_imports_included() -> None:
    """A cycle of imports, even one closed only by an `if TYPE_CHECKING:` import, means two modules that cannot be
    read, tested or moved apart; grimp (import-linter's graph) sees both kinds."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    assert cycles == []


def test_ruff_finds_nothing() -> None:
    """The lint configured in pyproject.toml, over everything in the repository."""
    ruff = shutil.which("ruff")
    assert ruff, "ruff is missing: ./setup installs it (the dev extra)"
    done = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing() -> None:
    """Every package and the bare-store probes type-check under `mypy --strict` (pyproject.toml sets it)."""
    probes = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bench" / "bare").glob("*.py"))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *PACKAGES, *probes],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


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
    """Percentiles computed one way everywhere, the bare-store probes and benchmarks included."""
    sources = [*(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")), *(ROOT / "bench").rglob("*.py")]
    defs = [f"{p.relative_to(ROOT)}:{name}" for p in sources
            for name in re.findall(r"^\s*def (\w*(?:percentile|quantile)\w*)\(", p.read_text(), re.M)]
    assert defs == ["elect_bench/judging/measures.py:percentile"]


def test_package_docstrings_name_every_scheme_their_package_registers() -> None:
    """A package docstring that says which methods there are says all of them (`elect`: every shipped scheme but
    the in-process one; an implementation package: the schemes it registers)."""
    import importlib

    entry_points: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
        "elect.electors"]
    registers: dict[str, set[str]] = {}
    for scheme, target in entry_points.items():
        registers.setdefault(target.split(".", 1)[0], set()).add(scheme)
    shipped = {s for package, schemes in registers.items() if package != "elect_bench" for s in schemes}
    expected = {"elect": shipped - {"memory"}, **{p: registers[p] for p in ("neli", "raft_priority", "cas_lease")}}
    unnamed = {package: sorted(s for s in schemes if s not in (importlib.import_module(package).__doc__ or "").lower())
               for package, schemes in expected.items()}
    assert unnamed == {package: [] for package in expected}
