"""A one-node Kubernetes cluster of real components, for the node tier: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, containerd (with runc and the CNI bridge), the
kubelet and kube-proxy as processes in the node's namespaces (:mod:`tests.node.host`), then
CoreDNS as a pod and a default StorageClass with its provisioner. Images are imported from
archives (:mod:`tests.node.images`).

Stopping is ordered (Appendix C of the design): controllers and scheduler first, so nothing
makes new pods; every pod deleted and gone from the node; then kube-proxy, the kubelet,
containerd, kube-apiserver and etcd; then whatever is left in the namespaces is killed (the
containerd shims), which ends the namespaces and with them every mount, the veth pair and the
routes; then the cgroups go and the kernel tunables are put back.
"""

from __future__ import annotations

import http.client
import signal
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import kubernetes.client
from kubernetes.client.rest import ApiException

from tests.k8s import control_plane
from tests.k8s.control_plane import ControlPlane, Process, etcd_env, write_kubeconfig

from . import addons, configs, host, images
from .configs import API_PORT, Layout
from .node import Node
from .pki import make_pki
from .provisioner import LocalProvisioner

START_TIMEOUT_S = 180.0
"""From nothing to CoreDNS ready: about 30 s on two idle cores, images imported."""
STOP_TIMEOUT_S = 60.0
POD_DELETION_TIMEOUT_S = 120.0


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    scheme, rest = url.split("://", 1)
    address, path = rest.split("/", 1)
    hostname, port = address.rsplit(":", 1)
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = http.client.HTTPSConnection(hostname, int(port), timeout=2, context=context)
    else:
        connection = http.client.HTTPConnection(hostname, int(port), timeout=2)
    try:
        connection.request("GET", "/" + path)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _unverified() -> ssl.SSLContext:
    """The controller manager's and scheduler's self-signed /healthz."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class Starter:
    """Starts the node's processes in its namespaces and stops them in reverse order."""

    def __init__(self, layout: Layout, namespaces: host.Namespaces) -> None:
        self.layout = layout
        self.namespaces = namespaces
        self.processes: dict[str, Process] = {}
        self.complaints: list[str] = []

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Process:
        """``command`` in the node's namespaces; it dies with the test process."""
        process = control_plane.start(
            name,
            [*self.namespaces.enter(), *command],
            self.layout.root,
            env,
            log_dir=self.layout.logs,
            preexec_fn=host.die_with_parent,
        )
        self.processes[name] = process
        return process

    def stop(self, name: str) -> None:
        process = self.processes.get(name)
        if process is None or process.popen.poll() is not None:
            return
        process.popen.send_signal(signal.SIGTERM)
        try:
            process.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait()
            self.complaints.append(
                process.failure(f"still running {STOP_TIMEOUT_S:.0f} s after SIGTERM")
            )

    def wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        while not ready():
            for process in self.processes.values():
                if process.popen.poll() is not None:
                    raise AssertionError(
                        process.failure(f"exited with {process.popen.returncode} before {what}")
                    )
            if time.monotonic() > deadline:
                tails = "\n\n".join(p.failure("running") for p in self.processes.values())
                raise AssertionError(f"{what} not reached within {START_TIMEOUT_S:.0f} s\n{tails}")
            time.sleep(0.2)


