"""What the node tier changes on the machine, confined where it can be and put back where it
cannot.

Every process of the node (control plane, containerd, kubelet, kube-proxy, and through them the
containerd shims, CNI plugins and containers) runs inside one pair of namespaces made for it
(:class:`Namespaces`):

- a **network namespace**: the pod bridge, the pods' veths, kube-proxy's packet-filter rules,
  ``ip_forward`` and every other ``net.*`` sysctl live there and vanish with it. The machine
  sees one veth pair (``rcn-host`` here, ``rcn-node`` there) and routes to the pod and Service
  ranges through it, which vanish with the pair. So no traffic of the tier goes to the
  machine's own addresses; the tests reach the API server, pods and Services at addresses
  inside that namespace;
- a **mount namespace** with private propagation and fresh tmpfs on ``/run``, ``/var/log``
  and ``/var/lib``: the overlay and volume mounts of containerd and the kubelet, the shims'
  sockets, runc's state, pod network-namespace pins and the kubelet's fixed paths
  (``/var/lib/kubelet/device-plugins``, ``/var/log/containers``) are gone when its last
  process ends, even after a SIGKILL.

What is global stays global, and is recorded before it is changed in a state file
(:data:`STATE_FILE`, one per machine) so that a later session puts it back if this one was
killed (:func:`restore_leftovers`): the kubelet's kernel tunables (:data:`KERNEL_TUNABLES`) and the
pods' cgroups (under :data:`CGROUP_ROOT` in each cgroup v1 hierarchy).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = Path("/run/reconsume-node")
"""The machine's, not a user's: the names, addresses and cgroups are the machine's too."""
STATE_FILE = STATE_DIR / "state.json"
"""What a running node changed; removed once it is put back."""
LOCK_FILE = STATE_DIR / "lock"
"""Held while a node runs: one node per machine (fixed names and addresses)."""

NODE_NAME = "reconsume-node"
HOST_LINK, NODE_LINK = "rcn-host", "rcn-node"
HOST_ADDRESS, NODE_ADDRESS, LINK_PREFIX = "10.243.255.1", "10.243.255.2", 30
"""The veth pair between the machine and the node's namespace; the node's InternalIP is
:data:`NODE_ADDRESS`, where the API server listens."""
POD_CIDR, POD_GATEWAY = "10.244.0.0/24", "10.244.0.1"
SERVICE_CIDR, API_SERVICE_IP, DNS_SERVICE_IP = "10.96.0.0/24", "10.96.0.1", "10.96.0.10"
ROUTED_CIDRS = (POD_CIDR, SERVICE_CIDR)
"""Routed from the machine into the node's namespace, so tests reach pods and Services."""

CGROUP_FS = Path("/sys/fs/cgroup")
CGROUP_ROOT = "reconsume-node"
"""The kubelet's ``cgroupRoot``: every pod's cgroup is below it, in every hierarchy."""
KERNEL_TUNABLES = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
"""The sysctls the kubelet sets at start (``setupKernelTunables``), not per network
namespace: restored at the end."""

