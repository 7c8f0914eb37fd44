"""Apache RocketMQ's name server and broker as processes on 127.0.0.1, and the Java load
generator's command line, for ``bench.compare_rocketmq``.

The servers are Maven Central's ``rocketmq-namesrv`` and ``rocketmq-broker`` jars (no
distribution zip), the load generator a small program on Apache RocketMQ's 4.9.8 client; both
are built by the Maven project ``bench/java`` (``make bench-java``, or :func:`ensure_built`):

    reason = ensure_built(print)          # None once built, else why it cannot run
    with rocketmq_servers(data_root, "Async", DELAY_LEVELS) as running:
        running.namesrv, running.broker.pid
    with rocketmq_replicated_servers(data_root, "Sync", DELAY_LEVELS) as running:
        running.broker.pid, running.replicas[0].pid     # SYNC_MASTER and SLAVE

The JVM options are those of RocketMQ's ``bin/runserver.sh`` and ``bin/runbroker.sh`` with the
heaps sized for a 2-core, 24 GiB machine (and without the GC log files). Every file a server
writes (store, config, its logs under ``user.home``) is under a fresh directory of
``data_root``, removed when the servers stop.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

from bench.common import BENCH_DIR, data_dir
from bench.servers import Running, Server

JAVA_DIR = BENCH_DIR / "java"
SERVER_LIB = JAVA_DIR / "servers" / "target" / "lib"
SERVER_ACL_LIB = JAVA_DIR / "servers-acl" / "target" / "lib"
"""The 5.3.2 broker: the last release with ACL 1.0 (``aclEnable``), for ``bench.compare_acl``."""
PROXY_LIB = JAVA_DIR / "servers-proxy" / "target" / "lib"
"""The proxy of the servers' release (RocketMQ 5's gRPC endpoint), for ``bench.rocketmq_proxy``."""
LOADGEN_JAR = JAVA_DIR / "loadgen" / "target" / "loadgen.jar"
LOADGEN_LIB = JAVA_DIR / "loadgen" / "target" / "lib"
LOADGEN5_JAR = JAVA_DIR / "loadgen5" / "target" / "loadgen5.jar"
LOADGEN5_LIB = JAVA_DIR / "loadgen5" / "target" / "lib"
"""The load generator on RocketMQ's 5.x client (gRPC), for ``bench.compare_client5``."""
BUILT_STAMP = JAVA_DIR / "loadgen" / "target" / ".built"
"""Touched after a successful build (also by the Makefile's bench-java rule)."""
M2_REPO = Path.home() / ".cache" / "reconsume" / "m2"
MVN_COMMAND = (
    "mvn", "-f", str(JAVA_DIR / "pom.xml"), f"-Dmaven.repo.local={M2_REPO}", "-B", "-q", "package",
)  # fmt: skip
LOADGEN_MAIN = "io.reconsume.bench.LoadGen"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"

DELAY_LEVELS = "1s 2s 1s 3s 4s 5s"
"""The delay levels of both brokers. A first retry waits level 3 (3 + reconsumeTimes), 1 s:
the shortest delay RocketMQ's ``messageDelayLevel`` can express (its units are s m h d)."""
SEGMENT_BYTES = 64 * 1024 * 1024
_G1 = (
    "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages",
)  # fmt: skip
NAMESRV_JVM = ("-server", "-Xms512m", "-Xmx512m", "-XX:MetaspaceSize=128m", *_G1)
"""runserver.sh's options (its heap is 4 GiB)."""
BROKER_JVM = (
    "-server", "-Xms2g", "-Xmx2g", *_G1, "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=2g",
)  # fmt: skip
"""runbroker.sh's options (its heap is 8 GiB, its direct memory 15 GiB)."""
LOADGEN_JVM = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC")
_BOOTED = re.compile(r"boot success")
STOP_TIMEOUT_S = 5.0
"""SIGTERM, then SIGKILL after this long (the broker's shutdown takes 15 s; its store is
thrown away)."""


def _newest_source_mtime() -> float:
    sources = [*JAVA_DIR.glob("**/pom.xml"), *JAVA_DIR.glob("*/src/**/*.java")]
    return max((p.stat().st_mtime for p in sources if "target" not in p.parts), default=0.0)


def is_built() -> bool:
    """The jars exist and are newer than every pom and Java source of ``bench/java``."""
    if not (BUILT_STAMP.exists() and LOADGEN_JAR.exists() and LOADGEN5_JAR.exists()):
        return False
    if not all(lib.is_dir() for lib in (SERVER_LIB, SERVER_ACL_LIB, PROXY_LIB)):
        return False
    return BUILT_STAMP.stat().st_mtime >= _newest_source_mtime()


