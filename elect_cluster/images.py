"""The compose cluster's images, built on this machine from `cluster/` with Podman or Docker.

No image registry is needed: the Debian root comes from debootstrap (the machine's own Debian mirror) and is
imported as an image; every other image is built FROM it. What the machine uses to reach package indexes (its
apt sources, the CA certificates it added, pip's settings) is copied into the base image's build context at
build time, never written into the repository. Each image carries a label with a hash of everything it was
built from (its container file and context, its parent's hash), so building again skips what is up to date.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import compose, state
from .apache_kafka import ensure_jars
from .errors import ClusterError, MissingBinary

TAG = "local"
LABEL = "org.elect.inputs"
SUITE = "bookworm"
ENGINE_ENV = "ELECT_ENGINE"
PODMAN_FIX = ("apt-get update && apt-get install -y podman runc netavark aardvark-dns catatonit iptables debootstrap "
              "docker-compose, and in "
              "/etc/containers/containers.conf: [containers] default_ulimits = [] and pids_limit = 0, "
              "[engine] runtime = \"runc\" (./setup does both)")
#: The project's files the member image is built from (cluster/Dockerfile copies each).
PROJECT = ("pyproject.toml", "README.md", "elect", "neli", "raft_priority", "cas_lease", "proto", "elect_cluster",
           "elect_bench", "elect_cli", "cluster", "bench")
Say = Callable[[str], None]


@dataclass(frozen=True)
class Image:
    """One local image: `folder` of `cluster/` holds its container file (None: the debootstrap root)."""

    name: str
    folder: str | None
    parent: str | None
    containerfile: str = "Containerfile"

    @property
    def ref(self) -> str:
        return f"{self.name}:{TAG}"


ROOTFS = Image("elect-rootfs", None, None)
BASE = Image("elect-base", "base", "elect-rootfs")
ETCD = Image("elect-etcd", "etcd", "elect-base")
ZOOKEEPER = Image("elect-zookeeper", "zookeeper", "elect-base")
KAFKA = Image("elect-kafka", "kafka", "elect-base")
MEMBER = Image("elect-member", ".", "elect-base", containerfile="cluster/Dockerfile")
IMAGES = {i.name: i for i in (ROOTFS, BASE, ETCD, ZOOKEEPER, KAFKA, MEMBER)}


def cluster_dir() -> Path:
    return compose.FILES


def project_root() -> Path:
    """The checkout the member image is built from (the folder above `cluster/`)."""
    root = cluster_dir().parent
    if not (root / "pyproject.toml").is_file():
        raise ClusterError(f"the member image is built from a checkout of elect; {root} is not one")
    return root


def engine() -> str:
    """The container engine's command: `$ELECT_ENGINE`, else Podman, else Docker, whichever answers."""
    chosen = os.environ.get(ENGINE_ENV)
    candidates = [chosen] if chosen else ["podman", "docker"]
    for name in candidates:
        path = shutil.which(name)
        if path and subprocess.run([path, "info"], capture_output=True, timeout=60).returncode == 0:
            return path
    raise MissingBinary(f"no working container engine ({' or '.join(candidates)}). Fix: {PODMAN_FIX}")


