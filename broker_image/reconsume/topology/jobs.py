"""A DeadLetterJob resource as the run it asks for, for every driver.

The operator runs ``reconsume dlq <action> ...`` in a Job's pod (or a SparkApplication);
embedded mode (:mod:`reconsume.embedded`) runs the same command as a local process. Both build
the command's arguments here from the resource, with the CRD's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class DeadLetterJobSpec:
    """A DeadLetterJob with the CRD's defaults applied."""

    name: str
    namespace: str
    uid: str
    generation: int
    consumer_group: str
    action: str
    filter: str | None = None
    target_topic: str | None = None
    sink_format: str = "parquet"
    sink_path: str | None = None
    max_messages: int | None = None
    rate_per_second: int | None = None
    dry_run: bool = False
    schedule: str | None = None
    image: str | None = None
    master: str = "local[*]"
    driver_cores: int = 1
    driver_memory: str = "1g"
    executor_instances: int = 1
    executor_cores: int = 1
    executor_memory: str = "1g"
    conf: Mapping[str, str] = field(default_factory=dict)

    @property
    def kubernetes_master(self) -> bool:
        """Spark on Kubernetes: the driver creates executor pods (RBAC needed)."""
        return self.master.startswith("k8s://")


@dataclass(frozen=True, slots=True)
class Source:
    """What the run reads: the name servers (as pods reach them) and the RocketMQ group; with
    access control on the cluster, the Secret holding the run's own account."""

    name_server: str
    group: str
    credentials_secret: str | None = None
    tls_secret: str | None = None
    """The cluster's ``spec.tls.secretName``: its ``ca.crt`` to trust (None: plaintext)."""
    tls_certificate: bool = False
    """Whether the servers ask for a client certificate (the Secret's ``tls.crt`` is shown)."""


def job_spec(body: Mapping[str, Any]) -> DeadLetterJobSpec:
    """A DeadLetterJob object as a :class:`DeadLetterJobSpec`."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    sink = spec.get("sink") or {}
    spark = spec.get("spark") or {}
    driver = spark.get("driver") or {}
    executor = spark.get("executor") or {}

    def optional_int(value: Any) -> int | None:
        return None if value is None else int(value)

    return DeadLetterJobSpec(
        name=str(metadata["name"]),
        namespace=str(metadata.get("namespace") or "default"),
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 1),
        consumer_group=str(spec.get("consumerGroup") or ""),
        action=str(spec.get("action") or ""),
        filter=spec.get("filter"),
        target_topic=(spec.get("target") or {}).get("topic"),
        sink_format=str(sink.get("format") or "parquet"),
        sink_path=sink.get("path"),
        max_messages=optional_int(spec.get("maxMessages")),
        rate_per_second=optional_int(spec.get("ratePerSecond")),
        dry_run=bool(spec.get("dryRun", False)),
        schedule=spec.get("schedule") or None,
        image=spark.get("image") or None,
        master=str(spark.get("master") or "local[*]"),
        driver_cores=int(driver.get("cores", 1)),
        driver_memory=str(driver.get("memory") or "1g"),
        executor_instances=int(executor.get("instances", 1)),
        executor_cores=int(executor.get("cores", 1)),
        executor_memory=str(executor.get("memory") or "1g"),
        conf={str(k): str(v) for k, v in (spark.get("conf") or {}).items()},
    )


def resource_conf(spec: DeadLetterJobSpec) -> dict[str, str]:
    """Spark properties of the run's resources: the driver's and, unless the master is local,
    the executors'. Drivers add their own and then ``spec.spark.conf``, which may override
    these."""
    conf = {"spark.driver.cores": str(spec.driver_cores), "spark.driver.memory": spec.driver_memory}
    if not spec.master.startswith("local"):
        conf["spark.executor.instances"] = str(spec.executor_instances)
        conf["spark.executor.cores"] = str(spec.executor_cores)
        conf["spark.executor.memory"] = spec.executor_memory
    if spec.master.startswith("spark://"):
        # A standalone master ignores spark.executor.instances and gives an application every
        # free core of the cluster; this caps it at what the spec asks for.
        conf["spark.cores.max"] = str(spec.executor_instances * spec.executor_cores)
    return conf


def job_arguments(spec: DeadLetterJobSpec, source: Source) -> list[str]:
    """``<action> --name-server ... --group ... --job <ns>/<name>`` and the flags of the spec
    (what the job does; not how Spark runs)."""
    arguments = [
        spec.action.lower(),
        "--name-server", source.name_server,
        "--group", source.group,
        "--job", f"{spec.namespace}/{spec.name}",
    ]  # fmt: skip
    if spec.filter:
        arguments += ["--filter", spec.filter]
    if spec.action == "Drain":
        arguments += ["--format", spec.sink_format]
        if spec.sink_path:
            arguments += ["--path", spec.sink_path]
    if spec.action == "Reprocess" and spec.target_topic:
        arguments += ["--target-topic", spec.target_topic]
    if spec.max_messages is not None:
        arguments += ["--max-messages", str(spec.max_messages)]
    if spec.rate_per_second is not None:
        arguments += ["--rate-per-second", str(spec.rate_per_second)]
    if spec.dry_run:
        arguments.append("--dry-run")
    return arguments
