"""Build reconsume's three images from broker_image/Dockerfile and operator/Dockerfile, without a
Docker engine, with buildah (``make images`` runs this; docs/images.md):

    python tools/build_images.py                       # public base images (Docker Hub)
    python tools/build_images.py --base debian         # base images made here from Debian
    python tools/build_images.py --push --repository registry.example.com/reconsume
    python tools/build_images.py --archives DIR        # also docker-archive files, for
                                                       # `ctr images import` / `kind load`

``--base debian`` is for machines that reach a Debian mirror but no container registry (the
node test tier's): instead of ``python:3.11-slim-bookworm`` and ``eclipse-temurin:17-jre``
it makes equivalent bases with mmdebstrap — Debian's python3 (3.11, with pip and venv, as
``python``) and Debian's OpenJDK 17 JRE at /opt/java/openjdk — and passes them to the same
Dockerfiles as ``PYTHON_IMAGE`` and ``JRE_IMAGE``. The machine's own extra CA certificates
(/usr/local/share/ca-certificates) go into that base, so ``pip`` inside the build trusts
what the machine trusts. Bases are cached in buildah's storage under their recipe's hash.

Everything buildah mounts is mounted in a private mount namespace that ends with this
program, with a run directory of its own: nothing stays mounted on the machine. Storage
(layers, the layer cache of ``--layers``) is under ~/.cache/reconsume/containers; a build of
all three images then removes the step images of earlier builds it did not use
(``--keep-cache`` keeps them), so the storage holds one build's cache, not one per change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path.home() / ".cache" / "reconsume"
STORAGE = CACHE_DIR / "containers"
DEFAULT_REPOSITORY = "ghcr.io/reconsume"
DEBIAN_SUITE = "bookworm"
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")
IN_NAMESPACE = "RECONSUME_BUILD_IMAGES_IN_NAMESPACE"
STEP_IMAGE = re.compile(r"^--> (?:Using cache )?([0-9a-f]{8,64})\b")


@dataclass(frozen=True)
class Image:
    name: str
    """The repository's last component: ``<repository>/<name>:<tag>``."""
    dockerfile: str
    target: str | None


IMAGES = (
    Image("reconsume", "broker_image/Dockerfile", "broker"),
    Image("dlq-jobs", "broker_image/Dockerfile", "dlq-jobs"),
    Image("operator", "operator/Dockerfile", None),
)


def package_version() -> str:
    """``__version__`` of the reconsume package, read from its source: the default tag of the
    three images. The chart's appVersion (the tag it gives them) and the operator's default
    images are the same version (``tools/check_version.py``, run by ``make lint``)."""
    init = ROOT / "broker_image" / "reconsume" / "__init__.py"
    match = re.search(r"""^__version__\s*=\s*["']([^"']+)["']\s*$""", init.read_text(), re.M)
    if match is None:
        raise SystemExit("broker_image/reconsume/__init__.py sets no __version__")
    return match.group(1)


def revision() -> str:
    try:
        result = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
    except FileNotFoundError:
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"