def _engine_run(argv: Sequence[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)


def built_hash(tool: str, image: Image) -> str | None:
    """The inputs hash of the image as built now, or None when there is none."""
    done = _engine_run([tool, "image", "inspect", "--format", f'{{{{index .Config.Labels "{LABEL}"}}}}', image.ref])
    if done.returncode != 0:
        return None
    text = done.stdout.strip()
    return text if text and text != "<no value>" else None


# --- what each image is built from ----------------------------------------------------------------------------

def _files(root: Path, names: Sequence[str]) -> Iterator[Path]:
    """Every file under the named entries of `root`, sorted, without caches and build leftovers."""
    for name in names:
        top = root / name
        found = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for p in found:
            parts = set(p.relative_to(root).parts)
            if "__pycache__" in parts or any(x.endswith(".egg-info") for x in parts) or p.suffix == ".pyc":
                continue
            yield p


def _digest(root: Path, names: Sequence[str], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in _files(root, names):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def debian_mirror() -> str:
    """The machine's Debian mirror: the first apt source whose URI ends in /debian (deb822 or one-line), read
    from /etc/apt (`$ELECT_APT_DIR` elsewhere)."""
    apt = Path(os.environ.get("ELECT_APT_DIR", "/etc/apt"))
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.sources")),
             *sorted((apt / "sources.list.d").glob("*.list"))]
    for f in files:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] not in (["URIs:"], ["deb"]):
                continue
            for uri in (w for w in words[1:] if "://" in w):
                if uri.rstrip("/").endswith("/debian"):
                    return uri
    raise ClusterError(f"no Debian mirror found in {apt}/sources.list(.d): debootstrap needs one")


def _site(into: Path) -> None:
    """Copy this machine's package-index settings into a build context's site/ folder."""
    apt = Path("/etc/apt")
    (into / "apt" / "sources.list.d").mkdir(parents=True)
    if (apt / "sources.list").is_file() and (apt / "sources.list").read_text().strip():
        shutil.copy(apt / "sources.list", into / "apt" / "sources.list")
    for f in sorted((apt / "sources.list.d").glob("*")):
        if f.suffix in (".list", ".sources"):
            shutil.copy(f, into / "apt" / "sources.list.d" / f.name)
    (into / "ca").mkdir()
    local_ca = Path("/usr/local/share/ca-certificates")
    if local_ca.is_dir():
        for f in sorted(local_ca.rglob("*.crt")):
            shutil.copy(f, into / "ca" / f.name)
    (into / "pip.conf").write_text(pip_settings())


def pip_settings() -> str:
    """pip's configuration as this machine has it: /etc/pip.conf, the user's pip.conf, and PIP_* variables
    (each one as the [global] option it stands for), in pip's own order of precedence."""
    config = configparser.ConfigParser()
    home = Path.home()
    config.read([Path("/etc/pip.conf"), home / ".config" / "pip" / "pip.conf", home / ".pip" / "pip.conf"])
    if not config.has_section("global"):
        config.add_section("global")
    for name, value in sorted(os.environ.items()):
        if name.startswith("PIP_") and name not in ("PIP_CONFIG_FILE", "PIP_ROOT_USER_ACTION"):
            config.set("global", name[4:].lower().replace("_", "-"), value)
    lines = []
    for section in config.sections():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in config.items(section, raw=True)]
    return "\n".join(lines) + "\n"


def _context(image: Image, into: Path) -> str:
    """Fill `into` with the image's build context; return the hash of everything in it (and its recipe)."""
    if image.name == "elect-member":
        root = project_root()
        for p in _files(root, PROJECT):
            target = into / p.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, target)
        return _digest(root, PROJECT)
    assert image.folder is not None
    shutil.copytree(cluster_dir() / image.folder, into, dirs_exist_ok=True)
    if image.name == "elect-base":
        _site(into / "site")
    if image.name == "elect-kafka":
        shutil.copytree(ensure_jars(), into / "libs", dirs_exist_ok=True)
        jars = sorted((into / "libs").glob("*.jar"))
        return _digest(into, [str(p.relative_to(into)) for p in sorted(into.rglob("*")) if p.is_file()
                              and p.suffix != ".jar"], "".join(f"{p.name}:{p.stat().st_size}\n" for p in jars))
    return _digest(into, [str(p.relative_to(into)) for p in sorted(into.rglob("*")) if p.is_file()])


def _rootfs_inputs() -> str:
    return hashlib.sha256(f"debootstrap --variant=minbase {SUITE} {debian_mirror()}".encode()).hexdigest()


# --- building ----------------------------------------------------------------------------------------------

