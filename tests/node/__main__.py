"""Run the node tier's cluster by hand: ``sudo .venv/bin/python -m tests.node [DIR]`` brings it
up (as the tests do, images imported), prints how to reach it, and stops it on Ctrl-C or
SIGTERM with the same cleanup as the tests."""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
from pathlib import Path

from tests.k8s.conftest import find_etcd
from tests.k8s.control_plane import kube_bin_dir

from .cluster import running_node


def main() -> None:
    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="node-"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with running_node(workdir, kube_bin_dir(), find_etcd()) as node:
        print(f"node ready; logs in {node.layout.logs}")
        print(f"export KUBECONFIG={node.kubeconfig}")
        print(f"alias kubectl={node.kubectl_binary}")
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        print("stopping the node")


if __name__ == "__main__":
    main()
