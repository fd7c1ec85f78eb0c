"""Bundled bench scenarios (YAML), installed as the package `elect_bench.scenarios`; no code lives here."""
