"""A Kubernetes control plane for the k8s tier: etcd and kube-apiserver as local processes on
free 127.0.0.1 ports, started with the flags controller-runtime's envtest uses. Nothing runs
controllers, schedulers or kubelets. Each process writes its log to a file; a start that fails
and a process that does not stop cleanly are reported with the end of those logs."""

from __future__ import annotations

import base64
import http.client
import json
import os
import platform
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import kubernetes.client

from ..polling import eventually
from .certs import CLIENT_USER, Credentials, make_credentials

REPO = Path(__file__).resolve().parents[2]
KUBE_MODULE = REPO / "tools" / "kube"
"""The Go module that builds kube-apiserver and the node's components (``make kube-bin``)."""
COREDNS_MODULE = REPO / "tools" / "coredns"
CACHE_DIR = Path.home() / ".cache" / "reconsume"

START_TIMEOUT_S = 90.0
"""etcd, then kube-apiserver until ``/readyz`` answers 200: about 10 s on two idle cores."""
STOP_TIMEOUT_S = 30.0
"""A process still running this long after SIGTERM is killed, and the test session fails."""
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24,fd00:10:96::/112"
"""Dual-stack, IPv4 first: Services are IPv4 unless they ask for IPv6 (``ipFamilies``), as
on an IPv6 cluster they all are."""

T = TypeVar("T")


def required_version(module_dir: Path, module: str) -> str:
    """The version of ``module`` the go.mod in ``module_dir`` requires."""
    for line in (module_dir / "go.mod").read_text().splitlines():
        fields = line.split("//")[0].split()  # `require <module> vX`, or in a block
        if len(fields) >= 2 and fields[-2] == module and "=>" not in fields:
            return fields[-1]
    raise AssertionError(f"no {module} requirement in {module_dir}/go.mod")


def kube_version() -> str:
    """The ``k8s.io/kubernetes`` version ``tools/kube/go.mod`` requires."""
    return required_version(KUBE_MODULE, "k8s.io/kubernetes")


def kube_bin_dir() -> Path:
    """Where ``make kube-bin`` caches the Kubernetes binaries (``$KUBE_BIN_DIR`` overrides it)."""
    override = os.environ.get("KUBE_BIN_DIR")
    if override:
        return Path(override)
    coredns = required_version(COREDNS_MODULE, "github.com/coredns/coredns")
    return CACHE_DIR / "bin" / f"kube-{kube_version()}-coredns-{coredns}"