class Buildah:
    def __init__(self, runroot: Path) -> None:
        self.prefix = [
            "buildah",
            "--root",
            str(STORAGE / "storage"),
            "--runroot",
            str(runroot),
            "--storage-driver",
            "overlay",
        ]

    def __call__(self, *args: str, capture: bool = False) -> str:
        command = [*self.prefix, *args]
        if capture:
            return subprocess.run(command, check=True, capture_output=True, text=True).stdout
        subprocess.run(command, check=True)
        return ""

    def stream(self, *args: str) -> set[str]:
        """Run a ``bud``, its output passed through; the ids (or their prefixes) of the step
        images it committed or reused from the layer cache (``--> [Using cache ]<id>``)."""
        process = subprocess.Popen(
            [*self.prefix, *args], stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert process.stdout is not None
        used = set()
        for line in process.stdout:
            sys.stdout.write(line)
            if match := STEP_IMAGE.match(line):
                used.add(match.group(1))
        sys.stdout.flush()
        if (code := process.wait()) != 0:
            raise subprocess.CalledProcessError(code, [*self.prefix, *args])
        return used

    def prune(self, keep: set[str]) -> int:
        """Remove the untagged images not in ``keep``: the layer cache of earlier builds.
        Each change of the sources leaves one build's step images behind (3-4 GB for the
        three images), which nothing reuses once the sources moved on; kept, they filled the
        disk of a machine that builds often. Layers a kept image uses stay. The number
        removed."""
        listed = json.loads(self("images", "--all", "--json", capture=True) or "[]")
        stale = [
            image["id"]
            for image in listed
            if not image.get("names") and not any(_same(image["id"], id_) for id_ in keep)
        ]
        if stale:
            self("rmi", *stale, capture=True)
        return len(stale)

    def exists(self, image: str) -> bool:
        command = [*self.prefix, "inspect", "--type", "image", image]
        return subprocess.run(command, capture_output=True).returncode == 0

    def image_id(self, image: str) -> str:
        return self(
            "inspect", "--type", "image", "--format", "{{.FromImageID}}", image, capture=True
        ).strip()


def _same(one: str, other: str) -> bool:
    """Whether two image ids, either possibly shortened, name the same image."""
    return one.startswith(other) or other.startswith(one)


def _debian_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _local_cas() -> list[Path]:
    return sorted(LOCAL_CA_DIR.glob("**/*.crt")) if LOCAL_CA_DIR.is_dir() else []


def _recipe_hash(*parts: str) -> str:
    digest = hashlib.sha256("\0".join(parts).encode())
    for ca in _local_cas():
        digest.update(ca.read_bytes())
    return digest.hexdigest()[:12]


PYTHON_PACKAGES = (
    "python3",
    "python3-venv",
    "python3-pip",
    "python-is-python3",
    "passwd",
    "ca-certificates",
)
JRE_PACKAGES = ("openjdk-17-jre-headless",)


def _mmdebstrap(packages: Sequence[str], hooks: Sequence[str], output: Path) -> None:
    command = [
        "mmdebstrap",
        "--quiet",
        "--variant=apt",
        f"--include={','.join(packages)}",
        "--skip=output/dev",
        # Documentation and translations only (the JRE's package scripts need the manual
        # pages' directories).
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        *(f"--customize-hook={hook}" for hook in hooks),
        DEBIAN_SUITE,
        str(output),
    ]
    subprocess.run(command, check=True)


def _import_rootfs(
    buildah: Buildah, tarball: Path, image: str, env: Sequence[str], cmd: str
) -> None:
    container = buildah("from", "scratch", capture=True).strip()
    try:
        buildah("add", "--quiet", container, str(tarball), "/", capture=True)
        config = [f"--env={variable}" for variable in env]
        buildah("config", *config, f"--cmd={cmd}", container)
        buildah("commit", "--quiet", "--format", "docker", container, image)
    finally:
        buildah("rm", container, capture=True)


def debian_bases(buildah: Buildah, work: Path) -> tuple[str, str]:
    """The Python and JRE base images made from Debian packages (made once per recipe)."""
    path_env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    python = f"localhost/reconsume-base/python:3.11-{DEBIAN_SUITE}-{_recipe_hash(*PYTHON_PACKAGES)}"
    if not buildah.exists(python):
        print(f"build_images: making {python} from Debian packages", flush=True)
        hooks = []
        if _local_cas():
            hooks = [
                f'mkdir -p "$1{LOCAL_CA_DIR}"',
                f'cp -r {LOCAL_CA_DIR}/. "$1{LOCAL_CA_DIR}/"',
                'chroot "$1" update-ca-certificates --fresh >/dev/null',
            ]
        tarball = work / "python.tar"
        _mmdebstrap(PYTHON_PACKAGES, hooks, tarball)
        _import_rootfs(buildah, tarball, python, [path_env, "LANG=C.UTF-8"], "python3")
        tarball.unlink()
    jdk = f"/usr/lib/jvm/java-17-openjdk-{_debian_arch()}"
    jre = f"localhost/reconsume-base/jre:17-{DEBIAN_SUITE}-{_recipe_hash(*JRE_PACKAGES, jdk)}"
    if not buildah.exists(jre):
        print(f"build_images: making {jre} from Debian packages", flush=True)
        # The JRE images keep a self-contained runtime at /opt/java/openjdk; Debian's links into
        # /etc, which a COPY of the directory would leave dangling: copy it with links resolved.
        hooks = [f'mkdir -p "$1/opt/java" && cp -rL "$1{jdk}" "$1/opt/java/openjdk"']
        tarball = work / "jre.tar"
        _mmdebstrap(JRE_PACKAGES, hooks, tarball)
        java_env = [
            "JAVA_HOME=/opt/java/openjdk",
            f"{path_env.replace('PATH=', 'PATH=/opt/java/openjdk/bin:')}",
        ]
        _import_rootfs(buildah, tarball, jre, [*java_env, "LANG=C.UTF-8"], "java")
        tarball.unlink()
    return python, jre


def build(buildah: Buildah, image: Image, reference: str, build_args: dict[str, str]) -> set[str]:
    """Build ``reference``; the ids of the step images it made or took from the layer cache."""
    command = [
        "bud",
        "--layers",
        "--format",
        "docker",
        "--isolation",
        "chroot",
        "--network",
        "host",
        "--file",
        str(ROOT / image.dockerfile),
        "--tag",
        reference,
    ]
    if image.target:
        command += ["--target", image.target]
    for key, value in build_args.items():
        command += ["--build-arg", f"{key}={value}"]
    started = time.monotonic()
    used = buildah.stream(*command, str(ROOT))
    print(f"build_images: {reference} built in {time.monotonic() - started:.0f} s", flush=True)
    return used


def export(
    buildah: Buildah, reference: str, directory: Path, index: dict[str, dict[str, str]]
) -> None:
    """A docker-archive of ``reference`` in ``directory`` (once per image id), recorded in
    ``index``."""
    image_id = buildah.image_id(reference)
    file_name = reference.rsplit("/", 1)[-1].replace(":", "_") + ".tar"
    archive = directory / file_name
    known = index.get(reference)
    if known and known.get("id") == image_id and archive.is_file():
        return
    temporary = archive.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    buildah("push", "--quiet", reference, f"docker-archive:{temporary}:{reference}")
    temporary.replace(archive)
    index[reference] = {"id": image_id, "archive": str(archive)}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repository", default=DEFAULT_REPOSITORY, help="default: %(default)s")
    parser.add_argument(
        "--tag", default=None, help="default: the package's version (the chart's appVersion)"
    )
    parser.add_argument(
        "--base",
        choices=("public", "debian"),
        default="public",
        help="public: the Dockerfiles' own base images; debian: made here (see above)",
    )
    parser.add_argument("--only", action="append", choices=[image.name for image in IMAGES])
    parser.add_argument("--push", action="store_true", help="push each image to its repository")
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="keep the layer cache of earlier builds (by default, after building all three "
        "images, untagged images this build did not use are removed)",
    )
    parser.add_argument(
        "--archives", type=Path, help="write docker-archive files and index.json here"
    )
    return parser.parse_args(argv)


