"""The images a node runs, as docker-archive files listed in ``index.json`` of
:data:`ARCHIVES` (``make node-deps`` writes them):

- reconsume's three images, built from its Dockerfiles by ``tools/build_images.py --base
  debian --archives`` (``make images``);
- the pod sandbox ("pause") and CoreDNS, each one static binary of ``make kube-bin`` in an
  otherwise empty image, built here: ``python -m tests.node.images BIN_DIR``.

The node imports them into containerd (``ctr images import``); no registry is involved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .configs import COREDNS_IMAGE_NAME, PAUSE_IMAGE

CACHE_DIR = Path.home() / ".cache" / "reconsume"
ARCHIVES = Path(os.environ.get("RECONSUME_IMAGE_ARCHIVES", CACHE_DIR / "images"))
STORAGE = CACHE_DIR / "containers" / "storage"
PRODUCT_IMAGES = ("reconsume", "dlq-jobs", "operator")


def index() -> dict[str, dict[str, str]]:
    """Image reference -> ``{"id", "archive"}``; empty when nothing was built."""
    try:
        loaded: dict[str, dict[str, str]] = json.loads((ARCHIVES / "index.json").read_text())
    except FileNotFoundError:
        return {}
    return loaded


def coredns_image(bin_dir: Path) -> str:
    """``<name>:<version>``, the version from the directory ``make kube-bin`` names."""
    version = bin_dir.name.rsplit("coredns-", 1)[-1]
    return f"{COREDNS_IMAGE_NAME}:{version}"


def _buildah(runroot: Path, *args: str) -> str:
    command = ["buildah", "--root", str(STORAGE), "--runroot", str(runroot)]
    command += ["--storage-driver", "overlay", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def build_binary_image(runroot: Path, binary: Path, reference: str, args: list[str]) -> str:
    """An image of one static binary at ``/<name>``, its entrypoint; the image id."""
    container = _buildah(runroot, "from", "scratch")
    try:
        _buildah(runroot, "copy", "--chmod", "0755", container, str(binary), f"/{binary.name}")
        entrypoint = json.dumps([f"/{binary.name}", *args])
        _buildah(runroot, "config", f"--entrypoint={entrypoint}", "--user=65534:65534", container)
        # A fixed creation time: the same binary gives the same image id, exported once.
        _buildah(
            runroot,
            "commit",
            "--quiet",
            "--timestamp=0",
            "--format",
            "docker",
            container,
            reference,
        )
    finally:
        _buildah(runroot, "rm", container)
    return _buildah(
        runroot, "inspect", "--type", "image", "--format", "{{.FromImageID}}", reference
    )


def main(bin_dir: Path) -> None:
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    images = index()
    wanted = {
        PAUSE_IMAGE: (bin_dir / "pause", []),
        coredns_image(bin_dir): (bin_dir / "coredns", []),
    }
    with tempfile.TemporaryDirectory(prefix="node-images-") as runroot:
        for reference, (binary, args) in wanted.items():
            image_id = build_binary_image(Path(runroot), binary, reference, args)
            archive = ARCHIVES / (reference.rsplit("/", 1)[-1].replace(":", "_") + ".tar")
            known = images.get(reference)
            if known and known.get("id") == image_id and archive.is_file():
                continue
            temporary = archive.with_suffix(".tmp")
            temporary.unlink(missing_ok=True)
            target = f"docker-archive:{temporary}:{reference}"
            _buildah(Path(runroot), "push", "--quiet", reference, target)
            temporary.replace(archive)
            images[reference] = {"id": image_id, "archive": str(archive)}
    (ARCHIVES / "index.json").write_text(json.dumps(images, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    if os.environ.get("RECONSUME_NODE_IMAGES_IN_NAMESPACE") != "1":
        # buildah's mounts end with this mount namespace (see tools/build_images.py).
        os.execvpe(
            "unshare",
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                sys.executable,
                "-m",
                "tests.node.images",
                *sys.argv[1:],
            ],
            {**os.environ, "RECONSUME_NODE_IMAGES_IN_NAMESPACE": "1"},
        )
    main(Path(sys.argv[1]))