def default_kube_apiserver() -> Path:
    """The kube-apiserver ``make kube-bin`` built (``$KUBE_APISERVER`` overrides it)."""
    override = os.environ.get("KUBE_APISERVER")
    if override:
        return Path(override)
    return kube_bin_dir() / "kube-apiserver"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 (held together while chosen)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} was not written)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def failure(self, what: str) -> str:
        return f"{self.name}: {what}; the end of {self.log}:\n{log_tail(self.log)}"

    def stop(self, clean: Callable[[int], bool]) -> str | None:
        """SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`; a complaint unless the process
        exited in time with a code ``clean`` accepts."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
                return self.failure(f"still running {STOP_TIMEOUT_S:.0f} s after SIGTERM, killed")
        if not clean(self.popen.returncode):
            return self.failure(f"exited with {self.popen.returncode}")
        return None


def start(
    name: str,
    command: list[str],
    workdir: Path,
    env: dict[str, str] | None = None,
    *,
    log_dir: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> Process:
    """``command`` in ``workdir``, its output in ``<log_dir or workdir>/<name>.log``."""
    log = (log_dir or workdir) / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, **(env or {})},
            preexec_fn=preexec_fn,
        )
    return Process(name, popen, log)


def poll(processes: list[Process], ready: Callable[[], bool], deadline: float, what: str) -> None:
    """Until ``ready()``; fails when a process exits or the deadline passes. ``deadline`` is
    shared by the steps of one start, so each step waits for what is left of it."""

    def running() -> None:
        for process in processes:
            if process.popen.poll() is not None:
                raise AssertionError(process.failure(f"exited with {process.popen.returncode}"))

    def tails() -> str:
        return "\n\n".join(p.failure("still running") for p in processes)

    eventually(
        ready,
        max(deadline - time.monotonic(), 0.0),
        f"{what} (start-up limit {START_TIMEOUT_S:.0f} s)",
        interval_s=0.1,
        check=running,
        detail=tails,
    )


def http_status(connection: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@dataclass(frozen=True)
class ControlPlane:
    """A running kube-apiserver (and its etcd), reached as a member of ``system:masters``."""

    server: str
    """``https://<address>:<port>`` (127.0.0.1 in the k8s tier)"""
    kubeconfig: Path
    """A kubeconfig with the credentials inline (context ``reconsume-test``), for tools and
    for ``KUBECONFIG``."""
    credentials: Credentials
    logs: dict[str, Path]
    """Each process's log, by name (``etcd``, ``kube-apiserver``)."""

    @property
    def host(self) -> str:
        return self.server.removeprefix("https://").rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.server.rsplit(":", 1)[1])

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.credentials.ca_cert))
        context.load_cert_chain(self.credentials.client_cert, self.credentials.client_key)
        return context

    def get(self, path: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """An authenticated ``GET path``: the status and the body."""
        connection = http.client.HTTPSConnection(
            self.host, self.port, context=self.ssl_context(), timeout=timeout_s
        )
        return http_status(connection, path)

    def configuration(self) -> kubernetes.client.Configuration:
        configuration = kubernetes.client.Configuration()
        configuration.host = self.server
        configuration.ssl_ca_cert = str(self.credentials.ca_cert)
        configuration.cert_file = str(self.credentials.client_cert)
        configuration.key_file = str(self.credentials.client_key)
        return configuration

    @contextmanager
    def api_client(self) -> Iterator[kubernetes.client.ApiClient]:
        """A client of the ``kubernetes`` package, closed (connections too) on exit."""
        client = kubernetes.client.ApiClient(self.configuration())
        try:
            yield client
        finally:
            client.close()
            client.rest_client.pool_manager.clear()

    def log_tails(self, lines: int = 40) -> str:
        """The end of each process's log, for failure messages."""
        return "\n\n".join(
            f"== {name} ({path}):\n{log_tail(path, lines)}" for name, path in self.logs.items()
        )


def write_kubeconfig(path: Path, server: str, credentials: Credentials) -> Path:
    def inline(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    name = "reconsume-test"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": inline(credentials.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": CLIENT_USER,
                "user": {
                    "client-certificate-data": inline(credentials.client_cert),
                    "client-key-data": inline(credentials.client_key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": CLIENT_USER}}],
        "current-context": name,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    path.chmod(0o600)
    return path


def etcd_command(etcd: Path, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    return [
        str(etcd),
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
    ]


def kube_apiserver_command(
    binary: Path, etcd_url: str, cert_dir: Path, port: int, credentials: Credentials
) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={credentials.serving_cert}",
        f"--tls-private-key-file={credentials.serving_key}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--allow-privileged=true",
        "--disable-admission-plugins=ServiceAccount",
        "--authorization-mode=RBAC",
        f"--service-account-issuer=https://127.0.0.1:{port}/",
        f"--service-account-key-file={credentials.service_account_public_key}",
        f"--service-account-signing-key-file={credentials.service_account_key}",
        f"--client-ca-file={credentials.ca_cert}",
    ]


def etcd_env() -> dict[str, str]:
    # etcd 3.4 refuses to start on arm64 unless told that this is intended.
    machine = platform.machine().lower()
    return {"ETCD_UNSUPPORTED_ARCH": "arm64"} if machine in {"aarch64", "arm64"} else {}


@contextmanager
def running_control_plane(
    workdir: Path, etcd: Path, kube_apiserver: Path
) -> Iterator[ControlPlane]:
    """Start etcd and kube-apiserver under ``workdir``, wait until the API server is ready,
    and stop both on exit (kube-apiserver first), failing unless both stop cleanly."""
    credentials = make_credentials(workdir / "pki")
    deadline = time.monotonic() + START_TIMEOUT_S
    complaints: list[str | None] = []
    with ExitStack() as stack:
        client_port, peer_port, port = free_ports(3)
        etcd_process = start(
            "etcd",
            etcd_command(etcd, workdir / "etcd", client_port, peer_port),
            workdir,
            etcd_env(),
        )
        # etcd 3.4 ends itself with the signal it received (after cleaning up).
        stack.callback(
            lambda: complaints.append(etcd_process.stop(lambda code: code in {0, -signal.SIGTERM}))
        )

        def etcd_healthy() -> bool:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", client_port, timeout=2)
                status, body = http_status(connection, "/health")
            except OSError:
                return False
            return status == 200 and json.loads(body).get("health") == "true"

        poll([etcd_process], etcd_healthy, deadline, "etcd /health")

        server = f"https://127.0.0.1:{port}"
        command = kube_apiserver_command(
            kube_apiserver, f"http://127.0.0.1:{client_port}", workdir / "certs", port, credentials
        )
        apiserver = start("kube-apiserver", command, workdir)
        stack.callback(lambda: complaints.append(apiserver.stop(lambda code: code == 0)))
        plane = ControlPlane(
            server=server,
            kubeconfig=write_kubeconfig(workdir / "kubeconfig", server, credentials),
            credentials=credentials,
            logs={"etcd": etcd_process.log, "kube-apiserver": apiserver.log},
        )

        def apiserver_ready() -> bool:
            try:
                status, _ = plane.get("/readyz", timeout_s=2)
            except (OSError, http.client.HTTPException):
                return False
            return status == 200

        poll([etcd_process, apiserver], apiserver_ready, deadline, "kube-apiserver /readyz")
        yield plane
    failures = [complaint for complaint in complaints if complaint]
    assert not failures, "\n\n".join(failures)
