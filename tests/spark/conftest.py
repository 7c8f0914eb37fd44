"""The Spark tier: a local-mode SparkSession shared by the session, and a name server with two
brokers shared by each module. Without pyspark or java the tests fail in CI (``CI=true``) and
skip elsewhere, saying what to install."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ..compat.conftest import missing
from ..integration.cluster import Cluster, start_cluster
from ..scratch import module_dir


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession with the ``reconsume`` data source registered."""
    if shutil.which("java") is None:
        missing("java is not installed (Debian: apt-get install openjdk-17-jre-headless)")
    try:
        from pyspark.sql import SparkSession

        from reconsume.spark.source import ReconsumeDataSource
    except ImportError as exc:
        missing(f"pyspark is not installed ({exc}): run `make venv` (the spark extra)")
    # The Python workers run this interpreter, which has reconsume installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Every Spark service on loopback, never on the machine's interface address.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("reconsume-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(ReconsumeDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and two Sync-flush brokers for the tests of one module."""
    with module_dir(tmp_path_factory, "spark-cluster") as root:
        started = start_cluster(root)
        yield started
        started.kill()
