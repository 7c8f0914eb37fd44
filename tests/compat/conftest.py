"""Tools the compat tier needs. A missing tool fails the run in CI (``CI=true``) and skips
the test elsewhere, with the reason and the command that installs it."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

HERE = Path(__file__).resolve().parent
ALI_ONS_DIR = HERE / "ali_ons"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> NoReturn:
    """Fail in CI, skip locally."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a compat test may not be skipped)", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class NodeProject:
    node: str
    """The ``node`` executable."""
    directory: Path
    """The npm project (package.json, lockfile, installed node_modules)."""

    def script(self, name: str) -> Path:
        return self.directory / name


@pytest.fixture(scope="session")
def ali_ons() -> NodeProject:
    """The ali-ons driver project, with its locked dependencies installed."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian: apt-get install nodejs npm)")
    if not (ALI_ONS_DIR / "node_modules" / "ali-ons" / "package.json").is_file():
        missing(f"ali-ons is not installed in {ALI_ONS_DIR}: run `make compat-deps`")
    return NodeProject(node, ALI_ONS_DIR)


@pytest.fixture(scope="session")
def grpc_js() -> NodeProject:
    """grpc-js, installed in the ali-ons driver project (one npm lockfile for the tier)."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Debian: apt-get install nodejs npm)")
    if not (ALI_ONS_DIR / "node_modules" / "@grpc" / "grpc-js" / "package.json").is_file():
        missing(f"@grpc/grpc-js is not installed in {ALI_ONS_DIR}: run `make compat-deps`")
    return NodeProject(node, ALI_ONS_DIR)


MQADMIN_DIR = HERE / "mqadmin"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
JVM_FLAGS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""A small heap and the quick JIT tier: mqadmin runs for about a second of CPU."""


@dataclass(frozen=True)
class Mqadmin:
    java: str
    """The ``java`` executable."""
    directory: Path
    """The Maven project: ``target/lib`` holds rocketmq-tools and its dependencies, and
    ``conf/logback_tools.xml`` is the log configuration mqadmin loads from ROCKETMQ_HOME."""
    home: Path | None = None
    """ROCKETMQ_HOME when not ``directory``: one whose ``conf`` has ``tools.yml`` too, the
    credentials mqadmin signs with."""

    def command(self, *args: str) -> list[str]:
        """``mqadmin <args>``: MQAdminStartup with the jars of ``target/lib``."""
        return [
            self.java,
            *JVM_FLAGS,
            f"-Drocketmq.home.dir={self.home or self.directory}",  # what ROCKETMQ_HOME would say
            # The client logs through slf4j (to stderr, by our logback config), not to files
            # under ~/logs.
            "-Drocketmq.client.logUseSlf4j=true",
            "-cp",
            str(self.directory / "target" / "lib" / "*"),
            MQADMIN_MAIN,
            *args,
        ]


@pytest.fixture(scope="session")
def mqadmin() -> Mqadmin:
    """Apache RocketMQ's mqadmin (rocketmq-tools, pinned by ``mqadmin/pom.xml``)."""
    java = shutil.which("java")
    if java is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jre-headless maven)")
    if not (MQADMIN_DIR / "target" / "lib" / "rocketmq-tools-4.9.8.jar").is_file():
        missing(
            f"rocketmq-tools is not installed in {MQADMIN_DIR}/target/lib: run `make compat-deps`"
        )
    return Mqadmin(java, MQADMIN_DIR)


JAVA_CLIENT_DIR = HERE / "java"
JAVA_CLIENT_JAR = JAVA_CLIENT_DIR / "target" / "java-client-driver.jar"


@dataclass(frozen=True)
class JavaClient:
    java: str
    """The ``java`` executable."""
    jar: Path
    """The driver (``java/src``), built by ``make compat-deps``; its manifest names the jars of
    ``target/lib``: Apache RocketMQ's rocketmq-client 4.9.8 and its dependencies."""

    def command(self, scenario: str, *args: str, state_dir: Path) -> list[str]:
        """``driver <scenario> <args>``; the client writes its log and its broadcasting
        offsets under ``state_dir`` (not under ~), and rebalances every second (not every
        20 s), so it takes a new retry topic's queues soon after the route has them."""
        return [
            self.java,
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Drocketmq.client.logRoot={state_dir / 'logs'}",
            f"-Drocketmq.client.localOffsetStoreDir={state_dir / 'offsets'}",
            "-Drocketmq.client.rebalance.waitInterval=1000",
            "-jar",
            str(self.jar),
            scenario,
            *args,
        ]


@pytest.fixture(scope="session")
def java_client() -> JavaClient:
    """The Java client driver (Apache RocketMQ's Java client, pinned by ``java/pom.xml``)."""
    return find_java_client()


def find_java_client() -> JavaClient:
    """:func:`java_client`, for other tiers' fixtures."""
    java = shutil.which("java")
    if java is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jdk-headless maven)")
    if not JAVA_CLIENT_JAR.is_file():
        missing(f"the Java client driver is not built ({JAVA_CLIENT_JAR}): run `make compat-deps`")
    return JavaClient(java, JAVA_CLIENT_JAR)


JAVA5_CLIENT_JAR = HERE / "java5" / "target" / "java5-client-driver.jar"


@pytest.fixture(scope="session")
def client5_drivers() -> tuple[str, ...]:
    """The RocketMQ 5.x client drivers (``client5_support``): the Python client is a
    dependency of the test extra; the Java client's driver must be built."""
    if shutil.which("java") is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jdk-headless maven)")
    if not JAVA5_CLIENT_JAR.is_file():
        missing(
            f"the 5.x Java client driver is not built ({JAVA5_CLIENT_JAR}): run `make compat-deps`"
        )
    return ("java", "python")


GO_CLIENT_DIR = HERE / "go"
GO_CLIENT_DRIVER = GO_CLIENT_DIR / "bin" / "go-client-driver"


@dataclass(frozen=True)
class GoClient:
    driver: Path
    """The driver (``go/*.go``), built by ``make compat-deps`` with Apache RocketMQ's
    rocketmq-client-go, pinned by ``go/go.mod`` and ``go/go.sum``."""

    def command(self, scenario: str, *args: str, state_dir: Path) -> list[str]:
        """``driver <scenario> <args>``; the client logs its warnings and errors to
        ``state_dir/rocketmq_client.log`` (not to stderr)."""
        state_dir.mkdir(parents=True, exist_ok=True)
        return [str(self.driver), scenario, *args, f"--log={state_dir / 'rocketmq_client.log'}"]


@pytest.fixture(scope="session")
def go_client() -> GoClient:
    """The Go client driver (Apache RocketMQ's Go client, pinned by ``go/go.mod``)."""
    if not GO_CLIENT_DRIVER.is_file():
        how = "`make compat-deps`" if shutil.which("go") else "install Go, then `make compat-deps`"
        missing(f"the Go client driver is not built ({GO_CLIENT_DRIVER}): run {how}")
    return GoClient(GO_CLIENT_DRIVER)