def ensure_built(log: Callable[[str], None]) -> str | None:
    """Build ``bench/java`` if it is missing or stale; ``None`` when it can run, otherwise the
    reason it cannot (no java, no mvn, a failed build)."""
    if shutil.which("java") is None:
        return "java not found on PATH"
    if is_built():
        return None
    if shutil.which("mvn") is None:
        return "mvn not found on PATH and bench/java is not built (make bench-java)"
    log(f"  building bench/java: {shlex.join(MVN_COMMAND)}")
    done = subprocess.run(MVN_COMMAND, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        return "the Maven build of bench/java failed:\n" + "\n".join(tail)
    BUILT_STAMP.touch()
    return None


def _jar_version(lib: Path, artifact: str) -> str:
    for jar in lib.glob(f"{artifact}-*.jar"):
        version = jar.name[len(artifact) + 1 : -len(".jar")]
        if version[:1].isdigit():
            return version
    return "?"


def versions(lib: Path = SERVER_LIB) -> dict[str, str]:
    """Versions of the RocketMQ servers (those of ``lib``), of the client and of Java (from the
    built jars)."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return {
        "rocketmq": _jar_version(lib, "rocketmq-broker"),
        "client": _jar_version(LOADGEN_LIB, "rocketmq-client"),
        "java": java.stderr.strip().splitlines()[0] if java.stderr.strip() else "?",
        "java_runtime": " ".join(java.stderr.strip().splitlines()[1:2]),
    }


def loadgen_command(command: str, namesrv: str, *args: str, log_root: Path) -> list[str]:
    """``java ... LoadGen <command> --namesrv <namesrv> <args>`` (client logs under
    ``log_root``)."""
    classpath = f"{LOADGEN_JAR}:{LOADGEN_LIB}/*"
    return [
        "java", *LOADGEN_JVM, f"-Drocketmq.client.logRoot={log_root}", "-cp", classpath,
        LOADGEN_MAIN, command, "--namesrv", namesrv, *args,
    ]  # fmt: skip


def display(command: list[str] | tuple[str, ...]) -> str:
    """``command`` as a shell line, with paths inside the repository made relative to it."""
    line = shlex.join(command).replace(f"{BENCH_DIR.parent}/", "")
    return line.replace(f"={Path.home()}/", "=$HOME/")


def _bindable(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def _any_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_ports(brokers: int = 1) -> tuple[int, ...]:
    """A name-server port and ``brokers`` broker ports ``p``, each with ``p - 2`` (the broker's
    second, "fast" port) and ``p + 1`` (its HA port, bound on every address) free as well."""
    for _ in range(100):
        ports = [_any_port() for _ in range(brokers + 1)]
        spans = [(port - 2, port + 1) for port in ports[1:]]
        if any(low <= 1024 for low, _ in spans) or any(
            a < d + 1 and c < b + 1 for i, (a, b) in enumerate(spans) for c, d in spans[i + 1 :]
        ):
            continue  # a broker's span too low, or two spans overlapping
        if any(low <= ports[0] <= high for low, high in spans):
            continue
        wanted = [ports[0], *(p for port in ports[1:] for p in (port - 2, port, port + 1))]
        if all(_bindable(port) for port in wanted):
            return tuple(ports)
    raise RuntimeError("no free ports for the RocketMQ name server and brokers")


def broker_conf(
    namesrv_port: int,
    broker_port: int,
    store: str,
    flush_mode: str,
    delay_levels: str,
    *,
    role: str = "ASYNC_MASTER",
    broker_id: int = 0,
    broker_name: str = "bench-broker",
    extra: tuple[str, ...] = (),
) -> str:
    """broker.conf: one master (or ``role`` and ``broker_id``), loopback, 64 MiB commit-log
    files, ``flush_mode``; ``extra`` lines (``key=value``) at the end."""
    flush = {"Async": "ASYNC_FLUSH", "Sync": "SYNC_FLUSH"}[flush_mode]
    return "\n".join(
        [
            "brokerClusterName=bench",
            f"brokerName={broker_name}",
            f"brokerId={broker_id}",
            f"brokerRole={role}",
            f"flushDiskType={flush}",
            f"listenPort={broker_port}",
            f"haListenPort={broker_port + 1}",
            "bindAddress=127.0.0.1",
            "brokerIP1=127.0.0.1",
            f"namesrvAddr=127.0.0.1:{namesrv_port}",
            f"storePathRootDir={store}",
            f"mappedFileSizeCommitLog={SEGMENT_BYTES}",
            "autoCreateTopicEnable=true",
            "autoCreateSubscriptionGroup=true",
            f"messageDelayLevel={delay_levels}",
            *extra,
            "",
        ]
    )


SYNC_MASTER = ("inSyncReplicas=2", "totalReplicas=2")
"""The master's lines beside ``brokerRole=SYNC_MASTER``: since 5.0 a SYNC_MASTER waits for
``inSyncReplicas`` copies, the master's own included, and that is 1 by default, so without
them it answers a send before its slave has the message (4.x's SYNC_MASTER always waited)."""


def replicated_broker_confs(
    namesrv_port: int,
    ports: tuple[int, int],
    stores: tuple[str, str],
    flush_mode: str,
    delay_levels: str,
) -> tuple[str, str]:
    """broker.conf of a SYNC_MASTER (brokerId 0) and of its SLAVE (brokerId 1): the same
    brokerName and flushDiskType; the slave finds the master's HA port through the name
    server."""
    master = broker_conf(
        namesrv_port,
        ports[0],
        stores[0],
        flush_mode,
        delay_levels,
        role="SYNC_MASTER",
        extra=SYNC_MASTER,
    )
    slave = broker_conf(
        namesrv_port, ports[1], stores[1], flush_mode, delay_levels, role="SLAVE", broker_id=1
    )
    return master, slave


def _start_java(
    jvm: tuple[str, ...],
    home: Path,
    main: str,
    conf: Path,
    address: str,
    timeout_s: float = 120.0,
    lib: Path = SERVER_LIB,
    *,
    conf_flag: str = "-c",
    ready: re.Pattern[str] = _BOOTED,
) -> Server:
    """Start ``java <jvm> <main> -c <conf>`` (the jars of ``lib``; the proxy's flag is ``-pc``)
    and wait for its "boot success" line (or one matching ``ready``)."""
    command = [
        "java", *jvm, f"-Drocketmq.home.dir={home}", f"-Duser.home={home}",
        "-cp", f"{lib}/*", main, conf_flag, str(conf),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=home
    )
    lines: list[str] = []
    booted = threading.Event()
    # The ready line, once printed: the output of a server that fails may end before
    # ``poll`` sees it exit.
    started: list[str] = []

    def pump() -> None:  # keeps reading, so a chatty server never blocks on a full pipe
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if ready.search(line):
                started.append(line)
                booted.set()
        booted.set()

    threading.Thread(target=pump, daemon=True).start()
    if not booted.wait(timeout_s) or not started or process.poll() is not None:
        process.kill()
        process.wait()
        logs = sorted((home / "logs").glob("**/*.log"))
        tail = "".join(lines[-20:]) + "".join(
            "\n".join(p.read_text(errors="replace").splitlines()[-10:]) for p in logs[:3]
        )
        raise RuntimeError(f"{main} did not start ({shlex.join(command)}):\n{tail}")
    return Server(process, address, lines)


@contextmanager
def rocketmq_servers(
    data_root: Path, flush_mode: str, delay_levels: str = DELAY_LEVELS
) -> Iterator[Running]:
    """An Apache RocketMQ name server and broker with a fresh store under
    ``data_root/rocketmq-<flush mode>-*``; the broker's ``pid`` is ``running.broker.pid``."""
    with ExitStack() as stack:
        home = stack.enter_context(data_dir(data_root.resolve(), f"rocketmq-{flush_mode.lower()}"))
        namesrv_port, broker_port = free_ports()
        namesrv_conf = home / "namesrv.conf"
        namesrv_conf.write_text(f"listenPort={namesrv_port}\nbindAddress=127.0.0.1\n")
        conf = home / "broker.conf"
        store = home / "store"
        conf.write_text(
            broker_conf(namesrv_port, broker_port, str(store), flush_mode, delay_levels)
        )
        namesrv = _start_java(
            NAMESRV_JVM, home, NAMESRV_MAIN, namesrv_conf, f"127.0.0.1:{namesrv_port}"
        )
        stack.callback(namesrv.stop, STOP_TIMEOUT_S)
        broker = _start_java(BROKER_JVM, home, BROKER_MAIN, conf, f"127.0.0.1:{broker_port}")
        stack.callback(broker.stop, STOP_TIMEOUT_S)
        yield Running(namesrv.address, broker, flush_mode, store)


@contextmanager
def rocketmq_replicated_servers(
    data_root: Path, flush_mode: str, delay_levels: str = DELAY_LEVELS
) -> Iterator[Running]:
    """An Apache RocketMQ name server, a SYNC_MASTER and its SLAVE (``replicated_broker_confs``)
    with fresh stores under ``data_root/rocketmq-sync-master-<flush mode>-*``; the slave is
    ``running.replicas[0]``. The slave may still be connecting when this yields (the load
    generator's ``setup --replicas 2 --probe-topic T`` waits for it)."""
    with ExitStack() as stack:
        name = f"rocketmq-sync-master-{flush_mode.lower()}"
        home = stack.enter_context(data_dir(data_root.resolve(), name))
        namesrv_port, master_port, slave_port = free_ports(2)
        namesrv_conf = home / "namesrv.conf"
        namesrv_conf.write_text(f"listenPort={namesrv_port}\nbindAddress=127.0.0.1\n")
        stores = (home / "store-master", home / "store-slave")
        confs = replicated_broker_confs(
            namesrv_port, (master_port, slave_port), (str(stores[0]), str(stores[1])),
            flush_mode, delay_levels,
        )  # fmt: skip
        namesrv = _start_java(
            NAMESRV_JVM, home, NAMESRV_MAIN, namesrv_conf, f"127.0.0.1:{namesrv_port}"
        )
        stack.callback(namesrv.stop, STOP_TIMEOUT_S)
        started: list[Server] = []
        roles = zip(("master", "slave"), confs, (master_port, slave_port), strict=True)
        for role, conf_text, port in roles:
            conf = home / f"broker-{role}.conf"
            conf.write_text(conf_text)
            # Each broker its own user.home, so their logs stay apart.
            broker_home = home / role
            broker_home.mkdir()
            server = _start_java(BROKER_JVM, broker_home, BROKER_MAIN, conf, f"127.0.0.1:{port}")
            stack.callback(server.stop, STOP_TIMEOUT_S)
            started.append(server)
        yield Running(namesrv.address, started[0], flush_mode, stores[0], (started[1],))


CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"
ADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
CONTROLLER_JVM = NAMESRV_JVM
"""The controller's options (``bin/mqcontroller`` runs it through ``runserver.sh``)."""


def controller_conf(port: int, store: str) -> str:
    """controller.conf: one DLedger controller (its peer address is also the one brokers
    use), 64 MiB log files (1 GiB by default)."""
    return "\n".join(
        [
            "controllerDLegerGroup=bench",
            f"controllerDLegerPeers=n0-127.0.0.1:{port}",
            "controllerDLegerSelfId=n0",
            f"controllerStorePath={store}",
            f"mappedFileSize={SEGMENT_BYTES}",
            "enableElectUncleanMaster=false",
            "notifyBrokerRoleChanged=true",
            "",
        ]
    )


def controller_broker_conf(
    namesrv_port: int,
    controller_port: int,
    broker_port: int,
    store: str,
    flush_mode: str,
    broker_name: str,
    extra: tuple[str, ...] = (),
) -> str:
    """broker.conf of a broker in controller mode: the controller elects the master among the
    brokers of ``broker_name`` and hands out their ids; a send is answered once every broker of
    the SyncStateSet has it (``allAckInSyncStateSet``, so no acknowledged message is lost)."""
    return broker_conf(
        namesrv_port, broker_port, store, flush_mode, DELAY_LEVELS, role="SLAVE", broker_id=-1,
        broker_name=broker_name,
        extra=(
            "enableControllerMode=true",
            f"controllerAddr=127.0.0.1:{controller_port}",
            "allAckInSyncStateSet=true",
            *extra,
        ),
    )  # fmt: skip


def start_controller(home: Path, port: int) -> Server:
    """A standalone controller (``ControllerStartup -c controller.conf``) with its store under
    ``home/controller``."""
    conf = home / "controller.conf"
    conf.write_text(controller_conf(port, str(home / "controller")))
    return _start_java(CONTROLLER_JVM, home, CONTROLLER_MAIN, conf, f"127.0.0.1:{port}")


def start_broker(home: Path, conf: Path, port: int, lib: Path = SERVER_LIB) -> Server:
    """A broker (``BrokerStartup -c conf``, ``BROKER_JVM``) with ``home`` as its user.home and
    rocketmq.home.dir, from the jars of ``lib``."""
    return _start_java(BROKER_JVM, home, BROKER_MAIN, conf, f"127.0.0.1:{port}", lib=lib)


def start_namesrv(home: Path, port: int, lib: Path = SERVER_LIB) -> Server:
    conf = home / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n")
    return _start_java(NAMESRV_JVM, home, NAMESRV_MAIN, conf, f"127.0.0.1:{port}", lib=lib)


def admin_command(*args: str) -> list[str]:
    """``mqadmin <args>`` (Apache RocketMQ's admin tool, from the servers' jars)."""
    return ["java", "-Xms256m", "-Xmx256m", "-cp", f"{SERVER_LIB}/*", ADMIN_MAIN, *args]
