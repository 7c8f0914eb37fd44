"""Running the RocketMQ 5.x client drivers against a gRPC endpoint (Apache RocketMQ's proxy, or
reconsume's) and reading their JSON-lines events into a :class:`.driver_support.DriverRun`:

* ``java5/``: Apache RocketMQ's rocketmq-client-java, pinned by ``java5/pom.xml``, built into
  ``java5/target/java5-client-driver.jar`` (:func:`ensure_java5_built`);
* ``python5_driver.py``: Apache RocketMQ's rocketmq-python-client, run by this interpreter.

Both take the same scenarios and options and print the same events:

    run = run_client5("java", "send", endpoint, state_dir, topic="t", count=10)
    run["sent"]                  # one event per message: messageId, queue, offset, ...
    consumer = start_client5("python", "push-consume", endpoint, state_dir, topic="t",
                             group="g", count=10, fail_times=1)
    run = finish_client5(consumer)    # waits for its end; run["received"], run["done"]
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .driver_support import DriverRun, Event

HERE = Path(__file__).resolve().parent
JAVA5_DIR = HERE / "java5"
JAVA5_JAR = JAVA5_DIR / "target" / "java5-client-driver.jar"
PYTHON5_DRIVER = HERE / "python5_driver.py"
M2_REPO = Path.home() / ".cache" / "reconsume" / "m2"
JAVA5_BUILD = (
    "mvn", "-f", str(JAVA5_DIR / "pom.xml"), f"-Dmaven.repo.local={M2_REPO}", "-B", "-q",
    "package",
)  # fmt: skip
DRIVERS = ("java", "python")
TIMEOUT_S = 60.0
"""A driver is killed after this long; it gives up by itself 10 s earlier."""


def _newest_java5_source() -> float:
    sources = [JAVA5_DIR / "pom.xml", *JAVA5_DIR.glob("src/**/*.java")]
    return max(p.stat().st_mtime for p in sources)


def ensure_java5_built(log: object = print) -> str | None:
    """Build ``java5/`` when its jar is missing or older than a source; None once it can run,
    else why it cannot (no java or mvn, a failed build)."""
    if shutil.which("java") is None:
        return "java not found on PATH"
    if JAVA5_JAR.is_file() and JAVA5_JAR.stat().st_mtime >= _newest_java5_source():
        return None
    if shutil.which("mvn") is None:
        return "mvn not found on PATH and the 5.x Java driver is not built"
    if callable(log):
        log(f"building {JAVA5_DIR}: {shlex.join(JAVA5_BUILD)}")
    done = subprocess.run(JAVA5_BUILD, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return "the Maven build failed:\n" + (done.stdout + done.stderr)[-3000:]
    return None


def client5_command(
    driver: str,
    scenario: str,
    endpoint: str,
    state_dir: Path,
    timeout_s: float = TIMEOUT_S,
    **options: object,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one driver run: ``--endpoints endpoint``, a
    deadline ``timeout_s`` - 10 s, and ``options`` as ``--name=value`` (``_`` as ``-``; True
    as a bare flag, False left out). The client's log goes under ``state_dir/logs``."""
    args = [f"--endpoints={endpoint}", f"--timeout-ms={int(timeout_s - 10) * 1000}"]
    for name, value in options.items():
        flag = f"--{name.replace('_', '-')}"
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args.append(f"{flag}={value}")
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if driver == "java":
        command = [
            "java", "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", f"-Drocketmq.log.root={logs}",
            "-jar", str(JAVA5_JAR), scenario, *args,
        ]  # fmt: skip
    elif driver == "python":
        command = [sys.executable, str(PYTHON5_DRIVER), scenario, *args]
        env["HOME"] = str(state_dir)  # the client logs under ~/logs/rocketmq_python
    else:
        raise ValueError(f"no driver {driver!r} (one of {DRIVERS})")
    return command, env


@dataclass
class Client5:
    driver: str
    scenario: str
    process: subprocess.Popen[str]
    state_dir: Path
    timeout_s: float


def start_client5(
    driver: str,
    scenario: str,
    endpoint: str,
    state_dir: Path,
    timeout_s: float = TIMEOUT_S,
    **options: object,
) -> Client5:
    """Start one driver run in the background (see :func:`client5_command`)."""
    command, env = client5_command(driver, scenario, endpoint, state_dir, timeout_s, **options)
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    return Client5(driver, scenario, process, state_dir, timeout_s)


def finish_client5(client: Client5, *, check: bool = True) -> DriverRun:
    """Wait for ``client``'s run to end (kill it past its timeout) and read its events; with
    ``check``, raise unless it exited 0 after its "done" event."""
    try:
        stdout, stderr = client.process.communicate(timeout=client.timeout_s)
    except subprocess.TimeoutExpired:
        client.process.kill()
        stdout, stderr = client.process.communicate()
        stderr += f"\n(killed after {client.timeout_s} s)"
    sequence: list[Event] = []
    for line in stdout.splitlines():
        try:
            sequence.append(json.loads(line))
        except json.JSONDecodeError:
            sequence.append({"event": "output", "line": line})
    events: dict[str, list[Event]] = {}
    for event in sequence:
        events.setdefault(event["event"], []).append(event)
    log = client5_log(client.driver, client.state_dir)
    run = DriverRun(client.process.returncode, sequence, events, stderr, log)
    if check and (run.returncode != 0 or not run["done"]):
        raise AssertionError(f"{client.driver} {client.scenario}: {run.explain()}")
    return run


def run_client5(
    driver: str,
    scenario: str,
    endpoint: str,
    state_dir: Path,
    timeout_s: float = TIMEOUT_S,
    *,
    check: bool = True,
    **options: object,
) -> DriverRun:
    """One driver run to its end (:func:`start_client5`, then :func:`finish_client5`)."""
    client = start_client5(driver, scenario, endpoint, state_dir, timeout_s, **options)
    return finish_client5(client, check=check)


def client5_log(driver: str, state_dir: Path) -> str:
    """The warnings and errors of the client's own log."""
    if driver == "java":
        log_file = state_dir / "logs" / "rocketmq-client.log"
    else:
        log_file = state_dir / "logs" / "rocketmq_python" / "rocketmq_client.log"
    if not log_file.is_file():
        return ""
    lines = log_file.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "WARN" in line or "ERROR" in line)