def in_private_mount_namespace() -> None:
    """Re-run this program in a mount namespace of its own (see the module's docstring)."""
    if os.environ.get(IN_NAMESPACE) == "1":
        return
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return  # rootless buildah runs in a namespace of its own anyway
    command = ["unshare", "--mount", "--propagation", "private", "--", sys.executable, *sys.argv]
    os.execvpe("unshare", command, {**os.environ, IN_NAMESPACE: "1"})


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse(sys.argv[1:] if argv is None else argv)
    for tool in ("buildah", *(("mmdebstrap",) if arguments.base == "debian" else ())):
        if shutil.which(tool) is None:
            print(
                f"build_images: {tool} is not installed (Debian: apt-get install {tool})",
                file=sys.stderr,
            )
            return 2
    in_private_mount_namespace()
    tag = arguments.tag or package_version()
    STORAGE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-images-") as work:
        buildah = Buildah(Path(work) / "run")
        build_args = {"VERSION": tag, "REVISION": revision()}
        if arguments.base == "debian":
            python, jre = debian_bases(buildah, Path(work))
            build_args |= {"PYTHON_IMAGE": python, "JRE_IMAGE": jre}
        references = []
        used: set[str] = set()
        for image in IMAGES:
            if arguments.only and image.name not in arguments.only:
                continue
            reference = f"{arguments.repository}/{image.name}:{tag}"
            used |= build(buildah, image, reference, build_args)
            references.append(reference)
            if arguments.push:
                buildah("push", reference, f"docker://{reference}")
        if arguments.archives:
            arguments.archives.mkdir(parents=True, exist_ok=True)
            index_file = arguments.archives / "index.json"
            index = json.loads(index_file.read_text()) if index_file.is_file() else {}
            for reference in references:
                export(buildah, reference, arguments.archives, index)
            index_file.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        buildah("rm", "--all", capture=True)
        if not arguments.only and not arguments.keep_cache:
            removed = buildah.prune(used)
            print(f"build_images: removed {removed} step image(s) of earlier builds", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