PRIVATE_TMPFS = ("/run", "/var/log", "/var/lib")
HOLDER_SCRIPT = """
set -e
mount --make-rprivate /
for dir in {dirs}; do mount -t tmpfs -o mode=0755 reconsume-node "$dir"; done
mkdir -p /var/log/containers /var/log/pods /run/containerd
ip link set lo up
echo ready
exec sleep infinity
""".format(dirs=" ".join(PRIVATE_TMPFS))

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when the test process ends, however it ends (the
    containerd shims, which containerd starts, are found by :func:`kill_namespace_processes`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run(command: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=60)


@contextmanager
def exclusive() -> Iterator[None]:
    """One node per machine at a time; waits for another session's to end."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _namespace_inode(pid: int, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


@dataclass
class Namespaces:
    """The node's mount and network namespaces, held by a process that only sleeps."""

    holder: subprocess.Popen[bytes]
    mount: str
    """``mnt:[inode]`` of the namespace, to recognise its processes."""
    network: str

    @classmethod
    def create(cls) -> Namespaces:
        holder = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--net",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                HOLDER_SCRIPT,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        assert holder.stdout is not None
        line = holder.stdout.readline()
        if line.strip() != b"ready":
            holder.kill()
            _, errors = holder.communicate()
            raise AssertionError(f"the node's namespaces could not be made: {errors.decode()}")
        return cls(
            holder,
            _namespace_inode(holder.pid, "mnt"),
            _namespace_inode(holder.pid, "net"),
        )

    def enter(self) -> list[str]:
        """The prefix that runs a command inside both namespaces."""
        return ["nsenter", f"--target={self.holder.pid}", "--mount", "--net", "--"]

    def run(self, command: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([*self.enter(), *command], check)

    def connect(self) -> None:
        """The veth pair, its addresses, and routes from the machine to pods and Services."""
        run(
            [
                "ip", "link", "add", HOST_LINK, "type", "veth",
                "peer", "name", NODE_LINK, "netns", str(self.holder.pid),
            ]
        )  # fmt: skip
        run(["ip", "address", "add", f"{HOST_ADDRESS}/{LINK_PREFIX}", "dev", HOST_LINK])
        run(["ip", "link", "set", HOST_LINK, "up"])
        self.run(["ip", "address", "add", f"{NODE_ADDRESS}/{LINK_PREFIX}", "dev", NODE_LINK])
        self.run(["ip", "link", "set", NODE_LINK, "up"])
        for cidr in ROUTED_CIDRS:
            run(["ip", "route", "add", cidr, "via", NODE_ADDRESS, "dev", HOST_LINK])
        # Per network namespace: the node routes between its veth and the pod bridge, and
        # bridged pod-to-Service-to-pod traffic passes kube-proxy's rules.
        self.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        self.run(["sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"])

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()
        for stream in (self.holder.stdout, self.holder.stderr):
            if stream is not None:
                stream.close()


def read_tunables() -> dict[str, str]:
    return {name: (Path("/proc/sys") / name).read_text().strip() for name in KERNEL_TUNABLES}


def write_tunables(values: dict[str, str]) -> None:
    for name, value in values.items():
        (Path("/proc/sys") / name).write_text(value)


def cgroup_hierarchies() -> list[Path]:
    """The mounted cgroup v1 hierarchies (and the v2 one of a hybrid layout)."""
    return sorted(path for path in CGROUP_FS.iterdir() if path.is_dir() and not path.is_symlink())


def create_cgroup_root() -> None:
    for hierarchy in cgroup_hierarchies():
        root = hierarchy / CGROUP_ROOT
        root.mkdir(exist_ok=True)
        # A new cpuset has no CPUs or memory nodes; its children inherit that and could not
        # hold a process.
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists():
                (root / name).write_text((hierarchy / name).read_text())


def _cgroup_dirs() -> list[Path]:
    """Every cgroup below :data:`CGROUP_ROOT`, deepest first, the roots last."""
    found: list[Path] = []
    for hierarchy in cgroup_hierarchies():
        root = hierarchy / CGROUP_ROOT
        if root.is_dir():
            found.extend(Path(path) for path, _, _ in os.walk(root))
    return sorted(found, key=lambda path: len(path.parts), reverse=True)


def _cgroup_pids() -> set[int]:
    pids: set[int] = set()
    for directory in _cgroup_dirs():
        try:
            text = (directory / "cgroup.procs").read_text()
        except OSError:
            continue
        pids.update(int(pid) for pid in text.split())
    return pids


def namespace_pids(mount: str | None, network: str | None) -> set[int]:
    """Processes in either namespace, or in the node's cgroups (containers have namespaces of
    their own)."""
    pids = _cgroup_pids()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if _namespace_inode(int(entry.name), "mnt") == mount or (
                _namespace_inode(int(entry.name), "net") == network
            ):
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def kill_namespace_processes(mount: str | None, network: str | None, timeout_s: float) -> int:
    """SIGKILL every process of the node still running; how many there were."""
    deadline = time.monotonic() + timeout_s
    killed: set[int] = set()
    while pids := namespace_pids(mount, network):
        for pid in pids - killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
        if time.monotonic() > deadline:
            raise AssertionError(f"processes of the node outlived SIGKILL: {sorted(pids)}")
        time.sleep(0.05)
        killed &= pids  # a reused pid is a new process
    return len(killed)


def remove_cgroups(timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while directories := _cgroup_dirs():
        for directory in directories:
            try:
                directory.rmdir()
            except OSError:
                continue  # not empty yet: its processes are still exiting
        if time.monotonic() > deadline:
            raise AssertionError(f"cgroups of the node could not be removed: {directories[:5]}")
        time.sleep(0.05)


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def wait_link_gone(timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while link_exists(HOST_LINK):
        if time.monotonic() > deadline:
            raise AssertionError(f"{HOST_LINK} outlived the node's network namespace")
        time.sleep(0.05)


@dataclass
class HostState:
    """What :func:`restore` puts back: saved before the node starts."""

    tunables: dict[str, str]
    mount: str | None = None
    network: str | None = None

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        temporary = STATE_FILE.with_suffix(".tmp")
        temporary.write_text(
            json.dumps({"tunables": self.tunables, "mount": self.mount, "network": self.network})
        )
        temporary.replace(STATE_FILE)

    @classmethod
    def load(cls) -> HostState | None:
        try:
            data = json.loads(STATE_FILE.read_text())
        except FileNotFoundError:
            return None
        return cls(data["tunables"], data.get("mount"), data.get("network"))

    def restore(self, timeout_s: float = 30.0) -> list[str]:
        """Kill what still runs, remove the cgroups, put the tunables back; what was found."""
        found: list[str] = []
        killed = kill_namespace_processes(self.mount, self.network, timeout_s)
        if killed:
            found.append(f"{killed} processes")
        if _cgroup_dirs():
            found.append("cgroups")
        remove_cgroups(timeout_s)
        changed = {k: v for k, v in read_tunables().items() if self.tunables.get(k) != v}
        if changed:
            found.append(f"kernel tunables {sorted(changed)}")
        write_tunables(self.tunables)
        if link_exists(HOST_LINK):
            found.append(HOST_LINK)
            # Its namespace has no process left, but the kernel frees a network namespace only
            # when its last socket is gone: connections of killed processes linger (up to two
            # minutes here) and keep the veth pair. Deleting our end deletes both at once.
            run(["ip", "link", "delete", HOST_LINK], check=False)
        wait_link_gone(timeout_s)
        STATE_FILE.unlink(missing_ok=True)
        return found


def restore_leftovers() -> list[str]:
    """Put back what a killed session left (see the module's docstring); what was found."""
    state = HostState.load()
    if state is None:
        return []
    return state.restore()


def tools_missing() -> list[str]:
    """The machine's tools the node needs that are not installed."""
    needed = (
        "unshare",
        "nsenter",
        "ip",
        "sysctl",
        "mount",
        "iptables",
        "containerd",
        "ctr",
        "runc",
    )
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("CNI plugins (/usr/lib/cni)")
    return missing
