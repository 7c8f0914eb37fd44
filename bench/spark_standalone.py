"""A Spark standalone cluster on 127.0.0.1 for the benchmarks: one master and ``workers``
workers of ``cores`` cores each, the jars of the installed ``pyspark``.

    with standalone_cluster(directory, workers=2) as cluster:
        session = spark_session(master=cluster.master_url, ...)

The processes are this process's children (their CPU, and that of the executors the workers
start, is counted as the JVM's by ``bench.dlq_jobs``) and are stopped, workers first, when the
block ends; their logs and work directories go under ``directory``. The master's REST
submission server (a fixed port, 6066) is off.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

_MASTER_AT = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = re.compile(r"Successfully registered with master")
START_TIMEOUT_S = 90.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Daemon:
    """One master or worker JVM and the lines it logged."""

    name: str
    process: subprocess.Popen[str]
    lines: list[str]
    pump: threading.Thread

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            for line in self.lines[seen:]:
                seen += 1
                if match := pattern.search(line):
                    return match
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(
            f"spark {self.name} did not log {pattern.pattern!r}:\n" + "".join(self.lines[-40:])
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.pump.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _daemon(name: str, main_class: str, args: list[str], log_dir: Path) -> Daemon:
    home = spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOCAL_IP": "127.0.0.1",  # every service on loopback, none on the interface
    }
    process = subprocess.Popen(
        [str(home / "bin" / "spark-class"), main_class, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        lines.extend(process.stdout)  # one line at a time, as they come

    pumping = threading.Thread(target=pump, daemon=True, name=f"spark-{name}")
    pumping.start()
    return Daemon(name, process, lines, pumping)


@dataclass(frozen=True, slots=True)
class StandaloneCluster:
    master_url: str
    workers: int
    cores_per_worker: int
    worker_memory: str

    @property
    def cores(self) -> int:
        return self.workers * self.cores_per_worker


@contextmanager
def standalone_cluster(
    directory: Path, *, workers: int, cores: int = 1, memory: str = "2g"
) -> Iterator[StandaloneCluster]:
    """A master and ``workers`` workers registered with it, stopped when the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        master = _daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            directory,
        )
        stack.callback(master.stop)
        url = master.wait_for(_MASTER_AT, START_TIMEOUT_S).group(1)
        started = []
        for index in range(workers):
            work_dir = directory / f"worker-{index}"
            work_dir.mkdir(exist_ok=True)
            worker = _daemon(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                [url, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                 "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir)],
                directory,
            )  # fmt: skip
            stack.callback(worker.stop)
            started.append(worker)
        for worker in started:
            worker.wait_for(_REGISTERED, START_TIMEOUT_S)
        yield StandaloneCluster(url, workers, cores, memory)
