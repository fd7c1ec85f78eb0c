"""`elect docs [serve|build|reference]`: the documentation site (MkDocs, mkdocs.yml at the checkout's root), and
its configuration reference, written from the schemes' own option tables and docstrings (the same `elect schemes
SCHEME` prints) into docs/configuration.md by `elect docs reference`. The page is committed, so its links work on
GitHub too; a build whose page differs from what the code says fails (the MkDocs hook below), so it cannot drift.

MkDocs with the Material theme and mkdocstrings rather than Sphinx: the docs are Markdown already (README,
docs/*.md, the reports the harness writes), and mkdocstrings reads the same docstrings Sphinx would."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elect import extras, options, registry
from elect.errors import ConfigError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

CONFIG = Path(__file__).resolve().parents[1] / "mkdocs.yml"


def register(sub: Any) -> None:
    p = sub.add_parser("docs", help="serve or build the documentation site (from a checkout)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=["serve", "build", "reference"], default="serve",
                   help="serve the site, build it (--out), or write docs/configuration.md from the code")
    p.add_argument("--out", default="site", help="where `build` writes the site (default: site/)")
    p.set_defaults(run=run)


REFERENCE = CONFIG.parent / "docs" / "configuration.md"


def run(args: argparse.Namespace) -> int:
    if not CONFIG.is_file():
        raise ConfigError(f"the docs are built from a checkout of elect: {CONFIG} is missing", parameter="action")
    if args.action == "reference":
        REFERENCE.write_text(configuration_page())
        print(f"elect docs: wrote {REFERENCE}")
        return 0
    extras.require("elect docs", ("mkdocs", "material", "mkdocstrings"), "docs")
    words = ["serve"] if args.action == "serve" else ["build", "--strict", "--site-dir", str(Path(args.out).resolve())]
    return subprocess.call([sys.executable, "-m", "mkdocs", *words, "--config-file", str(CONFIG)])


def configuration_page() -> str:
    """The configuration reference: per scheme its URL form, its options (name, type, default) and what they do."""
    lines = ["# Configuration reference", "",
             "Every scheme's options, as `elect schemes SCHEME` prints them; this page is written from the code "
             "(`elect docs reference`), and a site build fails when the two differ. An option is a URL query "
             "parameter (`etcd://127.0.0.1:2379/elect?ttl=0.5`), a key "
             "of a YAML or dict configuration beside `elector:` (see [Getting started](getting-started.md)), or a "
             "keyword of `elect.connect`. Durations are seconds; `on`/`off`, `true`/`false` and `500ms` are "
             "understood. Every configuration may add `require:` (see `elect.Requirements` in the "
             "[API](api.md)).", ""]
    for scheme, plugin in sorted(registry.plugins().items()):
        lines += [f"## {scheme}://", "", plugin.summary + ".", ""]
        if plugin.url_parts:
            parts = ", ".join(f"the URL's {part} is `{option}`" for part, option in plugin.url_parts.items())
            lines += [f"In a URL, {parts}.", ""]
        helps = options.help_of(plugin.options)
        lines += ["| option | type | default | what it does |", "| --- | --- | --- | --- |"]
        lines += [f"| `{name}` | `{tp.replace('|', chr(92) + '|')}` | `{default}` | "
                  f"{helps.get(name, '').replace('|', chr(92) + '|')} |"
                  for name, tp, default in options.describe(plugin.options)]
        lines += [""]
        for cls in _option_classes(plugin.options):
            doc = inspect.getdoc(cls) or ""
            lines += [f"*{cls.__name__}*: " + doc.replace("\n\n", "\n\n") if doc else "", ""]
    return "\n".join(lines)


def _option_classes(cls: type[Any]) -> list[type[Any]]:
    """The options dataclasses a scheme's options are made of, most specific first."""
    return [c for c in cls.__mro__ if dataclasses.is_dataclass(c) and c.__module__.split(".")[0] != "builtins"]


def reports_page(docs: Path) -> str:
    """Every committed run's report under docs/results, newest first, with the line that says how it was made."""
    lines = ["# Every committed report", "",
             "Each run the figures on these pages come from, as its command wrote it: `report.md` (a soak's `soak.md`) "
             "and, where the run is a trials run or a soak, `report.html` to explore its timelines. Newest first by "
             "the date in its provenance line.", ""]
    found = []
    for report in sorted((docs / "results").rglob("*.md")):
        if report.name not in ("report.md", "soak.md"):
            continue
        text = report.read_text(errors="replace").splitlines()
        title = next((t.lstrip("# ") for t in text if t.startswith("# ")), report.parent.name)
        made = next((t for t in text if t.startswith("Command:")), "")
        when = made.split(" — ", 1)[1][:16] if " — " in made else ""
        relative = report.relative_to(docs).as_posix()
        page = report.parent / "report.html"
        extra = f" · [report.html]({page.relative_to(docs).as_posix()})" if page.is_file() else ""
        found.append((when, f"- [{relative.removeprefix('results/').rsplit('/', 1)[0]}]({relative}){extra}: "
                            f"{title}{f' ({when} UTC)' if when else ''}"))
    lines += [entry for _, entry in sorted(found, key=lambda f: f[0], reverse=True)]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """MkDocs hook: refuse a configuration reference that the code no longer matches, and add the list of committed
    reports (generated: it follows docs/results)."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    committed = Path(config.docs_dir) / "configuration.md"
    if not committed.is_file() or committed.read_text() != configuration_page():
        raise PluginError(f"{committed} is not what the code says: run `elect docs reference` and commit it")
    files.append(File.generated(config, "reports.md", content=reports_page(Path(config.docs_dir))))
    return files
