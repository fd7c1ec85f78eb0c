"""What the local images are built from, without an engine: the Debian mirror debootstrap uses, pip's settings
carried into the base image, and the order images are built in."""

from __future__ import annotations

from pathlib import Path

import pytest

from elect_cluster import images
from elect_cluster.errors import ClusterError


def test_the_mirror_is_the_debian_uri_of_the_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian/\nSuites: bookworm\n")
    monkeypatch.setenv("ELECT_APT_DIR", str(tmp_path))
    assert images.debian_mirror() == "http://mirror.invalid/debian/"
    (tmp_path / "sources.list").write_text("# deb http://old.invalid/debian bookworm main\n"
                                           "deb [arch=amd64] http://one-line.invalid/debian bookworm main\n")
    assert images.debian_mirror() == "http://one-line.invalid/debian"  # sources.list is read first
    (tmp_path / "sources.list").unlink()
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    with pytest.raises(ClusterError, match="no Debian mirror"):
        images.debian_mirror()


def test_pip_variables_become_global_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "180")
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.invalid/simple")
    text = images.pip_settings()
    assert text.startswith("[global]\n")
    assert "default-timeout = 180\n" in text and "index-url = https://index.invalid/simple\n" in text


def test_parents_are_built_first_and_once() -> None:
    assert [i.name for i in images.order(["member", "etcd", "base"])] == [
        "elect-rootfs", "elect-base", "elect-member", "elect-etcd"]
    with pytest.raises(ClusterError, match="unknown image"):
        images.order(["postgres"])