def _debootstrap(tool: str, label: str, say: Say) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise MissingBinary(f"debootstrap is missing. Fix: {PODMAN_FIX}")
    with tempfile.TemporaryDirectory(prefix="elect-rootfs-", dir=os.environ.get("ELECT_BUILD_DIR")) as tmp:
        root = Path(tmp) / "root"
        mirror = debian_mirror()
        say(f"debootstrap --variant=minbase {SUITE} from {mirror}")
        done = _engine_run([debootstrap, "--variant=minbase", SUITE, str(root), mirror], timeout=1800)
        if done.returncode != 0:
            raise ClusterError(f"debootstrap failed:\n{(done.stdout + done.stderr)[-2000:]}")
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            imported = subprocess.run([tool, "import", "--change", f"LABEL {LABEL}={label}",
                                       "--change", 'CMD ["/bin/bash"]', "-", ROOTFS.ref],
                                      stdin=tar.stdout, capture_output=True, text=True, timeout=1800)
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
        if imported.returncode != 0:
            raise ClusterError(f"{tool} import failed: {imported.stderr[-2000:]}")


def _build(tool: str, image: Image, context: Path, label: str) -> None:
    argv = [tool, "build", "-q", "-t", image.ref, "--label", f"{LABEL}={label}",
            "-f", str(context / image.containerfile)]
    if image.parent is not None:
        argv += ["--build-arg", f"{'ROOTFS' if image.name == 'elect-base' else 'BASE'}={image.parent}:{TAG}"]
    done = _engine_run([*argv, str(context)], timeout=3600)
    if done.returncode != 0:
        raise ClusterError(f"building {image.ref} failed:\n{(done.stdout + done.stderr)[-3000:]}")


def order(names: Sequence[str]) -> list[Image]:
    """The named images and every image they are built FROM, parents first."""
    chosen: list[Image] = []

    def add(name: str) -> None:
        if name not in IMAGES:
            raise ClusterError(f"unknown image {name!r}; the images are {', '.join(IMAGES)}")
        image = IMAGES[name]
        if image.parent is not None:
            add(image.parent)
        if image not in chosen:
            chosen.append(image)

    for n in names:
        add(n if n.startswith("elect-") else f"elect-{n}")
    return chosen


@dataclass
class Outcome:
    image: str
    built: bool  # False: it was up to date
    seconds: float


def build(names: Sequence[str] = tuple(IMAGES), *, tool: str | None = None, force: bool = False,
          say: Say = lambda _m: None) -> list[Outcome]:
    """Build the named images (and what they are built FROM) unless their inputs are unchanged. Builds on one
    machine take turns (a lock in the cache directory): two at once would both build, and each untag the other's."""
    tool = tool or engine()
    with state.file_lock(state.cache_dir() / "images.lock"):
        return _build_all(names, tool, force, say)


def _build_all(names: Sequence[str], tool: str, force: bool, say: Say) -> list[Outcome]:
    outcomes: list[Outcome] = []
    parent_label = ""
    labels: dict[str, str] = {}
    for image in order(names):
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"{image.name}-", dir=os.environ.get("ELECT_BUILD_DIR")) as tmp:
            if image.folder is None:
                label = _rootfs_inputs()
            else:
                own = _context(image, Path(tmp))
                parent_label = labels[image.parent] if image.parent else ""
                label = hashlib.sha256(f"{own}\n{parent_label}".encode()).hexdigest()
            labels[image.name] = label
            if not force and built_hash(tool, image) == label:
                say(f"{image.ref} is up to date")
                outcomes.append(Outcome(image.ref, False, time.monotonic() - began))
                continue
            say(f"building {image.ref}")
            before = _engine_run([tool, "image", "inspect", "--format", "{{.Id}}", image.ref]).stdout.strip()
            if image.folder is None:
                _debootstrap(tool, label, say)
            else:
                _build(tool, image, Path(tmp), label)
            if before:  # the image this one replaces, untagged now: removed unless a container still uses it
                _engine_run([tool, "rmi", before])
        outcomes.append(Outcome(image.ref, True, time.monotonic() - began))
        say(f"built {image.ref} in {outcomes[-1].seconds:.0f} s")
    return outcomes