def import_images(starter: Starter, known: dict[str, dict[str, str]]) -> None:
    socket = starter.layout.containerd_socket
    for reference, entry in sorted(known.items()):
        result = starter.namespaces.run(
            [
                "ctr",
                f"--address={socket}",
                "--namespace=k8s.io",
                "images",
                "import",
                "--no-unpack=false",
                entry["archive"],
            ],
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(
                f"ctr images import {entry['archive']} ({reference}): {result.stderr}"
            )


def _node_ready(api: kubernetes.client.CoreV1Api) -> bool:
    try:
        node = api.read_node(host.NODE_NAME)
    except ApiException:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def _default_service_account(api: kubernetes.client.CoreV1Api) -> bool:
    try:
        api.read_namespaced_service_account("default", "default")
    except ApiException:
        return False
    return True


def _deployment_ready(apps: kubernetes.client.AppsV1Api, namespace: str, name: str) -> bool:
    try:
        deployment = apps.read_namespaced_deployment(name, namespace)
    except ApiException:
        return False
    return (deployment.status.ready_replicas or 0) >= (deployment.spec.replicas or 1)


def delete_every_pod(node: Node, timeout_s: float = POD_DELETION_TIMEOUT_S) -> list[str]:
    """Delete every pod (its grace period honoured), then force what is left; the pods that
    needed force. Returns once the API server lists no pod and the node runs no container."""
    forced: list[str] = []
    with node.plane.api_client() as client:
        api = kubernetes.client.CoreV1Api(client)
        for pod in api.list_pod_for_all_namespaces().items:
            try:
                api.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
            except ApiException as error:
                if error.status != 404:
                    raise
        deadline = time.monotonic() + timeout_s
        while pods := api.list_pod_for_all_namespaces().items:
            if time.monotonic() > deadline:
                for pod in pods:
                    forced.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
                    try:
                        api.delete_namespaced_pod(
                            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                        )
                    except ApiException as error:
                        if error.status != 404:
                            raise
                break
            time.sleep(0.5)
    return forced


def _running_tasks(node: Node) -> list[str]:
    result = node.namespaces.run(
        [
            "ctr",
            f"--address={node.layout.containerd_socket}",
            "--namespace=k8s.io",
            "tasks",
            "list",
            "--quiet",
        ],
        check=False,
    )
    return result.stdout.split() if result.returncode == 0 else []


@contextmanager
def running_node(workdir: Path, kube_bin_dir: Path, etcd: Path) -> Iterator[Node]:
    """A node ready for pods (see the module's docstring); everything undone on exit."""
    layout = Layout(workdir)
    layout.make()
    layout.config("resolv.conf").write_text("")
    known_images = images.index()
    with host.exclusive(), ExitStack() as stack:
        leftovers = host.restore_leftovers()
        if leftovers:
            print(f"node: put back what an earlier session left: {', '.join(leftovers)}")
        credentials = make_pki(layout)
        state = host.HostState(host.read_tunables())
        state.save()
        namespaces = host.Namespaces.create()
        state.mount, state.network = namespaces.mount, namespaces.network
        state.save()
        stack.callback(_restore_host, state, namespaces)
        namespaces.connect()
        host.create_cgroup_root()

        starter = Starter(layout, namespaces)
        stack.callback(_stop_processes, starter)
        deadline = time.monotonic() + START_TIMEOUT_S

        starter.start(
            "etcd",
            control_plane.etcd_command(
                etcd, layout.etcd, configs.ETCD_CLIENT_PORT, configs.ETCD_PEER_PORT
            ),
            etcd_env(),
        )
        starter.start("kube-apiserver", configs.apiserver_command(kube_bin_dir, layout))
        server = f"https://{host.NODE_ADDRESS}:{API_PORT}"
        plane = ControlPlane(
            server=server,
            kubeconfig=write_kubeconfig(layout.root / "kubeconfig", server, credentials),
            credentials=credentials,
            logs={},
        )

        def apiserver_ready() -> bool:
            try:
                status, _ = plane.get("/readyz", timeout_s=2)
            except (OSError, http.client.HTTPException):
                return False
            return status == 200

        starter.wait(apiserver_ready, deadline, "kube-apiserver /readyz")
        starter.start(
            "kube-controller-manager",
            configs.controller_manager_command(kube_bin_dir, layout),
        )
        starter.start("kube-scheduler", configs.scheduler_command(kube_bin_dir, layout))
        layout.config("containerd.toml").write_text(configs.containerd_config(layout))
        configs.write_json(
            layout.cni / "net.d" / "10-reconsume-node.conflist", configs.cni_config(layout)
        )
        starter.start("containerd", ["containerd", f"--config={layout.config('containerd.toml')}"])
        starter.wait(layout.containerd_socket.exists, deadline, "containerd's socket")
        import_images(starter, known_images)

        configs.write_json(layout.config("kubelet.json"), configs.kubelet_config(layout))
        starter.start("kubelet", configs.kubelet_command(kube_bin_dir, layout))
        configs.write_json(layout.config("kube-proxy.json"), configs.kube_proxy_config(layout))
        starter.start("kube-proxy", configs.kube_proxy_command(kube_bin_dir, layout))
        context = _unverified()
        for name, port in (
            ("kube-controller-manager", configs.CONTROLLER_MANAGER_PORT),
            ("kube-scheduler", configs.SCHEDULER_PORT),
        ):
            url = f"https://{host.NODE_ADDRESS}:{port}/healthz"
            starter.wait(lambda url=url: _http_ok(url, context), deadline, f"{name} /healthz")
        with plane.api_client() as client:
            core = kubernetes.client.CoreV1Api(client)
            apps = kubernetes.client.AppsV1Api(client)
            starter.wait(lambda: _node_ready(core), deadline, f"node {host.NODE_NAME} Ready")
            starter.wait(lambda: _default_service_account(core), deadline, "ServiceAccount default")

            provisioner = LocalProvisioner(plane.configuration(), layout.volumes)
            provisioner.start()
            stack.callback(provisioner.stop)
            node = Node(layout, plane, kube_bin_dir, namespaces, starter.processes, provisioner)
            stack.callback(_delete_pods, node, starter)
            coredns_image = images.coredns_image(kube_bin_dir)
            node.apply([*addons.coredns(coredns_image), addons.storage_class()])
            starter.wait(
                lambda: _deployment_ready(apps, "kube-system", "coredns"), deadline, "CoreDNS ready"
            )
        yield node
    # ExitStack has run: pods deleted, processes stopped, host restored.
    failures = [c for c in starter.complaints if c]
    assert not failures, "\n\n".join(failures)


def _delete_pods(node: Node, starter: Starter) -> None:
    """Before any process stops: nothing makes new pods, every pod is deleted and gone."""
    starter.stop("kube-controller-manager")
    starter.stop("kube-scheduler")
    forced = delete_every_pod(node)
    if forced:
        starter.complaints.append(f"pods that needed force to go: {forced}")
    deadline = time.monotonic() + POD_DELETION_TIMEOUT_S
    while tasks := _running_tasks(node):
        if time.monotonic() > deadline:
            starter.complaints.append(
                f"containers still running after their pods were deleted: {tasks}"
            )
            break
        time.sleep(0.5)


def _stop_processes(starter: Starter) -> None:
    for name in (
        "kube-proxy",
        "kubelet",
        "containerd",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-apiserver",
        "etcd",
    ):
        starter.stop(name)


def _restore_host(state: host.HostState, namespaces: host.Namespaces) -> None:
    namespaces.close()
    state.restore()
