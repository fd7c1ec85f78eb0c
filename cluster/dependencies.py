"""Print the requirements of pyproject.toml with the named extras, one per line, for the member image.

cluster/Dockerfile installs these in a layer of their own, before it copies the source: a change to the code then
rebuilds only the last layer (seconds) instead of downloading every dependency again (about two minutes here).
Standalone on purpose: it runs before elect is installed. Usage: python3 dependencies.py pyproject.toml all
"""

from __future__ import annotations

import re
import sys
import tomllib


def requirements(project: dict[str, object], extras: list[str]) -> list[str]:
    """The base dependencies and those of `extras`, following the project's own `name[extra,...]` references."""
    name = str(project["name"])
    optional = project.get("optional-dependencies", {})
    assert isinstance(optional, dict)
    base = project.get("dependencies", [])
    assert isinstance(base, list)
    found: list[str] = list(base)
    seen: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(rf"{re.escape(name)}\[([^\]]+)\]", req.replace(" ", ""))
            if own:
                todo += own.group(1).split(",")
            elif req not in found:
                found.append(req)
    return found


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        project = tomllib.load(f)["project"]
    print("\n".join(requirements(project, sys.argv[2:])))
