"""Compose and container files, installed as the package `elect_cluster.files`; no code lives here."""
