"""A node whose test session is killed leaves only what the next session puts back.

Runs after the node tier (its own package, so the tier's node is down: one node per machine).
The node is started as ``python -m tests.node`` and SIGKILLed once ready, as a killed test run
would be: its own processes die with it (parent-death signal), but the containerd shims and the
pods' containers do not, and with them the node's namespaces, veth and cgroups live on; the
kernel tunables stay as the kubelet set them. The next session's first step,
:func:`tests.node.host.restore_leftovers`, must find them and put everything back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.node import host
from tests.node.prerequisites import prerequisites

pytestmark = [pytest.mark.slow, pytest.mark.crash, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def mounts_under(directory: Path) -> list[str]:
    """Mount points of the machine's mount namespace below ``directory``."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1]
        if point.startswith(str(directory)):
            found.append(point)
    return found


def test_a_killed_session_leaves_what_the_next_one_puts_back(tmp_path: Path) -> None:
    prerequisites()
    before = host.read_tunables()
    workdir = tmp_path / "node"
    session = subprocess.Popen(
        [sys.executable, "-m", "tests.node", str(workdir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert session.stdout is not None
        output = []
        for line in session.stdout:
            output.append(line)
            if line.startswith("node ready"):
                break
        else:
            raise AssertionError("the node did not start:\n" + "".join(output[-40:]))
        state = host.HostState.load()
        assert state is not None
        assert state.tunables == before
        os.killpg(session.pid, signal.SIGKILL)
    finally:
        session.kill()
        session.wait()
        if session.stdout is not None:
            session.stdout.close()

    # Left behind: CoreDNS's container and its shim, so the node's namespaces (and the veth
    # of its network namespace) and cgroups; the kernel tunables the kubelet set.
    assert host.namespace_pids(state.mount, state.network), "nothing outlived the session"
    assert host.link_exists(host.HOST_LINK)
    assert any((h / host.CGROUP_ROOT).is_dir() for h in host.cgroup_hierarchies())
    with host.exclusive():
        found = host.restore_leftovers()
    assert any("processes" in what for what in found), found
    assert "cgroups" in found, found
    # Put back: no process, namespace, veth, cgroup or mount of the node; the tunables as they
    # were; no state file.
    assert not host.namespace_pids(state.mount, state.network)
    assert not host.link_exists(host.HOST_LINK)
    assert not any((h / host.CGROUP_ROOT).exists() for h in host.cgroup_hierarchies())
    assert host.read_tunables() == before
    assert not host.STATE_FILE.exists()
    assert not mounts_under(workdir), mounts_under(workdir)
